package cli

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/structs"
)

// testService is a service of two replicas, one healthy, one crash-looping.
func testService(now time.Time) api.ServiceDetail {
	svc := structs.Service{
		ID: testJobID, Name: "llama", Owner: "alice", Replicas: 2, Reason: "scaled 1→2 by alice", CreatedAt: now.Add(-2 * time.Hour),
		Spec: structs.ServiceSpec{
			Job: structs.JobSpec{Name: "llama", Command: []string{"vllm", "serve"}, Nodes: 1, GPUs: 1, Image: "vllm/vllm-openai:v0.6",
				SecretEnv: map[string]string{"HF_TOKEN": "hf_x"}},
			PortEnv: "PORT", Health: &structs.HealthCheck{Kind: structs.HealthHTTP, Path: "/health", Grace: structs.Duration(10 * time.Minute)},
		},
	}
	return api.ServiceDetail{
		ServiceInfo: api.ServiceInfo{
			Service: svc, Running: 1, Healthy: 1, State: "1/2 healthy, 1 crash-looping",
			Statuses: map[api.ReplicaStatus]int{api.ReplicaHealthy: 1, api.ReplicaCrashLooping: 1},
		},
		Replicas: []api.Replica{
			{JobID: structs.ReplicaJobID(testJobID, 0), Index: 0, State: structs.JobRunning, Status: api.ReplicaHealthy, Node: "gpu-01", Port: 20001,
				Alloc: &structs.Allocation{State: structs.AllocRunning, MasterPort: 20001}},
			{JobID: structs.ReplicaJobID(testJobID, 2), Index: 2, State: structs.JobQueued, Status: api.ReplicaCrashLooping,
				Reason: "crash-looping: restarting in 40s: exit code 1 (3 quick exits in a row)", Restarts: 3, Crashes: 3,
				LastExit: &api.ReplicaExit{State: structs.AllocFailed, ExitCode: 1, At: now.Add(-5 * time.Second)}},
		},
		Endpoints: []string{"http://10.0.0.1:7480/llama/", "http://10.0.0.2:7480/llama/"},
	}
}

