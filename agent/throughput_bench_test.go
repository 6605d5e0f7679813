package agent

import (
	"bytes"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/skein-dev/skein/agent/leader"
	"github.com/skein-dev/skein/fsm"
	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/sched"
	"github.com/skein-dev/skein/structs"
)

// benchShape is one kind of job in the throughput benchmark's queue: how
// many per 100,000 jobs, and its size. Bigger jobs get a higher priority,
// so they are placed first and the queue fits the 5,000 x 8 GPUs whole
// (88% of the GPUs) without fragmentation leaving any behind.
var benchShapes = []struct {
	per100k, nodes, gpus, cpus int
}{
	{200, 2, 8, 32},  // 2-node gangs
	{500, 1, 8, 32},  // whole nodes
	{1000, 1, 4, 16}, // half nodes
	{4000, 1, 2, 8},
	{16000, 1, 1, 4},
	{78300, 1, 0, 1}, // CPU-only: data loading, evaluation, preprocessing
}

// BenchmarkCommittedPlacements measures B1 end to end: a 3-node cluster of
// real agents (Raft over TCP, bbolt with fsync, production Raft timings),
// 5,000 simulated 8-GPU nodes registered through Raft and kept alive by
// feeding the leader their heartbeats, and a queue of mixed jobs held back
// by a dependency on one gate job. The clock starts when the gate is
// cancelled, which releases the whole queue at once, and stops when the
// leader's FSM holds no queued job: every job placed and committed. It
// also times, on a copy of the same state, the parts of the leader's work
// (state copy, sched.Decide, JSON encoding, FSM apply) and the sizes of the
// PlanApply entries. -benchtime 1x; one sub-benchmark per queue size.
func BenchmarkCommittedPlacements(b *testing.B) {
	for _, jobs := range []int{20000, 100000} {
		b.Run(fmt.Sprintf("nodes=5000/jobs=%d", jobs), func(b *testing.B) {
			for range b.N {
				benchCommittedPlacements(b, 5000, jobs, 0)
			}
		})
	}
}

// benchCommittedPlacements runs B1 once; with scrape > 0, a client GETs
// the leader's /metrics that often from the cluster's start to the end.
func benchCommittedPlacements(b *testing.B, nodes, jobs int, scrape time.Duration) {
	b.StopTimer()
	// Production Raft timings. Before the scheduler's free-GPU index,
	// passes over the growing queue kept both cores busy and the leader
	// lost its lease at 300 ms; it no longer does (docs/benchmarks-history.md,
	// "B1 (end to end) — committed placements per second through Raft").
	tc := benchCluster(b, 3, SecurityAuto)
	lead := -1
	for i, a := range tc.agents {
		if a.raft.IsLeader() {
			lead = i
		}
	}
	head := tc.agents[lead]
	var scraped *scraper
	if scrape > 0 {
		scraped = startScraper(head.HTTPAddr()+"/metrics", clusterToken, scrape)
	}

	// Heartbeats of the simulated nodes, on every agent, so whoever leads
	// neither holds them back nor marks them down.
	defer registerSimNodes(b, head, tc.live, nodes)()
	// The queue is one user's (the cluster token's), past the default
	// limits on queued jobs: lift them, as the admin of such a
	// queue would.
	unlimited := structs.Unlimited
	for _, req := range []structs.LimitsSetRequest{
		{Default: true, Limits: structs.Limits{MaxQueued: &unlimited}},
		{Cluster: true, Limits: structs.Limits{MaxQueued: &unlimited}},
	} {
		if _, err := head.apply(structs.LimitsSetType, req); err != nil {
			b.Fatal(err)
		}
	}
	gate := structs.NewID()
	if _, err := head.apply(structs.JobSubmitType, structs.JobSubmitRequest{JobID: gate, SubmittedAt: time.Now().UTC(),
		Spec: structs.JobSpec{Command: []string{"true"}, Nodes: 1, Constraints: map[string]string{"nowhere": "1"}}}); err != nil {
		b.Fatal(err)
	}
	specs := benchQueue(jobs, gate)
	parallel(b, len(specs), func(i int) error {
		_, err := head.apply(structs.JobSubmitType, structs.JobSubmitRequest{JobID: structs.NewID(), Spec: specs[i], SubmittedAt: time.Now().UTC()})
		return err
	})
	waitQuiet(b, head, jobs)

	parts := benchParts(b, head, gate)

	var first time.Time
	b.StartTimer()
	t0 := time.Now()
	if _, err := head.apply(structs.JobCancelType, structs.JobCancelRequest{JobID: gate, At: time.Now().UTC()}); err != nil {
		b.Fatal(err)
	}
	deadline := time.After(10 * time.Minute)
	for {
		_, changed := head.fsm.Watch()
		counts := head.fsm.JobCounts()
		if first.IsZero() && counts[structs.JobRunning] > 0 {
			first = time.Now()
		}
		if counts[structs.JobQueued] == 0 {
			break
		}
		select {
		case <-changed:
		case <-deadline:
			b.Fatalf("%d jobs still queued after 10 minutes", counts[structs.JobQueued])
		}
	}
	total := time.Since(t0)
	b.StopTimer()
	placed := head.fsm.JobCounts()[structs.JobRunning]
	if placed != jobs {
		b.Fatalf("%d jobs placed, want all %d", placed, jobs)
	}
	b.ReportMetric(float64(placed)/total.Seconds(), "placements/s")
	b.ReportMetric(float64(placed)/time.Since(first).Seconds(), "commit-window-placements/s")
	b.ReportMetric(float64(total.Milliseconds()), "total-ms")
	for k, v := range parts {
		b.ReportMetric(v, k)
	}
	if scraped != nil {
		scraped.end(b)
		b.ReportMetric(float64(scraped.scrapes), "scrapes")
	}
	for _, a := range tc.live() {
		a.Shutdown()
	}
}

