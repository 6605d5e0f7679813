package cli

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

const testJobID = "abcdef0123456789abcdef0123456789"

// acceptSubmit registers a POST /v1/jobs handler that creates a queued job
// from the request.
func acceptSubmit(f *fakeAgent) {
	f.handle("POST /v1/jobs", func(w http.ResponseWriter, r *http.Request) {
		var req api.SubmitRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			writeJSON(w, http.StatusBadRequest, api.ErrorBody{Error: err.Error()})
			return
		}
		writeJSON(w, http.StatusCreated, structs.Job{
			ID: testJobID, RequestID: req.RequestID, Spec: req.Spec,
			State: structs.JobQueued, SubmittedAt: time.Now(),
		})
	})
}

// submitted decodes the submit requests the agent received.
func submitted(t *testing.T, f *fakeAgent) []api.SubmitRequest {
	t.Helper()
	var out []api.SubmitRequest
	for _, r := range f.requests() {
		if r.Method != http.MethodPost || r.Path != "/v1/jobs" {
			continue
		}
		var req api.SubmitRequest
		if err := json.Unmarshal(r.Body, &req); err != nil {
			t.Fatalf("decode submit body: %v", err)
		}
		out = append(out, req)
	}
	return out
}

func TestSubmit_BuildsSpecFromEveryFlag(t *testing.T) {
	f := newFakeAgent(t)
	acceptSubmit(f)
	r := runCLI(t, "--addr", f.URL, "submit",
		"--name", "train", "--gpus", "4", "--nodes", "2", "--gpu-model", "H100",
		"--gpu-mem", "80G", "--cpus", "16", "--mem", "1.5T", "--priority", "-7",
		"--restarts", "3", "--time-limit", "90m", "--signal", "sigusr1@2m", "--env", "A=1", "--env", "B=x,y=z ",
		"--constraint", "rack=r1", "--constraint", "zone=a,b", "--workdir", "/data/run",
		"--request-id", "req-1", "--spread", "--after", "abc123", "--after", "def456:any",
		"--", "python", "train.py", "--lr", "3")
	if r.code != exitOK {
		t.Fatalf("exit code %d: %s", r.code, r.stderr)
	}
	if r.stdout != testJobID+"\n" {
		t.Errorf("stdout = %q, want the full job ID on its own line", r.stdout)
	}
	reqs := submitted(t, f)
	if len(reqs) != 1 {
		t.Fatalf("got %d submit requests, want 1", len(reqs))
	}
	want := structs.JobSpec{
		Name:            "train",
		Command:         []string{"python", "train.py", "--lr", "3"},
		Env:             map[string]string{"A": "1", "B": "x,y=z "},
		Workdir:         "/data/run",
		Nodes:           2,
		GPUs:            4,
		GPUModel:        "H100",
		GPUMemoryMinMiB: 80 * 1024,
		CPUs:            16,
		MemoryMiB:       3 * 1024 * 1024 / 2,
		Priority:        -7,
		Restarts:        3,
		TimeLimit:       structs.Duration(90 * time.Minute),
		Signal:          &structs.TimeSignal{Name: "USR1", Before: structs.Duration(2 * time.Minute)},
		Constraints:     map[string]string{"rack": "r1", "zone": "a,b"},
		Spread:          true,
		After:           []structs.Dependency{{JobID: "abc123", Condition: "ok"}, {JobID: "def456", Condition: "any"}},
	}
	if got := reqs[0].Spec; !reflect.DeepEqual(got, want) {
		t.Errorf("spec = %+v\nwant %+v", got, want)
	}
	if reqs[0].RequestID != "req-1" {
		t.Errorf("request ID = %q, want req-1", reqs[0].RequestID)
	}
}

func TestSubmit_ImageFlagsDescribeTheContainer(t *testing.T) {
	f := newFakeAgent(t)
	acceptSubmit(f)
	r := runCLI(t, "--addr", f.URL, "submit", "--image", "nvcr.io/nvidia/pytorch:24.01-py3", "--gpus", "8",
		"--mount", "/data:/data:ro", "--mount", "/scratch/alice:/scratch", "--shm-size", "64G", "--image-pull", "always",
		"--allow-cap", "net_bind_service", "--allow-cap", "CAP_NET_RAW", "--", "python", "train.py")
	if r.code != exitOK {
		t.Fatalf("exit code %d: %s", r.code, r.stderr)
	}
	want := structs.JobSpec{
		Command: []string{"python", "train.py"}, Nodes: 1, GPUs: 8,
		Image: "nvcr.io/nvidia/pytorch:24.01-py3", ImagePull: structs.PullAlways, ShmSizeMiB: 64 << 10,
		Mounts: []structs.Mount{{Source: "/data", Target: "/data", ReadOnly: true}, {Source: "/scratch/alice", Target: "/scratch"}},
		Caps:   []string{"NET_BIND_SERVICE", "NET_RAW"},
	}
	// No Workdir: the container starts in its image's, not in a path of
	// the submitting machine.
	if got := submitted(t, f)[0].Spec; !reflect.DeepEqual(got, want) {
		t.Errorf("spec = %+v\nwant %+v", got, want)
	}
}

func TestSubmit_FileMountsAndMountFlagsAddUp(t *testing.T) {
	f := newFakeAgent(t)
	acceptSubmit(f)
	path := filepath.Join(t.TempDir(), "job.yaml")
	writeTestFile(t, path, "image: busybox\nmounts: [\"/data:/data:ro\"]\nshm_size: 1G\ncommand: [true]\n")
	r := runCLI(t, "--addr", f.URL, "submit", "--file", path, "--mount", "/models:/models:ro", "--image", "busybox:1.36")
	if r.code != exitOK {
		t.Fatalf("exit code %d: %s", r.code, r.stderr)
	}
	got := submitted(t, f)[0].Spec
	want := []structs.Mount{{Source: "/data", Target: "/data", ReadOnly: true}, {Source: "/models", Target: "/models", ReadOnly: true}}
	if !reflect.DeepEqual(got.Mounts, want) || got.Image != "busybox:1.36" || got.ShmSizeMiB != 1024 {
		t.Errorf("image %q, mounts %+v, shm %d; want busybox:1.36, %+v, 1024", got.Image, got.Mounts, got.ShmSizeMiB, want)
	}
}

