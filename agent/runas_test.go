package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

// TestAgent_JobRunsAsItsOwnerAndReachesNothingOfTheAgents: in a real,
// secure agent running as root with ACLs, a job submitted with a user's
// token runs as that user's local account; it cannot read the agent's data
// dir (the Raft store, the node key, the API token), another user's logs,
// or the environment of its supervisor or of the agent; and its own
// environment holds nothing of the agent's.
func TestAgent_JobRunsAsItsOwnerAndReachesNothingOfTheAgents(t *testing.T) {
	alice := testutil.LocalUser(t)
	const marker = "SKEIN_TEST_AGENT_MARKER"
	t.Setenv(marker, "agent-only")
	t.Setenv("SKEIN_TOKEN", "agent-secret")
	cfg := testConfig(t, t.TempDir())
	cfg.Security = SecurityTLS
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Shutdown)
	data := a.DataDir()
	token, err := os.ReadFile(filepath.Join(data, "api-token"))
	if err != nil {
		t.Fatal(err)
	}
	admin := clientFor(t, a, bootstrapACL(t, clientFor(t, a, strings.TrimSpace(string(token)))))
	asAlice := clientFor(t, a, userToken(t, admin, alice.Name, structs.RoleSubmitter))

	// The admin has no local account: its job runs as the job user, and
	// its log is another user's.
	other := submit(t, admin, 0, "sh", "-c", "echo output of the job user")
	d := waitJobState(t, admin, other.ID, structs.JobSucceeded)
	otherLog := filepath.Join(a.allocDir(), d.Allocations[0].ID, "stdout.log")

	const script = `
try() { if "$@" >/dev/null 2>&1; then echo "yes"; else echo "no"; fi; }
echo "uid $(id -u)"
echo "gid $(id -g)"
for f in "$@"; do echo "$(basename "$f") $(try cat "$f")"; done
echo "data-dir $(try ls "$DATA")"
echo "supervisor-env $(try cat /proc/$PPID/environ)"
echo "agent-env $(try cat /proc/$AGENT/environ)"
echo "marker $(env | grep -c "^$MARKER=")"
echo "token $(env | grep -c '^SKEIN_TOKEN=')"
`
	files := []string{filepath.Join(data, "raft", "raft.db"), filepath.Join(data, "tls", "node.key"),
		filepath.Join(data, "api-token"), filepath.Join(data, "node-id"), otherLog}
	job := submitSpec(t, asAlice, structs.JobSpec{Command: append([]string{"sh", "-c", script, "job"}, files...),
		Env: map[string]string{"DATA": data, "AGENT": strconv.Itoa(os.Getpid()), "MARKER": marker}})
	if job.Owner != alice.Name {
		t.Fatalf("the job's owner is %q, want %s", job.Owner, alice.Name)
	}
	d = waitJobState(t, asAlice, job.ID, structs.JobSucceeded)
	if runAs := fmt.Sprintf("%s (uid %d)", alice.Name, alice.UID); d.Allocations[0].RunAs != runAs {
		t.Errorf("the allocation says it ran as %q, want %q", d.Allocations[0].RunAs, runAs)
	}
	want := "uid " + strconv.Itoa(alice.UID) + "\ngid " + strconv.Itoa(alice.GID) + "\n" +
		"raft.db no\nnode.key no\napi-token no\nnode-id no\nstdout.log no\n" +
		"data-dir no\nsupervisor-env no\nagent-env no\nmarker 0\ntoken 0\n"
	if got := logs(t, asAlice, job.ID, api.StreamStdout); got != want {
		t.Errorf("what the job was and could do:\n%s\nwant:\n%s", got, want)
	}
}

// TestAgent_RootOnlyForAUserAnAdminAllows: the jobs of a user whose local
// account is root fail to start, saying who may allow them, until an admin
// allows that user root; then they run as root.
func TestAgent_RootOnlyForAUserAnAdminAllows(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("only a root agent runs jobs as their owners")
	}
	a, admin := aclAgent(t)
	asRoot := clientFor(t, a, userToken(t, admin, "root", structs.RoleSubmitter))
	refused := submit(t, asRoot, 0, "id", "-u")
	d := waitJobState(t, asRoot, refused.ID, structs.JobFailed)
	const hint = "skein acl user set root --allow-root"
	if len(d.Allocations) != 1 || !strings.Contains(d.Allocations[0].Reason, hint) {
		t.Errorf("the refused job's allocations %+v, want one failed naming %q", d.Allocations, hint)
	}
	if _, err := admin.SetACLUser(context.Background(), api.ACLUserSetRequest{User: "root", AllowRoot: true}); err != nil {
		t.Fatal(err)
	}
	allowed := submit(t, asRoot, 0, "id", "-u")
	waitJobState(t, asRoot, allowed.ID, structs.JobSucceeded)
	if got := logs(t, asRoot, allowed.ID, api.StreamStdout); got != "0\n" {
		t.Errorf("the allowed job ran as uid %q, want 0", got)
	}
}