// simNode is one simulated 8-GPU node.
// registerSimNodes registers n simulated nodes through head, and makes
// every agent that agents names hear from them every 100 ms until the
// returned stop is called, so that whoever leads neither holds them back
// nor marks them down.
func registerSimNodes(b *testing.B, head *Agent, agents func() []*Agent, n int) (stop func()) {
	b.Helper()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("sim-%05d", i)
	}
	stopFeed := make(chan struct{})
	var feed sync.WaitGroup
	feed.Add(1)
	go func() {
		defer feed.Done()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			now := time.Now()
			for _, a := range agents() {
				for _, id := range ids {
					a.leader.HeardFrom(id, now)
				}
			}
			select {
			case <-stopFeed:
				return
			case <-tick.C:
			}
		}
	}()
	stop = func() { close(stopFeed); feed.Wait() }
	parallel(b, n, func(i int) error {
		_, err := head.apply(structs.NodeRegisterType, structs.NodeRegisterRequest{Node: testutil.SimNode(ids[i], i), At: time.Now().UTC()})
		return err
	})
	return stop
}

// benchQueue is the mixed queue, every job waiting for the gate.
func benchQueue(jobs int, gate string) []structs.JobSpec {
	var specs []structs.JobSpec
	for _, s := range benchShapes {
		for range s.per100k * jobs / 100000 {
			specs = append(specs, structs.JobSpec{
				Name:    fmt.Sprintf("bench-%dx%d", s.nodes, s.gpus),
				Command: []string{"python", "train.py", "--config", "bench.yaml"},
				Nodes:   s.nodes, GPUs: s.gpus, CPUs: s.cpus, Priority: s.nodes * s.gpus,
				Constraints: map[string]string{"bench": "1"},
				After:       []structs.Dependency{{JobID: gate, Condition: structs.AfterAny}},
			})
		}
	}
	for len(specs) < jobs {
		specs = append(specs, specs[len(specs)-1])
	}
	return specs
}

// parallel runs f(0..n-1) on 64 workers: concurrent writes let Raft batch
// them as a busy cluster's clients would.
func parallel(b *testing.B, n int, f func(i int) error) {
	parallelBy(b, 64, n, func(_, i int) error { return f(i) })
}

// parallelBy runs f(w, i) for i in 0..n-1 on workers goroutines (w is
// the one running it) and fails the benchmark with one of the errors.
func parallelBy(b *testing.B, workers, n int, f func(w, i int) error) {
	work := make(chan int)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if err := f(w, i); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		}()
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
}

