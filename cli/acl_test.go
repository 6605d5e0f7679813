package cli

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/structs"
)

// tableLines splits a table's output into lines of single-space-separated
// cells, for comparing without the alignment.
func tableLines(out string) []string {
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	for i, l := range lines {
		lines[i] = strings.Join(strings.Fields(l), " ")
	}
	return lines
}

func TestACL_BootstrapAUserTokenAndRevokeIt(t *testing.T) {
	a := newACLAgent(t)
	dir := t.TempDir()
	// as runs skein with the token in file (none when "").
	as := func(file string, args ...string) result {
		t.Helper()
		pre := []string{"--addr", a.URL}
		if file != "" {
			pre = append(pre, "--token-file", file)
		}
		return runCLI(t, append(pre, args...)...)
	}
	ok := func(r result) string {
		t.Helper()
		if r.code != exitOK {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
		return r.stdout
	}

	if out := ok(as("", "acl", "whoami")); !strings.HasPrefix(out, "ACLs are off (no bootstrap yet): ") {
		t.Fatalf("whoami before the bootstrap: %q", out)
	}
	admin := filepath.Join(dir, "admin.token")
	writeTestFile(t, admin, ok(as("", "acl", "bootstrap")))
	if out := ok(as(admin, "acl", "whoami")); !regexp.MustCompile(`User:\s+admin\nRole:\s+admin\n`).MatchString(out) {
		t.Fatalf("whoami with the bootstrap token:\n%s", out)
	}

	alice := filepath.Join(dir, "alice.token")
	writeTestFile(t, alice, ok(as(admin, "acl", "token", "create", "--user", "alice", "--role", "submitter", "--ttl", "30d")))
	out := ok(as(alice, "acl", "whoami"))
	for _, want := range []string{`User:\s+alice\n`, `Role:\s+submitter\n`, `Token:\s+0000000000000002\n`, `Permissions:\s+read, submit\n`} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("alice's whoami does not match %s:\n%s", want, out)
		}
	}
	if out := ok(as(alice, "submit", "true")); out != testJobID+"\n" {
		t.Errorf("alice's submit printed %q", out)
	}
	r := as(alice, "acl", "token", "list")
	if r.code != exitError || !strings.Contains(r.stderr, "Error: permission denied: role submitter lacks acl") {
		t.Fatalf("alice lists tokens: exit %d, stderr %q; want 1 and the permission named", r.code, r.stderr)
	}

	if out := ok(as(admin, "acl", "token", "revoke", "0000000000000002")); out != "revoked token 0000000000000002 of user alice (role submitter)\n" {
		t.Errorf("revoke printed %q", out)
	}
	if r := as(alice, "acl", "whoami"); r.code != exitError || !strings.Contains(r.stderr, "missing or wrong API token") {
		t.Fatalf("a revoked token still works: exit %d, stderr %q", r.code, r.stderr)
	}
	lines := tableLines(ok(as(admin, "acl", "token", "list")))
	if len(lines) != 3 || !strings.HasPrefix(lines[1], "0000000000000001 admin admin active") ||
		!strings.HasPrefix(lines[2], "0000000000000002 alice submitter revoked") {
		t.Errorf("token list after the revocation:\n%s", strings.Join(lines, "\n"))
	}
	if r := as(admin, "acl", "bootstrap"); r.code != exitError || !strings.Contains(r.stderr, "already bootstrapped") || r.stdout != "" {
		t.Errorf("a second bootstrap: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}

func TestACLBootstrap_PrintsTheTokenAloneAndOnStderrHowToUseIt(t *testing.T) {
	a := newACLAgent(t)
	r := runCLI(t, "--addr", a.URL, "acl", "bootstrap", "--user", "ops")
	if r.code != exitOK || r.stdout != "SKA1.0000000000000001.secret-of-ops\n" {
		t.Fatalf("got code %d, stdout %q, stderr %q; want the token alone", r.code, r.stdout, r.stderr)
	}
	want := "ACLs are on. This is the admin token of user ops (ID 0000000000000001), shown this once: the cluster keeps only its hash.\n" +
		"Keep it in a file only you can read and use it: export SKEIN_TOKEN_FILE=FILE\n" +
		"Give each user a token of their own: skein acl token create --user NAME --role submitter\n"
	if r.stderr != want {
		t.Errorf("stderr = %q\nwant %q", r.stderr, want)
	}
	var req api.ACLBootstrapRequest
	if err := json.Unmarshal(a.requests()[0].Body, &req); err != nil || req.User != "ops" {
		t.Errorf("request %+v, %v; want user ops", req, err)
	}
}

func TestACLBootstrap_DefaultUserAndJSON(t *testing.T) {
	a := newACLAgent(t)
	r := runCLI(t, "--addr", a.URL, "acl", "bootstrap", "--json")
	var got api.ACLTokenCreated
	mustDecode(t, r.stdout, &got)
	if r.code != exitOK || got.Token == "" || got.Info.User != api.DefaultBootstrapUser || got.Info.Role != structs.RoleAdmin {
		t.Fatalf("got code %d, %+v", r.code, got)
	}
}

func TestACLBootstrap_BadUserIsAUsageError(t *testing.T) {
	a := newACLAgent(t)
	r := runCLI(t, "--addr", a.URL, "acl", "bootstrap", "--user", "no spaces")
	if r.code != exitUsage || !strings.Contains(r.stderr, `Error: --user: "no spaces": use letters, digits`) ||
		!strings.Contains(r.stderr, "Run 'skein acl bootstrap --help' for usage.") {
		t.Fatalf("got code %d, stderr %q", r.code, r.stderr)
	}
	if n := len(a.requests()); n != 0 {
		t.Errorf("%d requests sent for a usage error", n)
	}
}

func TestACLTokenCreate_SendsTheFlagsAndPrintsTheTokenAlone(t *testing.T) {
	a := newACLAgent(t)
	r := runCLI(t, "--addr", a.URL, "acl", "token", "create", "--user", "alice", "--role", "reader", "--ttl", "12h", "--description", "dashboards")
	if r.code != exitOK || r.stdout != "SKA1.0000000000000001.secret-of-alice\n" {
		t.Fatalf("got code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if !regexp.MustCompile(`^token 0000000000000001 for user alice, role reader, expires \d{4}-\d\d-\d\d \d\d:\d\d UTC \(valid 12h\); shown this once\n` +
		`the user keeps it in a file only they can read and uses it: export SKEIN_TOKEN_FILE=FILE\n$`).MatchString(r.stderr) {
		t.Errorf("stderr = %q", r.stderr)
	}
	var req api.ACLTokenCreateRequest
	if err := json.Unmarshal(a.requests()[0].Body, &req); err != nil {
		t.Fatal(err)
	}
	if want := (api.ACLTokenCreateRequest{User: "alice", Role: structs.RoleReader, TTL: structs.Duration(12 * time.Hour), Description: "dashboards"}); req != want {
		t.Errorf("request %+v, want %+v", req, want)
	}
}

func TestACLTokenCreate_WithoutTTLTheTokenNeverExpires(t *testing.T) {
	a := newACLAgent(t)
	r := runCLI(t, "--addr", a.URL, "acl", "token", "create", "--user", "bob", "--role", "operator", "--json")
	var got api.ACLTokenCreated
	mustDecode(t, r.stdout, &got)
	if r.code != exitOK || got.Info.User != "bob" || got.Info.Role != structs.RoleOperator || !got.Info.ExpiresAt.IsZero() {
		t.Fatalf("got code %d, %+v", r.code, got)
	}
	if !strings.Contains(r.stderr, "never expires (revoke it with skein acl token revoke 0000000000000001)") {
		t.Errorf("stderr = %q", r.stderr)
	}
	var req map[string]any
	if err := json.Unmarshal(a.requests()[0].Body, &req); err != nil || req["ttl"] != nil {
		t.Errorf("request %v, %v; want no ttl", req, err)
	}
}

func TestACLTokenCreate_BadFlagsAreUsageErrorsAndSendNothing(t *testing.T) {
	// alice is a reader's token with more flags.
	alice := func(more ...string) []string { return append([]string{"--user", "alice", "--role", "reader"}, more...) }
	cases := []struct {
		name   string
		args   []string
		stderr string
	}{
		{"no user", []string{"--role", "reader"}, "give the token's --user and --role"},
		{"no role", []string{"--user", "alice"}, "give the token's --user and --role"},
		{"unknown role", []string{"--user", "alice", "--role", "root"}, `--role: "root": want one of reader, submitter, operator, admin`},
		{"bad user", []string{"--user", "-x", "--role", "reader"}, `--user: "-x": use letters`},
		{"ttl that does not parse", alice("--ttl", "soon"), `--ttl: invalid TTL "soon": want whole days (30d) or a duration (12h)`},
		{"fractional days", alice("--ttl", "1.5d"), `--ttl: invalid TTL "1.5d"`},
		{"zero ttl", alice("--ttl", "0d"), "--ttl: 0d: want more than 0 and at most 3650d (without --ttl a token works until revoked)"},
		{"negative ttl", alice("--ttl", "-2h"), "--ttl: -2h: want more than 0"},
		{"negative days", alice("--ttl", "-1d"), "--ttl: -1d: want more than 0"},
		{"too many days", alice("--ttl", "3651d"), "--ttl: 3651d: want more than 0 and at most 3650d"},
		{"days past a Duration", alice("--ttl", "9000000000000d"), "--ttl: 9000000000000d: want more than 0 and at most 3650d"},
		{"too many hours", alice("--ttl", "87601h"), "--ttl: 87601h: want more than 0 and at most 3650d"},
		{"long description", alice("--description", strings.Repeat("d", structs.MaxDescriptionLen+1)), "--description: 257 bytes; at most 256"},
		{"argument", alice("bob"), `unexpected argument "bob"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := newACLAgent(t)
			r := runCLI(t, append([]string{"--addr", a.URL, "acl", "token", "create"}, tc.args...)...)
			if r.code != exitUsage || !strings.Contains(r.stderr, tc.stderr) || !strings.Contains(r.stderr, "skein acl token create --help") {
				t.Fatalf("got code %d, stderr %q; want %d and %q", r.code, r.stderr, exitUsage, tc.stderr)
			}
			if n := len(a.requests()); n != 0 {
				t.Errorf("%d requests sent for a usage error", n)
			}
		})
	}
}

func TestParseTTL_TakesDaysAndGoDurations(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"30d":   30 * 24 * time.Hour,
		"1d":    24 * time.Hour,
		"3650d": structs.MaxACLTokenTTL,
		"12h":   12 * time.Hour,
		"90m":   90 * time.Minute,
		"1h30m": 90 * time.Minute,
	} {
		got, err := parseTTL(in)
		if err != nil || got != want {
			t.Errorf("parseTTL(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
}

func TestTTLText_DaysWhenWhole(t *testing.T) {
	for d, want := range map[time.Duration]string{
		30 * 24 * time.Hour: "30d",
		24 * time.Hour:      "1d",
		36 * time.Hour:      "36h",
		12 * time.Hour:      "12h",
		90 * time.Minute:    "1h30m",
	} {
		if got := ttlText(d); got != want {
			t.Errorf("ttlText(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestACLTokenList_Table(t *testing.T) {
	f := newFakeAgent(t)
	now := time.Now()
	f.reply("GET /v1/acl/tokens", http.StatusOK, []api.ACLTokenInfo{
		{ID: "0123456789abcdef", User: "admin", Role: structs.RoleAdmin, State: api.TokenActive, CreatedAt: now.Add(-49 * time.Hour)},
		{ID: "1111111111111111", User: "alice", Role: structs.RoleSubmitter, State: api.TokenActive, CreatedBy: "admin",
			CreatedAt: now.Add(-time.Hour - time.Second), ExpiresAt: now.Add(30*24*time.Hour - time.Hour + time.Minute), Description: "laptop"},
		{ID: "2222222222222222", User: "bob", Role: structs.RoleReader, State: api.TokenExpired, CreatedBy: "admin",
			CreatedAt: now.Add(-3 * 24 * time.Hour), ExpiresAt: now.Add(-2*time.Hour - time.Second), Description: strings.Repeat("x", 60)},
	})
	r := runCLI(t, "--addr", f.URL, "acl", "token", "list")
	if r.code != exitOK {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	want := []string{
		"ID USER ROLE STATE CREATED EXPIRES CREATED BY DESCRIPTION",
		"0123456789abcdef admin admin active 2d ago never - -",
		"1111111111111111 alice submitter active 1h ago in 29d admin laptop",
		"2222222222222222 bob reader expired 3d ago 2h ago admin " + strings.Repeat("x", 37) + "...",
	}
	if got := tableLines(r.stdout); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestACLTokenList_EmptyAndJSON(t *testing.T) {
	cases := []struct {
		name  string
		args  []string
		reply any
		want  string
	}{
		{"human", nil, []api.ACLTokenInfo{}, "No ACL tokens.\n"},
		{"json", []string{"--json"}, []api.ACLTokenInfo{}, "[]\n"},
		{"json from null", []string{"--json"}, nil, "[]\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeAgent(t)
			f.reply("GET /v1/acl/tokens", http.StatusOK, tc.reply)
			r := runCLI(t, append([]string{"--addr", f.URL, "acl", "token", "list"}, tc.args...)...)
			if r.code != exitOK || r.stdout != tc.want {
				t.Fatalf("got code %d, stdout %q; want 0, %q", r.code, r.stdout, tc.want)
			}
		})
	}
	a := newACLAgent(t)
	runCLI(t, "--addr", a.URL, "acl", "bootstrap")
	r := runCLI(t, "--addr", a.URL, "--token", "SKA1.0000000000000001.secret-of-admin", "acl", "token", "list", "--json")
	var got []api.ACLTokenInfo
	mustDecode(t, r.stdout, &got)
	if r.code != exitOK || len(got) != 1 || got[0].User != "admin" || got[0].State != api.TokenActive {
		t.Fatalf("got code %d, %+v", r.code, got)
	}
}

func TestACLTokenRevoke_ErrorsAndJSON(t *testing.T) {
	a := newACLAgent(t)
	runCLI(t, "--addr", a.URL, "acl", "bootstrap")
	admin := []string{"--addr", a.URL, "--token", "SKA1.0000000000000001.secret-of-admin"}
	runCLI(t, append(admin, "acl", "token", "create", "--user", "alice", "--role", "reader")...)

	if r := runCLI(t, append(admin, "acl", "token", "revoke")...); r.code != exitUsage || !strings.Contains(r.stderr, "missing ID") {
		t.Errorf("no ID: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := runCLI(t, append(admin, "acl", "token", "revoke", "ffff")...); r.code != exitError || r.stderr != "Error: acl token \"ffff\": not found\n" {
		t.Errorf("unknown ID: exit %d, stderr %q", r.code, r.stderr)
	}
	r := runCLI(t, append(admin, "acl", "token", "revoke", "0000000000000002", "--json")...)
	var got api.ACLTokenInfo
	mustDecode(t, r.stdout, &got)
	if r.code != exitOK || got.ID != "0000000000000002" || got.State != api.TokenRevoked || got.RevokedAt.IsZero() {
		t.Fatalf("got code %d, %+v", r.code, got)
	}
	if p := a.requests()[len(a.requests())-1]; p.Method != http.MethodDelete || p.Path != "/v1/acl/tokens/0000000000000002" {
		t.Errorf("request %s %s", p.Method, p.Path)
	}
}

func TestACLUserSet_AllowsOrForbidsRoot(t *testing.T) {
	for _, tc := range []struct {
		flag  string
		allow bool
		want  string
	}{
		{"--allow-root", true, "user alice: jobs may run as root where the local account alice is root\n"},
		{"--no-allow-root", false, "user alice: jobs never run as root\n"},
	} {
		t.Run(tc.flag, func(t *testing.T) {
			a := newACLAgent(t)
			r := runCLI(t, "--addr", a.URL, "acl", "user", "set", "alice", tc.flag)
			if r.code != exitOK || r.stdout != tc.want {
				t.Fatalf("got code %d, stdout %q, stderr %q; want %q", r.code, r.stdout, r.stderr, tc.want)
			}
			var req api.ACLUserSetRequest
			if err := json.Unmarshal(a.requests()[0].Body, &req); err != nil || req != (api.ACLUserSetRequest{User: "alice", AllowRoot: tc.allow}) {
				t.Errorf("request %+v, %v", req, err)
			}
		})
	}
}

func TestACLUserSet_BadUseIsAUsageErrorAndSendsNothing(t *testing.T) {
	cases := []struct {
		name   string
		args   []string
		stderr string
	}{
		{"no flag", []string{"alice"}, "give one of --allow-root or --no-allow-root"},
		{"both flags", []string{"alice", "--allow-root", "--no-allow-root"}, "give one of --allow-root or --no-allow-root"},
		{"no name", []string{"--allow-root"}, "missing NAME"},
		{"bad name", []string{"al ice", "--allow-root"}, `user: "al ice": use letters`},
		{"two names", []string{"alice", "bob", "--allow-root"}, `unexpected argument "bob"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := newACLAgent(t)
			r := runCLI(t, append([]string{"--addr", a.URL, "acl", "user", "set"}, tc.args...)...)
			if r.code != exitUsage || !strings.Contains(r.stderr, tc.stderr) {
				t.Fatalf("got code %d, stderr %q; want %d and %q", r.code, r.stderr, exitUsage, tc.stderr)
			}
			if n := len(a.requests()); n != 0 {
				t.Errorf("%d requests sent for a usage error", n)
			}
		})
	}
}

func TestACLUserList_TableEmptyAndJSON(t *testing.T) {
	f := newFakeAgent(t)
	now := time.Now()
	f.reply("GET /v1/acl/users", http.StatusOK, []structs.ACLUser{
		{Name: "alice", AllowRoot: true, UpdatedAt: now.Add(-3*time.Hour - time.Second), UpdatedBy: "admin"},
		{Name: "bob", UpdatedAt: now.Add(-2 * 24 * time.Hour)},
	})
	r := runCLI(t, "--addr", f.URL, "acl", "user", "list")
	want := []string{"USER ALLOW ROOT UPDATED UPDATED BY", "alice yes 3h ago admin", "bob no 2d ago -"}
	if got := tableLines(r.stdout); r.code != exitOK || strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got code %d\n%s\nwant\n%s", r.code, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	r = runCLI(t, "--addr", f.URL, "acl", "user", "list", "--json")
	var users []structs.ACLUser
	mustDecode(t, r.stdout, &users)
	if len(users) != 2 || users[0].Name != "alice" || !users[0].AllowRoot {
		t.Errorf("json: %+v", users)
	}

	empty := newFakeAgent(t)
	empty.reply("GET /v1/acl/users", http.StatusOK, nil)
	for args, want := range map[string]string{
		"":       "No users set: every user has the defaults (jobs never run as root).\n",
		"--json": "[]\n",
	} {
		r := runCLI(t, strings.Fields("--addr "+empty.URL+" acl user list "+args)...)
		if r.code != exitOK || r.stdout != want {
			t.Errorf("empty %q: code %d, stdout %q; want %q", args, r.code, r.stdout, want)
		}
	}
}

func TestACLWhoAmI_OnOffAndJSON(t *testing.T) {
	f := newFakeAgent(t)
	f.handle("GET /v1/acl/whoami", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(api.TokenHeader) == "" {
			writeJSON(w, http.StatusOK, api.WhoAmI{Role: structs.RoleAdmin, Permissions: allPermissions})
			return
		}
		writeJSON(w, http.StatusOK, api.WhoAmI{ACL: true, User: "carol", Role: structs.RoleOperator, TokenID: "abcdabcdabcdabcd",
			Permissions: []structs.Permission{structs.PermRead, structs.PermSubmit, structs.PermAnyJob, structs.PermLoaderEnv, structs.PermNodes}})
	})
	r := runCLI(t, "--addr", f.URL, "acl", "whoami")
	want := "ACLs are off (no bootstrap yet): whoever holds the cluster's API token may do everything (read, submit, jobs:any, env:loader, nodes, acl).\n" +
		"skein acl bootstrap turns them on and prints the first admin token.\n"
	if r.code != exitOK || r.stdout != want {
		t.Errorf("off: code %d, stdout %q\nwant %q", r.code, r.stdout, want)
	}
	r = runCLI(t, "--addr", f.URL, "--token", "t", "acl", "whoami")
	want = "User:        carol\nRole:        operator\nToken:       abcdabcdabcdabcd\nPermissions: read, submit, jobs:any, env:loader, nodes\n"
	if r.code != exitOK || r.stdout != want {
		t.Errorf("on: code %d, stdout %q\nwant %q", r.code, r.stdout, want)
	}
	r = runCLI(t, "--addr", f.URL, "--token", "t", "acl", "whoami", "--json")
	var who api.WhoAmI
	mustDecode(t, r.stdout, &who)
	if !who.ACL || who.User != "carol" || len(who.Permissions) != 5 {
		t.Errorf("json: %+v", who)
	}
}

func TestRun_PermissionDeniedExitsOneAndPointsAtWhoAmI(t *testing.T) {
	f := newFakeAgent(t)
	denied := (&structs.PermissionError{Role: structs.RoleReader, Need: structs.PermSubmit, What: "submit a job"}).Error()
	f.fail("POST /v1/jobs", http.StatusForbidden, denied)
	r := runCLI(t, "--addr", f.URL, "submit", "true")
	want := "Error: permission denied: role reader lacks submit to submit a job (roles from submitter have it)\n" +
		"(skein acl whoami shows the user and role of your token)\n"
	if r.code != exitError || r.stderr != want || r.stdout != "" {
		t.Fatalf("got code %d, stdout %q, stderr %q\nwant 1 and %q", r.code, r.stdout, r.stderr, want)
	}
	// A 403 that is no missing permission (a limit) has no such hint.
	f.fail("GET /v1/acl/tokens", http.StatusForbidden, "limit: too many tokens")
	r = runCLI(t, "--addr", f.URL, "acl", "token", "list")
	if r.code != exitError || r.stderr != "Error: limit: too many tokens\n" {
		t.Fatalf("got code %d, stderr %q", r.code, r.stderr)
	}
}
