package cli

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/structs"
)

func TestServe_AutoscaleFlagsMakeTheAutoscaleAndStartAtMin(t *testing.T) {
	f := newFakeAgent(t)
	acceptServe(f)
	r := runCLI(t, "--addr", f.URL, "serve", "--name", "llama", "--autoscale", "2-8", "--target", "waiting=10",
		"--scale-up-window", "30s", "--scale-down-window", "10m", "--", "serve")
	if r.code != exitOK {
		t.Fatalf("exit code %d: %s", r.code, r.stderr)
	}
	got := served(t, f)[0]
	want := structs.Autoscale{Min: 2, Max: 8, Metric: structs.AutoscaleInFlight, Target: 10, Tolerance: 0.1,
		UpWindow: structs.Duration(30 * time.Second), DownWindow: structs.Duration(10 * time.Minute)}
	if got.Autoscale == nil || *got.Autoscale != want || got.Replicas != 2 {
		t.Fatalf("autoscale %+v, replicas %d; want %+v and 2", got.Autoscale, got.Replicas, want)
	}
}

func TestServe_BadAutoscaleIsRefusedBeforeSending(t *testing.T) {
	cases := []struct {
		name   string
		args   []string
		stderr string
	}{
		{"target without autoscale", []string{"--target", "inflight=3"}, "--target: set, but the service has no --autoscale MIN-MAX"},
		{"autoscale without target", []string{"--autoscale", "1-3"}, "missing --target"},
		{"bounds that do not parse", []string{"--autoscale", "3", "--target", "inflight=3"}, `"3": want MIN-MAX replicas`},
		{"scale to zero on a gauge", []string{"--autoscale", "0-3", "--target", "gauge:q=3"}, "--autoscale: 0 (scale to zero) needs the inflight metric"},
		{"max zero", []string{"--autoscale", "0-0", "--target", "inflight=3"}, "--autoscale: 0: want 1 to"},
		{"gpu without GPUs", []string{"--autoscale", "1-3", "--target", "gpu=80"}, "--target: gpu: the replicas hold no GPUs (the gpu metric needs replicas with gpus)"},
		{"bad gauge", []string{"--autoscale", "1-3", "--target", "gauge:a-b=1"}, "--target: \"a-b\": want a Prometheus metric name"},
		{"zero target", []string{"--autoscale", "1-3", "--target", "inflight=0"}, "--target: 0: want more than 0"},
		{"target not a number", []string{"--autoscale", "1-3", "--target", "inflight=lots"}, `the value "lots" is not a number`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeAgent(t)
			acceptServe(f)
			r := runCLI(t, append(append([]string{"--addr", f.URL, "serve", "--name", "web"}, tc.args...), "true")...)
			if r.code == exitOK || !strings.Contains(r.stderr, tc.stderr) {
				t.Fatalf("got code %d, stderr %q; want %q", r.code, r.stderr, tc.stderr)
			}
			if n := len(f.requests()); n != 0 {
				t.Errorf("agent got %d requests, want none", n)
			}
		})
	}
}

