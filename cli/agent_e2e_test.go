package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/skein-dev/skein/agent"
	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

// realAgents holds, by test name, the global flags that point the CLI
// of a test (and of its subtests) at the real agent it started, with the
// admin token: tests run side by side, so these go on each command line
// (cliArgs) rather than in the process's environment.
var realAgents sync.Map // test name -> *realAgent

// realAgent is the CLI's way to a test's real agent.
type realAgent struct {
	addr      string
	tokenFile atomic.Pointer[string]
}

// startRealAgent runs an in-process agent with 2 simulated GPUs, turns its
// ACLs on, as every real cluster's admin does, and points the test's CLI
// at it with the admin token (--addr and --token-file, see cliArgs); tune
// changes its configuration.
func startRealAgent(t *testing.T, tune ...func(*agent.Config)) string {
	t.Helper()
	dataDir := testutil.JobDir(t)
	// Jobs outlive their agent by design: stop them before the data dir
	// goes (cleanups run last-in first-out, after the agent's Shutdown).
	t.Cleanup(func() { testutil.StopSupervisors(t, dataDir) })
	cfg := agent.Config{
		Name:       "e2e",
		DataDir:    dataDir,
		BindAddr:   "127.0.0.1",
		HTTPPort:   -1,
		RaftPort:   -1,
		GossipPort: -1,
		GPUs:       "sim:2xA100-40",
		KillGrace:  time.Second,
		// env(1) tells the test binary it is a supervisor, leaving the
		// test process's environment alone.
		SupervisorCmd: []string{"/usr/bin/env", superviseEnv + "=1", os.Args[0]},
		Logger:        hclog.NewNullLogger(),
		// Confined where tests may make cgroups, else unconfined.
		CgroupParent:    testutil.AgentCgroupParent(),
		AllowUnconfined: true,
	}
	for _, f := range tune {
		f(&cfg)
	}
	a, err := agent.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Shutdown)
	c, err := api.NewClient(a.HTTPAddr(), cfg.Token)
	if err != nil {
		t.Fatal(err)
	}
	boot, err := c.ACLBootstrap(context.Background(), api.ACLBootstrapRequest{})
	if err != nil {
		t.Fatalf("ACL bootstrap: %v", err)
	}
	tokenFile := filepath.Join(t.TempDir(), "admin-token")
	if err := os.WriteFile(tokenFile, []byte(boot.Token), 0o600); err != nil {
		t.Fatal(err)
	}
	ra := &realAgent{addr: a.HTTPAddr()}
	ra.tokenFile.Store(&tokenFile)
	realAgents.Store(t.Name(), ra)
	t.Cleanup(func() { realAgents.Delete(t.Name()) })
	return a.HTTPAddr()
}

// realAgentOf is the real agent t or the test above it started; nil if
// none did.
func realAgentOf(t *testing.T) *realAgent {
	for name := t.Name(); ; {
		if ra, ok := realAgents.Load(name); ok {
			return ra.(*realAgent)
		}
		i := strings.LastIndexByte(name, '/')
		if i < 0 {
			return nil
		}
		name = name[:i]
	}
}

// adminTokenFile is the file of the admin token of t's real agent.
func adminTokenFile(t *testing.T) string {
	t.Helper()
	ra := realAgentOf(t)
	if ra == nil {
		t.Fatal("the test started no real agent")
	}
	return *ra.tokenFile.Load()
}

// cliArgs is the command line `skein args...` as t runs it: with the
// flags that reach its real agent, if it started one.
func cliArgs(t *testing.T, args ...string) []string {
	argv := []string{"skein"}
	if ra := realAgentOf(t); ra != nil {
		argv = append(argv, "--addr", ra.addr, "--token-file", *ra.tokenFile.Load())
	}
	return append(argv, args...)
}

