package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

// burstDeadline bounds a burst: what is not submitted by then is left
// out, and what is not done by then is reported as not done.
const burstDeadline = 15 * time.Minute

// burstGangEvery makes one job in this many of a burst a gang of two
// nodes of four GPUs each; the others take one GPU. 5,000 such jobs take
// 6,750 GPUs: they all fit on 1,000 simulated workers of eight at once.
const burstGangEvery = 20

// BenchmarkWorkerBurst measures a burst of submissions at many workers:
// SKEIN_BENCH_SERVERS real agent processes (1, default, or 3
// voters with --standbys 0) hold the Raft log, and SKEIN_BENCH_WORKERS
// simulated workers (simWorkers; default 1,000) register, renew their
// leases, watch their views and run what is placed on them for
// SKEIN_BENCH_RUN (default 1s). Once every node is ready and after 3 s to
// settle, SKEIN_BENCH_CLIENTS clients (default 8), each from a loopback
// address of its own, submit SKEIN_BENCH_JOBS jobs (default 5,000; see
// burstGangEvery) back to back to the leader's API, each with a request
// ID, waiting as a busy leader asks (429, Retry-After) and sending a
// submission the leader dropped on stepping down (503) again; within
// burstDeadline, past which the rest is left unsubmitted and what is not
// done is reported as not done.
//
// It reports submit→running (from the submit's acknowledgement to the
// leader's acknowledgement of the last rank's running report) at p50 and
// p99; the time from the first submission to the last job done and the
// jobs per second over it; the submissions per second; the leader
// changes every server counted (skein_raft_leader_changes_total), the
// scheduling passes and their mean time, the mean time the state machine
// took per entry, and the submissions answered 429; the sims the leader
// marked down (their view said so), those that went --stop-after without
// a renewed lease, and the allocations ended under a running sim; the
// leader's and the benchmark process's own CPU over the burst. Then it
// checks that every acknowledged job ran exactly once: one job per
// request ID, each succeeded, with one allocation per rank, all of the
// first attempt and on distinct nodes, each reported running by one sim
// only, the one it was placed on. -benchtime 1x.
func BenchmarkWorkerBurst(b *testing.B) {
	workers := testutil.EnvInt(b, "SKEIN_BENCH_WORKERS", 1000)
	jobs := testutil.EnvInt(b, "SKEIN_BENCH_JOBS", 5000)
	clients := testutil.EnvInt(b, "SKEIN_BENCH_CLIENTS", 8)
	servers := testutil.EnvInt(b, "SKEIN_BENCH_SERVERS", 1)
	if servers != 1 && servers != 3 {
		b.Fatalf("SKEIN_BENCH_SERVERS=%d: want 1 or 3", servers)
	}
	if workers > 1<<16-2 || clients > 254 {
		b.Fatalf("SKEIN_BENCH_WORKERS=%d, SKEIN_BENCH_CLIENTS=%d: want at most %d workers and 254 clients (one loopback address each)", workers, clients, 1<<16-2)
	}
	runFor := time.Second
	if s := os.Getenv("SKEIN_BENCH_RUN"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			b.Fatalf("SKEIN_BENCH_RUN=%q: want a duration such as 1s", s)
		}
		runFor = d
	}
	for range b.N {
		benchWorkerBurst(b, servers, workers, jobs, clients, runFor)
	}
}

