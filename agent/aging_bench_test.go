package agent

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

// agingSamples is how many jobs each point of BenchmarkAging times.
const agingSamples = 300

// BenchmarkAging measures B9 on one one-node agent, in one run:
// submit -> running (as BenchmarkSubmitToRunning) fresh; again after
// SKEIN_BENCH_AGED_JOBS (default 100,000) trivial jobs ran and finished and
// are still kept (their retention has not passed); and again after the
// agent restarted on that data dir with a retention of one second, so that
// every finished job, allocation and directory is removed. At each point
// it reports the latency, the Go heap in use, the process's RSS and the
// data dir's size on disk; the aged latencies also as a ratio to fresh.
// The finished jobs run for real, as capped arrays of `true`.
// -benchtime 1x.
func BenchmarkAging(b *testing.B) {
	aged := 100000
	if s := os.Getenv("SKEIN_BENCH_AGED_JOBS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			b.Fatalf("SKEIN_BENCH_AGED_JOBS=%q: want a positive number", s)
		}
		aged = n
	}
	for range b.N {
		// One agent at a time, and none held once shut down: the memory
		// figures are this process's.
		var current *Agent
		b.Cleanup(func() {
			if current != nil {
				current.Shutdown()
			}
		})
		start := func(cfg Config) *api.Client {
			var err error
			if current, err = New(cfg); err != nil {
				b.Fatal(err)
			}
			c, err := api.NewClient(current.HTTPAddr(), "")
			if err != nil {
				b.Fatal(err)
			}
			return c
		}
		stop := func() {
			current.Shutdown()
			current = nil
		}
		cfg := testConfig(b, b.TempDir())
		c := start(cfg)
		fresh := agingPoint(b, current, c, "fresh")

		t0 := time.Now()
		runFinishedJobs(b, current, c, aged)
		b.ReportMetric(float64(aged)/time.Since(t0).Seconds(), "aging-jobs/s")
		old := agingPoint(b, current, c, "aged")
		stop()

		cfg.JobRetention = time.Second
		c = start(cfg)
		testutil.WaitFor(b, 10*time.Minute, func() error {
			jobs, dirs := len(current.fsm.Jobs()), allocDirs(b, current)
			if jobs > 10 || dirs > 10 {
				return fmt.Errorf("%d jobs and %d allocation directories left", jobs, dirs)
			}
			return nil
		})
		expired := agingPoint(b, current, c, "expired")
		b.ReportMetric(old.p50/fresh.p50, "aged/fresh-p50")
		b.ReportMetric(old.p99/fresh.p99, "aged/fresh-p99")
		b.ReportMetric(expired.p50/fresh.p50, "expired/fresh-p50")
		b.ReportMetric(expired.p99/fresh.p99, "expired/fresh-p99")
		stop()
	}
}

type agingFigures struct{ p50, p99 float64 }

// agingPoint times agingSamples jobs from submit to running, one at a
// time, and reports them with the memory and the data dir's size.
func agingPoint(b *testing.B, a *Agent, c *api.Client, name string) agingFigures {
	ctx := context.Background()
	var lat []time.Duration
	for range agingSamples {
		t0 := time.Now()
		job, err := c.SubmitJob(ctx, api.SubmitRequest{Spec: structs.JobSpec{Command: []string{"true"}, GPUs: 1}})
		if err != nil {
			b.Fatal(err)
		}
		waitAlloc(b, a, job.ID, func(al *structs.Allocation) bool { return al.State != structs.AllocPending })
		lat = append(lat, time.Since(t0))
		waitAlloc(b, a, job.ID, func(al *structs.Allocation) bool { return !al.Live() })
	}
	slices.Sort(lat)
	ms := func(q float64) float64 { return float64(testutil.Percentile(lat, q)) / float64(time.Millisecond) }
	f := agingFigures{p50: ms(0.50), p99: ms(0.99)}
	b.ReportMetric(f.p50, name+"-p50-ms")
	b.ReportMetric(f.p99, name+"-p99-ms")
	runtime.GC()
	debug.FreeOSMemory()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	b.ReportMetric(float64(m.HeapInuse)/(1<<20), name+"-heap-MiB")
	rss, err := testutil.RSSMiB(os.Getpid())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(rss, name+"-rss-MiB")
	b.ReportMetric(float64(diskBytes(b, a.DataDir()))/(1<<20), name+"-datadir-MiB")
	b.ReportMetric(float64(diskBytes(b, a.allocDir()))/(1<<20), name+"-allocdirs-MiB")
	b.ReportMetric(float64(len(a.fsm.Jobs())), name+"-jobs")
	return f
}

// runFinishedJobs runs n trivial jobs to their end, as job arrays of
// `true` of at most agingChunk tasks, each capped at a few tasks at once,
// keeping two arrays ahead of the finished jobs so the queue stays short
// (a pass copies the whole queue; what is measured here is what finished
// jobs cost, not a deep queue). It polls: a watch over a state of this size
// would cost more than the jobs.
func runFinishedJobs(b *testing.B, a *Agent, c *api.Client, n int) {
	const chunk, running, ahead = 1000, 16, 2
	ctx := context.Background()
	before := a.fsm.JobCounts()[structs.JobSucceeded]
	submitted := 0
	deadline := time.Now().Add(3 * time.Hour)
	for {
		counts := a.fsm.JobCounts()
		done := counts[structs.JobSucceeded] - before
		if done >= n {
			return
		}
		if counts[structs.JobFailed] > 0 || counts[structs.JobCancelled] > 0 {
			b.Fatalf("aging jobs failed: %v", counts)
		}
		if time.Now().After(deadline) {
			b.Fatalf("aging jobs not done after 3 hours: %v", counts)
		}
		for submitted < n && submitted-done < ahead*chunk {
			size := min(chunk, n-submitted)
			_, err := c.SubmitJob(ctx, api.SubmitRequest{Spec: structs.JobSpec{Command: []string{"true"},
				Array: &structs.ArraySpec{Start: 0, End: size - 1, MaxRunning: running}}})
			if err != nil {
				b.Fatal(err)
			}
			submitted += size
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// allocDirs counts the allocation directories on the agent's node.
func allocDirs(b *testing.B, a *Agent) int {
	entries, err := os.ReadDir(a.allocDir())
	if err != nil {
		b.Fatal(err)
	}
	return len(entries)
}

// diskBytes is what the files under dir take on disk.
func diskBytes(b *testing.B, dir string) int64 {
	var total int64
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) {
				return nil // removed while walking
			}
			return err
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			total += st.Blocks * 512
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return total
}
