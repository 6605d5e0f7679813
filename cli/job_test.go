package cli

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/structs"
)

func TestJob_HumanViewShowsJobSpecAndAllocations(t *testing.T) {
	now := time.Now()
	d := api.JobDetail{
		Job: structs.Job{
			ID: testJobID, State: structs.JobFailed, Reason: "rank 1 exited with code 2", ExitCode: 2, Attempts: 1,
			SubmittedAt: now.Add(-5 * time.Minute), StartedAt: now.Add(-4 * time.Minute), FinishedAt: now.Add(-time.Minute),
			Spec: structs.JobSpec{
				Name: "train", Command: []string{"python", "-c", "print('hi there')"}, Nodes: 2, GPUs: 2,
				GPUModel: "H100", GPUMemoryMinMiB: 80 * 1024, CPUs: 8, MemoryMiB: 64 * 1024, Priority: 5,
				Restarts: 1, TimeLimit: structs.Duration(2 * time.Hour), Workdir: "/work",
				Env: map[string]string{"B": "2", "A": "x y"},
			},
		},
		Allocations: []structs.Allocation{
			{ID: "a0a0a0a0ffff", NodeID: "node-id-1", Rank: 0, Attempt: 1, State: structs.AllocSucceeded, GPUs: []string{"GPU-aaa", "GPU-bbb"}, RunAs: "alice (uid 1001)"},
			{ID: "b1b1b1b1ffff", NodeID: "node-id-2", Rank: 1, Attempt: 1, State: structs.AllocFailed, ExitCode: 2, GPUs: []string{"GPU-ccc", "GPU-ddd"}, Reason: "exit code 2"},
		},
		Nodes: map[string]string{"node-id-1": "gpu-01", "node-id-2": "gpu-02"},
	}
	f := newFakeAgent(t)
	f.reply("GET /v1/jobs/{id}", http.StatusOK, d)
	// node-id-2 has left: its GPUs are shown by the start of their UUIDs.
	f.reply("GET /v1/nodes", http.StatusOK, []api.NodeInfo{{Node: structs.Node{ID: "node-id-1", Name: "gpu-01",
		GPUs: []structs.GPU{{Index: 0, UUID: "GPU-aaa"}, {Index: 1, UUID: "GPU-bbb"}}}}})

	r := runCLI(t, "--addr", f.URL, "job", "abcdef01")
	if r.code != exitOK {
		t.Fatalf("exit code %d: %s", r.code, r.stderr)
	}
	if p := f.requests()[0].Path; p != "/v1/jobs/abcdef01" {
		t.Errorf("path = %q, want /v1/jobs/abcdef01", p)
	}
	for _, want := range []string{
		`ID:\s+` + testJobID,
		`Name:\s+train`,
		`State:\s+failed`,
		`Reason:\s+rank 1 exited with code 2`,
		`Exit code:\s+2`,
		`Submitted:\s+\d{4}-\d\d-\d\d .*\(5m ago\)`,
		`Finished:\s+.*\(1m ago\)`,
		`Attempts:\s+1`,
		`Command:\s+python -c 'print\('\\''hi there'\\''\)'`,
		`GPUs:\s+2 per node`,
		`Nodes:\s+2`,
		`GPU model:\s+H100`,
		`GPU memory:\s+80G`,
		`Memory:\s+64G`,
		`Priority:\s+5`,
		`Time limit:\s+2h0m0s`,
		`Env:\s+A=x y, B=2\n`,
		`Secret env:\s+-\n`,
		`Workdir:\s+/work`,
		`ALLOC\s+RANK\s+ATTEMPT\s+NODE\s+RUNS AS\s+STATE\s+EXIT\s+GPUS\s+REASON`,
		`a0a0a0a0\s+0\s+1\s+gpu-01\s+alice \(uid 1001\)\s+succeeded\s+0\s+0-1\s+-`,
		`b1b1b1b1\s+1\s+1\s+gpu-02\s+-\s+failed\s+2\s+GPU-ccc,GPU-ddd\s+exit code 2`,
	} {
		if !regexp.MustCompile(want).MatchString(r.stdout) {
			t.Errorf("output does not match %s:\n%s", want, r.stdout)
		}
	}
}

