package cli

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/structs"
)

// acceptServe registers a POST /v1/services handler that answers the
// service the request describes, with two endpoints.
func acceptServe(f *fakeAgent) {
	f.handle("POST /v1/services", func(w http.ResponseWriter, r *http.Request) {
		var req api.ServiceCreateRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			writeJSON(w, http.StatusBadRequest, api.ErrorBody{Error: err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, api.ServiceDetail{
			ServiceInfo: api.ServiceInfo{
				Service: structs.Service{ID: testJobID, Name: req.Name, Spec: req.Spec, Replicas: req.Replicas, CreatedAt: time.Now()},
				State:   "0/2 healthy, 2 starting",
			},
			Endpoints: []string{"http://10.0.0.1:7480/" + req.Name + "/", "http://10.0.0.2:7480/" + req.Name + "/"},
		})
	})
}

// served decodes the create requests the agent received.
func served(t *testing.T, f *fakeAgent) []api.ServiceCreateRequest {
	t.Helper()
	var out []api.ServiceCreateRequest
	for _, r := range f.requests() {
		if r.Method != http.MethodPost || r.Path != "/v1/services" {
			continue
		}
		var req api.ServiceCreateRequest
		if err := json.Unmarshal(r.Body, &req); err != nil {
			t.Fatalf("decode create body: %v", err)
		}
		out = append(out, req)
	}
	return out
}

func TestServe_PrintsTheNameAndWhereItAnswers(t *testing.T) {
	f := newFakeAgent(t)
	acceptServe(f)
	r := runCLI(t, "--addr", f.URL, "serve", "--name", "llama", "--replicas", "2", "--", "python", "-m", "http.server")
	if r.code != exitOK {
		t.Fatalf("exit code %d: %s", r.code, r.stderr)
	}
	if r.stdout != "llama\n" {
		t.Errorf("stdout = %q, want the name alone", r.stdout)
	}
	want := "service llama: 0/2 healthy, 2 starting; it answers at http://10.0.0.1:7480/llama/ and on the ingress of 1 other node (skein service llama)\n"
	if r.stderr != want {
		t.Errorf("stderr = %q, want %q", r.stderr, want)
	}
}

func TestServe_BuildsTheServiceFromEveryFlag(t *testing.T) {
	f := newFakeAgent(t)
	acceptServe(f)
	r := runCLI(t, "--addr", f.URL, "serve", "--name", "llama", "--replicas", "3", "--port-env", "HTTP_PORT",
		"--health", "http:/health", "--health-interval", "10s", "--health-timeout", "3s", "--health-failures", "5",
		"--health-grace", "10m", "--drain-timeout", "1m", "--drain-delay", "5s", "--progress-deadline", "20m", "--unhealthy-timeout", "2m", "--public",
		"--gpus", "1", "--gpu-model", "H100", "--gpu-mem", "80G", "--cpus", "8", "--mem", "64G", "--priority", "50",
		"--env", "MODEL=/models/llama", "--secret-env", "HF_TOKEN=hf_x", "--constraint", "zone=a", "--preemptible",
		"--preempt-grace", "45s", "--image", "vllm/vllm-openai:v0.6", "--image-pull", "always", "--mount", "/models:/models:ro",
		"--shm-size", "16G", "--spread", "--workdir", "/srv",
		"--", "--model", "/models/llama", "--port", "$HTTP_PORT")
	if r.code != exitOK {
		t.Fatalf("exit code %d: %s", r.code, r.stderr)
	}
	reqs := served(t, f)
	if len(reqs) != 1 {
		t.Fatalf("got %d create requests, want 1", len(reqs))
	}
	want := api.ServiceCreateRequest{
		Name: "llama", Replicas: 3,
		Spec: structs.ServiceSpec{
			Job: structs.JobSpec{
				Name: "llama", Command: []string{"--model", "/models/llama", "--port", "$HTTP_PORT"},
				Env: map[string]string{"MODEL": "/models/llama"}, SecretEnv: map[string]string{"HF_TOKEN": "hf_x"},
				Workdir: "/srv", Nodes: 1, GPUs: 1, GPUModel: "H100", GPUMemoryMinMiB: 80 << 10, CPUs: 8, MemoryMiB: 64 << 10,
				Priority: 50, Constraints: map[string]string{"zone": "a"}, Spread: true, Preemptible: true,
				PreemptGrace: structs.Duration(45 * time.Second), Image: "vllm/vllm-openai:v0.6", ImagePull: structs.PullAlways,
				Mounts: []structs.Mount{{Source: "/models", Target: "/models", ReadOnly: true}}, ShmSizeMiB: 16 << 10,
			},
			PortEnv: "HTTP_PORT",
			Health: &structs.HealthCheck{Kind: structs.HealthHTTP, Path: "/health", Interval: structs.Duration(10 * time.Second),
				Timeout: structs.Duration(3 * time.Second), Failures: 5, Grace: structs.Duration(10 * time.Minute)},
			DrainTimeout:     structs.Duration(time.Minute),
			DrainDelay:       structs.Duration(5 * time.Second),
			ProgressDeadline: structs.Duration(20 * time.Minute),
			UnhealthyTimeout: structs.Duration(2 * time.Minute),
			Public:           true,
		},
	}
	if !reflect.DeepEqual(reqs[0], want) {
		t.Errorf("request = %+v\nwant %+v", reqs[0], want)
	}
}

func TestServe_DefaultsAreFilledIn(t *testing.T) {
	f := newFakeAgent(t)
	acceptServe(f)
	if r := runCLI(t, "--addr", f.URL, "serve", "--name", "web", "--health", "tcp", "--image", "nginx", "--", "nginx"); r.code != exitOK {
		t.Fatalf("exit code %d: %s", r.code, r.stderr)
	}
	req := served(t, f)[0]
	if req.Replicas != 1 || req.Spec.PortEnv != structs.DefaultPortEnv || req.Spec.Job.Nodes != 1 || req.Spec.Job.Workdir != "" ||
		!reflect.DeepEqual(req.Spec.Health, &structs.HealthCheck{Kind: structs.HealthTCP}) {
		t.Errorf("request = %+v, want 1 replica, port env PORT, one node, the image's workdir, a bare tcp check", req)
	}
}

func TestParseHealth_ReadsWhatStringWrites(t *testing.T) {
	for _, in := range []string{"http:/health", "http:/v1/models?ready=1", "tcp", "exec:curl -fsS localhost:8000/health"} {
		h, err := parseHealth(in)
		if err != nil || h.String() != in {
			t.Errorf("parseHealth(%q) = %+v, %v; want it to read back as %q", in, h, err, in)
		}
	}
	if h, _ := parseHealth("exec:pgrep  -f  vllm"); !reflect.DeepEqual(h.Command, []string{"pgrep", "-f", "vllm"}) {
		t.Errorf("exec command = %q, want it split at spaces", h.Command)
	}
	for _, bad := range []string{"", "http", "tcp:8000", "exec", "grpc:/health", "HTTP:/health"} {
		if h, err := parseHealth(bad); err == nil {
			t.Errorf("parseHealth(%q) = %+v, want an error", bad, h)
		}
	}
}

func TestServe_BadValuesAreRefusedBeforeSending(t *testing.T) {
	cases := []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"no name", []string{"true"}, exitUsage, "Error: missing --name: a service is reached by its name"},
		{"no command", []string{"--name", "web"}, exitUsage, "missing command"},
		{"health that does not parse", []string{"--name", "web", "--health", "grpc", "true"}, exitUsage,
			`Error: --health: invalid health check "grpc": want http:/PATH, tcp or exec:CMD`},
		{"health timing without a check", []string{"--name", "web", "--health-grace", "10m", "true"}, exitUsage,
			"Error: --health-grace: set, but the service has no health check (--health)"},
		{"health interval that does not parse", []string{"--name", "web", "--health", "tcp", "--health-interval", "often", "true"}, exitUsage,
			`Error: --health-interval: invalid duration "often"`},
		{"a time limit", []string{"--name", "web", "--time-limit", "1h", "true"}, exitUsage, "flag provided but not defined: -time-limit"},
		{"several nodes", []string{"--name", "web", "--nodes", "2", "true"}, exitUsage, "flag provided but not defined: -nodes"},
		{"bad name", []string{"--name", "Web_1", "true"}, exitError, `Error: --name: "Web_1": want lower-case letters, digits and '-', starting with a letter`},
		{"too many replicas", []string{"--name", "web", "--replicas", "1001", "true"}, exitError, "Error: --replicas: 1001 is out of range 0..1000"},
		{"reserved port env", []string{"--name", "web", "--port-env", "MASTER_PORT", "true"}, exitError, "Error: --port-env: MASTER_PORT is set by skein"},
		{"port env set by --env", []string{"--name", "web", "--env", "PORT=80", "true"}, exitError, "Error: --env: PORT is the replica's port (port_env)"},
		{"health path without a slash", []string{"--name", "web", "--health", "http:health", "true"}, exitError,
			`Error: --health: "health": want a path starting with '/'`},
		{"health timeout past the interval", []string{"--name", "web", "--health", "tcp", "--health-interval", "1s", "--health-timeout", "2s", "true"}, exitError,
			"Error: --health-timeout: 2s is longer than the interval 1s"},
		{"gpus out of range", []string{"--name", "web", "--gpus", "65", "true"}, exitError, "Error: --gpus: 65 is out of range 0..64"},
		{"mount without image", []string{"--name", "web", "--mount", "/data:/data", "true"}, exitError, "Error: --mount: set, but the job has no image"},
		{"drain timeout too long", []string{"--name", "web", "--drain-timeout", "2h", "true"}, exitError, "Error: --drain-timeout: 2h0m0s is out of range"},
		{"progress deadline too long", []string{"--name", "web", "--progress-deadline", "49h", "true"}, exitError,
			"Error: --progress-deadline: 49h0m0s is out of range 0s..48h0m0s (0: the default, 10m0s)"},
		{"progress deadline that does not parse", []string{"--name", "web", "--progress-deadline", "-1m", "true"}, exitUsage, "Error: --progress-deadline:"},
		{"unhealthy timeout too long", []string{"--name", "web", "--unhealthy-timeout", "25h", "true"}, exitError,
			"Error: --unhealthy-timeout: 25h0m0s is out of range 0s..24h0m0s (0: the default, 30s)"},
		{"drain delay too long", []string{"--name", "web", "--drain-delay", "11m", "true"}, exitError, "Error: --drain-delay: 11m0s is out of range 0s..10m0s"},
		{"drain delay that does not parse", []string{"--name", "web", "--drain-delay", "soon", "true"}, exitUsage, `Error: --drain-delay: invalid duration "soon"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeAgent(t)
			acceptServe(f)
			r := runCLI(t, append([]string{"--addr", f.URL, "serve"}, tc.args...)...)
			if r.code != tc.code || !strings.Contains(r.stderr, tc.stderr) {
				t.Fatalf("got code %d, stderr %q; want %d and %q", r.code, r.stderr, tc.code, tc.stderr)
			}
			if n := len(f.requests()); n != 0 {
				t.Errorf("agent got %d requests, want none", n)
			}
		})
	}
}

func TestServe_FileOfKindServiceGivesTheRequestOfTheSameFlags(t *testing.T) {
	file := `
kind: service
name: llama
replicas: 2
port_env: HTTP_PORT
health: "exec:curl -fsS localhost:8000/health"
health_interval: 10s
health_timeout: 3s
health_failures: 5
health_grace: 10m
drain_timeout: 1m
progress_deadline: 20m
unhealthy_timeout: 2m
drain_delay: 5s
public: true
autoscale: 2-6
target: gauge:vllm:num_requests_waiting=5
scale_up_window: 30s
scale_down_window: 10m
scale_tolerance: 0.2
command: [vllm, serve]
gpus: 1
image: vllm/vllm-openai:v0.6
env: {MODEL: /models/llama}
`
	flags := []string{"--name", "llama", "--replicas", "2", "--port-env", "HTTP_PORT", "--health", "exec:curl -fsS localhost:8000/health",
		"--health-interval", "10s", "--health-timeout", "3s", "--health-failures", "5", "--health-grace", "10m",
		"--drain-timeout", "1m", "--drain-delay", "5s", "--progress-deadline", "20m", "--unhealthy-timeout", "2m", "--public", "--autoscale", "2-6", "--target", "gauge:vllm:num_requests_waiting=5",
		"--scale-up-window", "30s", "--scale-down-window", "10m", "--scale-tolerance", "0.2", "--gpus", "1", "--image", "vllm/vllm-openai:v0.6", "--env", "MODEL=/models/llama",
		"--", "vllm", "serve"}
	// The file must say every key a service file adds to a job's: a key
	// added to serviceKeys belongs in this test.
	for _, k := range yamlKeys[serviceKeys]() {
		if !strings.Contains(file, "\n"+k+": ") {
			t.Errorf("the service file of this test lacks the key %q", k)
		}
	}
	path := filepath.Join(t.TempDir(), "llama.yaml")
	writeTestFile(t, path, file)
	f := newFakeAgent(t)
	acceptServe(f)
	for _, args := range [][]string{{"-f", path}, flags} {
		if r := runCLI(t, append([]string{"--addr", f.URL, "serve"}, args...)...); r.code != exitOK {
			t.Fatalf("serve %q: exit code %d: %s", args, r.code, r.stderr)
		}
	}
	reqs := served(t, f)
	if len(reqs) != 2 {
		t.Fatalf("got %d create requests, want 2", len(reqs))
	}
	if !reflect.DeepEqual(reqs[0], reqs[1]) {
		t.Fatalf("the file gave\n%+v\nthe flags gave\n%+v", reqs[0], reqs[1])
	}
	if h := reqs[0].Spec.Health; h == nil || h.Failures != 5 || len(h.Command) != 3 || !reqs[0].Spec.Public {
		t.Fatalf("the file's health check and public did not arrive: %+v", reqs[0].Spec)
	}
	if a := reqs[0].Autoscale; a == nil || a.Max != 6 || a.Tolerance != 0.2 || a.DownWindow != structs.Duration(10*time.Minute) {
		t.Fatalf("the file's autoscale did not arrive: %+v", a)
	}
	if sp := reqs[0].Spec; sp.ProgressDeadline != structs.Duration(20*time.Minute) || sp.UnhealthyTimeout != structs.Duration(2*time.Minute) {
		t.Fatalf("the file's progress deadline and unhealthy timeout did not arrive: %+v", sp)
	}
}

func TestServe_FlagsOverrideTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "web.yaml")
	writeTestFile(t, path, "kind: service\nname: web\nreplicas: 4\nhealth: tcp\nhealth_grace: 5m\ncommand: [nginx]\nimage: nginx\n")
	f := newFakeAgent(t)
	acceptServe(f)
	r := runCLI(t, "--addr", f.URL, "serve", "-f", path, "--name", "web2", "--replicas", "0", "--health", "http:/ready")
	if r.code != exitOK {
		t.Fatalf("exit code %d: %s", r.code, r.stderr)
	}
	req := served(t, f)[0]
	wantHealth := &structs.HealthCheck{Kind: structs.HealthHTTP, Path: "/ready", Grace: structs.Duration(5 * time.Minute)}
	if req.Name != "web2" || req.Spec.Job.Name != "web2" || req.Replicas != 0 || !reflect.DeepEqual(req.Spec.Health, wantHealth) {
		t.Errorf("request = %+v, health %+v; want web2, 0 replicas, the flag's check with the file's grace", req, req.Spec.Health)
	}
}

func TestJobFile_KindsKeepJobsAndServicesApart(t *testing.T) {
	cases := []struct {
		name, cmd, yaml, want string
	}{
		{"a service file to submit", "submit", "kind: service\nname: web\ncommand: [x]\n", "f.yaml: kind: service: a service file runs with skein serve -f"},
		{"a service key in a job file", "submit", "command: [x]\nreplicas: 2\n", "f.yaml: line 2: replicas: only a file of kind: service takes it (skein serve -f)"},
		{"a job file to serve", "serve", "name: web\ncommand: [x]\n", "f.yaml: not a service file: it says kind: service (a job file runs with skein submit -f"},
		{"a job file of kind job to serve", "serve", "kind: job\nname: web\ncommand: [x]\n", "f.yaml: not a service file"},
		{"an unknown kind", "submit", "command: [x]\nkind: daemon\n", `f.yaml: line 2: kind: "daemon": want job (the default) or service`},
		{"a time limit in a service file", "serve", "kind: service\nname: web\ncommand: [x]\ntime_limit: 1h\n",
			"f.yaml: line 4: time_limit: not a key of a service file: a replica runs until it is stopped"},
		{"nodes in a service file", "serve", "kind: service\nname: web\ncommand: [x]\nnodes: 2\n", "f.yaml: line 4: nodes: not a key of a service file"},
		{"a health check that does not parse", "serve", "kind: service\nname: web\ncommand: [x]\nhealth: udp\n",
			`f.yaml: line 4: health: invalid health check "udp": want http:/PATH, tcp or exec:CMD`},
		{"a health check as a map", "serve", "kind: service\nname: web\ncommand: [x]\nhealth: {kind: tcp}\n", "f.yaml: line 4: health: want one value written as --health takes it, not a list or map"},
		{"health timing without a check", "serve", "kind: service\nname: web\ncommand: [x]\nhealth_failures: 2\n",
			"f.yaml: line 4: health_failures: set, but the service has no health check (health)"},
		{"replicas that are not a number", "serve", "kind: service\nname: web\ncommand: [x]\nreplicas: many\n", "f.yaml: line 4: cannot unmarshal !!str `many` into int"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "f.yaml")
			writeTestFile(t, path, tc.yaml)
			r := runCLI(t, "--addr", "http://127.0.0.1:1", tc.cmd, "-f", path)
			if r.code != exitError || !strings.Contains(r.stderr, tc.want) {
				t.Fatalf("exit %d, stderr %q; want 1 and %q", r.code, r.stderr, tc.want)
			}
		})
	}
}

func TestServe_ServerRefusalIsShown(t *testing.T) {
	f := newFakeAgent(t)
	f.fail("POST /v1/services", http.StatusBadRequest, "no node has 8 GPUs; largest has 4")
	r := runCLI(t, "--addr", f.URL, "serve", "--name", "web", "--gpus", "8", "true")
	if r.code != exitError || r.stderr != "Error: no node has 8 GPUs; largest has 4\n" {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
}

func TestServe_JSONHidesSecretValues(t *testing.T) {
	f := newFakeAgent(t)
	acceptServe(f)
	r := runCLI(t, "--addr", f.URL, "serve", "--json", "--name", "web", "--secret-env", "TOKEN=s3cret", "true")
	if r.code != exitOK || strings.Contains(r.stdout, "s3cret") {
		t.Fatalf("exit %d, stdout %s", r.code, r.stdout)
	}
	var d api.ServiceDetail
	mustDecode(t, r.stdout, &d)
	if d.Service.Spec.Job.SecretEnv["TOKEN"] != api.HiddenValue {
		t.Fatalf("secret env %v, want it hidden", d.Service.Spec.Job.SecretEnv)
	}
}
