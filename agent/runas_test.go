package agent

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

// TestAgent_JobRunsAsItsOwnerAndReachesNothingOfTheAgents: in a real,
// secure agent running as root, a job whose owner has a local account
// runs as that account; it cannot read the agent's data dir (the Raft
// store, the node key, the API token), another user's logs, or the
// environment of its supervisor or of the agent; and its own environment
// holds nothing of the agent's. The job's owner is stamped into the
// submit entry directly, as the node that takes a submit will from the
// caller's ACL token.
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
	c := secureClient(t, a)
	data := a.DataDir()

	// A job of no owner runs as the job user, and is another user's.
	other := submit(t, c, 0, "sh", "-c", "echo output of the job user")
	d := waitJobState(t, c, other.ID, structs.JobSucceeded)
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
	id := structs.NewID()
	if _, err := a.apply(structs.JobSubmitType, structs.JobSubmitRequest{RequestID: id, JobID: id,
		Spec: structs.JobSpec{Command: append([]string{"sh", "-c", script, "job"}, files...),
			Env: map[string]string{"DATA": data, "AGENT": strconv.Itoa(os.Getpid()), "MARKER": marker}},
		SubmittedAt: time.Now().UTC(), Owner: alice.Name}); err != nil {
		t.Fatal(err)
	}
	waitJobState(t, c, id, structs.JobSucceeded)
	want := "uid " + strconv.Itoa(alice.UID) + "\ngid " + strconv.Itoa(alice.GID) + "\n" +
		"raft.db no\nnode.key no\napi-token no\nnode-id no\nstdout.log no\n" +
		"data-dir no\nsupervisor-env no\nagent-env no\nmarker 0\ntoken 0\n"
	if got := logs(t, c, id, api.StreamStdout); got != want {
		t.Errorf("what the job was and could do:\n%s\nwant:\n%s", got, want)
	}
}

// secureClient is a client of a secure agent: its CA and its API token.
func secureClient(t *testing.T, a *Agent) *api.Client {
	t.Helper()
	tok, err := os.ReadFile(filepath.Join(a.DataDir(), "api-token"))
	if err != nil {
		t.Fatal(err)
	}
	bundle, err := os.ReadFile(a.secure.CACertPath())
	if err != nil {
		t.Fatal(err)
	}
	conf, err := api.ClusterTLS(bundle)
	if err != nil {
		t.Fatal(err)
	}
	c, err := api.NewClient(a.HTTPAddr(), strings.TrimSpace(string(tok)))
	if err != nil {
		t.Fatal(err)
	}
	c = c.WithTLS(conf)
	testutil.WaitFor(t, 10*time.Second, func() error {
		_, err := c.Status(context.Background())
		return err
	})
	return c
}
