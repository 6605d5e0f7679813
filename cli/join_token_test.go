package cli

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/structs"
)

func TestJoinTokenCreate_PrintsTokenAloneAndHowToUseIt(t *testing.T) {
	f := newFakeAgent(t)
	created := time.Date(2030, 1, 1, 12, 0, 30, 0, time.UTC)
	f.reply("POST /v1/join-tokens", http.StatusOK, api.JoinTokenCreated{
		Token: "skein-jt-abc.secret",
		Info:  api.JoinToken{ID: "jt-abc", CreatedAt: created, ExpiresAt: created.Add(2 * time.Hour), MaxUses: 3, State: "active"},
	})
	f.reply("GET /v1/status", http.StatusOK, api.Status{Node: "gpu-01"})
	f.reply("GET /v1/nodes", http.StatusOK, []api.NodeInfo{
		{Node: structs.Node{ID: "n2", Name: "gpu-02", Addresses: structs.Addresses{Gossip: "10.0.0.2:7472"}}},
		{Node: structs.Node{ID: "n1", Name: "gpu-01", Addresses: structs.Addresses{Gossip: "10.0.0.1:7472"}}},
	})
	r := runCLI(t, "--addr", f.URL, "join-token", "create", "--ttl", "2h", "--uses", "3", "--description", "rack 4")
	if r.code != exitOK || r.stdout != "skein-jt-abc.secret\n" {
		t.Fatalf("got code %d, stdout %q, stderr %q; want the token alone", r.code, r.stdout, r.stderr)
	}
	want := "join token jt-abc expires 2030-01-01 14:00 UTC (valid 2h) and admits up to 3 node(s)\n" +
		"start a new node with it: skein agent --data-dir DIR --join 10.0.0.1:7472 --join-token-file FILE\n"
	if r.stderr != want {
		t.Errorf("stderr = %q, want %q", r.stderr, want)
	}
	var req api.JoinTokenCreateRequest
	if err := json.Unmarshal(f.requests()[0].Body, &req); err != nil {
		t.Fatal(err)
	}
	if req != (api.JoinTokenCreateRequest{TTL: structs.Duration(2 * time.Hour), Uses: 3, Description: "rack 4"}) {
		t.Errorf("request = %+v", req)
	}
}

func TestJoinTokenCreate_LoopbackWithoutNodeAddressStaysLoopback(t *testing.T) {
	f := newFakeAgent(t)
	f.reply("POST /v1/join-tokens", http.StatusOK, api.JoinTokenCreated{Token: "tok", Info: api.JoinToken{ID: "jt1"}})
	r := runCLI(t, "--addr", f.URL, "join-token", "create")
	if r.code != exitOK || !strings.Contains(r.stderr, "admits any number of nodes\n") || !strings.Contains(r.stderr, "--join 127.0.0.1 --join-token-file FILE") {
		t.Fatalf("got code %d, stderr %q", r.code, r.stderr)
	}
	var req api.JoinTokenCreateRequest
	if err := json.Unmarshal(f.requests()[0].Body, &req); err != nil || time.Duration(req.TTL) != api.DefaultJoinTokenTTL || req.Uses != 0 {
		t.Errorf("request = %+v, %v; want the default TTL and no use limit", req, err)
	}
}

// An agent on loopback is secure only with --tls, and so must be the node
// the hint starts to join it.
func TestJoinTokenCreate_ALoopbackClusterOverHTTPSSaysTLS(t *testing.T) {
	ca := newTestCA(t)
	f := newTLSFakeAgent(t, ca)
	f.reply("POST /v1/join-tokens", http.StatusOK, api.JoinTokenCreated{Token: "tok", Info: api.JoinToken{ID: "jt1"}})
	f.reply("GET /v1/status", http.StatusOK, api.Status{Node: "a"})
	f.reply("GET /v1/nodes", http.StatusOK, []api.NodeInfo{{Node: structs.Node{ID: "n1", Name: "a", Addresses: structs.Addresses{Gossip: "127.0.0.11:7472"}}}})
	r := runCLI(t, "--addr", f.URL, "--token", "t0k", "--ca-cert", caFile(t, ca), "join-token", "create")
	if want := "start a new node with it: skein agent --tls --data-dir DIR --join 127.0.0.11:7472 --join-token-file FILE\n"; r.code != exitOK || !strings.HasSuffix(r.stderr, want) {
		t.Fatalf("got code %d, stderr %q; want it to end %q", r.code, r.stderr, want)
	}
}

func TestJoinTokenCreate_JSON(t *testing.T) {
	f := newFakeAgent(t)
	f.reply("POST /v1/join-tokens", http.StatusOK, api.JoinTokenCreated{Token: "tok", Info: api.JoinToken{ID: "jt1", State: "active"}})
	r := runCLI(t, "--addr", f.URL, "join-token", "create", "--json")
	var got api.JoinTokenCreated
	mustDecode(t, r.stdout, &got)
	if r.code != exitOK || got.Token != "tok" || got.Info.ID != "jt1" {
		t.Fatalf("got code %d, %+v", r.code, got)
	}
}