func TestSubmit_WaitPrintsPullProgressThenTheEnd(t *testing.T) {
	f := newFakeAgent(t)
	acceptSubmit(f)
	const gib = 1 << 30
	pulls := []*structs.PullProgress{
		{Image: "pytorch:24.01", Bytes: 300 << 20},            // the total not known yet
		{Image: "pytorch:24.01", Bytes: gib, Total: 10 * gib}, // 10%
		{Image: "pytorch:24.01", Bytes: gib + 1, Total: 10 * gib},
		{Image: "pytorch:24.01", Bytes: 5 * gib, Total: 10 * gib}, // 50%
		nil,
	}
	var polls atomic.Int32
	f.handle("GET /v1/jobs/{id}", func(w http.ResponseWriter, r *http.Request) {
		n := int(polls.Add(1)) - 1
		d := api.JobDetail{Job: structs.Job{ID: r.PathValue("id"), State: structs.JobRunning, Spec: structs.JobSpec{Nodes: 1}, Attempts: 1},
			Nodes: map[string]string{"node-1": "gpu-01"}}
		a := structs.Allocation{ID: "alloc-1", NodeID: "node-1", State: structs.AllocPending, Attempt: 1}
		switch {
		case n < len(pulls)-1:
			a.Pull = pulls[n]
		case n == len(pulls)-1:
			a.State = structs.AllocRunning
		default:
			a.State, d.Job.State = structs.AllocSucceeded, structs.JobSucceeded
		}
		d.Allocations = []structs.Allocation{a}
		writeJSON(w, http.StatusOK, d)
	})
	r := runCLI(t, "--addr", f.URL, "submit", "--wait", "--image", "pytorch:24.01", "true")
	lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
	if r.code != exitOK || len(lines) < 5 {
		t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
	for i, want := range []string{
		"job abcdef01 running on gpu-01 (attempt 1)",
		"job abcdef01 on gpu-01: pulling pytorch:24.01 (300 MiB so far)",
		"job abcdef01 on gpu-01: pulling pytorch:24.01 10% (1 GiB of 10 GiB)",
	} {
		if lines[i] != want {
			t.Errorf("line %d = %q, want %q", i+1, lines[i], want)
		}
	}
	// The pull that moved on by a byte is only said if the poll after
	// it came pullEvery later, which a slow machine may take.
	if last := lines[len(lines)-2:]; last[0] != "job abcdef01 on gpu-01: pulling pytorch:24.01 50% (5 GiB of 10 GiB)" ||
		last[1] != "job abcdef01 succeeded" {
		t.Errorf("last lines %q, want the 50%% line, then the end", last)
	}
}

func TestPullReporter_SaysEachStepOrAfterAWhile(t *testing.T) {
	var b strings.Builder
	rep := newPullReporter(&b)
	t0 := time.Unix(1e9, 0)
	detail := func(bytes, total int64) *api.JobDetail {
		return &api.JobDetail{
			Job: structs.Job{ID: testJobID, Spec: structs.JobSpec{Nodes: 2}},
			Allocations: []structs.Allocation{
				{ID: "a0", NodeID: "fedcba9876543210fedcba9876543210", Rank: 0, State: structs.AllocPending,
					Pull: &structs.PullProgress{Image: "img", Bytes: bytes, Total: total}},
				{ID: "a1", NodeID: "node-1", Rank: 1, State: structs.AllocRunning},
			},
			Nodes: map[string]string{"node-1": "gpu-02"},
		}
	}
	steps := []struct {
		at           time.Duration
		bytes, total int64
		said         bool
	}{
		{0, 10, 0, true},                      // the first report
		{time.Second, 20, 0, false},           // no total, too soon
		{6 * time.Second, 30, 0, true},        // no total, a while later
		{7 * time.Second, 30, 1000, true},     // the total came: 3%
		{8 * time.Second, 70, 1000, false},    // 7%: less than a step
		{9 * time.Second, 80, 1000, true},     // 8%: a step
		{30 * time.Second, 80, 1000, false},   // no progress, however long
		{31 * time.Second, 81, 1000, true},    // a while later, any progress
		{32 * time.Second, 1000, 1000, true},  // done
		{33 * time.Second, 5000, 1000, false}, // odd bytes past the total stay at 100%
	}
	for i, s := range steps {
		b.Reset()
		rep.report(detail(s.bytes, s.total), t0.Add(s.at))
		if said := b.Len() > 0; said != s.said {
			t.Errorf("step %d (%d of %d at %s): said %q, want a line: %v", i, s.bytes, s.total, s.at, b.String(), s.said)
		}
	}
	b.Reset()
	rep = newPullReporter(&b)
	rep.report(detail(550, 1000), t0)
	if want := "job abcdef01 rank 0 on fedcba98: pulling img 55% (550 B of 1000 B)\n"; b.String() != want {
		t.Errorf("line %q, want %q", b.String(), want)
	}
}

func TestSubmit_ArgumentsAfterCommandBelongToTheJob(t *testing.T) {
	cases := []struct {
		name    string
		args    []string
		gpus    int
		command []string
	}{
		{"without separator", []string{"--gpus", "2", "python", "train.py", "--lr", "3"}, 2, []string{"python", "train.py", "--lr", "3"}},
		{"with separator", []string{"--gpus", "2", "--", "python", "train.py", "--lr", "3"}, 2, []string{"python", "train.py", "--lr", "3"}},
		{"command starting with a dash", []string{"--", "-weird", "--gpus", "9"}, 0, []string{"-weird", "--gpus", "9"}},
		{"command named help", []string{"help", "me"}, 0, []string{"help", "me"}},
		{"command named like a flag", []string{"--", "gpus"}, 0, []string{"gpus"}},
		{"help flag of the command", []string{"ls", "--help"}, 0, []string{"ls", "--help"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeAgent(t)
			acceptSubmit(f)
			r := runCLI(t, append([]string{"--addr", f.URL, "submit"}, tc.args...)...)
			if r.code != exitOK {
				t.Fatalf("exit code %d: %s%s", r.code, r.stdout, r.stderr)
			}
			reqs := submitted(t, f)
			if len(reqs) != 1 {
				t.Fatalf("got %d submit requests, want 1", len(reqs))
			}
			if got := reqs[0].Spec; got.GPUs != tc.gpus || !reflect.DeepEqual(got.Command, tc.command) {
				t.Errorf("gpus %d command %q, want gpus %d command %q", got.GPUs, got.Command, tc.gpus, tc.command)
			}
		})
	}
}

func TestSubmit_DefaultsAreFilledIn(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	f := newFakeAgent(t)
	acceptSubmit(f)
	if r := runCLI(t, "--addr", f.URL, "submit", "true"); r.code != exitOK {
		t.Fatalf("exit code %d: %s", r.code, r.stderr)
	}
	req := submitted(t, f)[0]
	if req.Spec.Workdir != wd {
		t.Errorf("workdir = %q, want the current directory %q", req.Spec.Workdir, wd)
	}
	if req.Spec.Nodes != 1 {
		t.Errorf("nodes = %d, want 1", req.Spec.Nodes)
	}
	if len(req.RequestID) != 32 {
		t.Errorf("request ID = %q, want a generated 32-character ID", req.RequestID)
	}
}

func TestSubmit_EnvNameAloneCopiesCallerValue(t *testing.T) {
	t.Setenv("CLI_TEST_PASSED", "from caller")
	f := newFakeAgent(t)
	acceptSubmit(f)
	if r := runCLI(t, "--addr", f.URL, "submit", "--env", "CLI_TEST_PASSED", "--env", "EMPTY=", "env"); r.code != exitOK {
		t.Fatalf("exit code %d: %s", r.code, r.stderr)
	}
	want := map[string]string{"CLI_TEST_PASSED": "from caller", "EMPTY": ""}
	if got := submitted(t, f)[0].Spec.Env; !reflect.DeepEqual(got, want) {
		t.Errorf("env = %v, want %v", got, want)
	}
}

func TestSubmit_SecretEnvTakesValuesOrCopiesTheCallers(t *testing.T) {
	t.Setenv("CLI_TEST_SECRET", "s3cret")
	f := newFakeAgent(t)
	acceptSubmit(f)
	if r := runCLI(t, "--addr", f.URL, "submit", "--secret-env", "CLI_TEST_SECRET", "--secret-env", "B=x=y", "--env", "A=1", "env"); r.code != exitOK {
		t.Fatalf("exit code %d: %s", r.code, r.stderr)
	}
	spec := submitted(t, f)[0].Spec
	if want := map[string]string{"CLI_TEST_SECRET": "s3cret", "B": "x=y"}; !reflect.DeepEqual(spec.SecretEnv, want) {
		t.Errorf("secret_env = %v, want %v", spec.SecretEnv, want)
	}
	if want := map[string]string{"A": "1"}; !reflect.DeepEqual(spec.Env, want) {
		t.Errorf("env = %v, want %v", spec.Env, want)
	}
}

func TestSubmit_SecretEnvNameUnsetInCallerIsError(t *testing.T) {
	f := newFakeAgent(t)
	acceptSubmit(f)
	r := runCLI(t, "--addr", f.URL, "submit", "--secret-env", "CLI_TEST_SURELY_UNSET_VAR", "env")
	if r.code != exitError || !strings.Contains(r.stderr, "Error: --secret-env CLI_TEST_SURELY_UNSET_VAR: not set in your environment; give a value with --secret-env CLI_TEST_SURELY_UNSET_VAR=VALUE") {
		t.Fatalf("got code %d, stderr %q; want 1 naming the flag and the variable", r.code, r.stderr)
	}
	if n := len(f.requests()); n != 0 {
		t.Errorf("agent got %d requests, want none", n)
	}
}

func TestSubmit_FileSecretEnvAndFlagsAddToIt(t *testing.T) {
	f := newFakeAgent(t)
	acceptSubmit(f)
	path := filepath.Join(t.TempDir(), "job.yaml")
	writeTestFile(t, path, "command: [train]\nsecret_env: {A: from-file, B: from-file}\n")
	if r := runCLI(t, "--addr", f.URL, "submit", "--file", path, "--secret-env", "B=from-flag", "--secret-env", "C=from-flag"); r.code != exitOK {
		t.Fatalf("exit code %d: %s", r.code, r.stderr)
	}
	want := map[string]string{"A": "from-file", "B": "from-flag", "C": "from-flag"}
	if got := submitted(t, f)[0].Spec.SecretEnv; !reflect.DeepEqual(got, want) {
		t.Errorf("secret_env = %v, want %v", got, want)
	}
}

func TestSubmit_FileSecretEnvErrorsNeverQuoteTheValue(t *testing.T) {
	cases := []struct{ name, yaml, want string }{
		{"a scalar", "command: [x]\nsecret_env: hf_abcdefgh\n", "job.yaml: line 2: secret_env: want a map of NAME: VALUE"},
		{"a list", "command: [x]\nsecret_env: [hf_abcdefgh]\n", "job.yaml: line 2: secret_env: want a map of NAME: VALUE"},
		{"a list as a value", "command: [x]\nsecret_env:\n  TOKEN: [hf_abcdefgh]\n", "job.yaml: line 3: secret_env: TOKEN: want a plain value, not a list or map"},
		{"an alias of a scalar", "command: [x]\nname: &t hf_abcdefgh\nsecret_env: *t\n", "job.yaml: line 3: secret_env: want a map of NAME: VALUE"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "job.yaml")
			writeTestFile(t, path, tc.yaml)
			r := runCLI(t, "--addr", "http://127.0.0.1:1", "submit", "--file", path)
			if r.code != exitError || !strings.Contains(r.stderr, tc.want) || strings.Contains(r.stderr, "hf_") {
				t.Fatalf("exit %d, stderr %q; want 1 and %q, without the value", r.code, r.stderr, tc.want)
			}
		})
	}
	// Empty, or made through an alias of a map, it is fine.
	f := newFakeAgent(t)
	acceptSubmit(f)
	for _, file := range []string{
		"command: [x]\nsecret_env:\n",
		"command: [x]\nconstraints: &m {TOKEN: hf_1}\nsecret_env: *m\n",
	} {
		path := filepath.Join(t.TempDir(), "job.yaml")
		writeTestFile(t, path, file)
		if r := runCLI(t, "--addr", f.URL, "submit", "--file", path); r.code != exitOK {
			t.Errorf("%q: exit %d: %s", file, r.code, r.stderr)
		}
	}
	if reqs := submitted(t, f); len(reqs) != 2 || reqs[0].Spec.SecretEnv != nil || reqs[1].Spec.SecretEnv["TOKEN"] != "hf_1" {
		t.Errorf("submitted %+v", reqs)
	}
}

