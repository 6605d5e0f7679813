package cli

import (
	"net/http"
	"testing"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/structs"
)

func testStatus() api.Status {
	return api.Status{
		Node: "gpu-02", Leader: "gpu-01", LeaderID: "n1", Nodes: 3, NodesReady: 2,
		GPUsTotal: 16, GPUsFree: 5, GPUsSimulated: true, RaftIndex: 1234, Version: "0.1.0",
		Jobs: map[structs.JobState]int{structs.JobQueued: 1, structs.JobRunning: 2, structs.JobFailed: 4},
	}
}

func TestStatus_PrintsAlignedSummary(t *testing.T) {
	cases := []struct {
		name   string
		status func(*api.Status)
		want   string
	}{
		{"leader elected", func(*api.Status) {}, "" +
			"node:       gpu-02\n" +
			"leader:     gpu-01\n" +
			"nodes:      2/3 ready\n" +
			"GPUs:       5/16 free (simulated)\n" +
			"jobs:       1 queued, 2 running, 0 succeeded, 4 failed, 0 cancelled, 0 timed_out\n" +
			"raft index: 1234\n" +
			"version:    0.1.0\n"},
		{"no leader, real GPUs", func(s *api.Status) { s.Leader, s.GPUsSimulated, s.Jobs = "", false, nil }, "" +
			"node:       gpu-02\n" +
			"leader:     none (no leader elected)\n" +
			"nodes:      2/3 ready\n" +
			"GPUs:       5/16 free\n" +
			"jobs:       0 queued, 0 running, 0 succeeded, 0 failed, 0 cancelled, 0 timed_out\n" +
			"raft index: 1234\n" +
			"version:    0.1.0\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := testStatus()
			tc.status(&s)
			f := newFakeAgent(t)
			f.reply("GET /v1/status", http.StatusOK, s)
			r := runCLI(t, "--addr", f.URL, "status")
			if r.code != exitOK || r.stdout != tc.want {
				t.Fatalf("got code %d, stdout:\n%s\nwant:\n%s", r.code, r.stdout, tc.want)
			}
		})
	}
}

func TestStatus_JSONParsesBack(t *testing.T) {
	f := newFakeAgent(t)
	f.reply("GET /v1/status", http.StatusOK, testStatus())
	r := runCLI(t, "--addr", f.URL, "status", "--json")
	if r.code != exitOK {
		t.Fatalf("exit code %d: %s", r.code, r.stderr)
	}
	var got api.Status
	mustDecode(t, r.stdout, &got)
	if got.Leader != "gpu-01" || got.GPUsFree != 5 || got.Jobs[structs.JobFailed] != 4 {
		t.Errorf("status = %+v, want the agent's answer", got)
	}
}
