package agent

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

// scrapeMetrics GETs a's /metrics with token ("" for none) and parses it.
func scrapeMetrics(t *testing.T, a *Agent, token string) (map[string]*dto.MetricFamily, error) {
	t.Helper()
	return scrapeAt(t, a, token, "/metrics")
}

// scrapeAt is scrapeMetrics on path.
func scrapeAt(t *testing.T, a *Agent, token, path string) (map[string]*dto.MetricFamily, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, a.HTTPAddr()+path, nil)
	if err != nil {
		return nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(resp.Body)
}

// series returns the value of the one series of a family whose labels
// include labels (a histogram's value is its count), or an error.
func series(fams map[string]*dto.MetricFamily, name string, labels map[string]string) (float64, error) {
	fam, ok := fams[name]
	if !ok {
		return 0, fmt.Errorf("no %s in the scrape", name)
	}
	var found []float64
	for _, s := range fam.GetMetric() {
		if !hasLabels(s, labels) {
			continue
		}
		switch fam.GetType() {
		case dto.MetricType_COUNTER:
			found = append(found, s.GetCounter().GetValue())
		case dto.MetricType_GAUGE:
			found = append(found, s.GetGauge().GetValue())
		case dto.MetricType_HISTOGRAM:
			found = append(found, float64(s.GetHistogram().GetSampleCount()))
		}
	}
	if len(found) != 1 {
		return 0, fmt.Errorf("%s%v: %d series, want 1", name, labels, len(found))
	}
	return found[0], nil
}

// hasLabels reports whether a series carries every label of labels.
func hasLabels(s *dto.Metric, labels map[string]string) bool {
	have := map[string]string{}
	for _, l := range s.GetLabel() {
		have[l.GetName()] = l.GetValue()
	}
	for k, v := range labels {
		if have[k] != v {
			return false
		}
	}
	return true
}

// waitSeries waits until a series of a's metrics satisfies ok.
func waitSeries(t *testing.T, a *Agent, token, name string, labels map[string]string, what string, ok func(float64) bool) {
	t.Helper()
	testutil.WaitFor(t, 15*time.Second, func() error {
		fams, err := scrapeMetrics(t, a, token)
		if err != nil {
			return err
		}
		v, err := series(fams, name, labels)
		if err != nil {
			return err
		}
		if !ok(v) {
			return fmt.Errorf("%s%v = %v, want %s", name, labels, v, what)
		}
		return nil
	})
}

func equals(want float64) func(float64) bool  { return func(v float64) bool { return v == want } }
func atLeast(want float64) func(float64) bool { return func(v float64) bool { return v >= want } }