func TestSubmit_JSONHidesSecretValues(t *testing.T) {
	f := newFakeAgent(t)
	acceptSubmit(f) // echoes the spec, secret values included
	r := runCLI(t, "--addr", f.URL, "submit", "--json", "--secret-env", "TOKEN=t0ps3cret", "true")
	var job structs.Job
	mustDecode(t, r.stdout, &job)
	if r.code != exitOK || job.Spec.SecretEnv["TOKEN"] != api.HiddenValue || strings.Contains(r.stdout+r.stderr, "t0ps3cret") {
		t.Fatalf("exit %d, output shows the secret or not its name:\n%s%s", r.code, r.stdout, r.stderr)
	}
}

func TestSubmit_EnvNameUnsetInCallerIsError(t *testing.T) {
	f := newFakeAgent(t)
	acceptSubmit(f)
	r := runCLI(t, "--addr", f.URL, "submit", "--env", "CLI_TEST_SURELY_UNSET_VAR", "env")
	if r.code != exitError || !strings.Contains(r.stderr, "--env CLI_TEST_SURELY_UNSET_VAR: not set") {
		t.Fatalf("got code %d, stderr %q; want 1 naming the variable", r.code, r.stderr)
	}
	if n := len(f.requests()); n != 0 {
		t.Errorf("agent got %d requests, want none", n)
	}
}