func TestJoinTokenCreate_OutOfRangeFlagsAreUsageErrors(t *testing.T) {
	f := newFakeAgent(t)
	cases := []struct {
		name   string
		args   []string
		stderr string
	}{
		{"zero ttl", []string{"--ttl", "0s"}, "--ttl 0s: want more than 0 and at most 8760h"},
		{"ttl too long", []string{"--ttl", "9000h"}, "--ttl 9000h: want more than 0 and at most 8760h"},
		{"ttl that does not parse", []string{"--ttl", "soon"}, `--ttl: invalid duration "soon"`},
		{"negative uses", []string{"--uses", "-1"}, "--uses -1: want 0 (any number) to 100000"},
		{"too many uses", []string{"--uses", "100001"}, "--uses 100001: want 0 (any number) to 100000"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := runCLI(t, append([]string{"--addr", f.URL, "join-token", "create"}, tc.args...)...)
			if r.code != exitUsage || !strings.Contains(r.stderr, tc.stderr) {
				t.Fatalf("got code %d, stderr %q; want 2 and %q", r.code, r.stderr, tc.stderr)
			}
		})
	}
	if n := len(f.requests()); n != 0 {
		t.Errorf("the agent got %d requests, want none", n)
	}
}

func TestJoinTokenList_Table(t *testing.T) {
	f := newFakeAgent(t)
	now := time.Now()
	f.reply("GET /v1/join-tokens", http.StatusOK, []api.JoinToken{
		{ID: "jt1", ExpiresAt: now.Add(3*time.Hour + time.Minute), MaxUses: 3, Uses: 1, State: "active", Description: "rack 4"},
		{ID: "jt2", ExpiresAt: now.Add(-49 * time.Hour), Uses: 7, State: "expired"},
		{ID: "jt3", ExpiresAt: now.Add(time.Hour + time.Minute), Uses: 0, Revoked: true, State: "revoked", Description: strings.Repeat("x", 60)},
	})
	r := runCLI(t, "--addr", f.URL, "join-token", "list")
	if r.code != exitOK {
		t.Fatalf("exit code %d: %s", r.code, r.stderr)
	}
	want := []string{
		"ID STATE USES EXPIRES DESCRIPTION",
		"jt1 active 1/3 in 3h rack 4",
		"jt2 expired 7/- 2d ago -",
		"jt3 revoked 0/- in 1h " + strings.Repeat("x", 37) + "...",
	}
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if len(lines) != len(want) {
		t.Fatalf("got %d lines, want %d:\n%s", len(lines), len(want), r.stdout)
	}
	for i, w := range want {
		if got := strings.Join(strings.Fields(lines[i]), " "); got != w {
			t.Errorf("line %d = %q, want %q", i, got, w)
		}
	}
}

func TestJoinTokenList_EmptyList(t *testing.T) {
	for args, want := range map[string]string{"": "No join tokens.\n", "--json": "[]\n"} {
		f := newFakeAgent(t)
		f.reply("GET /v1/join-tokens", http.StatusOK, nil)
		cmd := []string{"--addr", f.URL, "join-token", "list"}
		if args != "" {
			cmd = append(cmd, args)
		}
		if r := runCLI(t, cmd...); r.code != exitOK || r.stdout != want {
			t.Errorf("%v: got code %d, stdout %q; want %q", cmd[2:], r.code, r.stdout, want)
		}
	}
}

func TestJoinTokenList_JSONParsesBack(t *testing.T) {
	f := newFakeAgent(t)
	f.reply("GET /v1/join-tokens", http.StatusOK, []api.JoinToken{{ID: "jt1", MaxUses: 3, State: "active"}})
	r := runCLI(t, "--addr", f.URL, "join-token", "list", "--json")
	var got []api.JoinToken
	mustDecode(t, r.stdout, &got)
	if r.code != exitOK || len(got) != 1 || got[0].ID != "jt1" || got[0].MaxUses != 3 {
		t.Fatalf("got code %d, %+v", r.code, got)
	}
}

func TestJoinTokenRevoke(t *testing.T) {
	f := newFakeAgent(t)
	f.reply("DELETE /v1/join-tokens/{id}", http.StatusOK, api.JoinToken{ID: "jt1", Uses: 2, Revoked: true, State: "revoked"})
	f.fail("DELETE /v1/join-tokens/nope", http.StatusNotFound, `join token "nope": not found`)

	r := runCLI(t, "--addr", f.URL, "join-token", "revoke", "jt1")
	if r.code != exitOK || r.stdout != "revoked join token jt1 (it admitted 2 node(s))\n" {
		t.Fatalf("got code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if req := f.requests()[0]; req.Method != http.MethodDelete || req.Path != "/v1/join-tokens/jt1" {
		t.Errorf("request = %s %s", req.Method, req.Path)
	}
	r = runCLI(t, "--addr", f.URL, "join-token", "revoke", "jt1", "--json")
	var got api.JoinToken
	mustDecode(t, r.stdout, &got)
	if !got.Revoked {
		t.Errorf("--json = %+v, want the revoked token", got)
	}
	if r := runCLI(t, "--addr", f.URL, "join-token", "revoke", "nope"); r.code != exitError || !strings.Contains(r.stderr, `join token "nope": not found`) {
		t.Errorf("unknown token: code %d, stderr %q", r.code, r.stderr)
	}
	if r := runCLI(t, "--addr", f.URL, "join-token", "revoke"); r.code != exitUsage || !strings.Contains(r.stderr, "missing ID") {
		t.Errorf("no ID: code %d, stderr %q", r.code, r.stderr)
	}
}
