package metrics

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/skein-dev/skein/cluster"
	"github.com/skein-dev/skein/fsm"
	"github.com/skein-dev/skein/gpu"
	"github.com/skein-dev/skein/structs"
)

// fakeRaft is a leader with fixed counters and a gossip view of its own.
type fakeRaft struct{ members []cluster.Member }

func (fakeRaft) IsLeader() bool { return true }
func (fakeRaft) Stats() map[string]string {
	return map[string]string{"term": "3", "commit_index": "42", "applied_index": "41", "last_log_index": "42",
		"last_snapshot_index": "20", "num_peers": "2", "last_contact": "0"}
}
func (r fakeRaft) Members() []cluster.Member { return r.members }
func (fakeRaft) GossipHealth() int           { return 2 }
func (fakeRaft) Followers() []cluster.Follower {
	return []cluster.Follower{
		{ID: nodeID, LastContact: 30 * time.Millisecond, LastIndex: 40, Healthy: true},
		{ID: "unregistered", LastContact: -1, LastIndex: 12},
	}
}

// fakeTelemetry returns fixed samples.
type fakeTelemetry []gpu.Sample

func (t fakeTelemetry) Sample() []gpu.Sample { return t }

// memSink is a snapshot sink in memory.
type memSink struct{ bytes.Buffer }

func (*memSink) ID() string    { return "mem" }
func (*memSink) Close() error  { return nil }
func (*memSink) Cancel() error { return nil }

// world is a state machine holding one node of two GPUs, named n1, with a
// job on GPU 0 and another queued, applied through Raft's side of the
// metrics (WrapFSM).
type world struct {
	t     *testing.T
	fsm   *fsm.FSM
	raft  raft.FSM
	index uint64
}

const nodeID = "node-1"

func newWorld(t *testing.T) (*world, *Metrics, Config) {
	inv, err := gpu.Discover("sim:2xH100-80", nodeID, "none")
	if err != nil {
		t.Fatal(err)
	}
	return newWorldOf(t, inv)
}

// newWorldOf is newWorld with the GPUs of inv, at least one.
func newWorldOf(t *testing.T, inv gpu.Inventory) (*world, *Metrics, Config) {
	w := &world{t: t, fsm: fsm.New(nil)}
	cfg := Config{
		NodeID: nodeID, NodeName: "n1", FSM: w.fsm, View: w.fsm, Inventory: inv,
		Raft: fakeRaft{members: []cluster.Member{{ID: "a", Status: cluster.StatusAlive}, {ID: "b", Status: cluster.StatusFailed}}},
	}
	m := New(cfg)
	w.raft = m.WrapFSM(w.fsm)
	at := time.Unix(1_700_000_000, 0).UTC()
	w.apply(structs.NodeRegisterType, structs.NodeRegisterRequest{At: at, Node: structs.Node{
		ID: nodeID, Name: "n1", CPUs: 8, MemoryMiB: 1 << 16, GPUs: inv.GPUs, Status: structs.NodeReady}})
	w.apply(structs.JobSubmitType, structs.JobSubmitRequest{JobID: "job-a", SubmittedAt: at,
		Spec: structs.JobSpec{Command: []string{"true"}, Nodes: 1, GPUs: 1}})
	w.apply(structs.JobSubmitType, structs.JobSubmitRequest{JobID: "job-b", SubmittedAt: at,
		Spec: structs.JobSpec{Command: []string{"true"}, Nodes: 1, GPUs: 2, Priority: 7}})
	w.apply(structs.PlanApplyType, structs.PlanApplyRequest{At: at, Plan: structs.Plan{Placements: []structs.JobPlacement{{
		JobID: "job-a", Allocations: []structs.Allocation{{ID: "alloc-a", NodeID: nodeID, GPUs: []string{inv.GPUs[0].UUID}, CreatedAt: at}}}}}})
	return w, m, cfg
}

func (w *world) apply(t structs.MessageType, msg any) {
	w.t.Helper()
	buf, err := structs.Encode(t, msg)
	if err != nil {
		w.t.Fatal(err)
	}
	w.index++
	if resp, ok := w.raft.Apply(&raft.Log{Index: w.index, Type: raft.LogCommand, Data: buf}).(error); ok {
		w.t.Fatalf("apply %s: %v", t, resp)
	}
}

