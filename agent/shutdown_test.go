package agent

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

// busyDevAgent starts a dev agent with its data in a temporary directory,
// as `skein agent --dev` runs, with 8 simulated GPUs, and fills them: 8
// one-GPU jobs running and queued more queued behind them. Every job
// marks its start with a file named after its allocation in the
// directory it returns, then sleeps until stopped.
func busyDevAgent(tb testing.TB, queued int) (*Agent, string) {
	tb.Helper()
	const running = 8
	cfg := testConfig(tb, tb.TempDir())
	cfg.Dev, cfg.DataDir = true, "" // the dev agent's own temporary data dir
	cfg.GPUs = fmt.Sprintf("sim:%dxH100-80", running)
	cfg.KillGrace = 10 * time.Second // the agent command's default
	a, err := New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(a.Shutdown)
	// Before the Shutdown above: whatever a broken shutdown left running.
	tb.Cleanup(func() { testutil.StopSupervisors(tb, a.DataDir()) })
	c := clientFor(tb, a, cfg.Token)
	marks := testutil.SharedDir(tb)
	for range running + queued {
		_, err := c.SubmitJob(context.Background(), api.SubmitRequest{
			RequestID: structs.NewID(),
			Spec: structs.JobSpec{GPUs: 1, Command: []string{"sh", "-c",
				`touch "$0/$SKEIN_ALLOC_ID" && exec sleep 600`, marks}},
		})
		if err != nil {
			tb.Fatal(err)
		}
	}
	testutil.WaitFor(tb, 30*time.Second, func() error {
		if n := countEntries(tb, marks); n != running {
			return fmt.Errorf("%d jobs have started, want %d", n, running)
		}
		q := 0
		for _, j := range a.fsm.Jobs() {
			if j.State == structs.JobQueued {
				q++
			}
		}
		if q != queued {
			return fmt.Errorf("%d jobs queued, want %d", q, queued)
		}
		return nil
	})
	return a, marks
}

// countEntries counts the entries of dir.
func countEntries(tb testing.TB, dir string) int {
	tb.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		tb.Fatal(err)
	}
	return len(entries)
}

// A dev agent stops its jobs when it shuts down, freeing their GPUs: the
// queued jobs behind them must not start in their place.
func TestShutdown_BusyDevAgentStartsNoQueuedJob(t *testing.T) {
	t.Parallel()
	a, marks := busyDevAgent(t, 22)
	before := countEntries(t, marks)
	a.Shutdown()
	if started := countEntries(t, marks) - before; started != 0 {
		t.Fatalf("%d queued jobs started after the agent began shutting down", started)
	}
	if _, err := os.Stat(a.DataDir()); !os.IsNotExist(err) {
		t.Fatalf("the dev agent's temporary data dir %s is still there (%v)", a.DataDir(), err)
	}
}

// BenchmarkShutdownBusyDevAgent measures how long a dev agent with 8 jobs
// running and 22 queued takes to shut down (ns/op), stopping its jobs as
// a dev agent with a temporary data dir does, and reports how many queued
// jobs started meanwhile.
func BenchmarkShutdownBusyDevAgent(b *testing.B) {
	started := 0
	b.StopTimer()
	for range b.N {
		a, marks := busyDevAgent(b, 22)
		before := countEntries(b, marks)
		b.StartTimer()
		a.Shutdown()
		b.StopTimer()
		started += countEntries(b, marks) - before
	}
	b.ReportMetric(float64(started)/float64(b.N), "started/shutdown")
}