func TestServiceAutoscale_SetsOrTurnsOff(t *testing.T) {
	f := newFakeAgent(t)
	f.handle("POST /v1/services/{name}/autoscale", func(w http.ResponseWriter, r *http.Request) {
		var req api.ServiceAutoscaleRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		d := testService(time.Now())
		d.Service.Name, d.Service.Autoscale = r.PathValue("name"), req.Autoscale
		writeJSON(w, http.StatusOK, d)
	})
	r := runCLI(t, "--addr", f.URL, "service", "autoscale", "llama", "1-8", "--target", "gauge:vllm:num_requests_waiting=5")
	if r.code != exitOK || !strings.HasPrefix(r.stdout, "service llama: autoscale 1-8 replicas, gauge:vllm:num_requests_waiting=5 per replica, up after 0s, down after 5m, tolerance 0.1; ") {
		t.Fatalf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, "--addr", f.URL, "service", "autoscale", "llama", "off")
	if r.code != exitOK || !strings.HasPrefix(r.stdout, "service llama: autoscale off; ") {
		t.Fatalf("off: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	var req api.ServiceAutoscaleRequest
	if err := json.Unmarshal(f.requests()[1].Body, &req); err != nil || req.Autoscale != nil {
		t.Fatalf("off sent %+v, %v", req, err)
	}
	if r := runCLI(t, "--addr", f.URL, "service", "autoscale", "llama", "off", "--target", "inflight=2"); r.code != exitUsage {
		t.Errorf("off with --target: exit %d, stderr %q", r.code, r.stderr)
	}
	if n := len(f.requests()); n != 2 {
		t.Errorf("the agent got %d requests, want the two good ones", n)
	}
}

func TestServe_FileAutoscaleIsOverriddenByFlagsAndNeedsItsBounds(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "web.yaml")
	writeTestFile(t, path, "kind: service\nname: web\nautoscale: 1-4\ntarget: inflight=3\ncommand: [serve]\n")
	f := newFakeAgent(t)
	acceptServe(f)
	r := runCLI(t, "--addr", f.URL, "serve", "-f", path, "--autoscale", "2-5")
	if r.code != exitOK {
		t.Fatalf("exit code %d: %s", r.code, r.stderr)
	}
	if a := served(t, f)[0].Autoscale; a == nil || a.Min != 2 || a.Max != 5 || a.Target != 3 || a.Metric != structs.AutoscaleInFlight {
		t.Fatalf("autoscale %+v: want the flag's bounds, the file's target", a)
	}
	bad := filepath.Join(dir, "bad.yaml")
	writeTestFile(t, bad, "kind: service\nname: web\ntarget: inflight=3\ncommand: [serve]\n")
	if r := runCLI(t, "--addr", f.URL, "serve", "-f", bad); r.code == exitOK ||
		!strings.Contains(r.stderr, "line 3: target: set, but the service has no autoscale (MIN-MAX)") {
		t.Fatalf("target without autoscale: exit %d, stderr %q", r.code, r.stderr)
	}
}

func TestService_DetailShowsTheAutoscaleAndWhatWasObserved(t *testing.T) {
	now := time.Now()
	d := testService(now)
	d.Service.Autoscale = &structs.Autoscale{Min: 1, Max: 8, Metric: structs.AutoscaleInFlight, Target: 10, Tolerance: 0.1,
		DownWindow: structs.DefaultAutoscaleDownWindow}
	d.Service.Reason = "scaled 2→4: 38 requests in flight per replica, target 10"
	d.Observed = &structs.AutoscaleObservation{Value: 9.456, At: now.Add(-2 * time.Second)}
	f := newFakeAgent(t)
	f.reply("GET /v1/services/{name}", http.StatusOK, d)
	r := runCLI(t, "--addr", f.URL, "service", "llama")
	for _, want := range []string{
		"Replicas:      2 wanted (scaled 2→4: 38 requests in flight per replica, target 10)",
		"Autoscale:     1-8 replicas, inflight=10 per replica, up after 0s, down after 5m, tolerance 0.1; observed 9.46 per replica 2s ago",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, r.stdout)
		}
	}
	d.Observed.Paused = "paused: rollout to version 3 in progress"
	paused := newFakeAgent(t)
	paused.reply("GET /v1/services/{name}", http.StatusOK, d)
	if r := runCLI(t, "--addr", paused.URL, "service", "llama"); !strings.Contains(r.stdout, "per replica 2s ago; paused: rollout to version 3 in progress\n") {
		t.Errorf("output lacks the pause:\n%s", r.stdout)
	}
	d.Observed, d.Service.Autoscale = nil, nil
	off := newFakeAgent(t)
	off.reply("GET /v1/services/{name}", http.StatusOK, d)
	if r := runCLI(t, "--addr", off.URL, "service", "llama"); !strings.Contains(r.stdout, "Autoscale:     off\n") {
		t.Errorf("output lacks the autoscale off:\n%s", r.stdout)
	}
}