func TestAgent_Metrics_CountersMoveAsJobsRunFailArePreemptedAndLoseTheirGPU(t *testing.T) {
	t.Parallel()
	a, token, c := startAgentAdmin(t, testConfig(t, t.TempDir()))
	ctx := context.Background()

	// The simulated GPUs' series, from the state, before any job.
	fams, err := scrapeMetrics(t, a, token)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range a.inv.GPUs {
		l := map[string]string{"node": a.Name(), "index": fmt.Sprint(g.Index), "uuid": g.UUID, "model": g.Model, "simulated": "true"}
		for state, want := range map[string]float64{"healthy": 1, "unhealthy": 0, "cordoned": 0, "foreign": 0} {
			l["state"] = state
			if v, err := series(fams, "skein_gpu_health_state", l); err != nil || v != want {
				t.Errorf("GPU %d %s: %v (%v), want %v", g.Index, state, v, err, want)
			}
		}
		delete(l, "state")
		if v, err := series(fams, "skein_gpu_allocated", l); err != nil || v != 0 {
			t.Errorf("GPU %d allocated: %v (%v), want 0", g.Index, v, err)
		}
	}
	if v, err := series(fams, "skein_raft_is_leader", nil); err != nil || v != 1 {
		t.Errorf("is_leader %v (%v), want 1 on a one-node cluster", v, err)
	}
	// The simulated GPUs' telemetry: idle GPUs read 0 %, and there is no
	// temperature or power series, which the simulator does not make up.
	g0 := a.inv.GPUs[0]
	waitSeries(t, a, token, "skein_gpu_utilization_percent", map[string]string{"node": a.Name(), "index": "0", "uuid": g0.UUID,
		"model": g0.Model, "simulated": "true"}, "0 on an idle simulated GPU", equals(0))
	if fams, err := scrapeMetrics(t, a, token); err != nil {
		t.Fatal(err)
	} else if _, ok := fams["skein_gpu_temperature_celsius"]; ok {
		t.Error("a temperature series for simulated GPUs, which have no sensor")
	}

	// A job that succeeds: waited in the queue, ran, answered by route.
	ok := submit(t, c, 1, "true")
	waitJobState(t, c, ok.ID, structs.JobSucceeded)
	waitSeries(t, a, token, "skein_jobs_submit_to_running_seconds", nil, "1 observation", equals(1))
	waitSeries(t, a, token, "skein_sched_queue_wait_seconds", map[string]string{"gpus": "1"}, "1 observation", equals(1))
	waitSeries(t, a, token, "skein_jobs", map[string]string{"state": "succeeded"}, "1", equals(1))
	waitSeries(t, a, token, "skein_http_request_duration_seconds", map[string]string{"api": "user", "route": "POST /v1/jobs", "code": "201"}, "1 request", equals(1))
	waitSeries(t, a, token, "skein_http_request_duration_seconds", map[string]string{"api": "user", "route": "GET /v1/jobs/{id}"}, "requests", atLeast(1))
	waitSeries(t, a, token, "skein_raft_commit_duration_seconds", map[string]string{"type": "job-submit"}, "1 write", equals(1))
	waitSeries(t, a, token, "skein_sched_pass_duration_seconds", nil, "passes", atLeast(1))

	// A job that fails once and is restarted.
	failing := submitSpec(t, c, structs.JobSpec{Command: []string{"sh", "-c", "exit 3"}, GPUs: 1, Restarts: 1})
	waitJobState(t, c, failing.ID, structs.JobFailed)
	waitSeries(t, a, token, "skein_sched_restarts_total", map[string]string{"cause": "failure"}, "1", equals(1))
	waitSeries(t, a, token, "skein_jobs", map[string]string{"state": "failed"}, "1", equals(1))

	// A preemptible job stopped for an urgent one, and placed again after.
	low := submitSpec(t, c, structs.JobSpec{Command: []string{"sleep", "600"}, GPUs: 4, Preemptible: true})
	waitJobState(t, c, low.ID, structs.JobRunning)
	waitSeries(t, a, token, "skein_gpu_job_info", map[string]string{"index": "3", "job": low.ID}, "1", equals(1))
	high := submitSpec(t, c, structs.JobSpec{Command: []string{"true"}, GPUs: 4, Priority: 10})
	waitJobState(t, c, high.ID, structs.JobSucceeded)
	waitSeries(t, a, token, "skein_sched_preemptions_total", nil, "1", equals(1))
	waitSeries(t, a, token, "skein_sched_restarts_total", map[string]string{"cause": "preempted"}, "1", equals(1))
	waitJobState(t, c, low.ID, structs.JobRunning)
	if _, err := c.CancelJob(ctx, low.ID); err != nil {
		t.Fatal(err)
	}
	waitJobState(t, c, low.ID, structs.JobCancelled)

	// A GPU fault under a running job: it runs again on another GPU, and
	// the GPU's series says unhealthy.
	job := submit(t, c, 1, "sleep", "600")
	waitJobState(t, c, job.ID, structs.JobRunning)
	first := a.fsm.Allocs(job.ID)[0]
	index := -1
	for _, g := range a.inv.GPUs {
		if g.UUID == first.GPUs[0] {
			index = g.Index
		}
	}
	if err := c.InjectGPUFault(ctx, api.GPUFaultRequest{Node: a.Name(), Index: index, Reason: "XID 79: GPU has fallen off the bus"}); err != nil {
		t.Fatal(err)
	}
	waitSeries(t, a, token, "skein_sched_restarts_total", map[string]string{"cause": "gpu_fault"}, "1", equals(1))
	waitSeries(t, a, token, "skein_gpu_health_state", map[string]string{"index": fmt.Sprint(index), "state": "unhealthy"}, "1", equals(1))
	waitSeries(t, a, token, "skein_cluster_gpus", map[string]string{"state": "unhealthy"}, "1", equals(1))
	waitJobState(t, c, job.ID, structs.JobRunning)
	waitSeries(t, a, token, "skein_gpu_job_info", map[string]string{"job": job.ID}, "1 GPU holding the job", equals(1))
	// Every pass is timed, and those that placed a job counted it.
	fams, err = scrapeMetrics(t, a, token)
	if err != nil {
		t.Fatal(err)
	}
	if placed := fams["skein_sched_pass_placements"].GetMetric()[0].GetHistogram().GetSampleSum(); placed < 6 {
		t.Errorf("passes placed %v jobs, want at least the 6 placements made", placed)
	}
}

