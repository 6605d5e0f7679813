package agent

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"sync/atomic"
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
	// Jobs outlive their agent by design; stop them before the data dir
	// goes (cleanups run last-in first-out, after the agent's Shutdown).
	t.Cleanup(func() { testutil.StopSupervisors(t, dataDir) })
	// Jobs run as the job user (nobody): they must reach their work dirs.
	testutil.LetJobsReach(t, dataDir)
	return Config{
		Name:        "test-node",
		DataDir:     dataDir,
		BindAddr:    "127.0.0.1",
		HTTPPort:    -1,
		RaftPort:    -1, // bound by the kernel: a port picked and freed first can be taken by another test
		GossipPort:  -1,
		GPUs:        "sim:4xH100-80",
		MasterPorts: testMasterPorts(),
		KillGrace:   time.Second,
		// env(1) tells the test binary it is a supervisor: nothing of the
		// test process's own environment changes, so tests may run side
		// by side.
		SupervisorCmd: []string{"/usr/bin/env", superviseEnv + "=1", os.Args[0]},
		// Jobs are confined where the machine lets tests make cgroups,
		// in groups the test binary removes; elsewhere they run
		// unconfined.
		CgroupParent:    testutil.AgentCgroupParent(),
		AllowUnconfined: true,
		// The agents of a test share its process: a late timer is the
		// test binary's load, not one leader's, and a test that reads
		// the leader wants its answer (agent/server's tests shed).
		Starved: func() bool { return false },
		Timing: cluster.Timing{
			HeartbeatTimeout:   200 * time.Millisecond,
			ElectionTimeout:    200 * time.Millisecond,
			LeaderLeaseTimeout: 100 * time.Millisecond,
			CommitTimeout:      5 * time.Millisecond,
		},
		Logger: hclog.New(&hclog.LoggerOptions{Name: t.Name(), Level: hclog.Warn, Output: logs}),
	}
}

// masterPortBlocks counts the MASTER_PORT ranges handed to test agents.
var masterPortBlocks atomic.Int64

// testMasterPorts is a MASTER_PORT range of a test agent's own. Test
// agents share one host with each other and with other packages' tests,
// and each checks that its gang's port is free on every address: with
// the default range for all, two could be given the same port and the
// second not start. Blocks of 16 start at a point of this process's, and
// stay below the default range (29500-29999) that other tests' agents use.
func testMasterPorts() structs.PortRange {
	block := (int64(os.Getpid())*37 + masterPortBlocks.Add(1)) % 592
	lo := 20000 + int(block)*16
	return structs.PortRange{Min: lo, Max: lo + 15}
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

// startAgent starts an agent from cfg and bootstraps its ACLs, as every
// real cluster's admin does: the client it returns holds the admin token.
func startAgent(t *testing.T, cfg Config) (*Agent, *api.Client) {
	t.Helper()
	a, _, c := startAgentAdmin(t, cfg)
	return a, c
}

// startAgentAdmin is startAgent that also returns the admin token, for the
// test's own HTTP requests.
func startAgentAdmin(t *testing.T, cfg Config) (*Agent, string, *api.Client) {
	t.Helper()
	a, legacy := startAgentWithoutACL(t, cfg)
	token := bootstrapACL(t, legacy)
	return a, token, clientFor(t, a, token)
}

// startAgentWithoutACL starts an agent from cfg and leaves its ACLs off:
// the client it returns holds cfg.Token. Only tests of what a cluster does
// before its bootstrap, or of the cluster's API token, use it.
func startAgentWithoutACL(t *testing.T, cfg Config) (*Agent, *api.Client) {
	t.Helper()
	a, err := New(cfg)
	if err != nil {
		t.Fatalf("start agent: %v", err)
	}
	t.Cleanup(a.Shutdown)
	return a, clientFor(t, a, cfg.Token)
}

// restartAgent starts an agent from cfg on the data dir of one whose ACLs
// are on: the client it returns holds token, that agent's admin token.
func restartAgent(t *testing.T, cfg Config, token string) (*Agent, *api.Client) {
	t.Helper()
	a, _ := startAgentWithoutACL(t, cfg)
	if _, on := a.fsm.ACL(); !on {
		t.Fatal("the restarted agent has lost its ACLs")
	}
	return a, clientFor(t, a, token)
}

// tokenClient is an HTTP client, with a minute's timeout, whose requests
// carry token: for a test's own requests to an API or an ingress.
func tokenClient(token string) *http.Client {
	return &http.Client{Timeout: time.Minute, Transport: tokenTransport(token)}
}

// tokenTransport sets its token on every request it sends.
type tokenTransport string

func (t tokenTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(api.TokenHeader, string(t))
	return http.DefaultTransport.RoundTrip(r)
}

// bootstrapACL turns ACLs on through c, which holds the cluster's
// token, once its agent answers, and returns the admin token: one Raft
// entry, committed by the time the answer comes.
func bootstrapACL(t *testing.T, c *api.Client) string {
	t.Helper()
	ctx := context.Background()
	testutil.WaitFor(t, 10*time.Second, func() error {
		_, err := c.Status(ctx)
		return err
	})
	boot, err := c.ACLBootstrap(ctx, api.ACLBootstrapRequest{})
	if err != nil {
		t.Fatalf("ACL bootstrap: %v", err)
	}
	return boot.Token
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
