package runner

import (
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

// stdoutOf runs a task to its end, requires it to succeed, and returns
// what it printed.
func stdoutOf(t *testing.T, r *Runner, rec *recorder, dir string, tk Task) string {
	t.Helper()
	mustStart(t, r, tk)
	if u := waitTerminal(t, rec, tk.Alloc.ID); u.State != structs.AllocSucceeded {
		t.Fatalf("job ended %+v; stderr: %s", u, readFile(t, filepath.Join(dir, tk.Alloc.ID, stderrFile)))
	}
	return readFile(t, filepath.Join(dir, tk.Alloc.ID, stdoutFile))
}

func TestRunner_JobRunsAsTheAccountItsOwnerMapsTo(t *testing.T) {
	t.Parallel()
	alice := testutil.LocalUser(t)
	nobody := jobUser(t)
	e := newEnv(t)
	r, rec := e.runner(t)
	home := func(name string) string {
		u, err := user.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		return u.HomeDir
	}
	cases := []struct {
		name      string
		owner     string
		allowRoot bool
		uid, gid  int
		user      string
		home      string
	}{
		{name: "an owner with a local account runs as it", owner: alice.Name,
			uid: alice.UID, gid: alice.GID, user: alice.Name, home: home(alice.Name)},
		{name: "an owner allowed root but not root runs as its own account", owner: alice.Name, allowRoot: true,
			uid: alice.UID, gid: alice.GID, user: alice.Name, home: home(alice.Name)},
		{name: "an owner without a local account runs as a uid of its own", owner: "carol-has-no-account",
			uid: hashedUID("carol-has-no-account"), gid: hashedUID("carol-has-no-account"), user: "carol-has-no-account", home: "/nonexistent"},
		{name: "a job without an owner runs as the job user", owner: "",
			uid: int(nobody.UID), gid: int(nobody.GID), user: nobody.Name, home: nobody.Home},
		{name: "root runs as root when an admin allows it", owner: "root", allowRoot: true,
			uid: 0, gid: 0, user: "root", home: home("root")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tk := sh(`id -u; id -g; echo "$USER $LOGNAME $HOME"; touch mine; stat -c %u:%g mine`)
			tk.Job.Owner, tk.Job.AllowRoot = tc.owner, tc.allowRoot
			out := stdoutOf(t, r, rec, e.allocDir, tk)
			uid, gid := strconv.Itoa(tc.uid), strconv.Itoa(tc.gid)
			want := uid + "\n" + gid + "\n" + tc.user + " " + tc.user + " " + tc.home + "\n" + uid + ":" + gid + "\n"
			if out != want {
				t.Errorf("job printed %q, want %q", out, want)
			}
			var sp spec
			if _, err := readJSON(filepath.Join(e.allocDir, tk.Alloc.ID, specFile), &sp); err != nil || sp.User == nil ||
				int(sp.User.UID) != tc.uid || sp.User.Name != tc.user {
				t.Errorf("spec.json records the account %+v (%v), want %s (uid %d)", sp.User, err, tc.user, tc.uid)
			}
		})
	}
}

func TestRunner_OwnerMappingToRootWithoutAllowanceFailsToStart(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r, _ := e.runner(t)
	tk := sh("id -u")
	tk.Job.Owner = "root"
	const hint = "skein acl user set root --allow-root"
	err := r.Start(tk)
	if !errors.Is(err, ErrRootRefused) || !strings.Contains(err.Error(), hint) {
		t.Fatalf("Start = %v, want %v naming %q", err, ErrRootRefused, hint)
	}
	dir := filepath.Join(e.allocDir, tk.Alloc.ID)
	if st := readStatus(t, dir); st.State != structs.AllocFailed || !strings.HasPrefix(st.Reason, "start failed: ") ||
		!strings.Contains(st.Reason, hint) {
		t.Errorf("status = %+v, want failed with the reason naming %q", st, hint)
	}
	for _, name := range []string{supervisorPIDFile, jobPIDFile, stdoutFile} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			t.Errorf("%s exists: something was started for a refused job", name)
		}
	}
	if tracked(r, tk.Alloc.ID) {
		t.Error("a refused allocation is still tracked")
	}
}

