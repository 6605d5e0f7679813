package agent

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/cluster"
	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

// testConfig is a dev-like agent on loopback with free ports, 4 simulated
// GPUs, fast Raft timings and the test binary as supervisor.
func testConfig(t testing.TB, dataDir string) Config {
	t.Helper()
	// Registered first, so it runs after every other cleanup: from then on
	// the agent's stray goroutines (memberlist's probes) log nowhere
	// instead of into a finished test, which panics.
	logs := hclogWriter{t: t, done: &atomic.Bool{}}
	t.Cleanup(func() { logs.done.Store(true) })
	os.Setenv(superviseEnv, "1") // inherited by supervisors the runner starts
	t.Cleanup(func() { os.Unsetenv(superviseEnv) })
	// Jobs outlive their agent by design; stop them before the data dir
	// goes (cleanups run last-in first-out, after the agent's Shutdown).
	t.Cleanup(func() { stopSupervisors(t, dataDir) })
	// Jobs run as the job user (nobody): they must reach their work dirs.
	testutil.LetJobsReach(t, dataDir)
	return Config{
		Name:          "test-node",
		DataDir:       dataDir,
		BindAddr:      "127.0.0.1",
		HTTPPort:      -1,
		RaftPort:      -1, // bound by the kernel: a port picked and freed first can be taken by another test
		GossipPort:    -1,
		GPUs:          "sim:4xH100-80",
		KillGrace:     time.Second,
		SupervisorCmd: []string{os.Args[0]},
		Timing: cluster.Timing{
			HeartbeatTimeout:   200 * time.Millisecond,
			ElectionTimeout:    200 * time.Millisecond,
			LeaderLeaseTimeout: 100 * time.Millisecond,
			CommitTimeout:      5 * time.Millisecond,
		},
		Logger: hclog.New(&hclog.LoggerOptions{Name: t.Name(), Level: hclog.Warn, Output: logs}),
	}
}

// hclogWriter sends agent logs to the test log, shown only on failure,
// until done is set.
type hclogWriter struct {
	t    testing.TB
	done *atomic.Bool
}

func (w hclogWriter) Write(p []byte) (int, error) {
	if !w.done.Load() {
		w.t.Log(string(p))
	}
	return len(p), nil
}

func startAgent(t *testing.T, cfg Config) (*Agent, *api.Client) {
	t.Helper()
	a, err := New(cfg)
	if err != nil {
		t.Fatalf("start agent: %v", err)
	}
	t.Cleanup(a.Shutdown)
	c, err := api.NewClient(a.HTTPAddr(), cfg.Token)
	if err != nil {
		t.Fatal(err)
	}
	return a, c
}

func submit(t *testing.T, c *api.Client, gpus int, argv ...string) *structs.Job {
	t.Helper()
	job, err := c.SubmitJob(context.Background(), api.SubmitRequest{
		RequestID: structs.NewID(),
		Spec:      structs.JobSpec{Command: argv, GPUs: gpus},
	})
	if err != nil {
		t.Fatalf("submit %v: %v", argv, err)
	}
	return job
}

func waitJobState(t *testing.T, c *api.Client, id string, want structs.JobState) *api.JobDetail {
	t.Helper()
	var d *api.JobDetail
	testutil.WaitFor(t, 15*time.Second, func() error {
		var err error
		d, err = c.Job(context.Background(), id)
		if err != nil {
			return err
		}
		if d.Job.State != want {
			return fmt.Errorf("job %s is %s (%s), want %s", structs.ShortID(id), d.Job.State, d.Job.Reason, want)
		}
		return nil
	})
	return d
}

func logs(t *testing.T, c *api.Client, id, stream string) string {
	t.Helper()
	var b bytes.Buffer
	if err := c.Logs(context.Background(), id, api.LogOptions{Stream: stream}, &b); err != nil {
		t.Fatalf("logs %s: %v", stream, err)
	}
	return b.String()
}

func writeFile(path string) error { return os.WriteFile(path, nil, 0o600) }

// stopSupervisors stops every supervisor working in dir, as the agent's
// Shutdown deliberately does not, and waits for them to finish writing.
func stopSupervisors(t testing.TB, dir string) {
	find := func() []int {
		var pids []int
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == os.Getpid() {
				continue
			}
			cmd, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
			if err == nil && bytes.Contains(cmd, []byte(dir+"/")) {
				pids = append(pids, pid)
			}
		}
		return pids
	}
	for _, pid := range find() {
		_ = syscall.Kill(pid, syscall.SIGTERM) // the supervisor stops its job's group
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(find()) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	for _, pid := range find() {
		t.Logf("supervisor %d did not stop; killing it", pid)
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}