func TestJob_QueuedJobShowsWhyItWaits(t *testing.T) {
	f := newFakeAgent(t)
	f.reply("GET /v1/jobs/{id}", http.StatusOK, api.JobDetail{Job: structs.Job{
		ID: testJobID, State: structs.JobQueued, Reason: "no node has 8 free GPUs",
		Spec: structs.JobSpec{Command: []string{"true"}, Nodes: 1, GPUs: 8},
	}})
	r := runCLI(t, "--addr", f.URL, "job", testJobID)
	if r.code != exitOK {
		t.Fatalf("exit code %d: %s", r.code, r.stderr)
	}
	if !regexp.MustCompile(`State:\s+queued\nWaiting:\s+no node has 8 free GPUs\n`).MatchString(r.stdout) {
		t.Errorf("output lacks the waiting reason under the state:\n%s", r.stdout)
	}
	if strings.Contains(r.stdout, "Exit code") {
		t.Errorf("a queued job shows an exit code:\n%s", r.stdout)
	}
}

func TestJob_FlagAfterIDPrintsJSON(t *testing.T) {
	d := api.JobDetail{
		Job:         structs.Job{ID: testJobID, State: structs.JobRunning, Spec: structs.JobSpec{Command: []string{"true"}, Nodes: 1}},
		Allocations: []structs.Allocation{{ID: "alloc1", JobID: testJobID, NodeID: "n1", GPUs: []string{"GPU-1"}, State: structs.AllocRunning}},
		Nodes:       map[string]string{"n1": "gpu-01"},
	}
	for _, args := range [][]string{{"job", "--json", testJobID}, {"job", testJobID, "--json"}} {
		f := newFakeAgent(t)
		f.reply("GET /v1/jobs/{id}", http.StatusOK, d)
		r := runCLI(t, append([]string{"--addr", f.URL}, args...)...)
		if r.code != exitOK {
			t.Fatalf("%v: exit code %d: %s", args, r.code, r.stderr)
		}
		var got api.JobDetail
		mustDecode(t, r.stdout, &got)
		if got.Job.ID != testJobID || len(got.Allocations) != 1 || got.Nodes["n1"] != "gpu-01" {
			t.Errorf("%v: detail = %+v, want the agent's answer", args, got)
		}
	}
}