func TestSubmit_BadValuesAreRejectedBeforeSending(t *testing.T) {
	cases := []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"empty command", nil, exitUsage, "missing command"},
		{"empty command after separator", []string{"--"}, exitUsage, "missing command"},
		{"size that does not parse", []string{"--mem", "12Q", "true"}, exitUsage, `Error: --mem: invalid size "12Q": use a number with an optional unit, like 512M or 80G`},
		{"no memory", []string{"--mem", "0", "true"}, exitUsage, `Error: --mem 0: below the minimum 1M (leave --mem out for no limit of the job's own)`},
		{"pids max below the minimum", []string{"--pids-max", "3", "true"}, exitError, "Error: --pids-max: 3 is out of range 8..4194304"},
		{"gpu size that does not parse", []string{"--gpus", "1", "--gpu-mem", "lots", "true"}, exitUsage, `Error: --gpu-mem: invalid size "lots"`},
		{"duration that does not parse", []string{"--time-limit", "soon", "true"}, exitUsage, `Error: --time-limit: invalid duration "soon"`},
		{"number that does not parse", []string{"--gpus", "two", "true"}, exitUsage, `invalid value "two" for flag -gpus`},
		{"unknown signal", []string{"--time-limit", "1h", "--signal", "KILL", "true"}, exitUsage, `Error: --signal: invalid signal "KILL": want one of HUP, INT`},
		{"signal without time limit", []string{"--signal", "USR1@30s", "true"}, exitError, "Error: --signal: is sent before the time limit, but time_limit is not set"},
		{"signal after the limit", []string{"--time-limit", "1m", "--signal", "USR1@5m", "true"}, exitError, "Error: --signal: 5m0s before the limit: must be less than time_limit 1m0s"},
		{"unknown flag", []string{"--gpu", "2", "true"}, exitUsage, "flag provided but not defined: -gpu"},
		{"constraint without value", []string{"--constraint", "rack", "true"}, exitUsage, `--constraint "rack": want KEY=VALUE`},
		{"singleton without a name", []string{"--singleton", "true"}, exitError, "Error: --singleton: set, but the job has no name"},
		{"after with an odd condition", []string{"--after", "abc:maybe", "true"}, exitUsage, `Error: --after: invalid dependency "abc:maybe": want JOB_ID, JOB_ID:ok, JOB_ID:any or JOB_ID:notok`},
		{"gpus out of range", []string{"--gpus", "65", "true"}, exitError, "Error: --gpus: 65 is out of range 0..64"},
		{"priority out of range", []string{"--priority", "5000", "true"}, exitError, "Error: --priority: 5000 is out of range"},
		{"nodes out of range", []string{"--nodes", "5000", "true"}, exitError, "Error: --nodes: 5000 is out of range"},
		{"gpu model without gpus", []string{"--gpu-model", "H100", "true"}, exitError, "Error: --gpus: 0, but a GPU model"},
		{"reserved env", []string{"--env", "CUDA_VISIBLE_DEVICES=0", "true"}, exitError, "Error: --env: CUDA_VISIBLE_DEVICES is set by skein"},
		{"reserved secret env", []string{"--secret-env", "SKEIN_RANK=0", "true"}, exitError, "Error: --secret-env: SKEIN_RANK is set by skein"},
		{"bad secret env name", []string{"--secret-env", "1X=0", "true"}, exitError, `Error: --secret-env: invalid variable name "1X"`},
		{"secret env also in env", []string{"--env", "K=1", "--secret-env", "K=2", "true"}, exitError, "Error: --secret-env: K is in env too; give it once"},
		{"empty program", []string{"--", ""}, exitError, "Error: command: empty"},
		{"request ID too long", []string{"--request-id", strings.Repeat("r", 200), "true"}, exitError, "Error: --request-id: longer than"},
		{"bad image", []string{"--image", "My Image", "true"}, exitError, `Error: --image: "My Image" holds a space`},
		{"bad pull policy", []string{"--image", "busybox", "--image-pull", "sometimes", "true"}, exitError,
			`Error: --image-pull: "sometimes": want if-not-present, always or never`},
		{"mount that does not parse", []string{"--image", "busybox", "--mount", "/data", "true"}, exitUsage,
			`Error: --mount: invalid mount "/data": want SRC:DST or SRC:DST:ro`},
		{"relative mount", []string{"--image", "busybox", "--mount", "data:/data", "true"}, exitError,
			`Error: --mount: source "data": want an absolute path`},
		{"mount without image", []string{"--mount", "/data:/data", "true"}, exitError, "Error: --mount: set, but the job has no image"},
		{"shm size that does not parse", []string{"--image", "busybox", "--shm-size", "big", "true"}, exitUsage, `Error: --shm-size: invalid size "big"`},
		{"shm size too big", []string{"--image", "busybox", "--shm-size", "2T", "true"}, exitError, "Error: --shm-size: 2T is out of range 0..1T"},
		{"an unknown capability", []string{"--image", "busybox", "--allow-cap", "ROOT", "true"}, exitUsage,
			`Error: --allow-cap: "ROOT" is not a Linux capability: want a name like NET_BIND_SERVICE or CAP_NET_RAW`},
		{"a capability twice", []string{"--image", "busybox", "--allow-cap", "NET_RAW", "--allow-cap", "cap_net_raw", "true"}, exitError,
			"Error: --allow-cap: NET_RAW given twice"},
		{"a capability without image", []string{"--allow-cap", "NET_RAW", "true"}, exitError,
			"Error: --allow-cap: set, but the job has no image"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeAgent(t)
			acceptSubmit(f)
			r := runCLI(t, append([]string{"--addr", f.URL, "submit"}, tc.args...)...)
			if r.code != tc.code || !strings.Contains(r.stderr, tc.stderr) {
				t.Fatalf("got code %d, stderr %q; want %d and %q", r.code, r.stderr, tc.code, tc.stderr)
			}
			if n := len(f.requests()); n != 0 {
				t.Errorf("agent got %d requests, want none", n)
			}
		})
	}
}