// scrape answers a scrape through the handler and parses it.
func scrape(t *testing.T, m *Metrics) map[string]*dto.MetricFamily {
	t.Helper()
	rec := httptest.NewRecorder()
	m.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("scrape: %d %s", rec.Code, rec.Body)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(rec.Body)
	if err != nil {
		t.Fatalf("parse the scrape: %v", err)
	}
	return fams
}

// documented is a row of the metrics table (docs/metrics.md).
type documented struct {
	typ    string
	labels []string
	// serversOnly marks a series a worker does not export.
	serversOnly bool
}

// docFiles are the user documentation: README.md and docs/*.md.
func docFiles(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{"../../README.md"}, docs...)
}

// docsTable reads the metrics table of the documentation (README.md
// and docs/*.md, where docs/metrics.md holds it): every row whose first
// cell names a skein_ metric.
func docsTable(t *testing.T) map[string]documented {
	t.Helper()
	out := map[string]documented{}
	for _, file := range docFiles(t) {
		readTableRows(t, file, out)
	}
	if len(out) == 0 {
		t.Fatal("no metrics table in README.md or docs/*.md")
	}
	return out
}

// readTableRows adds the metrics table's rows in file to out.
func readTableRows(t *testing.T, file string, out map[string]documented) {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		cells := strings.Split(sc.Text(), "|")
		if len(cells) < 5 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`skein_") {
			continue
		}
		name := strings.Trim(strings.TrimSpace(cells[1]), "`")
		var labels []string
		for l := range strings.SplitSeq(cells[3], ",") {
			if l = strings.TrimSpace(l); l != "" {
				labels = append(labels, l)
			}
		}
		slices.Sort(labels)
		if _, dup := out[name]; dup {
			t.Errorf("the documentation has %s twice (again in %s)", name, file)
		}
		out[name] = documented{typ: strings.TrimSpace(cells[2]), labels: labels,
			serversOnly: strings.HasPrefix(strings.TrimSpace(cells[4]), "*servers only:*")}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
}

func labelNames(m *dto.Metric) []string {
	var out []string
	for _, l := range m.GetLabel() {
		out = append(out, l.GetName())
	}
	slices.Sort(out)
	return out
}

// everySeries scrapes metrics on which every hook has run once and every
// GPU reading is taken, so that every series with labels exists.
func everySeries(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	return everySeriesOn(t, true)
}

// everySeriesOn is everySeries on a server, or on a worker: its copy of
// the state empty, its view holding its node and allocation.
func everySeriesOn(t *testing.T, server bool) map[string]*dto.MetricFamily {
	t.Helper()
	w, _, cfg := newWorld(t)
	w.apply(structs.AccountSetType, structs.AccountRequest{Op: structs.AccountCreate, Name: "ml"})
	if !server {
		cfg.FSM, cfg.HoldsState = fsm.New(nil), func() bool { return false }
	}
	cfg.Telemetry = fakeTelemetry{{Index: 0, UUID: cfg.Inventory.GPUs[0].UUID, Model: "H100 80GB", Simulated: true,
		Has: gpu.HasUtil | gpu.HasMemUtil | gpu.HasMemory | gpu.HasTemp | gpu.HasPower | gpu.HasECC}}
	cfg.TimerLag = func() time.Duration { return 3 * time.Millisecond }
	m := New(cfg)
	now := time.Now()
	m.Pass(time.Millisecond, 1)
	m.Placed(&structs.Job{SubmittedAt: now.Add(-time.Second), Spec: structs.JobSpec{GPUs: 1}}, nil, now)
	m.Placed(&structs.Job{Attempts: 1}, []*structs.Allocation{{State: structs.AllocFailed}}, now)
	m.Preempted(1)
	m.Leading(true)
	m.ProbeRTT("b", time.Millisecond)
	m.Running(&structs.Job{SubmittedAt: now.Add(-time.Second)}, &structs.Allocation{Attempt: 1}, now)
	m.Committed(structs.JobSubmitType, time.Millisecond)
	m.ObserveRequest("user", "GET /v1/jobs", 200, time.Millisecond)
	wrapped := m.WrapFSM(w.fsm)
	buf, _ := structs.Encode(structs.JobCancelType, structs.JobCancelRequest{JobID: "job-b"})
	wrapped.Apply(&raft.Log{Index: 100, Type: raft.LogCommand, Data: buf})
	snap, err := wrapped.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if err := snap.Persist(&memSink{}); err != nil {
		t.Fatal(err)
	}
	return scrape(t, m)
}