func TestAgent_Metrics_NeedTheReadPermissionWithACLs(t *testing.T) {
	t.Parallel()
	a, admin := aclAgent(t)
	reader := userToken(t, admin, "prometheus", structs.RoleReader)
	if _, err := scrapeMetrics(t, a, ""); err == nil {
		t.Fatal("a scrape without a token was answered")
	}
	fams, err := scrapeMetrics(t, a, reader)
	if err != nil {
		t.Fatalf("a reader's scrape: %v", err)
	}
	if v, err := series(fams, "skein_raft_is_leader", nil); err != nil || v != 1 {
		t.Fatalf("is_leader %v (%v), want 1", v, err)
	}
	// Alone, a node has no one to probe.
	if v, err := series(fams, "skein_gossip_probe_rtt_seconds", nil); err != nil || v != 0 {
		t.Fatalf("a lone node timed %v gossip probes (%v), want 0", v, err)
	}
	if code, _ := call(t, a, "not-a-token", http.MethodGet, "/metrics", nil); code != http.StatusUnauthorized {
		t.Fatalf("a scrape with a bad token: %d, want 401", code)
	}
}

func TestCluster_Metrics_TheLeaderReportsEachFollowerAndEveryNodeItsProbes(t *testing.T) {
	t.Parallel()
	tc := startCluster(t, 3)
	testutil.WaitFor(t, 20*time.Second, func() error {
		leaders := 0
		for _, a := range tc.agents {
			fams, err := scrapeMetrics(t, a, tc.admin)
			if err != nil {
				return err
			}
			if v, err := series(fams, "skein_gossip_members", map[string]string{"status": "alive"}); err != nil || v != 3 {
				return fmt.Errorf("%s: %v alive gossip members (%v), want 3", a.Name(), v, err)
			}
			if v, err := series(fams, "skein_gossip_probe_rtt_seconds", nil); err != nil || v == 0 {
				return fmt.Errorf("%s: %v gossip probes timed (%v), want some", a.Name(), v, err)
			}
			leading, err := series(fams, "skein_raft_is_leader", nil)
			if err != nil {
				return err
			}
			if leading == 0 {
				if _, ok := fams["skein_raft_follower_last_contact_seconds"]; ok {
					return fmt.Errorf("%s does not lead, yet reports its followers", a.Name())
				}
				continue
			}
			leaders++
			for _, f := range tc.agents {
				if f == a {
					continue
				}
				peer := map[string]string{"peer": f.Name()}
				if _, err := series(fams, "skein_raft_follower_last_contact_seconds", peer); err != nil {
					return fmt.Errorf("leader %s: %w", a.Name(), err)
				}
				if _, err := series(fams, "skein_raft_follower_lag_entries", peer); err != nil {
					return fmt.Errorf("leader %s: %w", a.Name(), err)
				}
				if v, err := series(fams, "skein_raft_follower_healthy", peer); err != nil || v != 1 {
					return fmt.Errorf("leader %s: follower %s healthy %v (%v), want 1", a.Name(), f.Name(), v, err)
				}
			}
		}
		if leaders != 1 {
			return fmt.Errorf("%d nodes say they lead", leaders)
		}
		return nil
	})
}