func TestSubmit_RetriesWithSameRequestIDAfterConnectionFailure(t *testing.T) {
	f := newFakeAgent(t)
	var calls atomic.Int32
	f.handle("POST /v1/jobs", func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			conn, _, err := http.NewResponseController(w).Hijack()
			if err != nil {
				t.Errorf("hijack: %v", err)
				return
			}
			conn.Close() // the request got no answer
			return
		}
		var req api.SubmitRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		writeJSON(w, http.StatusCreated, structs.Job{ID: testJobID, RequestID: req.RequestID, Spec: req.Spec, State: structs.JobQueued})
	})

	r := runCLI(t, "--addr", f.URL, "submit", "true")
	if r.code != exitOK || r.stdout != testJobID+"\n" {
		t.Fatalf("got code %d, stdout %q, stderr %q; want success", r.code, r.stdout, r.stderr)
	}
	reqs := submitted(t, f)
	if len(reqs) != 2 {
		t.Fatalf("got %d submit requests, want 2", len(reqs))
	}
	if reqs[0].RequestID == "" || reqs[0].RequestID != reqs[1].RequestID {
		t.Errorf("request IDs %q and %q, want the same non-empty ID twice", reqs[0].RequestID, reqs[1].RequestID)
	}
}

func TestSubmit_AgentAnswerIsNotRetried(t *testing.T) {
	f := newFakeAgent(t)
	f.fail("POST /v1/jobs", http.StatusServiceUnavailable, "no leader")
	r := runCLI(t, "--addr", f.URL, "submit", "true")
	if r.code != exitError || r.stderr != "Error: no leader\n" {
		t.Fatalf("got code %d, stderr %q; want 1 and the agent's message", r.code, r.stderr)
	}
	if n := len(submitted(t, f)); n != 1 {
		t.Errorf("got %d submit requests, want 1", n)
	}
}

func TestSubmit_JSONPrintsCreatedJob(t *testing.T) {
	f := newFakeAgent(t)
	acceptSubmit(f)
	r := runCLI(t, "--addr", f.URL, "submit", "--json", "--name", "n", "true")
	if r.code != exitOK {
		t.Fatalf("exit code %d: %s", r.code, r.stderr)
	}
	var job structs.Job
	mustDecode(t, r.stdout, &job)
	if job.ID != testJobID || job.Spec.Name != "n" || job.State != structs.JobQueued {
		t.Errorf("job = %+v, want the created job", job)
	}
	if !strings.Contains(r.stdout, "\n  \"id\": ") {
		t.Errorf("stdout is not indented by two spaces:\n%s", r.stdout)
	}
}

func TestSubmit_WaitSaysEachStateAndExitsWithTheJobsStatus(t *testing.T) {
	cases := []struct {
		name     string
		state    structs.JobState
		reason   string
		exitCode int
		code     int
	}{
		{"succeeded", structs.JobSucceeded, "", 0, exitOK},
		{"failed with a code", structs.JobFailed, "exited with code 3", 3, 3},
		{"killed by a signal", structs.JobFailed, "killed by signal SIGSEGV", 139, 139},
		{"lost with its node", structs.JobFailed, "lost: node gpu-01 left", -1, exitNoCode},
		{"cancelled", structs.JobCancelled, "cancelled by user", -1, exitCancelled},
		{"timed out", structs.JobTimedOut, "time limit 2s exceeded", 143, exitTimedOut},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeAgent(t)
			acceptSubmit(f)
			var polls atomic.Int32
			f.handle("GET /v1/jobs/{id}", func(w http.ResponseWriter, r *http.Request) {
				d := api.JobDetail{Job: structs.Job{ID: r.PathValue("id"), State: structs.JobQueued, Reason: "queued: not enough free GPUs"},
					Nodes: map[string]string{"node-1": "gpu-01"}}
				switch polls.Add(1) {
				case 1:
				case 2:
					d.Job.State, d.Job.Attempts, d.Job.Reason = structs.JobRunning, 1, ""
					d.Allocations = []structs.Allocation{{ID: "alloc-1", NodeID: "node-1", Attempt: 1, State: structs.AllocRunning}}
				default:
					d.Job.State, d.Job.Attempts, d.Job.Reason, d.Job.ExitCode = tc.state, 1, tc.reason, tc.exitCode
				}
				writeJSON(w, http.StatusOK, d)
			})
			r := runCLI(t, "--addr", f.URL, "submit", "--wait", "true")
			want := "job abcdef01 queued: not enough free GPUs\njob abcdef01 running on gpu-01 (attempt 1)\njob abcdef01 " + string(tc.state)
			if tc.reason != "" {
				want += ": " + tc.reason
			}
			if r.code != tc.code || r.stderr != want+"\n" {
				t.Fatalf("got code %d, stderr %q; want %d, %q", r.code, r.stderr, tc.code, want+"\n")
			}
			if r.stdout != testJobID+"\n" {
				t.Errorf("stdout = %q, want the job ID", r.stdout)
			}
			if n := polls.Load(); n != 3 {
				t.Errorf("polled %d times, want 3", n)
			}
		})
	}
}