// TestRunner_JobCannotReadTheAgentsFilesOrAnotherUsersJob: the allocation
// directory sits in a data dir laid out as the agent's; a job of one user
// reaches its own work dir and logs and nothing else there: not the
// agent's keys and tokens, not another user's logs or spec, not the
// environment of its supervisor or of the agent (this test), and none of
// the files the root runner trusts.
func TestRunner_JobCannotReadTheAgentsFilesOrAnotherUsersJob(t *testing.T) {
	t.Parallel()
	alice := testutil.LocalUser(t)
	data := testutil.JobDir(t)
	if err := os.Chmod(data, 0o711); err != nil {
		t.Fatal(err)
	}
	token := filepath.Join(data, "api-token")
	key := filepath.Join(data, "tls", "node.key")
	if err := os.Mkdir(filepath.Dir(key), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{token, key} {
		if err := os.WriteFile(f, []byte("secret\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	e := newEnvIn(t, data)
	r, rec := e.runner(t)

	other := sh("echo output of the job user")
	stdoutOf(t, r, rec, e.allocDir, other)
	otherDir := filepath.Join(e.allocDir, other.Alloc.ID)

	const script = `
try() { if "$@" >/dev/null 2>&1; then echo "yes"; else echo "no"; fi; }
echo "token $(try cat "$1")"
echo "key $(try cat "$2")"
echo "other-log $(try cat "$3")"
echo "other-spec $(try cat "$4")"
echo "list-allocs $(try ls "$5")"
echo "supervisor-env $(try cat /proc/$PPID/environ)"
echo "agent-env $(try cat /proc/$6/environ)"
echo "write-job-pid $(try sh -c 'echo 1 > ../job.pid')"
echo "move-spec $(try mv ../spec.json ../spec.old)"
echo "own-log $(try sh -c 'echo forged >> ../stderr.log')"
echo "own-work $(try touch mine)"
`
	tk := task("/bin/sh", "-c", script, "job", token, key, filepath.Join(otherDir, stdoutFile),
		filepath.Join(otherDir, specFile), e.allocDir, strconv.Itoa(os.Getpid()))
	tk.Job.Owner = alice.Name
	out := stdoutOf(t, r, rec, e.allocDir, tk)
	want := "token no\nkey no\nother-log no\nother-spec no\nlist-allocs no\nsupervisor-env no\nagent-env no\n" +
		"write-job-pid no\nmove-spec no\nown-log no\nown-work yes\n"
	if out != want {
		t.Errorf("what the job could do:\n%s\nwant:\n%s", out, want)
	}
}

// TestRunner_JobEnvironmentHoldsNothingOfTheAgents: the job's environment
// is its account's, the allow-list's picks of the agent's, its own and
// skein's; nothing else of the agent's environment, and no secret, gets
// through.
func TestRunner_JobEnvironmentHoldsNothingOfTheAgents(t *testing.T) {
	const marker = "SKEIN_TEST_AGENT_MARKER"
	t.Setenv(marker, "agent-only")
	t.Setenv("SKEIN_TOKEN", "agent-secret")
	t.Setenv("LC_TIME", "C")
	e := newEnv(t)
	r, rec := e.runner(t, func(c *Config) { c.AgentEnv = nil })
	tk := task("/usr/bin/env")
	tk.Job.Spec.Env = map[string]string{"MY_VAR": "mine"}
	env := envMap(t, strings.Split(strings.TrimSpace(stdoutOf(t, r, rec, e.allocDir, tk)), "\n"))
	nobody := jobUser(t)
	want := map[string]string{"PATH": JobPath, "HOME": nobody.Home, "USER": nobody.Name, "LOGNAME": nobody.Name,
		"SHELL": nobody.Shell, "LC_TIME": "C", "MY_VAR": "mine"}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("job saw %s=%q, want %q", k, env[k], v)
		}
	}
	for k, v := range env {
		if _, ok := want[k]; !ok && !slices.Contains(ownEnv, k) && !allowed(DefaultJobEnvAllow, k) {
			t.Errorf("job saw %s=%q, which is neither its own, skein's nor allowed", k, v)
		}
	}
	for _, k := range []string{marker, "SKEIN_TOKEN"} {
		if v, ok := env[k]; ok {
			t.Errorf("job saw the agent's %s=%q", k, v)
		}
	}
}

func TestJobBaseEnv_AllowListPicksTheAgentsVariables(t *testing.T) {
	a := Account{Name: "alice", UID: 1000, GID: 1000, Home: "/home/alice", Shell: "/bin/bash"}
	agentEnv := []string{"PATH=/agent/bin", "HOME=/root", "HTTP_PROXY=http://proxy:3128", "NVIDIA_DRIVER_CAPABILITIES=all",
		"NVIDIAX=1", "LANG=C.UTF-8", "SKEIN_TOKEN=secret", "AWS_SECRET_ACCESS_KEY=k"}
	cases := []struct {
		name  string
		allow []string
		want  []string
	}{
		{name: "the default passes the locale and time zone", allow: DefaultJobEnvAllow,
			want: []string{"LANG=C.UTF-8"}},
		{name: "names and prefixes", allow: []string{"HTTP_PROXY", "NVIDIA_*"},
			want: []string{"HTTP_PROXY=http://proxy:3128", "NVIDIA_DRIVER_CAPABILITIES=all"}},
		{name: "secrets never pass", allow: []string{"SKEIN_*", "SKEIN_TOKEN"}},
		{name: "an empty list passes nothing", allow: []string{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := jobBaseEnv(a, tc.allow, agentEnv)
			want := append([]string{"PATH=" + JobPath, "HOME=/home/alice", "USER=alice", "LOGNAME=alice", "SHELL=/bin/bash"}, tc.want...)
			if !slices.Equal(got, want) {
				t.Errorf("jobBaseEnv = %q, want %q", got, want)
			}
		})
	}
}

func TestCheckEnvAllow(t *testing.T) {
	for _, ok := range [][]string{nil, {"LANG", "LC_*", "TZ"}, {"_X1"}, {"A*"}} {
		if err := CheckEnvAllow(ok); err != nil {
			t.Errorf("CheckEnvAllow(%q) = %v, want nil", ok, err)
		}
	}
	for _, bad := range []string{"*", "", "1ABC", "A=B", "LC_*_X", "A-B", "*LC"} {
		if err := CheckEnvAllow([]string{"LANG", bad}); !errors.Is(err, ErrEnvAllow) || !strings.Contains(err.Error(), strconv.Quote(bad)) {
			t.Errorf("CheckEnvAllow(%q) = %v, want %v naming it", bad, err, ErrEnvAllow)
		}
	}
}

func TestLookupJobUser(t *testing.T) {
	nobody, err := user.Lookup(DefaultJobUser)
	if err != nil {
		t.Skipf("no %s account here: %v", DefaultJobUser, err)
	}
	uid, _ := strconv.Atoi(nobody.Uid)
	gid, _ := strconv.Atoi(nobody.Gid)
	const noAccount = "4000000001"
	if _, err := user.LookupId(noAccount); err == nil {
		t.Skipf("uid %s has an account here", noAccount)
	}
	cases := []struct {
		in       string
		name     string
		uid, gid int
		refused  string // part of the error, "" for none
	}{
		{in: "", name: DefaultJobUser, uid: uid, gid: gid},
		{in: DefaultJobUser, name: DefaultJobUser, uid: uid, gid: gid},
		{in: nobody.Uid, name: DefaultJobUser, uid: uid, gid: gid},
		{in: nobody.Uid + ":4242", name: DefaultJobUser, uid: uid, gid: 4242},
		{in: noAccount + ":4242", name: noAccount, uid: 4000000001, gid: 4242},
		{in: noAccount, refused: "give its group too"},
		{in: "root", refused: "uid 0"},
		{in: "0", refused: "uid 0"},
		{in: "0:0", refused: "uid 0"},
		{in: "no-such-account", refused: `no local account "no-such-account"`},
		{in: "nobody:4242", refused: "UID[:GID]"},
		{in: nobody.Uid + ":x", refused: `group "x"`},
	}
	for _, tc := range cases {
		a, err := LookupJobUser(tc.in)
		switch {
		case tc.refused != "":
			if !errors.Is(err, ErrJobUser) || !strings.Contains(err.Error(), tc.refused) {
				t.Errorf("LookupJobUser(%q) = %+v, %v; want %v saying %q", tc.in, a, err, ErrJobUser, tc.refused)
			}
		case err != nil || a.Name != tc.name || int(a.UID) != tc.uid || int(a.GID) != tc.gid ||
			!slices.Contains(a.Groups, a.GID):
			t.Errorf("LookupJobUser(%q) = %+v, %v; want %s, uid %d, gid %d among its groups", tc.in, a, err, tc.name, tc.uid, tc.gid)
		}
	}
}

func TestNew_RefusesARootJobUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only a root runner resolves the job user")
	}
	_, err := New(Config{AllocDir: filepath.Join(t.TempDir(), "allocs"), JobUser: "root"})
	if !errors.Is(err, ErrJobUser) {
		t.Errorf("New with job user root = %v, want %v", err, ErrJobUser)
	}
}