func TestJob_UnknownJobPrintsAgentMessage(t *testing.T) {
	f := newFakeAgent(t)
	f.fail("GET /v1/jobs/{id}", http.StatusNotFound, `job "nope": not found`)
	r := runCLI(t, "--addr", f.URL, "job", "nope")
	if r.code != exitError || r.stderr != "Error: job \"nope\": not found\n" || r.stdout != "" {
		t.Fatalf("got code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}

func TestJob_TimedOutJobShowsItsLimitSignalAndExitCode(t *testing.T) {
	f := newFakeAgent(t)
	f.reply("GET /v1/jobs/{id}", http.StatusOK, api.JobDetail{
		Job: structs.Job{
			ID: testJobID, State: structs.JobTimedOut, Reason: "time limit 2h0m0s exceeded", ExitCode: 143, Attempts: 1,
			Spec: structs.JobSpec{Command: []string{"train"}, Nodes: 1, TimeLimit: structs.Duration(2 * time.Hour),
				Signal: &structs.TimeSignal{Name: "USR1", Before: structs.Duration(time.Minute)}},
		},
		Allocations: []structs.Allocation{{ID: "a0a0a0a0ffff", NodeID: "n1", Attempt: 1, State: structs.AllocTimedOut, ExitCode: 143,
			Reason: "time limit 2h0m0s exceeded"}},
	})
	r := runCLI(t, "--addr", f.URL, "job", testJobID)
	if r.code != exitOK {
		t.Fatalf("exit code %d: %s", r.code, r.stderr)
	}
	for _, want := range []string{
		`State:\s+timed_out\nReason:\s+time limit 2h0m0s exceeded\n`,
		`Exit code:\s+143`,
		`Time limit:\s+2h0m0s \(SIGUSR1 1m0s before\)`,
		`a0a0a0a0\s+0\s+1\s+n1\s+-\s+timed_out\s+143\s+-\s+time limit 2h0m0s exceeded`,
	} {
		if !regexp.MustCompile(want).MatchString(r.stdout) {
			t.Errorf("output does not match %s:\n%s", want, r.stdout)
		}
	}
}

func TestJob_ShowsTheOwnerAndHidesSecretValuesUnlessAsked(t *testing.T) {
	// The agent answers what it may show: another user's env values
	// hidden, secret values only with ?secrets=true.
	f := newFakeAgent(t)
	f.handle("GET /v1/jobs/{id}", func(w http.ResponseWriter, r *http.Request) {
		secret := api.HiddenValue
		if r.URL.Query().Get("secrets") == "true" {
			secret = "hf_abc"
		}
		writeJSON(w, http.StatusOK, api.JobDetail{Job: structs.Job{
			ID: testJobID, Owner: "alice", AllowRoot: true, State: structs.JobRunning,
			Spec: structs.JobSpec{Command: []string{"train"}, Nodes: 1,
				Env: map[string]string{"LR": api.HiddenValue}, SecretEnv: map[string]string{"HF_TOKEN": secret, "DB_PASS": secret}},
		}})
	})
	r := runCLI(t, "--addr", f.URL, "job", testJobID)
	for _, want := range []string{
		`Owner:\s+alice \(may run as root\)\n`,
		`Env:\s+LR=\(hidden\)\n`,
		`Secret env:\s+DB_PASS=\(hidden\), HF_TOKEN=\(hidden\)\n`,
	} {
		if !regexp.MustCompile(want).MatchString(r.stdout) {
			t.Errorf("output does not match %s:\n%s", want, r.stdout)
		}
	}
	if q := f.requests()[0].Query; q.Has("secrets") {
		t.Errorf("query %v: asked for secrets without --show-secrets", q)
	}

	r = runCLI(t, "--addr", f.URL, "job", testJobID, "--show-secrets")
	if r.code != exitOK || !regexp.MustCompile(`Secret env:\s+DB_PASS=hf_abc, HF_TOKEN=hf_abc\n`).MatchString(r.stdout) {
		t.Errorf("--show-secrets: exit %d, output:\n%s", r.code, r.stdout)
	}
	if q := f.requests()[1].Query; q.Get("secrets") != "true" {
		t.Errorf("--show-secrets: query %v, want secrets=true", q)
	}
	r = runCLI(t, "--addr", f.URL, "job", testJobID, "--show-secrets", "--json")
	var d api.JobDetail
	mustDecode(t, r.stdout, &d)
	if d.Job.Spec.SecretEnv["HF_TOKEN"] != "hf_abc" || d.Job.Owner != "alice" {
		t.Errorf("--show-secrets --json: %+v", d.Job)
	}
}

func TestJob_SecretValuesStayHiddenWhenTheAgentSendsThemUnasked(t *testing.T) {
	f := newFakeAgent(t)
	f.reply("GET /v1/jobs/{id}", http.StatusOK, api.JobDetail{Job: structs.Job{
		ID: testJobID, State: structs.JobQueued,
		Spec: structs.JobSpec{Command: []string{"train"}, Nodes: 1, SecretEnv: map[string]string{"HF_TOKEN": "hf_abc"}},
	}})
	for _, args := range [][]string{{"job", testJobID}, {"job", testJobID, "--json"}} {
		r := runCLI(t, append([]string{"--addr", f.URL}, args...)...)
		if r.code != exitOK || strings.Contains(r.stdout, "hf_abc") || !strings.Contains(r.stdout, "HF_TOKEN") ||
			!strings.Contains(r.stdout, api.HiddenValue) {
			t.Errorf("%v: exit %d, output shows the secret or not its name:\n%s", args, r.code, r.stdout)
		}
	}
}

func TestJob_ShowsTheContainerAndAPullingAllocation(t *testing.T) {
	const gib = 1 << 30
	d := api.JobDetail{
		Job: structs.Job{
			ID: testJobID, State: structs.JobRunning, Attempts: 1,
			Spec: structs.JobSpec{
				Command: []string{"python", "train.py"}, Nodes: 3, GPUs: 8,
				Image: "nvcr.io/nvidia/pytorch:24.01-py3", ShmSizeMiB: 64 << 10,
				Mounts: []structs.Mount{{Source: "/data", Target: "/data", ReadOnly: true}, {Source: "/scratch", Target: "/s"}},
				Caps:   []string{"NET_BIND_SERVICE", "NET_RAW"},
			},
		},
		Allocations: []structs.Allocation{
			{ID: "a0a0a0a0ffff", NodeID: "n1", Rank: 0, Attempt: 1, State: structs.AllocPending,
				Pull: &structs.PullProgress{Image: "nvcr.io/nvidia/pytorch:24.01-py3", Bytes: gib + gib/10, Total: 26 * gib / 10}},
			{ID: "b1b1b1b1ffff", NodeID: "n2", Rank: 1, Attempt: 1, State: structs.AllocPending,
				Pull: &structs.PullProgress{Image: "nvcr.io/nvidia/pytorch:24.01-py3", Bytes: 300 << 20}},
			{ID: "c2c2c2c2ffff", NodeID: "n3", Rank: 2, Attempt: 1, State: structs.AllocPending},
		},
		Nodes: map[string]string{"n1": "gpu-01", "n2": "gpu-02", "n3": "gpu-03"},
	}
	f := newFakeAgent(t)
	f.reply("GET /v1/jobs/{id}", http.StatusOK, d)
	r := runCLI(t, "--addr", f.URL, "job", testJobID)
	if r.code != exitOK {
		t.Fatalf("exit code %d: %s", r.code, r.stderr)
	}
	for _, want := range []string{
		`Image:\s+nvcr.io/nvidia/pytorch:24.01-py3\n`,
		`Image pull:\s+if-not-present \(default\)\n`,
		`Mounts:\s+/data:/data:ro, /scratch:/s\n`,
		`Shm size:\s+64G\n`,
		`Capabilities:\s+NET_BIND_SERVICE, NET_RAW\n`,
		`a0a0a0a0\s+0\s+1\s+gpu-01\s+-\s+pulling 42% \(1.1 GiB of 2.6 GiB\)\s+-`,
		`b1b1b1b1\s+1\s+1\s+gpu-02\s+-\s+pulling \(300 MiB so far\)\s+-`,
		`c2c2c2c2\s+2\s+1\s+gpu-03\s+-\s+pending\s+-`,
	} {
		if !regexp.MustCompile(want).MatchString(r.stdout) {
			t.Errorf("output does not match %s:\n%s", want, r.stdout)
		}
	}

	// A job without an image says nothing of containers.
	d.Job.Spec = structs.JobSpec{Command: []string{"true"}, Nodes: 1}
	d.Allocations = nil
	g := newFakeAgent(t)
	g.reply("GET /v1/jobs/{id}", http.StatusOK, d)
	r = runCLI(t, "--addr", g.URL, "job", testJobID)
	if r.code != exitOK || strings.Contains(r.stdout, "Image") || strings.Contains(r.stdout, "Mounts") || strings.Contains(r.stdout, "Shm") {
		t.Fatalf("exit %d; a job without an image shows container fields:\n%s", r.code, r.stdout)
	}
}

func TestJob_AnOutOfMemoryJobShowsWhatItUsed(t *testing.T) {
	f := newFakeAgent(t)
	f.reply("GET /v1/jobs/{id}", http.StatusOK, api.JobDetail{
		Job: structs.Job{
			ID: testJobID, State: structs.JobFailed, Reason: "out of memory: used 64M of its 64M limit", ExitCode: 137, Attempts: 1,
			Spec: structs.JobSpec{Command: []string{"train"}, Nodes: 1, MemoryMiB: 64, CPUs: 1},
		},
		Allocations: []structs.Allocation{
			{ID: "a0a0a0a0ffff", NodeID: "n1", Attempt: 1, State: structs.AllocFailed, ExitCode: 137,
				Reason: "out of memory: used 64M of its 64M limit",
				Usage: &structs.AllocUsage{MemoryPeakBytes: 64 << 20, MemoryLimitBytes: 64 << 20, OOMKills: 1,
					CPUTime: structs.Duration(2500 * time.Millisecond), CPUThrottled: structs.Duration(400 * time.Millisecond), ThrottledPeriods: 9}},
			{ID: "b0b0b0b0ffff", NodeID: "n1", Attempt: 1, State: structs.AllocKilled, ExitCode: 137, Reason: "killed",
				Usage: &structs.AllocUsage{MemoryPeakBytes: 3 << 30, CPUTime: structs.Duration(time.Second)}},
		},
	})
	r := runCLI(t, "--addr", f.URL, "job", testJobID)
	if r.code != exitOK {
		t.Fatalf("exit code %d: %s", r.code, r.stderr)
	}
	for _, want := range []string{
		`Reason:\s+out of memory: used 64M of its 64M limit\n`,
		`Usage:\n\s*ALLOC\s+MAX MEMORY\s+MEM LIMIT\s+CPU TIME\s+THROTTLED\s+OOM KILLS\n`,
		`a0a0a0a0\s+64M\s+64M\s+2.5s\s+400ms in 9 periods\s+1\n`,
		`b0b0b0b0\s+3G\s+none\s+1s\s+-\s+0\n`,
	} {
		if !regexp.MustCompile(want).MatchString(r.stdout) {
			t.Errorf("output does not match %s:\n%s", want, r.stdout)
		}
	}
}