// TestSubmit_WaitNamesEachAttemptEvenOneThatEndedBetweenPolls: a job
// not yet looked at by the scheduler is not said to be queued (it was
// just submitted), and each attempt is named where it ran, though the
// polls never saw it running.
func TestSubmit_WaitNamesEachAttemptEvenOneThatEndedBetweenPolls(t *testing.T) {
	f := newFakeAgent(t)
	acceptSubmit(f)
	var polls atomic.Int32
	f.handle("GET /v1/jobs/{id}", func(w http.ResponseWriter, r *http.Request) {
		d := api.JobDetail{Job: structs.Job{ID: r.PathValue("id"), State: structs.JobQueued, Spec: structs.JobSpec{Nodes: 1}},
			Nodes: map[string]string{"node-1": "gpu-01", "node-2": "gpu-02"}}
		attempt := func(k int, node string) {
			d.Job.Attempts = k
			d.Allocations = append(d.Allocations, structs.Allocation{ID: fmt.Sprint("alloc-", k), NodeID: node, Attempt: k,
				State: structs.AllocFailed, ExitCode: 7, Reason: "exited with code 7"})
		}
		switch polls.Add(1) {
		case 1: // not yet looked at
		case 2:
			attempt(1, "node-1")
			d.Job.Reason = "queued: restarting in 1s after failure: exited with code 7 (attempt 2 of 3)"
		default:
			attempt(1, "node-1")
			attempt(2, "node-2")
			attempt(3, "node-1")
			d.Job.State, d.Job.Reason, d.Job.ExitCode = structs.JobFailed, "exited with code 7", 7
		}
		writeJSON(w, http.StatusOK, d)
	})
	r := runCLI(t, "--addr", f.URL, "submit", "--wait", "true")
	want := `job abcdef01 running on gpu-01 (attempt 1)
job abcdef01 queued: restarting in 1s after failure: exited with code 7 (attempt 2 of 3)
job abcdef01 running on gpu-02 (attempt 2)
job abcdef01 running on gpu-01 (attempt 3)
job abcdef01 failed: exited with code 7
`
	if r.code != 7 || r.stderr != want {
		t.Fatalf("exit %d, stderr:\n%s\nwant 7 and\n%s", r.code, r.stderr, want)
	}
}

func TestSubmit_FileDescribesTheJobAndFlagsOverrideIt(t *testing.T) {
	f := newFakeAgent(t)
	acceptSubmit(f)
	path := filepath.Join(t.TempDir(), "job.yaml")
	writeTestFile(t, path, `
name: train
command: [torchrun, train.py]
workdir: /data
nodes: 2
gpus: 8
gpu_model: H100
gpu_mem: 80G
cpus: 32
mem: 512G
priority: 5
restarts: 2
time_limit: 2h
signal: USR2@10m
env: {LR: "3e-4"}
constraints: {zone: a}
after: [abc123, "def456:any"]
spread: true
`)
	r := runCLI(t, "--addr", f.URL, "submit", "--file", path, "--gpus", "4", "--env", "SEED=1")
	if r.code != exitOK {
		t.Fatalf("exit code %d: %s", r.code, r.stderr)
	}
	want := structs.JobSpec{
		Name: "train", Command: []string{"torchrun", "train.py"}, Workdir: "/data", Nodes: 2, GPUs: 4,
		GPUModel: "H100", GPUMemoryMinMiB: 80 * 1024, CPUs: 32, MemoryMiB: 512 * 1024, Priority: 5, Restarts: 2,
		TimeLimit: structs.Duration(2 * time.Hour), Env: map[string]string{"LR": "3e-4", "SEED": "1"},
		Signal:      &structs.TimeSignal{Name: "USR2", Before: structs.Duration(10 * time.Minute)},
		Constraints: map[string]string{"zone": "a"}, Spread: true,
		After: []structs.Dependency{{JobID: "abc123", Condition: "ok"}, {JobID: "def456", Condition: "any"}},
	}
	if got := submitted(t, f)[0].Spec; !reflect.DeepEqual(got, want) {
		t.Errorf("spec = %+v\nwant %+v", got, want)
	}
}

func TestSubmit_FileWithEveryKeyGivesTheSpecOfTheSameFlags(t *testing.T) {
	file := `
name: train
command: [torchrun, train.py]
workdir: /data
nodes: 2
gpus: 8
gpu_model: H100
gpu_mem: 80G
cpus: 32
mem: 1.5T
pids_max: 2048
priority: -7
restarts: 2
time_limit: 2h
signal: sigusr2@10m
env: {LR: "3e-4", SEED: "1"}
secret_env: {HF_TOKEN: hf_x}
constraints: {zone: a}
partition: gpu
nodelist: [gpu01, gpu02]
exclude: [gpu03]
hold: true
mail_type: [BEGIN, END]
mail_user: alice@example.com
begin: 2030-01-02T03:04:00Z
deadline: 2030-01-03T00:00:00Z
after: [abc123, "def456:any"]
singleton: true
exclusive: true
array: 0-99%8
spread: true
preemptible: true
preempt_grace: 45s
image: nvcr.io/nvidia/pytorch:24.01-py3
image_pull: never
mounts: ["/data:/data:ro", /scratch:/scratch]
shm_size: 64G
caps: [cap_net_bind_service]
account: ml
qos: high
`
	flags := []string{
		"--image", "nvcr.io/nvidia/pytorch:24.01-py3", "--image-pull", "never", "--mount", "/data:/data:ro",
		"--mount", "/scratch:/scratch", "--shm-size", "64G", "--allow-cap", "NET_BIND_SERVICE",
		"--name", "train", "--workdir", "/data", "--nodes", "2", "--gpus", "8", "--gpu-model", "H100",
		"--gpu-mem", "80G", "--cpus", "32", "--mem", "1.5T", "--pids-max", "2048", "--priority", "-7", "--restarts", "2",
		"--time-limit", "2h", "--signal", "sigusr2@10m", "--env", "LR=3e-4", "--env", "SEED=1",
		"--secret-env", "HF_TOKEN=hf_x", "--constraint", "zone=a", "--partition", "gpu", "--nodelist", "gpu[01-02]", "--exclude", "gpu03", "--hold", "--mail-type", "begin,END", "--mail-user", "alice@example.com", "--begin", "2030-01-02T03:04:00Z", "--deadline", "2030-01-03T00:00:00Z", "--after", "abc123", "--after", "def456:any", "--array", "0-99%8",
		"--singleton", "--exclusive", "--spread", "--preemptible", "--preempt-grace", "45s", "--account", "ml", "--qos", "high", "--", "torchrun", "train.py",
	}
	// The file must say every key a job file has: a field added to
	// JobSpec belongs in this test.
	for _, f := range reflect.VisibleFields(reflect.TypeFor[structs.JobSpec]()) {
		if key := f.Tag.Get("yaml"); !strings.Contains(file, "\n"+key+": ") {
			t.Errorf("the job file of this test lacks the key %q (JobSpec.%s)", key, f.Name)
		}
	}
	path := filepath.Join(t.TempDir(), "job.yaml")
	writeTestFile(t, path, file)
	f := newFakeAgent(t)
	acceptSubmit(f)
	for _, args := range [][]string{{"--file", path}, flags} {
		if r := runCLI(t, append([]string{"--addr", f.URL, "submit"}, args...)...); r.code != exitOK {
			t.Fatalf("submit %q: exit code %d: %s", args, r.code, r.stderr)
		}
	}
	reqs := submitted(t, f)
	if len(reqs) != 2 {
		t.Fatalf("got %d submit requests, want 2", len(reqs))
	}
	fromFile, fromFlags := reqs[0].Spec, reqs[1].Spec
	if !reflect.DeepEqual(fromFile, fromFlags) {
		t.Fatalf("the file gave\n%+v\nthe flags gave\n%+v", fromFile, fromFlags)
	}
	v := reflect.ValueOf(fromFile)
	for i := range v.NumField() {
		if v.Field(i).IsZero() {
			t.Errorf("JobSpec.%s is zero: the test does not set it", v.Type().Field(i).Name)
		}
	}
}