func TestSupervisor_RootRefusesAProcessSpecWithoutAnAccount(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("a supervisor that is not root runs every job as itself")
	}
	e := newEnv(t)
	dir := newAllocDir(t, e, spec{Driver: processDriverName, Argv: []string{"/bin/true"}, Workdir: "/"})
	if code := startSupervisor(t, dir).exitCode(t); code != 0 {
		t.Fatalf("supervisor exited %d", code)
	}
	if st := readStatus(t, dir); st.State != structs.AllocFailed || st.Reason != "start failed: "+errNoAccount.Error() {
		t.Errorf("status = %+v, want a start failure: %v", st, errNoAccount)
	}
}

// TestRunner_AllocDirFromBeforeAccountsIsAdoptedAndSwept: a directory an
// older agent made (0700, a spec without an account) whose job still runs
// is adopted, stopped and swept as any other.
func TestRunner_AllocDirFromBeforeAccountsIsAdoptedAndSwept(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	dir := newAllocDir(t, e, spec{Driver: fakeDriverName, Argv: []string{fakeUntilTerm}, CreateIndex: 3,
		KillGrace: structs.Duration(time.Hour)})
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("the old directory is %v (%v), want 0700", fi.Mode(), err)
	}
	startSupervisor(t, dir)
	waitJobStarted(t, dir)

	r, rec := e.runner(t)
	id := filepath.Base(dir)
	if adopted, err := r.Restore(); err != nil || !slices.Contains(adopted, id) {
		t.Fatalf("Restore = %v, %v; want %s adopted", adopted, err, id)
	}
	r.Stop(id, "cancelled")
	if u := waitTerminal(t, rec, id); u.State != structs.AllocKilled {
		t.Fatalf("ended %+v, want killed", u)
	}
	// The supervisor lets go of its lock just after it records the outcome.
	waitFor(t, 5*time.Second, "the old directory swept", func() (bool, string) {
		n, err := r.Sweep(func(string) bool { return false }, 10)
		return n == 1 && err == nil, fmt.Sprintf("swept %d, %v", n, err)
	})
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the old directory is still there: %v", err)
	}
}