func TestMetrics_TheDocumentedTableAndTheRegisteredMetricsAgree(t *testing.T) {
	table := docsTable(t)
	fams := everySeries(t)
	for name, fam := range fams {
		if !strings.HasPrefix(name, "skein_") {
			continue
		}
		doc, ok := table[name]
		if !ok {
			t.Errorf("%s is registered but not in the metrics table (docs/metrics.md)", name)
			continue
		}
		if typ := strings.ToLower(fam.GetType().String()); typ != doc.typ {
			t.Errorf("%s is a %s, docs/metrics.md says %s", name, typ, doc.typ)
		}
		for _, s := range fam.GetMetric() {
			if got := labelNames(s); !slices.Equal(got, doc.labels) {
				t.Errorf("%s has labels %v, docs/metrics.md says %v", name, got, doc.labels)
				break
			}
		}
	}
	for name := range table {
		if _, ok := fams[name]; !ok {
			t.Errorf("docs/metrics.md documents %s, which is not registered", name)
		}
	}
	for _, std := range []string{"go_goroutines", "process_cpu_seconds_total"} {
		if _, ok := fams[std]; !ok {
			t.Errorf("no %s: the Go or process collector is missing", std)
		}
	}
}

// value returns the value of the series of a family with the labels
// given (a subset of its labels), failing when there is not exactly one.
func value(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	t.Helper()
	var found []float64
	for _, s := range fams[name].GetMetric() {
		have := map[string]string{}
		for _, l := range s.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		match := true
		for k, v := range labels {
			match = match && have[k] == v
		}
		if match {
			switch {
			case s.Gauge != nil:
				found = append(found, s.Gauge.GetValue())
			case s.Counter != nil:
				found = append(found, s.Counter.GetValue())
			case s.Histogram != nil:
				found = append(found, float64(s.Histogram.GetSampleCount()))
			}
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s%v: %d series, want 1", name, labels, len(found))
	}
	return found[0]
}

func TestMetrics_AWorkerExportsItsOwnSeriesNotTheServersOnes(t *testing.T) {
	table := docsTable(t)
	fams := everySeriesOn(t, false)
	for name, d := range table {
		if _, got := fams[name]; got == d.serversOnly {
			t.Errorf("%s on a worker: exported %v, servers only %v in docs/metrics.md", name, got, d.serversOnly)
		}
	}
	// The GPU series come from the worker's view, not its empty state.
	for index, want := range []float64{1, 0} {
		if got := value(t, fams, "skein_gpu_allocated", map[string]string{"index": fmt.Sprint(index)}); got != want {
			t.Errorf("skein_gpu_allocated of GPU %d on a worker = %v, want %v (its view's allocation is on GPU 0)", index, got, want)
		}
	}
	for _, fam := range []string{"go_goroutines", "skein_gossip_members"} {
		if _, ok := fams[fam]; !ok {
			t.Errorf("%s is missing on a worker", fam)
		}
	}
}

func TestMetrics_GPUSeriesPerGPU_TelemetryOnlyWhereTheReadingIs(t *testing.T) {
	_, _, cfg := newWorld(t)
	g0, g1 := cfg.Inventory.GPUs[0], cfg.Inventory.GPUs[1]

	// Without telemetry: health and allocation of both GPUs, no readings.
	fams := scrape(t, New(cfg))
	for _, g := range []structs.GPU{g0, g1} {
		l := map[string]string{"node": "n1", "index": fmt.Sprint(g.Index), "uuid": g.UUID, "model": g.Model, "simulated": "true"}
		if v := value(t, fams, "skein_gpu_health_state", merge(l, "state", "healthy")); v != 1 {
			t.Errorf("GPU %d healthy: %v, want 1", g.Index, v)
		}
		if v := value(t, fams, "skein_gpu_health_state", merge(l, "state", "unhealthy")); v != 0 {
			t.Errorf("GPU %d unhealthy: %v, want 0", g.Index, v)
		}
	}
	if v := value(t, fams, "skein_gpu_allocated", map[string]string{"uuid": g0.UUID}); v != 1 {
		t.Errorf("GPU 0 allocated %v, want 1", v)
	}
	if v := value(t, fams, "skein_gpu_allocated", map[string]string{"uuid": g1.UUID}); v != 0 {
		t.Errorf("GPU 1 allocated %v, want 0", v)
	}
	if v := value(t, fams, "skein_gpu_job_info", map[string]string{"uuid": g0.UUID, "job": "job-a"}); v != 1 {
		t.Errorf("GPU 0's job info %v, want 1", v)
	}
	if n := len(fams["skein_gpu_job_info"].GetMetric()); n != 1 {
		t.Errorf("%d job info series, want 1 (GPU 1 is free)", n)
	}
	if _, ok := fams["skein_gpu_utilization_percent"]; ok {
		t.Error("utilisation series without telemetry")
	}

	// With telemetry: GPU 1 has no power sensor, and no power series.
	cfg.Telemetry = fakeTelemetry{
		{Index: 0, UUID: g0.UUID, Model: g0.Model, Simulated: true, Has: gpu.HasUtil | gpu.HasMemory | gpu.HasTemp | gpu.HasPower | gpu.HasECC,
			UtilPercent: 87, MemUsedMiB: 1024, MemTotalMiB: 81559, TempC: 61, PowerW: 402.5, ECCCorrected: 3, ECCUncorrected: 1, XIDs: 2},
		{Index: 1, UUID: g1.UUID, Model: g1.Model, Simulated: true, Has: gpu.HasUtil | gpu.HasTemp, UtilPercent: 5, TempC: 40},
	}
	fams = scrape(t, New(cfg))
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"skein_gpu_utilization_percent", map[string]string{"uuid": g0.UUID, "simulated": "true", "node": "n1"}, 87},
		{"skein_gpu_utilization_percent", map[string]string{"uuid": g1.UUID}, 5},
		{"skein_gpu_memory_used_bytes", map[string]string{"uuid": g0.UUID}, 1024 << 20},
		{"skein_gpu_memory_total_bytes", map[string]string{"uuid": g0.UUID}, 81559 << 20},
		{"skein_gpu_temperature_celsius", map[string]string{"uuid": g1.UUID}, 40},
		{"skein_gpu_power_watts", map[string]string{"uuid": g0.UUID}, 402.5},
		{"skein_gpu_ecc_errors_total", map[string]string{"uuid": g0.UUID, "kind": "corrected"}, 3},
		{"skein_gpu_ecc_errors_total", map[string]string{"uuid": g0.UUID, "kind": "uncorrected"}, 1},
		{"skein_gpu_xid_events_total", map[string]string{"uuid": g0.UUID}, 2},
		{"skein_gpu_xid_events_total", map[string]string{"uuid": g1.UUID}, 0},
	} {
		if got := value(t, fams, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if n := len(fams["skein_gpu_power_watts"].GetMetric()); n != 1 {
		t.Errorf("%d power series, want 1: GPU 1 has no power reading", n)
	}
}

func merge(l map[string]string, k, v string) map[string]string {
	out := maps.Clone(l)
	out[k] = v
	return out
}

func TestMetrics_StateAndRaftGauges(t *testing.T) {
	_, m, _ := newWorld(t)
	m.ProbeRTT("a", 300*time.Microsecond)
	m.ProbeRTT("b", 2*time.Millisecond)
	fams := scrape(t, m)
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"skein_jobs", map[string]string{"state": "running"}, 1},
		{"skein_jobs", map[string]string{"state": "queued"}, 1},
		{"skein_jobs", map[string]string{"state": "failed"}, 0},
		{"skein_allocations", map[string]string{"state": "pending"}, 1},
		{"skein_nodes", map[string]string{"status": "ready"}, 1},
		{"skein_cluster_gpus", map[string]string{"state": "healthy"}, 2},
		{"skein_cluster_gpus_allocated", nil, 1},
		{"skein_sched_queue_depth", map[string]string{"reason": "new", "priority": "high"}, 1},
		{"skein_sched_queue_depth", map[string]string{"reason": "new", "priority": "normal"}, 0},
		{"skein_fsm_index", nil, 4},
		{"skein_raft_is_leader", nil, 1},
		{"skein_raft_term", nil, 3},
		{"skein_raft_commit_index", nil, 42},
		{"skein_raft_applied_index", nil, 41},
		{"skein_raft_peers", nil, 2},
		{"skein_raft_last_contact_seconds", nil, 0},
		{"skein_gossip_members", map[string]string{"status": "alive"}, 1},
		{"skein_gossip_members", map[string]string{"status": "failed"}, 1},
		{"skein_gossip_health_score", nil, 2},
		{"skein_raft_follower_last_contact_seconds", map[string]string{"peer": "n1"}, 0.03},
		{"skein_raft_follower_lag_entries", map[string]string{"peer": "n1"}, 2},
		{"skein_raft_follower_lag_entries", map[string]string{"peer": "unregistered"}, 30},
		{"skein_raft_follower_healthy", map[string]string{"peer": "n1"}, 1},
		{"skein_raft_follower_healthy", map[string]string{"peer": "unregistered"}, 0},
		{"skein_fsm_apply_duration_seconds", map[string]string{"type": "plan-apply"}, 1},
		{"skein_fsm_apply_duration_seconds", map[string]string{"type": "job-submit"}, 2},
	} {
		if got := value(t, fams, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	rtt := fams["skein_gossip_probe_rtt_seconds"].GetMetric()[0].GetHistogram()
	if rtt.GetSampleCount() != 2 || rtt.GetSampleSum() != 0.0023 {
		t.Errorf("probe RTT histogram of %d probes, %vs in all; want 2, 0.0023s", rtt.GetSampleCount(), rtt.GetSampleSum())
	}
	for _, b := range rtt.GetBucket() {
		want := map[float64]uint64{0.0001: 0, 0.0002: 0, 0.0004: 1, 0.0008: 1, 0.0016: 1, 0.0032: 2}[b.GetUpperBound()]
		if b.GetUpperBound() >= 0.0032 {
			want = 2
		}
		if b.GetCumulativeCount() != want {
			t.Errorf("probe RTT bucket le=%v holds %d, want %d", b.GetUpperBound(), b.GetCumulativeCount(), want)
		}
	}
	if n := len(fams["skein_raft_follower_last_contact_seconds"].GetMetric()); n != 1 {
		t.Errorf("%d follower contact series, want 1: one follower never heard from the leader", n)
	}
	if n := len(fams["skein_sched_queue_depth"].GetMetric()); n != len(queueReasons)*len(priorityBands) {
		t.Errorf("%d queue depth series, want every reason and band: %d", n, len(queueReasons)*len(priorityBands))
	}
}

func TestMetrics_PerAccount(t *testing.T) {
	w, m, _ := newWorld(t)
	shares := 70
	w.apply(structs.AccountSetType, structs.AccountRequest{Op: structs.AccountCreate, Name: "ml", Shares: &shares})
	w.apply(structs.JobSubmitType, structs.JobSubmitRequest{JobID: "job-c", SubmittedAt: time.Unix(1_700_000_000, 0),
		Spec: structs.JobSpec{Command: []string{"true"}, Nodes: 1, GPUs: 1, Account: "ml"}})
	fams := scrape(t, m)
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"skein_account_shares", map[string]string{"account": "ml"}, 70},
		{"skein_account_jobs", map[string]string{"account": "ml", "state": "queued"}, 1},
		{"skein_account_jobs", map[string]string{"account": "", "state": "running"}, 1},
		{"skein_account_gpus_allocated", map[string]string{"account": ""}, 1},
		{"skein_account_gpus_allocated", map[string]string{"account": "ml"}, 0},
		{"skein_account_usage_gpu_seconds", map[string]string{"account": "ml"}, 0},
	} {
		if got := value(t, fams, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
}

func TestQueueReason_SortsTheSchedulersWords(t *testing.T) {
	now := time.Now()
	for _, c := range []struct {
		reason string
		back   bool
		want   string
	}{
		{"", false, "new"},
		{"restarting in 2s after failure: exited with code 3 (attempt 2 of 3)", true, "backoff"},
		{"restarting after failure: lost (attempt 2 of 2)", false, "restarting"},
		{"waiting for job 3f2a1b2c (running)", false, "dependency"},
		{"array 3f2a1b2c runs its limit of 4 tasks", false, "array_limit"},
		{"waiting: alice's GPU limit (8) is in use", false, "gpu_limit"},
		{"waiting for 2 preempted jobs to stop", false, "preemption"},
		{"waiting: job 3f2a1b2c (priority 10) is preempting lower-priority jobs to run first", false, "preemption"},
		{"first in line: 16 GPUs on 2 nodes reserved from ~14:05 UTC", false, "reservation"},
		{"needs 1 nodes, 0 feasible: 2 nodes: not enough free GPUs; 1 node: reserved for higher-priority job 3f2a1b2c from ~14:05 UTC", false, "reservation"},
		{"needs 1 nodes, 0 feasible: 3 nodes: not enough free GPUs", false, "resources"},
	} {
		q := fsm.QueuedJob{Reason: c.reason}
		if c.back {
			q.NotBefore = now.Add(time.Second)
		}
		if got := queueReason(q, now); got != c.want {
			t.Errorf("%q: %s, want %s", c.reason, got, c.want)
		}
	}
}

func TestRestartCause_NamesWhatEndedTheAttempt(t *testing.T) {
	for _, c := range []struct {
		name     string
		job      structs.Job
		previous []structs.Allocation
		want     string
	}{
		{"failed", structs.Job{}, []structs.Allocation{{State: structs.AllocFailed}}, "failure"},
		{"timed out rank", structs.Job{}, []structs.Allocation{{State: structs.AllocSucceeded}, {State: structs.AllocTimedOut}}, "failure"},
		{"node lost over a failure", structs.Job{}, []structs.Allocation{{State: structs.AllocFailed}, {State: structs.AllocLost}}, "node_lost"},
		{"GPU fault over all", structs.Job{}, []structs.Allocation{{State: structs.AllocLost}, {State: structs.AllocKilled, GPUFault: "XID 79"}}, "gpu_fault"},
		{"preempted", structs.Job{Preemptions: 1}, []structs.Allocation{{State: structs.AllocKilled}}, "preempted"},
		{"stopped", structs.Job{}, []structs.Allocation{{State: structs.AllocKilled}}, "other"},
	} {
		var prev []*structs.Allocation
		for i := range c.previous {
			prev = append(prev, &c.previous[i])
		}
		if got := restartCause(&c.job, prev); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}

// dashPanel is a panel of the Grafana dashboard; a collapsed row holds
// its panels.
type dashPanel struct {
	ID      int    `json:"id"`
	Type    string `json:"type"`
	Title   string `json:"title"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
	Panels []dashPanel `json:"panels"`
}

// What the dashboard test reads of PromQL: the names of the registry's
// metrics, the label matchers right after one, the label lists of by and
// without, and Grafana's label_values(metric, label).
var (
	promMetric   = regexp.MustCompile(`\b(?:skein|go|process)_[a-zA-Z0-9_]+`)
	promSelector = regexp.MustCompile(`\b((?:skein|go|process)_[a-zA-Z0-9_]+)\{([^}]*)\}`)
	promMatcher  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)\s*"`)
	promGrouping = regexp.MustCompile(`\b(?:by|without)\s*\(([^)]*)\)`)
	labelValues  = regexp.MustCompile(`^label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*,\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)$`)
)