// A leader change moves the counter of the node that takes over, and the
// old leader had counted its own election.
func TestCluster_Metrics_ALeaderChangeMovesTheLeaderChangesCounter(t *testing.T) {
	t.Parallel()
	tc := startCluster(t, 3)
	changes := func(a *Agent) (float64, error) {
		fams, err := scrapeMetrics(t, a, tc.admin)
		if err != nil {
			return 0, err
		}
		return series(fams, "skein_raft_leader_changes_total", nil)
	}
	old := tc.leader()
	before := map[*Agent]float64{}
	testutil.WaitFor(t, 10*time.Second, func() error {
		for _, a := range tc.agents {
			n, err := changes(a)
			if err != nil {
				return fmt.Errorf("%s: %w", a.Name(), err)
			}
			before[a] = n
		}
		// The leader's loop counts its leadership a moment after Raft
		// names it.
		if before[tc.agents[old]] < 1 {
			return fmt.Errorf("the leader %s counted %v leader changes, want its election at least", tc.agents[old].Name(), before[tc.agents[old]])
		}
		return nil
	})
	tc.kill(old)
	next := tc.agents[tc.leader()]
	testutil.WaitFor(t, 10*time.Second, func() error {
		n, err := changes(next)
		if err != nil {
			return err
		}
		if n <= before[next] {
			return fmt.Errorf("the new leader %s counted %v leader changes, as many as before the old one died (%v)", next.Name(), n, before[next])
		}
		return nil
	})
}

// A snapshot of the state sets the snapshot series: the size is the
// bytes Raft stored for it, the index Raft's, and its writing is timed
// once; a larger state makes a larger snapshot.
func TestAgent_Metrics_ASnapshotSetsItsSizeTimeAndIndex(t *testing.T) {
	t.Parallel()
	a, token, c := startAgentAdmin(t, testConfig(t, t.TempDir()))
	fams, err := scrapeMetrics(t, a, token)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := series(fams, "skein_raft_snapshot_duration_seconds", nil); err != nil || v != 0 {
		t.Fatalf("snapshots timed before any: %v (%v), want 0", v, err)
	}
	sizes := []float64{}
	for round := 1; round <= 2; round++ {
		for range 5 * round { // jobs no node fits: state, not work
			spec := structs.JobSpec{Command: []string{"true"}, GPUs: 1, Constraints: map[string]string{"zone": "nowhere"}}
			if _, err := c.SubmitJob(context.Background(), api.SubmitRequest{Spec: spec}); err != nil {
				t.Fatal(err)
			}
		}
		if err := a.raft.Snapshot(); err != nil {
			t.Fatal(err)
		}
		meta := newestSnapshot(t, a)
		fams, err := scrapeMetrics(t, a, token)
		if err != nil {
			t.Fatal(err)
		}
		size, err := series(fams, "skein_raft_snapshot_size_bytes", nil)
		if err != nil || size != float64(meta.Size) || size == 0 {
			t.Fatalf("snapshot %d: skein_raft_snapshot_size_bytes %v (%v), want the %d bytes Raft stored", round, size, err, meta.Size)
		}
		if v, err := series(fams, "skein_raft_last_snapshot_index", nil); err != nil || v != float64(meta.Index) {
			t.Fatalf("snapshot %d: skein_raft_last_snapshot_index %v (%v), want %d", round, v, err, meta.Index)
		}
		h := fams["skein_raft_snapshot_duration_seconds"].GetMetric()[0].GetHistogram()
		if h.GetSampleCount() != uint64(round) || h.GetSampleSum() <= 0 {
			t.Fatalf("snapshot %d: %d snapshots timed, %vs in all; want %d, in some time", round, h.GetSampleCount(), h.GetSampleSum(), round)
		}
		sizes = append(sizes, size)
	}
	if sizes[1] <= sizes[0] {
		t.Fatalf("snapshot sizes %v: the second, of more jobs, is not larger", sizes)
	}
}