// waitQuiet waits until every queued job says it waits for the gate, so
// the leader has nothing left to write before the clock starts.
func waitQuiet(b *testing.B, a *Agent, jobs int) {
	deadline := time.Now().Add(5 * time.Minute)
	for {
		waiting := 0
		for _, j := range a.fsm.State().Queued {
			if len(j.Spec.After) > 0 && j.Reason != "" {
				waiting++
			}
		}
		if waiting == jobs {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d jobs wait for the gate after 5 minutes", waiting, jobs)
		}
		_, changed := a.fsm.Watch()
		select {
		case <-changed:
		case <-time.After(time.Second):
		}
	}
}

// benchParts times the leader's own steps for the released queue on a
// copy of the leader's state with the gate cancelled: the state copy a
// pass starts from, sched.Decide, encoding the entries, writing them to a
// bbolt log store as one batch (one fsync, as the leader's batched applies
// do), applying them to an FSM, and one JobCounts (which the clock loop
// calls on every change). It also reports how many entries the plan takes
// and the largest one's size.
func benchParts(b *testing.B, lead *Agent, gate string) map[string]float64 {
	snap, err := lead.fsm.Snapshot()
	if err != nil {
		b.Fatal(err)
	}
	sink := &memSink{}
	if err := snap.Persist(sink); err != nil {
		b.Fatal(err)
	}
	f := fsm.New(nil)
	if err := f.Restore(io.NopCloser(&sink.buf)); err != nil {
		b.Fatal(err)
	}
	cancel, err := structs.Encode(structs.JobCancelType, structs.JobCancelRequest{JobID: gate, At: time.Now().UTC()})
	if err != nil {
		b.Fatal(err)
	}
	if res := f.Apply(&raft.Log{Index: f.Index() + 1, Type: raft.LogCommand, Data: cancel}); res != nil {
		if err, ok := res.(error); ok {
			b.Fatal(err)
		}
	}
	t := time.Now()
	view := f.State()
	stateMs := time.Since(t)
	t = time.Now()
	plan := sched.Decide(view, sched.Inputs{Now: time.Now()}).Plan
	decideMs := time.Since(t)
	for i := range plan.Placements {
		for j := range plan.Placements[i].Allocations {
			plan.Placements[i].Allocations[j].ID = structs.NewID()
		}
	}
	t = time.Now()
	var bufs [][]byte
	maxBytes, totalBytes := 0, 0
	for _, p := range leader.SplitPlan(plan, leader.MaxEntryAllocs, leader.MaxEntryReasons) {
		buf, err := structs.Encode(structs.PlanApplyType, structs.PlanApplyRequest{Plan: p, At: time.Now().UTC()})
		if err != nil {
			b.Fatal(err)
		}
		bufs = append(bufs, buf)
		maxBytes = max(maxBytes, len(buf))
		totalBytes += len(buf)
	}
	encodeMs := time.Since(t)
	index := f.Index()
	logs := make([]*raft.Log, len(bufs))
	for i, buf := range bufs {
		logs[i] = &raft.Log{Index: index + uint64(i) + 1, Type: raft.LogCommand, Data: buf}
	}
	store, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(b.TempDir(), "raft.db")})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	t = time.Now()
	if err := store.StoreLogs(logs); err != nil {
		b.Fatal(err)
	}
	storeMs := time.Since(t)
	t = time.Now()
	for _, l := range logs {
		f.Apply(l)
	}
	applyMs := time.Since(t)
	t = time.Now()
	f.JobCounts()
	countMs := time.Since(t)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	return map[string]float64{
		"state-copy-ms": ms(stateMs), "decide-ms": ms(decideMs), "encode-ms": ms(encodeMs), "fsm-apply-ms": ms(applyMs),
		"bolt-store-ms": ms(storeMs), "job-counts-ms": ms(countMs),
		"entries": float64(len(bufs)), "max-entry-KB": float64(maxBytes) / 1024, "plan-MB": float64(totalBytes) / (1 << 20),
	}
}

// memSink keeps a snapshot in memory.
type memSink struct{ buf bytes.Buffer }

func (s *memSink) Write(p []byte) (int, error) { return s.buf.Write(p) }
func (s *memSink) Close() error                { return nil }
func (s *memSink) ID() string                  { return "bench" }
func (s *memSink) Cancel() error               { return nil }
