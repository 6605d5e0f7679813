package cli

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

func testGPUs() []api.GPUInfo {
	h100 := func(i int) structs.GPU {
		return structs.GPU{Index: i, UUID: fmt.Sprintf("GPU-%d", i), Model: "NVIDIA H100", MemoryMiB: 80 * 1024, Healthy: true}
	}
	bad, cordoned, foreign, busy := h100(1), h100(2), h100(3), h100(0)
	bad.Healthy, bad.Reason = false, "XID 79: GPU has fallen off the bus"
	cordoned.Cordoned, cordoned.CordonReason, cordoned.Warning = true, "bad fan", "clocks throttled"
	foreign.ForeignProcesses = 2
	sim := structs.GPU{Index: 0, UUID: "GPU-s", Model: "NVIDIA A100", MemoryMiB: 40 * 1024, Healthy: true, Simulated: true}
	return []api.GPUInfo{
		{Node: "gpu-01", NodeID: "n1", GPU: busy, Health: busy.HealthState(), Job: "0123456789abcdef"},
		{Node: "gpu-01", NodeID: "n1", GPU: bad, Health: bad.HealthState()},
		{Node: "gpu-01", NodeID: "n1", GPU: cordoned, Health: cordoned.HealthState()},
		{Node: "gpu-01", NodeID: "n1", GPU: foreign, Health: foreign.HealthState()},
		{Node: "dev", NodeID: "n2", GPU: sim, Health: sim.HealthState()},
	}
}