func benchWorkerBurst(b *testing.B, servers, workers, jobs, clients int, runFor time.Duration) {
	b.StopTimer()
	c := startSimCluster(b, "127.0.0", 61, servers, workers, runFor)
	nodes, addrs, token, sims := c.nodes, c.addrs, c.token, c.sims
	cls := simClients(b, clients, addrs, token)
	specOf := func(i int) structs.JobSpec {
		spec := structs.JobSpec{Command: []string{"true"}, Nodes: 1, GPUs: 1, Constraints: map[string]string{"bench": "1"}}
		if i%burstGangEvery == burstGangEvery-1 {
			spec.Nodes, spec.GPUs = 2, 4
		}
		return spec
	}

	before := scrapeServers(b, addrs, token)
	// The sims' counts from here: what registration cost is not the
	// burst's.
	down0, lapses0, lost0 := sims.markedDown.Load(), sims.lapses.Load(), sims.lostRunning.Load()
	failed0, refused0 := sims.failed.Load(), sims.refusedReports.Load()
	pids := []int{nodes[0].proc.cmd.Process.Pid, os.Getpid()}
	cpu0 := cpuOf(b, pids)
	b.StartTimer()
	start := time.Now()
	deadline := start.Add(burstDeadline)
	acks, unavailable, err := submitAll(cls, sims, "burst", jobs, specOf, deadline)
	submitted := time.Since(start)
	if err != nil {
		b.Fatal(err)
	}
	var done int
	var lastDone time.Time
	for done, lastDone = sims.ledger.progress(); done < jobs && time.Now().Before(deadline); done, lastDone = sims.ledger.progress() {
		time.Sleep(20 * time.Millisecond) // the sims' reports are what is waited on
	}
	b.StopTimer()
	cpu1 := cpuOf(b, pids)
	took := lastDone.Sub(start)
	after := scrapeServers(b, addrs, token)
	var sent []burstAck
	for _, a := range acks {
		if a.id != "" {
			sent = append(sent, a)
		}
	}
	if done < jobs {
		b.Errorf("%d jobs submitted, %d of %d done %s after the burst began", len(sent), done, jobs, burstDeadline)
	}

	var lat []time.Duration
	for i, a := range acks {
		if j := sims.ledger.job(a.id); a.id != "" && j != nil && len(j.runs) == specOf(i).Nodes {
			lat = append(lat, j.running.Sub(a.at))
		}
	}
	slices.Sort(lat)
	lost, duplicated := checkRanOnce(b, cls[0][sims.leader.Load()], sims.ledger, acks, specOf)

	// The figures are logged as well as reported: a run that fails its
	// checks still says what it measured.
	var figures []string
	report := func(v float64, unit string) {
		b.ReportMetric(v, unit)
		figures = append(figures, fmt.Sprintf("%.4g %s", v, unit))
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	report(ms(testutil.Percentile(lat, 0.50)), "submit-running-p50-ms")
	report(ms(testutil.Percentile(lat, 0.99)), "submit-running-p99-ms")
	report(took.Seconds(), "all-done-s")
	report(float64(done)/took.Seconds(), "jobs/s")
	report(float64(len(sent))/submitted.Seconds(), "submissions/s")
	report(after.leaderChanges-before.leaderChanges, "leader-changes")
	report(after.passes-before.passes, "passes")
	// Where the leader's time went: its scheduling passes, and the
	// entries its state machine applied (the wait for the state's lock
	// included), one after another.
	report(1000*(after.passSec-before.passSec)/(after.passes-before.passes), "pass-ms")
	report(1000*(after.applySec-before.applySec)/(after.applied-before.applied), "apply-ms/entry")
	report(after.busy-before.busy, "busy-429s")
	report(float64(unavailable), "leader-lost-503s")
	down, lapses, lostRunning := sims.markedDown.Load()-down0, sims.lapses.Load()-lapses0, sims.lostRunning.Load()-lost0
	report(float64(down), "workers-marked-down")
	report(float64(lapses), "lease-lapses")
	report(float64(lostRunning), "allocs-lost-running")
	report(float64(lost), "lost-jobs")
	report(float64(duplicated), "duplicated-jobs")
	report(float64(sims.failed.Load()-failed0), "failed-calls")
	report(float64(sims.refusedReports.Load()-refused0), "refused-reports")
	wall := lastDone.Sub(start).Seconds()
	report((cpu1[0]-cpu0[0])/wall, "leader-cores")
	report((cpu1[1]-cpu0[1])/wall, "harness-cores")
	b.Logf("%d servers, %d workers, %d jobs, %d clients, run %s: %s", servers, workers, jobs, clients, runFor, strings.Join(figures, ", "))
	if n := after.leaderChanges - before.leaderChanges; n > 0 {
		b.Errorf("%v leader changes during the burst", n)
	}
	if down+lapses+lostRunning > 0 {
		b.Errorf("%d sims marked down, %d leases lapsed, %d allocations ended under a running sim",
			down, lapses, lostRunning)
	}
}

// burstAck is the leader's answer to one submission of a burst: the job
// and when the client had it.
type burstAck struct {
	id string
	at time.Time
}

// isUnavailable reports whether err is a 503: a node that does not lead,
// or a leader that stepped down while it held the request.
func isUnavailable(err error) bool {
	var apiErr *api.Error
	return errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusServiceUnavailable
}

// checkRanOnce checks, through c and against what the sims reported
// (ledger), that each acknowledged job (acks, by submission; specOf its
// spec) ran exactly once, and that the cluster holds no job that was not
// acknowledged: it returns the jobs that did not run (or not to the
// end) and those run more than once or created twice, and fails the
// benchmark naming the first few.
func checkRanOnce(b *testing.B, c *api.Client, ledger *simLedger, acks []burstAck, specOf func(int) structs.JobSpec) (lost, duplicated int) {
	b.Helper()
	all, err := c.Jobs(context.Background(), true)
	if err != nil {
		b.Fatal(err)
	}
	held := map[string]bool{}
	for _, j := range all {
		held[j.ID] = true
	}
	var problems []string
	note := func(format string, args ...any) {
		if len(problems) < 10 {
			problems = append(problems, fmt.Sprintf(format, args...))
		}
	}
	acked := map[string]bool{}
	sent := 0
	for _, a := range acks {
		if a.id != "" {
			acked[a.id] = true
			sent++
		}
	}
	if len(acked) != sent {
		duplicated += sent - len(acked)
		note("%d submissions answered with a job another submission got", sent-len(acked))
	}
	for id := range held {
		if !acked[id] {
			duplicated++
			note("job %s is in the cluster but no submission was answered with it", id)
		}
	}
	details := make([]*api.JobDetail, len(acks))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < len(acks); i = int(next.Add(1) - 1) {
				if acks[i].id == "" {
					continue
				}
				if d, err := c.Job(context.Background(), acks[i].id); err == nil {
					details[i] = d
				}
			}
		}()
	}
	wg.Wait()
	for i, a := range acks {
		ranks := specOf(i).Nodes
		d, ran := details[i], ledger.job(a.id)
		switch {
		case a.id == "":
			continue // never submitted: the burst ran out of time
		case d == nil:
			lost++
			note("job %s (submission %d) acknowledged, not in the cluster", a.id, i)
			continue
		case d.Job.State != structs.JobSucceeded || ran == nil || ran.succeeded != ranks:
			lost++
			succeeded := 0
			if ran != nil {
				succeeded = ran.succeeded
			}
			note("job %s: %s, %d of %d ranks reported succeeded", a.id, d.Job.State, succeeded, ranks)
			continue
		}
		placed := map[string]bool{}
		twice := len(d.Allocations) != ranks
		for _, al := range d.Allocations {
			runs := ran.runs[al.Rank]
			twice = twice || al.Attempt != 1 || placed[al.NodeID] || len(runs) != 1 || runs[0] != al.NodeID
			placed[al.NodeID] = true
		}
		if twice || len(ran.runs) != ranks {
			duplicated++
			note("job %s: %d allocations for %d ranks, sims' runs by rank %v", a.id, len(d.Allocations), ranks, ran.runs)
		}
	}
	for _, p := range problems {
		b.Error(p)
	}
	return lost, duplicated
}