// newestSnapshot is the metadata of a's latest snapshot, as Raft's file
// store keeps it.
func newestSnapshot(t *testing.T, a *Agent) *raft.SnapshotMeta {
	t.Helper()
	store, err := raft.NewFileSnapshotStore(filepath.Join(a.DataDir(), "raft"), 2, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	metas, err := store.List()
	if err != nil || len(metas) == 0 {
		t.Fatalf("list a's snapshots: %d, %v", len(metas), err)
	}
	return metas[0] // newest first
}

// promConfig is what deploy/prometheus/prometheus.yml may set, by
// Prometheus's names: decoded with known fields only, as Prometheus
// decodes its own, a misspelt key fails.
type promConfig struct {
	Global struct {
		ScrapeInterval     string `yaml:"scrape_interval"`
		EvaluationInterval string `yaml:"evaluation_interval"`
	} `yaml:"global"`
	ScrapeConfigs []struct {
		JobName     string `yaml:"job_name"`
		Scheme      string `yaml:"scheme"`
		MetricsPath string `yaml:"metrics_path"`
		TLSConfig   struct {
			CAFile string `yaml:"ca_file"`
		} `yaml:"tls_config"`
		Authorization struct {
			Type            string `yaml:"type"`
			CredentialsFile string `yaml:"credentials_file"`
		} `yaml:"authorization"`
		StaticConfigs []struct {
			Targets []string `yaml:"targets"`
		} `yaml:"static_configs"`
		RelabelConfigs []struct {
			SourceLabels []string `yaml:"source_labels"`
			Regex        string   `yaml:"regex"`
			TargetLabel  string   `yaml:"target_label"`
			Replacement  string   `yaml:"replacement"`
		} `yaml:"relabel_configs"`
	} `yaml:"scrape_configs"`
}

// The example scrape configuration scrapes what an agent serves: its
// path (Prometheus's default, /metrics, unless it says), with a bearer
// token as a reader's, on the agent's default API port, under the job
// the dashboard's queries select.
func TestAgent_Metrics_ThePrometheusExampleScrapesTheAgent(t *testing.T) {
	t.Parallel()
	f, err := os.Open("../deploy/prometheus/prometheus.yml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := yaml.NewDecoder(f)
	dec.KnownFields(true)
	var cfg promConfig
	if err := dec.Decode(&cfg); err != nil {
		t.Fatalf("prometheus.yml: %v", err)
	}
	for name, d := range map[string]string{"scrape_interval": cfg.Global.ScrapeInterval, "evaluation_interval": cfg.Global.EvaluationInterval} {
		if _, err := model.ParseDuration(d); err != nil {
			t.Errorf("global.%s: %v", name, err)
		}
	}
	if len(cfg.ScrapeConfigs) != 1 {
		t.Fatalf("%d scrape configs, want 1", len(cfg.ScrapeConfigs))
	}
	sc := cfg.ScrapeConfigs[0]
	dash, err := os.ReadFile("../deploy/grafana/skein.json")
	if err != nil {
		t.Fatal(err)
	}
	if sel := fmt.Sprintf(`job=\"%s\"`, sc.JobName); !strings.Contains(string(dash), sel) {
		t.Errorf("job_name %q: the dashboard selects no %s", sc.JobName, sel)
	}
	if sc.Scheme != "http" && sc.Scheme != "https" {
		t.Errorf("scheme %q, want http or https", sc.Scheme)
	}
	if sc.Authorization.Type != "" && sc.Authorization.Type != "Bearer" {
		t.Errorf("authorization type %q: the agent takes Bearer tokens", sc.Authorization.Type)
	}
	// The instance label is the target's host: Prometheus anchors a
	// relabelling's regex and expands $1 in its replacement.
	var instance *regexp.Regexp
	var replacement string
	for _, r := range sc.RelabelConfigs {
		re, err := regexp.Compile("^(?:" + r.Regex + ")$")
		if err != nil {
			t.Fatalf("relabel regex %q: %v", r.Regex, err)
		}
		if r.TargetLabel == "instance" && slices.Equal(r.SourceLabels, []string{"__address__"}) {
			instance, replacement = re, r.Replacement
		}
	}
	if instance == nil {
		t.Error("no relabelling of __address__ to instance")
	}
	var targets []string
	for _, s := range sc.StaticConfigs {
		targets = append(targets, s.Targets...)
	}
	if len(targets) == 0 {
		t.Error("no targets")
	}
	for _, target := range targets {
		host, port, err := net.SplitHostPort(target)
		if err != nil || port != strconv.Itoa(DefaultHTTPPort) {
			t.Errorf("target %q: want host:%d, the agent's API port (%v)", target, DefaultHTTPPort, err)
			continue
		}
		if instance != nil {
			if got := instance.ReplaceAllString(target, replacement); got != host {
				t.Errorf("target %q is relabelled instance %q, want %q", target, got, host)
			}
		}
	}

	path := sc.MetricsPath
	if path == "" {
		path = "/metrics"
	}
	a, admin := aclAgent(t)
	fams, err := scrapeAt(t, a, userToken(t, admin, "prometheus", structs.RoleReader), path)
	if err != nil {
		t.Fatalf("scrape %s as the example does: %v", path, err)
	}
	if _, err := series(fams, "skein_raft_is_leader", nil); err != nil {
		t.Fatalf("scrape %s: %v", path, err)
	}
}