func TestCurrentAccount_IsThisProcesssUser(t *testing.T) {
	a := currentAccount()
	if int(a.UID) != os.Getuid() || int(a.GID) != os.Getgid() {
		t.Fatalf("currentAccount = %+v, want uid %d, gid %d", a, os.Getuid(), os.Getgid())
	}
	if u, err := user.Current(); err == nil && (a.Name != u.Username || a.Home != u.HomeDir) {
		t.Errorf("currentAccount = %+v, want %s with home %s", a, u.Username, u.HomeDir)
	}
	if a.Shell == "" {
		t.Error("currentAccount has no shell")
	}
}

// TestRunner_LogsAndTheirRotatedPartsAreRoots: every part of a log, and
// what the supervisor records of it (.meta), is root's and 0600: the job
// writes its output only through the supervisor's pipes.
func TestRunner_LogsAndTheirRotatedPartsAreRoots(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.logMax = MinLogMax
	r, rec := e.runner(t)
	tk := sh(`i=0; while [ $i -lt 400 ]; do echo "line $i of the job's output"; i=$((i+1)); done`)
	stdoutOf(t, r, rec, e.allocDir, tk)
	dir := filepath.Join(e.allocDir, tk.Alloc.ID)
	for name, uid := range map[string]uint32{stdoutFile: 0, stdoutFile + rotatedSuffix: 0, stdoutFile + metaSuffix: 0} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Sys().(*syscall.Stat_t).Uid; got != uid || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: owner uid %d, mode %04o; want uid %d, 0600", name, got, fi.Mode().Perm(), uid)
		}
	}
}