func TestServices_TableShowsOneRowPerService(t *testing.T) {
	now := time.Now()
	d := testService(now)
	web := api.ServiceInfo{Service: structs.Service{Name: "web", Replicas: 3, CreatedAt: now.Add(-3 * time.Minute),
		Spec: structs.ServiceSpec{Job: structs.JobSpec{Command: []string{"python", "-m", "http.server"}}}}, Healthy: 2, State: "scaling 2→3"}
	f := newFakeAgent(t)
	f.reply("GET /v1/services", http.StatusOK, []api.ServiceInfo{d.ServiceInfo, web})
	r := runCLI(t, "--addr", f.URL, "services")
	if r.code != exitOK {
		t.Fatalf("exit code %d: %s", r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	want := [][]string{
		{"NAME", "OWNER", "REPLICAS", "STATE", "IMAGE/COMMAND", "AGE"},
		{"llama", "alice", "1/2", "1/2 healthy, 1 crash-looping", "vllm/vllm-openai:v0.6", "2h"},
		{"web", "-", "2/3", "scaling 2→3", "python -m http.server", "3m"},
	}
	if len(lines) != len(want) {
		t.Fatalf("got %d lines, want %d:\n%s", len(lines), len(want), r.stdout)
	}
	for i, w := range want {
		if got := strings.Fields(lines[i]); strings.Join(got, "|") != strings.Join(strings.Fields(strings.Join(w, " ")), "|") {
			t.Errorf("line %d = %q, want columns %q", i, lines[i], w)
		}
	}

	f = newFakeAgent(t)
	f.reply("GET /v1/services", http.StatusOK, []api.ServiceInfo{})
	if r := runCLI(t, "--addr", f.URL, "services"); r.code != exitOK || r.stdout != "No services.\n" {
		t.Fatalf("no services: %d %q", r.code, r.stdout)
	}
}

func TestServices_JSONHidesSecretValues(t *testing.T) {
	f := newFakeAgent(t)
	f.reply("GET /v1/services", http.StatusOK, []api.ServiceInfo{testService(time.Now()).ServiceInfo})
	r := runCLI(t, "--addr", f.URL, "services", "--json")
	var list []api.ServiceInfo
	mustDecode(t, r.stdout, &list)
	if r.code != exitOK || len(list) != 1 || list[0].Service.Spec.Job.SecretEnv["HF_TOKEN"] != api.HiddenValue {
		t.Fatalf("exit %d, list %+v", r.code, list)
	}
}

func TestService_DetailShowsReplicasAndEndpoints(t *testing.T) {
	f := newFakeAgent(t)
	f.reply("GET /v1/services/{name}", http.StatusOK, testService(time.Now()))
	crashed := structs.ReplicaJobID(testJobID, 2)
	f.handle("GET /v1/jobs/{id}/logs", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("id") != crashed || r.URL.Query().Get("stream") != "stderr" || r.URL.Query().Get("lines") != "5" {
			http.Error(w, "want the crash-looping replica's last 5 lines of stderr", http.StatusBadRequest)
			return
		}
		fmt.Fprint(w, "loading /models/llama\nCUDA out of memory\n")
	})
	r := runCLI(t, "--addr", f.URL, "service", "llama")
	if r.code != exitOK {
		t.Fatalf("exit code %d: %s", r.code, r.stderr)
	}
	for _, want := range []string{
		"State:         1/2 healthy, 1 crash-looping",
		"Replicas:      2 wanted (scaled 1→2 by alice)",
		"Health:        http:/health every 5s, timeout 2s, unhealthy after 3 failures in a row, none counted for 10m after a start",
		"Drain timeout: 30s",
		"Drain delay:   2s",
		"Public:        no",
		"Endpoints (on any node's ingress):\n  http://10.0.0.1:7480/llama/\n  http://10.0.0.2:7480/llama/\n",
		"Image:", "vllm/vllm-openai:v0.6",
		"Secret env:  HF_TOKEN=" + api.HiddenValue,
		"REPLICA  VERSION  JOB", "HEALTH", "RESTARTS", "LAST EXIT",
		"\nLast lines of r2's stderr (skein logs " + crashed + "):\n  loading /models/llama\n  CUDA out of memory\n",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "hf_x") || strings.Contains(r.stdout, "Time limit") || strings.Contains(r.stdout, "Restarts:") {
		t.Errorf("output shows a secret or a field replicas do not have:\n%s", r.stdout)
	}
	rows := strings.Split(strings.TrimSuffix(r.stdout[strings.Index(r.stdout, "REPLICA  VERSION  JOB"):], "\n"), "\n")
	want := [][]string{
		{"r0", "0", structs.ReplicaJobID(testJobID, 0), "gpu-01", "20001", "running", "healthy", "0", "-", "-"},
		{"r2", "0", structs.ReplicaJobID(testJobID, 2), "-", "-", "queued", "crash-looping", "3", "(3", "crashes", "in", "a", "row)",
			"exit", "1,", "5s", "ago", "crash-looping:"},
	}
	for i, w := range want {
		if got := strings.Fields(rows[i+1]); len(got) < len(w) || strings.Join(got[:len(w)], " ") != strings.Join(w, " ") {
			t.Errorf("replica row %d = %q, want it to start with %q", i, rows[i+1], w)
		}
	}
	if q := f.requests()[0].Query; q.Has("secrets") {
		t.Errorf("query %v asks for secrets without --show-secrets", q)
	}
	if strings.Count(r.stdout, "Last lines of") != 1 {
		t.Errorf("want the last lines of the crash-looping replica only:\n%s", r.stdout)
	}
	runCLI(t, "--addr", f.URL, "service", "--show-secrets", "llama")
	if q := f.requests()[2].Query; q.Get("secrets") != "true" {
		t.Errorf("query %v, want secrets=true with --show-secrets", q)
	}
}

func TestService_UnknownNameIsTheServersError(t *testing.T) {
	f := newFakeAgent(t)
	f.fail("GET /v1/services/{name}", http.StatusNotFound, `no such service: "nope" (skein services lists them)`)
	r := runCLI(t, "--addr", f.URL, "service", "nope")
	if r.code != exitError || !strings.Contains(r.stderr, `no such service: "nope"`) {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	if r := runCLI(t, "--addr", f.URL, "service"); r.code != exitUsage || !strings.Contains(r.stderr, "missing NAME") {
		t.Fatalf("no name: exit %d, stderr %q", r.code, r.stderr)
	}
}

func TestScale_SendsTheCountAndSaysTheState(t *testing.T) {
	f := newFakeAgent(t)
	f.handle("POST /v1/services/{name}/scale", func(w http.ResponseWriter, r *http.Request) {
		var req api.ServiceScaleRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		d := testService(time.Now())
		d.Service.Name, d.Service.Replicas, d.State = r.PathValue("name"), req.Replicas, "scaling 2→4"
		writeJSON(w, http.StatusOK, d)
	})
	r := runCLI(t, "--addr", f.URL, "scale", "--reason", "launch day", "llama", "4")
	if r.code != exitOK || r.stdout != "service llama: scaling 2→4\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	var req api.ServiceScaleRequest
	if err := json.Unmarshal(f.requests()[0].Body, &req); err != nil || req != (api.ServiceScaleRequest{Replicas: 4, Reason: "launch day"}) {
		t.Fatalf("request %+v, %v", req, err)
	}
	for _, bad := range [][]string{{"llama"}, {"llama", "four"}, {"llama", "-1"}, {"llama", "1001"}, {"llama", "2", "3"}} {
		if r := runCLI(t, append([]string{"--addr", f.URL, "scale"}, bad...)...); r.code != exitUsage {
			t.Errorf("scale %q: exit %d, stderr %q; want 2", bad, r.code, r.stderr)
		}
	}
	if n := len(f.requests()); n != 1 {
		t.Errorf("the agent got %d requests, want only the good one", n)
	}
}

func TestServiceDelete_SaysTheState(t *testing.T) {
	f := newFakeAgent(t)
	f.handle("DELETE /v1/services/{name}", func(w http.ResponseWriter, r *http.Request) {
		d := testService(time.Now())
		d.Service.Deleted, d.State = true, "deleting, 2 stopping"
		writeJSON(w, http.StatusOK, d)
	})
	r := runCLI(t, "--addr", f.URL, "service", "delete", "llama")
	if r.code != exitOK || r.stdout != "service llama: deleting, 2 stopping\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if req := f.requests()[0]; req.Path != "/v1/services/llama" {
		t.Fatalf("request to %s", req.Path)
	}
}