func TestGPUs_TableShowsHealthReasonAndJob(t *testing.T) {
	f := newFakeAgent(t)
	f.reply("GET /v1/gpus", http.StatusOK, testGPUs())
	r := runCLI(t, "--addr", f.URL, "gpus")
	if r.code != exitOK {
		t.Fatalf("exit code %d: %s", r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	want := []string{
		"NODE IDX MODEL MEM HEALTH REASON JOB",
		"gpu-01 0 NVIDIA H100 80G healthy - 01234567",
		"gpu-01 1 NVIDIA H100 80G unhealthy XID 79: GPU has fallen off the bus -",
		"gpu-01 2 NVIDIA H100 80G cordoned bad fan; warning: clocks throttled -",
		"gpu-01 3 NVIDIA H100 80G foreign in use by 2 processes skein did not start -",
		"dev 0 NVIDIA A100 (simulated) 40G healthy - -",
	}
	if len(lines) != len(want) {
		t.Fatalf("got %d lines, want %d:\n%s", len(lines), len(want), r.stdout)
	}
	for i, w := range want {
		if got := strings.Join(strings.Fields(lines[i]), " "); got != w {
			t.Errorf("line %d = %q, want %q", i, got, w)
		}
	}
}

func TestGPUs_JSONParsesBackAndEmptyListSaysSo(t *testing.T) {
	f := newFakeAgent(t)
	f.reply("GET /v1/gpus", http.StatusOK, testGPUs())
	r := runCLI(t, "--addr", f.URL, "gpus", "--json")
	var got []api.GPUInfo
	mustDecode(t, r.stdout, &got)
	if len(got) != 5 || got[1].Health != structs.GPUUnhealthy || got[1].Reason == "" || got[0].Job == "" {
		t.Fatalf("gpus = %+v", got)
	}
	g := newFakeAgent(t)
	g.reply("GET /v1/gpus", http.StatusOK, []api.GPUInfo{})
	if r := runCLI(t, "--addr", g.URL, "gpus"); r.code != exitOK || r.stdout != "No GPUs.\n" {
		t.Fatalf("empty list: %d %q", r.code, r.stdout)
	}
}

func TestGPU_CordonSendsNodeIndexAndReason(t *testing.T) {
	f := newFakeAgent(t)
	g := testGPUs()[0]
	g.Cordoned, g.Health = true, structs.GPUCordoned
	f.reply("POST /v1/gpus/cordon", http.StatusOK, g)
	r := runCLI(t, "--addr", f.URL, "gpu", "cordon", "gpu-01/0", "--reason", "bad fan")
	if r.code != exitOK {
		t.Fatalf("exit code %d: %s", r.code, r.stderr)
	}
	if !strings.Contains(r.stdout, "GPU 0 on node gpu-01 cordoned; job 01234567 keeps running on it") {
		t.Fatalf("output %q", r.stdout)
	}
	var body api.GPURequest
	if err := json.Unmarshal(f.requests()[0].Body, &body); err != nil {
		t.Fatal(err)
	}
	if body != (api.GPURequest{Node: "gpu-01", Index: 0, Reason: "bad fan"}) {
		t.Fatalf("request body %+v", body)
	}
}

func TestGPU_BadNodeIndexIsAUsageErrorNamingTheField(t *testing.T) {
	for _, arg := range []string{"gpu-01", "/3", "gpu-01/x", "gpu-01/64", "gpu-01/-1"} {
		for _, cmd := range []string{"cordon", "uncordon", "fault"} {
			r := runCLI(t, "--addr", "http://127.0.0.1:1", "gpu", cmd, arg)
			if r.code != exitUsage || !strings.Contains(r.stderr, "NODE/INDEX") {
				t.Errorf("gpu %s %s: exit %d, stderr %q", cmd, arg, r.code, r.stderr)
			}
		}
	}
}

func TestGPU_AgentErrorsAreShown(t *testing.T) {
	f := newFakeAgent(t)
	f.fail("POST /v1/gpus/fault", http.StatusBadRequest, "GPU 0 on node gpu-01 is not simulated: faults can only be injected into simulated GPUs")
	r := runCLI(t, "--addr", f.URL, "gpu", "fault", "gpu-01/0")
	if r.code != exitError || !strings.Contains(r.stderr, "not simulated") {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
}

func TestCLI_GPUFaultAgainstARealAgent(t *testing.T) {
	t.Parallel()
	startRealAgent(t)
	r := runCLI(t, "submit", "--gpus", "1", "--", "sleep", "600")
	if r.code != 0 {
		t.Fatalf("submit: %d %s", r.code, r.stderr)
	}
	id := strings.TrimSpace(r.stdout)
	d := waitJobState(t, id, structs.JobRunning)
	uuid := d.Allocations[0].GPUs[0]
	var gpus []api.GPUInfo
	mustDecode(t, runCLI(t, "gpus", "--json").stdout, &gpus)
	idx := -1
	for _, g := range gpus {
		if g.UUID == uuid {
			idx = g.Index
		}
	}
	target := fmt.Sprintf("e2e/%d", idx)
	if r := runCLI(t, "gpu", "fault", target, "--reason", "XID 79: GPU has fallen off the bus"); r.code != 0 {
		t.Fatalf("gpu fault: %d %s", r.code, r.stderr)
	}
	testutil.WaitFor(t, 15*time.Second, func() error {
		r := runCLI(t, "job", id)
		for _, want := range []string{"GPU faults", "1 (restarted without using a restart)", "GPU " + fmt.Sprint(idx) + " on node e2e unhealthy: XID 79"} {
			if !strings.Contains(r.stdout, want) {
				return fmt.Errorf("skein job does not show %q yet:\n%s", want, r.stdout)
			}
		}
		return nil
	})
	d = waitJobState(t, id, structs.JobRunning)
	if last := d.Allocations[len(d.Allocations)-1]; last.GPUs[0] == uuid {
		t.Fatal("the job runs again on the failed GPU")
	}
	r = runCLI(t, "gpus")
	if !strings.Contains(strings.Join(strings.Fields(r.stdout), " "), fmt.Sprintf("e2e %d NVIDIA A100 (simulated) 40G unhealthy XID 79", idx)) {
		t.Fatalf("skein gpus does not show the failed GPU:\n%s", r.stdout)
	}
	if r := runCLI(t, "gpu", "uncordon", target); r.code != 0 || !strings.Contains(r.stdout, "returned to service (now healthy)") {
		t.Fatalf("gpu uncordon: %d %s %s", r.code, r.stdout, r.stderr)
	}
	if r := runCLI(t, "cancel", id); r.code != 0 {
		t.Fatalf("cancel: %d %s", r.code, r.stderr)
	}
	waitJobState(t, id, structs.JobCancelled) // its supervisor is done with the data dir
}