// burstCounts are counts summed over the servers' metrics: leader
// changes, passes and busy answers; the passes' time, and the entries
// the state machine applied and their time.
type burstCounts struct{ leaderChanges, passes, busy, passSec, applied, applySec float64 }

// scrapeServers reads, from each server's /metrics, the leader changes it
// counted, its scheduling passes and the submissions it answered 429.
func scrapeServers(b *testing.B, addrs []string, token string) burstCounts {
	b.Helper()
	var bc burstCounts
	for _, addr := range addrs {
		fams := scrapeMetrics(b, addr, token)
		bc.leaderChanges += sumOf(fams, "skein_raft_leader_changes_total", nil)
		bc.passes += sumOf(fams, "skein_sched_pass_duration_seconds", nil)
		bc.busy += sumOf(fams, "skein_http_request_duration_seconds", map[string]string{"route": "POST /v1/jobs", "code": "429"})
		bc.passSec += secondsOf(fams, "skein_sched_pass_duration_seconds")
		bc.applied += sumOf(fams, "skein_fsm_apply_duration_seconds", nil)
		bc.applySec += secondsOf(fams, "skein_fsm_apply_duration_seconds")
	}
	return bc
}

// scrapeMetrics reads the metric families at an agent's /metrics.
func scrapeMetrics(b *testing.B, addr, token string) map[string]*dto.MetricFamily {
	b.Helper()
	req, err := http.NewRequest(http.MethodGet, addr+"/metrics", nil)
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set(api.TokenHeader, token)
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b.Fatalf("GET %s/metrics: %s", addr, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		b.Fatalf("GET %s/metrics: %v", addr, err)
	}
	return fams
}

// sumOf sums the samples of family name whose labels include labels: a
// counter's values, a histogram's counts.
func sumOf(fams map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	total := 0.0
	for _, m := range fams[name].GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		match := true
		for k, v := range labels {
			match = match && have[k] == v
		}
		if match {
			total += m.GetCounter().GetValue() + float64(m.GetHistogram().GetSampleCount())
		}
	}
	return total
}

// secondsOf is the sum of the observations of histogram family name.
func secondsOf(fams map[string]*dto.MetricFamily, name string) float64 {
	total := 0.0
	for _, m := range fams[name].GetMetric() {
		total += m.GetHistogram().GetSampleSum()
	}
	return total
}

// cpuOf reads the CPU seconds each process of pids has used so far.
func cpuOf(b *testing.B, pids []int) []float64 {
	b.Helper()
	cpu := make([]float64, len(pids))
	for i, pid := range pids {
		s, err := testutil.CPUSeconds(pid)
		if err != nil {
			b.Fatal(err)
		}
		cpu[i] = s
	}
	return cpu
}