// TestRunner_OwnersWithoutAccountsDoNotShareOne: two owners that have no
// local account run as accounts of their own, so one's job can neither
// read the other's environment (its secrets) nor signal it.
func TestRunner_OwnersWithoutAccountsDoNotShareOne(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("only a root runner runs jobs as other accounts")
	}
	e := newEnv(t)
	r, rec := e.runner(t)
	work := testutil.SharedDir(t)
	victim := sh(`echo $$ > victim.pid; exec sleep 1000`)
	victim.Job.Owner = "ghost-victim"
	victim.Job.Spec.SecretEnv = map[string]string{"API_KEY": "hunter2"}
	victim.Job.Spec.Workdir = work
	mustStart(t, r, victim)
	waitFile(t, filepath.Join(work, "victim.pid"), "\n")
	thief := sh(`p=$(cat victim.pid)
if tr '\0' '\n' < /proc/$p/environ 2>/dev/null | grep -q hunter2; then echo "read the secret"; else echo "no secret"; fi
if kill -0 $p 2>/dev/null; then echo "may signal"; else echo "may not signal"; fi
id -u`)
	thief.Job.Owner = "ghost-thief"
	thief.Job.Spec.Workdir = work
	out := stdoutOf(t, r, rec, e.allocDir, thief)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || lines[0] != "no secret" || lines[1] != "may not signal" {
		t.Errorf("another owner's job (both without local accounts): %q, want no secret and no signal", out)
	}
	victimAs, thiefAs := runsAs(filepath.Join(e.allocDir, victim.Alloc.ID)), runsAs(filepath.Join(e.allocDir, thief.Alloc.ID))
	if victimAs == thiefAs || !strings.HasPrefix(victimAs, "ghost-victim (uid ") {
		t.Errorf("the two owners run as %q and %q, want accounts of their own", victimAs, thiefAs)
	}
	r.Stop(victim.Alloc.ID, "test over")
	waitTerminal(t, rec, victim.Alloc.ID)
}

// hashedUID is the uid a fresh node gives an owner without a local
// account: the first it tries in DefaultJobUIDs.
func hashedUID(owner string) int {
	h := fnv.New32a()
	h.Write([]byte(owner))
	return int(uint64(DefaultJobUIDs.Min) + uint64(h.Sum32())%DefaultJobUIDs.size())
}

// TestRunner_OwnersWithoutAccountsShareTheJobUserWhenTold: a node whose
// operator turned the uid range off (--job-uid-range none) runs them all
// as the job user, as before.
func TestRunner_OwnersWithoutAccountsShareTheJobUserWhenTold(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("only a root runner runs jobs as other accounts")
	}
	e := newEnv(t)
	r, rec := e.runner(t, func(c *Config) { c.ShareJobUser = true })
	tk := sh(`id -u`)
	tk.Job.Owner = "ghost-shared"
	if got, want := strings.TrimSpace(stdoutOf(t, r, rec, e.allocDir, tk)), strconv.Itoa(int(jobUser(t).UID)); got != want {
		t.Errorf("ran as uid %s, want the job user's %s", got, want)
	}
}

// TestOwnerUIDs_KeptAcrossRestartsAndNeverShared: a node gives an owner
// the same uid again after a restart, and gives two owners whose names
// hash alike different uids.
func TestOwnerUIDs_KeptAcrossRestartsAndNeverShared(t *testing.T) {
	dir := t.TempDir()
	span := UIDRange{Min: 5000, Max: 5001} // two uids: every owner collides
	o, err := newOwnerUIDs(span, dir)
	if err != nil {
		t.Fatal(err)
	}
	a, err := o.account("a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := o.account("b")
	if err != nil {
		t.Fatal(err)
	}
	if a.UID == b.UID || a.UID < 5000 || a.UID > 5001 || b.UID < 5000 || b.UID > 5001 {
		t.Fatalf("a %d, b %d: want two uids of 5000-5001", a.UID, b.UID)
	}
	if _, err := o.account("c"); !errors.Is(err, errUIDsExhausted) {
		t.Errorf("a third owner of a two-uid range: %v, want errUIDsExhausted", err)
	}
	again, err := newOwnerUIDs(span, dir)
	if err != nil {
		t.Fatal(err)
	}
	if a2, err := again.account("a"); err != nil || a2.UID != a.UID {
		t.Errorf("after a restart a runs as %d (%v), want %d", a2.UID, err, a.UID)
	}
	for _, bad := range []string{"", "5", "9-3", "0-10", "1-4294967295", "x-y"} {
		if _, err := ParseUIDRange(bad); err == nil {
			t.Errorf("ParseUIDRange(%q) accepted", bad)
		}
	}
	if r, err := ParseUIDRange("100-200"); err != nil || r != (UIDRange{100, 200}) {
		t.Errorf("ParseUIDRange(100-200) = %v, %v", r, err)
	}
}
