package cli

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/structs"
)

func TestServiceUpdate_SendsTheCurrentSpecWithTheChanges(t *testing.T) {
	cur := testService(time.Now())
	cur.Service.Version = 1
	f := newFakeAgent(t)
	f.handle("GET /v1/services/{name}", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, http.StatusOK, cur) })
	var got api.ServiceUpdateRequest
	f.handle("POST /v1/services/{name}/update", func(w http.ResponseWriter, r *http.Request) {
		if err := json.NewDecoder(r.Body).Decode(&got); err != nil {
			t.Errorf("decode: %v", err)
		}
		d := cur
		d.Service.Version = 2
		d.Service.Rollout = &structs.Rollout{Version: 2, From: 1, MaxSurge: got.MaxSurge, MaxUnavailable: got.MaxUnavailable, State: structs.RolloutRunning}
		writeJSON(w, http.StatusOK, d)
	})
	r := runCLI(t, "--addr", f.URL, "service", "update", "llama", "--image", "vllm/vllm-openai:v0.7", "--env", "MODE=fast", "--max-surge", "2",
		"--progress-deadline", "3m", "--unhealthy-timeout", "45s", "--drain-delay", "10s")
	if r.code != exitOK {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if want := "service llama: rolling out version 2 over version 1 (max surge 2, max unavailable 0)"; !strings.Contains(r.stdout, want) {
		t.Fatalf("stdout %q lacks %q", r.stdout, want)
	}
	if q := f.requests()[0].Query; q.Get("secrets") != "true" {
		t.Fatalf("the current spec was read without its secrets: %v", q)
	}
	j := got.Spec.Job
	if j.Image != "vllm/vllm-openai:v0.7" || j.Env["MODE"] != "fast" || j.SecretEnv["HF_TOKEN"] != "hf_x" || !slices.Equal(j.Command, []string{"vllm", "serve"}) ||
		j.GPUs != 1 || got.Spec.Health == nil || got.Spec.Health.Path != "/health" || got.MaxSurge != 2 || got.MaxUnavailable != 0 ||
		got.Spec.DrainDelay != structs.Duration(10*time.Second) {
		t.Fatalf("update sent %+v", got)
	}
	if got.Spec.ProgressDeadline != structs.Duration(3*time.Minute) || got.Spec.UnhealthyTimeout != structs.Duration(45*time.Second) {
		t.Fatalf("update sent progress deadline %s, unhealthy timeout %s; want 3m, 45s", got.Spec.ProgressDeadline, got.Spec.UnhealthyTimeout)
	}

	// A new command after --; the deadline not given keeps the spec's.
	cur.Service.Spec.ProgressDeadline = structs.Duration(7 * time.Minute)
	runCLI(t, "--addr", f.URL, "service", "update", "llama", "--", "vllm", "serve", "--fast")
	if got.Spec.ProgressDeadline != structs.Duration(7*time.Minute) {
		t.Fatalf("second update sent progress deadline %s, want the spec's 7m", got.Spec.ProgressDeadline)
	}
	if !slices.Equal(got.Spec.Job.Command, []string{"vllm", "serve", "--fast"}) || got.Spec.Job.Image != "vllm/vllm-openai:v0.6" {
		t.Fatalf("second update sent %+v", got.Spec.Job)
	}
}

func TestServiceUpdate_RefusesAnUnhealthyTimeoutOutOfRange(t *testing.T) {
	f := newFakeAgent(t)
	f.reply("GET /v1/services/{name}", http.StatusOK, testService(time.Now()))
	r := runCLI(t, "--addr", f.URL, "service", "update", "llama", "--unhealthy-timeout", "48h")
	if want := "Error: --unhealthy-timeout: 48h0m0s is out of range 0s..24h0m0s"; r.code != exitError || !strings.Contains(r.stderr, want) {
		t.Fatalf("exit %d, stderr %q; want %q", r.code, r.stderr, want)
	}
	for _, req := range f.requests() {
		if req.Method == http.MethodPost {
			t.Fatal("a refused update was sent")
		}
	}
}

func TestServiceUpdate_RefusesLimitsThatCannotMove(t *testing.T) {
	f := newFakeAgent(t)
	f.reply("GET /v1/services/{name}", http.StatusOK, testService(time.Now()))
	r := runCLI(t, "--addr", f.URL, "service", "update", "llama", "--max-surge", "0")
	if r.code != exitError || !strings.Contains(r.stderr, "--max-surge") {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	r = runCLI(t, "--addr", f.URL, "service", "update", "llama", "--drain-delay", "1h")
	if want := "Error: --drain-delay: 1h0m0s is out of range 0s..10m0s"; r.code != exitError || !strings.Contains(r.stderr, want) {
		t.Fatalf("exit %d, stderr %q, want %q", r.code, r.stderr, want)
	}
	for _, req := range f.requests() {
		if req.Method == http.MethodPost {
			t.Fatal("a refused update was sent")
		}
	}
}

func TestService_DetailShowsTheVersionAndTheRollout(t *testing.T) {
	d := testService(time.Now())
	d.Service.Version = 1
	d.Service.Rollout = &structs.Rollout{Version: 1, From: 2, State: structs.RolloutRolledBack,
		Reason: "rolled back: replica r5 of version 2 crash-looping: exited with code 1"}
	d.Replicas[0].Version = 1
	f := newFakeAgent(t)
	f.reply("GET /v1/services/{name}", http.StatusOK, d)
	r := runCLI(t, "--addr", f.URL, "service", "llama")
	want := "Version:       1 (rolled back from version 2: rolled back: replica r5 of version 2 crash-looping: exited with code 1)"
	if r.code != exitOK || !strings.Contains(r.stdout, want) {
		t.Fatalf("exit %d, output lacks %q:\n%s", r.code, want, r.stdout)
	}
	if want := "Rollouts:      roll back on a new replica unhealthy for 30s after its grace, or no progress in 10m"; !strings.Contains(r.stdout, want) {
		t.Fatalf("output lacks the defaults %q:\n%s", want, r.stdout)
	}
	d.Service.Spec.ProgressDeadline, d.Service.Spec.UnhealthyTimeout = structs.Duration(time.Hour), structs.Duration(2*time.Minute)
	f = newFakeAgent(t)
	f.reply("GET /v1/services/{name}", http.StatusOK, d)
	r = runCLI(t, "--addr", f.URL, "service", "llama")
	if want := "Rollouts:      roll back on a new replica unhealthy for 2m after its grace, or no progress in 1h"; !strings.Contains(r.stdout, want) {
		t.Fatalf("output lacks the spec's %q:\n%s", want, r.stdout)
	}
}