// seriesOf returns the family a series name in a query belongs to, its
// name, and the labels a query may use on it: the family's, the ones
// Prometheus adds at a scrape (instance, job), and le on a histogram's
// _bucket series. ok is false for a name the registry has no family of.
func seriesOf(fams map[string]*dto.MetricFamily, name string) (base string, labels []string, ok bool) {
	base, fam := name, fams[name]
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		trimmed, cut := strings.CutSuffix(name, suffix)
		f := fams[trimmed]
		if fam != nil || !cut || f == nil {
			continue
		}
		if f.GetType() == dto.MetricType_HISTOGRAM || (f.GetType() == dto.MetricType_SUMMARY && suffix != "_bucket") {
			base, fam = trimmed, f
			if suffix == "_bucket" {
				labels = append(labels, "le")
			}
		}
	}
	if fam == nil {
		return "", nil, false
	}
	labels = append(labels, "instance", "job")
	for _, s := range fam.GetMetric() {
		for _, l := range labelNames(s) {
			if !slices.Contains(labels, l) {
				labels = append(labels, l)
			}
		}
	}
	return base, labels, true
}

func TestMetrics_TheDashboardQueriesOnlyRegisteredMetricsAndTheirLabels(t *testing.T) {
	b, err := os.ReadFile("../../deploy/grafana/skein.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Type  string `json:"type"`
				Query struct {
					Query string `json:"query"`
				} `json:"query"`
			} `json:"list"`
		} `json:"templating"`
		Panels []dashPanel `json:"panels"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	fams := everySeries(t)
	table := docsTable(t)
	shown := map[string]bool{}
	check := func(where, expr string) {
		names := promMetric.FindAllString(expr, -1)
		if len(names) == 0 {
			t.Errorf("%s: %q names no metric of skein's", where, expr)
		}
		var usable []string
		for _, n := range names {
			base, labels, ok := seriesOf(fams, n)
			if !ok {
				t.Errorf("%s shows %s, which is not registered", where, n)
				continue
			}
			if _, doc := table[base]; strings.HasPrefix(base, "skein_") && !doc {
				t.Errorf("%s shows %s, which docs/metrics.md does not document", where, base)
			}
			shown[base] = true
			usable = append(usable, labels...)
		}
		for _, sel := range promSelector.FindAllStringSubmatch(expr, -1) {
			_, labels, ok := seriesOf(fams, sel[1])
			for _, m := range promMatcher.FindAllStringSubmatch(sel[2], -1) {
				if ok && !slices.Contains(labels, m[1]) {
					t.Errorf("%s selects %s by %s, a label it does not have", where, sel[1], m[1])
				}
			}
		}
		for _, g := range promGrouping.FindAllStringSubmatch(expr, -1) {
			for l := range strings.SplitSeq(g[1], ",") {
				if l = strings.TrimSpace(l); l != "" && !slices.Contains(usable, l) {
					t.Errorf("%s groups by %s, which none of its metrics has: %q", where, l, expr)
				}
			}
		}
	}
	var walk func([]dashPanel)
	walk = func(panels []dashPanel) {
		for _, p := range panels {
			walk(p.Panels)
			if p.Type == "row" {
				continue
			}
			if len(p.Targets) == 0 {
				t.Errorf("panel %q has no query", p.Title)
			}
			for _, target := range p.Targets {
				check(fmt.Sprintf("panel %q", p.Title), target.Expr)
			}
		}
	}
	walk(dash.Panels)
	for _, v := range dash.Templating.List {
		if v.Type != "query" {
			continue
		}
		m := labelValues.FindStringSubmatch(v.Query.Query)
		if m == nil {
			t.Errorf("variable $%s: %q is not label_values(metric, label)", v.Name, v.Query.Query)
			continue
		}
		if _, labels, ok := seriesOf(fams, m[1]); !ok || !slices.Contains(labels, m[2]) {
			t.Errorf("variable $%s takes the values of label %s of %s, which has no such label (registered: %t)", v.Name, m[2], m[1], ok)
		}
	}
	var missing []string
	for name := range table {
		if !shown[name] {
			missing = append(missing, name)
		}
	}
	slices.Sort(missing)
	if len(missing) > 0 {
		t.Errorf("documented but on no panel of the dashboard: %v", missing)
	}
}

func TestMetrics_TheTimerLagIsTheMonitorsOnEveryNode(t *testing.T) {
	for _, server := range []bool{true, false} {
		if got := value(t, everySeriesOn(t, server), "skein_agent_timer_lag_seconds", nil); got != 0.003 {
			t.Errorf("skein_agent_timer_lag_seconds (server %v) = %v, want 0.003, the monitor's lag", server, got)
		}
	}
}