func waitJobState(t *testing.T, id string, want structs.JobState) api.JobDetail {
	t.Helper()
	var d api.JobDetail
	deadline := time.Now().Add(15 * time.Second)
	for {
		r := runCLI(t, "job", "--json", id)
		if r.code != 0 {
			t.Fatalf("skein job: %d %s", r.code, r.stderr)
		}
		mustDecode(t, r.stdout, &d)
		if d.Job.State == want {
			return d
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s is %s (%s), want %s", id, d.Job.State, d.Job.Reason, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestCLI_AgainstARealAgent(t *testing.T) {
	t.Parallel()
	startRealAgent(t)

	r := runCLI(t, "submit", "--gpus", "2", "--name", "hello", "--", "sh", "-c", "echo out; echo err >&2")
	if r.code != 0 {
		t.Fatalf("submit: %d %s", r.code, r.stderr)
	}
	id := strings.TrimSpace(r.stdout)
	d := waitJobState(t, id, structs.JobSucceeded)
	if len(d.Allocations) != 1 || len(d.Allocations[0].GPUs) != 2 {
		t.Fatalf("allocations = %+v, want one holding 2 GPUs", d.Allocations)
	}

	r = runCLI(t, "logs", id[:6])
	if r.code != 0 || r.stdout != "out\n" || r.stderr != "err\n" {
		t.Fatalf("logs: code %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}

	r = runCLI(t, "jobs")
	if r.code != 0 || !strings.Contains(r.stdout, structs.ShortID(id)) || !strings.Contains(r.stdout, "succeeded") {
		t.Fatalf("jobs: %d\n%s", r.code, r.stdout)
	}

	r = runCLI(t, "job", id)
	for _, want := range []string{"succeeded", "Exit code: 0", " 0-1 ", "e2e"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("job output lacks %q:\n%s", want, r.stdout)
		}
	}
	if r = runCLI(t, "job", "--wide", id); !strings.Contains(r.stdout, strings.Join(d.Allocations[0].GPUs, ",")) {
		t.Errorf("job --wide lacks the GPU UUIDs %v:\n%s", d.Allocations[0].GPUs, r.stdout)
	}

	r = runCLI(t, "nodes")
	if r.code != 0 || !strings.Contains(r.stdout, "NVIDIA A100 (simulated)") || !strings.Contains(r.stdout, "2/2") {
		t.Fatalf("nodes: %d\n%s", r.code, r.stdout)
	}

	r = runCLI(t, "submit", "--gpus", "3", "--", "true")
	if r.code != 1 || !strings.Contains(r.stderr, "no node has 3 GPUs; largest has 2") {
		t.Fatalf("oversized submit: %d %q", r.code, r.stderr)
	}
	// The agent probes no container engine, so no node can run an image.
	r = runCLI(t, "submit", "--image", "busybox", "--", "true")
	if r.code != 1 || !strings.Contains(r.stderr, "no node can run image busybox: none has a container engine that answers") {
		t.Fatalf("image submit to a cluster without engines: %d %q", r.code, r.stderr)
	}

	r = runCLI(t, "submit", "--gpus", "2", "--", "sleep", "60")
	long := strings.TrimSpace(r.stdout)
	waitJobState(t, long, structs.JobRunning)
	r = runCLI(t, "submit", "--gpus", "1", "--", "true")
	queued := strings.TrimSpace(r.stdout)
	deadline := time.Now().Add(10 * time.Second)
	for {
		r = runCLI(t, "job", queued)
		if strings.Contains(r.stdout, "Waiting:") && strings.Contains(r.stdout, "not enough free GPUs") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("queued job does not say why it waits:\n%s", r.stdout)
		}
		time.Sleep(50 * time.Millisecond)
	}

	r = runCLI(t, "status", "--json")
	var s api.Status
	mustDecode(t, r.stdout, &s)
	if s.GPUsFree != 0 || s.GPUsTotal != 2 || s.Jobs[structs.JobQueued] != 1 || s.Leader != "e2e" {
		t.Fatalf("status = %+v", s)
	}

	r = runCLI(t, "cancel", long)
	if r.code != 0 {
		t.Fatalf("cancel: %d %s", r.code, r.stderr)
	}
	waitJobState(t, long, structs.JobCancelled)
	waitJobState(t, queued, structs.JobSucceeded)

	r = runCLI(t, "job", "0000dead")
	if r.code != 1 || !strings.Contains(r.stderr, "0000dead") {
		t.Fatalf("unknown job: %d %q", r.code, r.stderr)
	}
}

func TestCLI_SubmitWaitFollowsTheJobToItsEnd(t *testing.T) {
	t.Parallel()
	startRealAgent(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	done := make(chan result, 1)
	go func() { done <- runCLI(t, "submit", "--wait", "--", "sh", "-c", "exit 5") }()
	select {
	case r := <-done:
		id := strings.TrimSpace(r.stdout)
		if r.code != 5 || !strings.HasSuffix(r.stderr, fmt.Sprintf("job %s failed: exited with code 5\n", structs.ShortID(id))) {
			t.Fatalf("submit --wait: %d %q, want the job's exit code 5 and a last line saying so", r.code, r.stderr)
		}
	case <-ctx.Done():
		t.Fatal("submit --wait did not return")
	}
}

// TestCLI_TimeLimitWithSignalEndsTimedOut: from the command line to the
// job's processes and back: the signal arrives before the limit, the job
// ends timed_out, and jobs, job and status say so.
func TestCLI_TimeLimitWithSignalEndsTimedOut(t *testing.T) {
	t.Parallel()
	startRealAgent(t)
	out := testutil.SharedDir(t) + "/signalled"
	r := runCLI(t, "submit", "--time-limit", "2s", "--signal", "USR1@1500ms", "--restarts", "1", "--wait", "--",
		"sh", "-c", `trap 'echo usr1 >> "$0"' USR1; while :; do sleep 0.05; done`, out)
	if r.code != exitTimedOut || !strings.Contains(r.stderr, "timed_out: time limit 2s exceeded") {
		t.Fatalf("submit --wait: %d %q, want exit %d saying timed_out", r.code, r.stderr, exitTimedOut)
	}
	b, err := os.ReadFile(out)
	if err != nil || string(b) != "usr1\n" {
		t.Fatalf("the job got the signal %q (%v), want once", b, err)
	}
	r = runCLI(t, "jobs")
	if r.code != 0 || !strings.Contains(r.stdout, "timed_out") || !strings.Contains(r.stdout, "time limit 2s exceeded") {
		t.Fatalf("jobs: %d\n%s", r.code, r.stdout)
	}
	r = runCLI(t, "status", "--json")
	var s api.Status
	mustDecode(t, r.stdout, &s)
	if s.Jobs[structs.JobTimedOut] != 1 {
		t.Fatalf("status counts %v, want one timed_out", s.Jobs)
	}
}