func TestSubmit_FileErrorsNameTheField(t *testing.T) {
	cases := []struct{ name, yaml, want string }{
		{"unknown field", "command: [x]\ngpus_per_node: 2\n", "job.yaml: line 2: gpus_per_node: no such key (did you mean gpus?)"},
		{"unknown key, near a known one", "command: [x]\ngpu: 2\n", "job.yaml: line 2: gpu: no such key (did you mean gpus?)"},
		{"unknown key, near none", "command: [x]\nflavour: vanilla\n", "job.yaml: line 2: flavour: no such key\n"},
		{"command string with an open quote", "command: python3 'train.py\n", `job.yaml: line 1: command: "python3 'train.py": a quote (') is not closed`},
		{"bad size", "command: [x]\nmem: 12Q\n", "mem: invalid size"},
		{"bad duration", "command: [x]\ntime_limit: soon\n", "time_limit: invalid duration"},
		{"bad signal", "command: [x]\ntime_limit: 1h\nsignal: STOP\n", `signal: invalid signal "STOP": want one of`},
		{"bad dependency", "command: [x]\nafter: [\"a:maybe\"]\n", "after:"},
		{"not yaml", "command: [x\n", "job.yaml"},
		{"line and key of a bad value", "command: [x]\ngpus: 1\ngpu_mem: lots\n", `job.yaml: line 3: gpu_mem: invalid size "lots": use a number`},
		{"empty size", "command: [x]\nmem: \"\"\n", `job.yaml: line 2: mem: invalid size "": empty`},
		{"bad array", "command: [x]\narray: ten\n", `job.yaml: line 2: array: invalid array "ten": want START-END`},
		{"array as a map", "command: [x]\narray: {start: 0, end: 3}\n", "job.yaml: line 2: array: want one value written as the flag takes it, not a list or map"},
		{"dependency in a list", "command: [x]\nafter:\n  - abc\n  - \"a:maybe\"\n", `job.yaml: line 2: after: invalid dependency "a:maybe"`},
		{"wrong type", "command: [x]\ngpus: two\n", "job.yaml: line 2: cannot unmarshal !!str `two` into int"},
		{"bad value after a wrong type", "command: [x]\ngpus: two\nmem: 12Q\n", `job.yaml: line 3: mem: invalid size "12Q"`},
		{"key given twice", "command: [x]\ngpus: 1\ngpus: 2\n", `job.yaml: line 3: mapping key "gpus" already defined at line 2`},
		{"bad mount", "command: [x]\nimage: busybox\nmounts: [\"/data:/data\", /data]\n", `job.yaml: line 3: mounts: invalid mount "/data": want SRC:DST`},
		{"mount as a map", "command: [x]\nimage: busybox\nmounts: [{source: /a, target: /b}]\n", "job.yaml: line 3: mounts: want one value written as the flag takes it"},
		{"bad shm size", "command: [x]\nimage: busybox\nshm_size: huge\n", `job.yaml: line 3: shm_size: invalid size "huge"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "job.yaml")
			writeTestFile(t, path, tc.yaml)
			r := runCLI(t, "--addr", "http://127.0.0.1:1", "submit", "--file", path)
			if r.code != exitError || !strings.Contains(r.stderr, tc.want) {
				t.Fatalf("exit %d, stderr %q; want 1 and %q", r.code, r.stderr, tc.want)
			}
		})
	}
}

func writeTestFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestSubmit_ArrayFlag(t *testing.T) {
	f := newFakeAgent(t)
	acceptSubmit(f)
	r := runCLI(t, "--addr", f.URL, "submit", "--array", "0-99%8", "--", "train.sh")
	if r.code != exitOK {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if got := submitted(t, f)[0].Spec.Array; got == nil || *got != (structs.ArraySpec{Start: 0, End: 99, MaxRunning: 8}) {
		t.Fatalf("array = %+v", got)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--array", "ten", "x"}, exitUsage, `Error: --array: invalid array "ten": want START-END`},
		{[]string{"--array", "5-2", "x"}, exitError, "array: 5-2"},
		{[]string{"--array", "0-3", "--wait", "x"}, exitUsage, "cannot be used with --array"},
	} {
		r := runCLI(t, append([]string{"--addr", f.URL, "submit"}, tc.args...)...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("submit %v: exit %d %q; want %d and %q", tc.args, r.code, r.stderr, tc.code, tc.want)
		}
	}
}

func TestSubmit_FollowSaysEachStatePrintsTheOutputAndExitsWithTheJobsCode(t *testing.T) {
	t.Parallel()
	startRealAgent(t)
	gate := filepath.Join(testutil.SharedDir(t), "gate")
	var out, errb syncBuffer
	code := make(chan int, 1)
	go func() {
		code <- run(NewApp(&out, &errb), cliArgs(t, "submit", "--follow", "--",
			"sh", "-c", `echo out; echo err >&2; until [ -e "$0" ]; do sleep 0.01; done; echo done; exit 7`, gate))
	}()
	// Running, it says where, and its output comes as it is written.
	testutil.WaitFor(t, 15*time.Second, func() error {
		if !strings.Contains(errb.String(), " running on e2e (attempt 1)\n") || !strings.HasSuffix(errb.String(), "err\n") || out.String() != "out\n" {
			return fmt.Errorf("stdout %q, stderr %q", out.String(), errb.String())
		}
		return nil
	})
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case c := <-code:
		lines := strings.Split(strings.TrimSuffix(errb.String(), "\n"), "\n")
		id, ok := strings.CutSuffix(strings.TrimPrefix(lines[0], "job "), " submitted")
		if !ok || len(id) != 32 {
			t.Fatalf("the first line on stderr is %q, want the job's ID", lines[0])
		}
		if want := "job " + structs.ShortID(id) + " failed: exited with code 7"; c != 7 || out.String() != "out\ndone\n" || lines[len(lines)-1] != want {
			t.Errorf("submit --follow: code %d, stdout %q, stderr %q; want 7, all of stdout, and %q last", c, out.String(), errb.String(), want)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("submit --follow did not end with the job")
	}
}

// TestSubmit_WaitSaysEachStateOnStderrAndExitsWithTheJobsCode: a job
// that waits for GPUs, runs and fails: --wait prints its ID on stdout,
// a line on stderr for each state as it comes, and exits with its code.
func TestSubmit_WaitSaysEachStateOnStderrAndExitsWithTheJobsCode(t *testing.T) {
	t.Parallel()
	startRealAgent(t) // 2 GPUs
	dir := testutil.SharedDir(t)
	hold := `until [ -e "$0" ]; do sleep 0.01; done; exit "$1"`
	blocker := submitID(t, "--gpus", "2", "--", "sh", "-c", hold, filepath.Join(dir, "blocker"), "0")
	waitJobState(t, blocker, structs.JobRunning)

	var out, errb syncBuffer
	code := make(chan int, 1)
	go func() {
		code <- run(NewApp(&out, &errb), cliArgs(t, "submit", "--gpus", "1", "--wait", "--",
			"sh", "-c", hold, filepath.Join(dir, "job"), "3"))
	}()
	waitSaid := func(want string) {
		t.Helper()
		testutil.WaitFor(t, 15*time.Second, func() error {
			if !strings.Contains(errb.String(), want) {
				return fmt.Errorf("stderr %q lacks %q", errb.String(), want)
			}
			return nil
		})
	}
	waitSaid(" queued: ")
	writeTestFile(t, filepath.Join(dir, "blocker"), "")
	waitSaid(" running on e2e (attempt 1)\n")
	writeTestFile(t, filepath.Join(dir, "job"), "")
	select {
	case c := <-code:
		id := strings.TrimSpace(out.String())
		short := structs.ShortID(id)
		if len(id) != 32 || out.String() != id+"\n" {
			t.Fatalf("submit --wait printed %q on stdout, want the job's ID alone", out.String())
		}
		// A line each time why it waits changes, one running, then how
		// it ended.
		lines := strings.Split(strings.TrimSuffix(errb.String(), "\n"), "\n")
		queued := regexp.MustCompile(`^job ` + short + ` queued: `)
		n := 0
		for n < len(lines) && queued.MatchString(lines[n]) {
			n++
		}
		why := "job " + short + " queued: first in line: 1 GPU on 1 node reserved for when running jobs without a time limit end; 1 node: not enough free GPUs"
		want := []string{"job " + short + " running on e2e (attempt 1)", "job " + short + " failed: exited with code 3"}
		if c != 3 || !slices.Contains(lines[:n], why) || !slices.Equal(lines[n:], want) {
			t.Errorf("submit --wait: code %d, stderr:\n%s\nwant 3, queued lines with %q, then %q", c, errb.String(), why, want)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("submit --wait did not end with the job")
	}
}

func TestSubmit_FollowAndWaitRefuseWhatTheyCannotDo(t *testing.T) {
	f := newFakeAgent(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--follow", "--array", "0-3"}, "--follow waits for one job; it cannot be used with --array"},
		{[]string{"--wait", "--array", "0-3"}, "--wait waits for one job; it cannot be used with --array"},
		{[]string{"--follow", "--json"}, "--follow prints the job's output; it cannot be used with --json"},
	} {
		r := runCLI(t, append(append([]string{"--addr", f.URL, "submit"}, tc.args...), "true")...)
		if want := "Error: " + tc.want + "\nRun 'skein submit --help' for usage.\n"; r.code != exitUsage || r.stderr != want {
			t.Errorf("%v: code %d, stderr %q, want %d, %q", tc.args, r.code, r.stderr, exitUsage, want)
		}
	}
	if n := len(f.requests()); n != 0 {
		t.Errorf("agent got %d requests, want none", n)
	}
}

// A job file's command may be one string, as people write it: its words,
// split as a shell splits them; one that needs the shell runs under sh -c.
func TestSubmit_FileCommandAsOneString(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		want []string
	}{
		{"command: python3 train.py\n", []string{"python3", "train.py"}},
		{"command: python3  train.py --name 'a b' \"c d\" e\\ f\n", []string{"python3", "train.py", "--name", "a b", "c d", "e f"}},
		{"command: 'python3 train.py > out.log'\n", []string{"sh", "-c", "python3 train.py > out.log"}},
		{"command: 'vllm serve --port $PORT'\n", []string{"sh", "-c", "vllm serve --port $PORT"}},
		{"command: \"echo '$HOME'\"\n", []string{"echo", "$HOME"}},
		{"command: [python3, train.py]\n", []string{"python3", "train.py"}},
	} {
		f := newFakeAgent(t)
		acceptSubmit(f)
		path := filepath.Join(t.TempDir(), "job.yaml")
		writeTestFile(t, path, tc.yaml)
		if r := runCLI(t, "--addr", f.URL, "submit", "--file", path); r.code != exitOK {
			t.Fatalf("%q: exit %d: %s", tc.yaml, r.code, r.stderr)
		}
		if got := submitted(t, f)[0].Spec.Command; !slices.Equal(got, tc.want) {
			t.Errorf("%q: command %q, want %q", tc.yaml, got, tc.want)
		}
	}
}

// A flag that is not one says which one was likely meant.
func TestSubmit_AnUnknownFlagSuggestsTheNearestOne(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"submit", "--gpu", "2", "--", "true"}, "flag provided but not defined: -gpu (did you mean --gpus?)"},
		{[]string{"logs", "abc", "--tial", "3"}, "flag provided but not defined: --tial (did you mean --tail?)"},
	} {
		r := runCLI(t, append([]string{"--addr", "http://127.0.0.1:1"}, tc.args...)...)
		if r.code != exitUsage || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%q: exit %d, stderr %q, want %q", tc.args, r.code, r.stderr, tc.want)
		}
	}
	r := runCLI(t, "--addr", "http://127.0.0.1:1", "submit", "--zzzzzz", "--", "true")
	if r.code != exitUsage || strings.Contains(r.stderr, "did you mean") {
		t.Errorf("a flag near none: exit %d, stderr %q", r.code, r.stderr)
	}
}
