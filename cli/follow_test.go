package cli

import (
	"fmt"
	"testing"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/structs"
)

func TestEndStatus_ZeroOnlyForSuccessTheJobsCodeWhenItHasOne(t *testing.T) {
	cases := []struct {
		state string
		code  int
		want  int
	}{
		{string(structs.JobSucceeded), 0, 0},
		{string(structs.JobFailed), 7, 7},
		{string(structs.JobFailed), 137, 137}, // SIGKILL
		{string(structs.JobFailed), -1, exitNoCode},
		{string(structs.JobFailed), 0, exitNoCode},   // failed, yet exit code 0: no code of its own
		{string(structs.JobFailed), 300, exitNoCode}, // not an exit status
		{string(structs.JobCancelled), -1, exitCancelled},
		{string(structs.JobTimedOut), 143, exitTimedOut},
		{string(structs.AllocSucceeded), 0, 0},
		{string(structs.AllocFailed), 3, 3},
		{string(structs.AllocKilled), 143, exitCancelled},
		{string(structs.AllocLost), -1, exitNoCode},
		{string(structs.AllocTimedOut), 143, exitTimedOut},
	}
	for _, tc := range cases {
		if got := endStatus(tc.state, tc.code); got != tc.want {
			t.Errorf("endStatus(%s, %d) = %d, want %d", tc.state, tc.code, got, tc.want)
		}
	}
}

// gang is the detail of a running job of n ranks, rank r on node-r, in
// its second attempt.
func gang(n int) *api.JobDetail {
	d := &api.JobDetail{Job: structs.Job{ID: testJobID, State: structs.JobRunning, Attempts: 2, Spec: structs.JobSpec{Nodes: n}},
		Nodes: map[string]string{}}
	for r := n - 1; r >= 0; r-- { // out of order: lines go by rank
		id := fmt.Sprintf("node-%d", r)
		d.Nodes[id] = fmt.Sprintf("gpu-%02d", r)
		d.Allocations = append(d.Allocations,
			structs.Allocation{ID: "old-" + id, NodeID: "elsewhere", Rank: r, Attempt: 1, State: structs.AllocLost},
			structs.Allocation{ID: "a-" + id, NodeID: id, Rank: r, Attempt: 2, State: structs.AllocRunning})
	}
	return d
}

func TestStateLine_NamesTheNodesOfTheAttemptByRank(t *testing.T) {
	cases := []struct {
		name string
		d    *api.JobDetail
		want string
	}{
		{"one node", gang(1), "job abcdef01 running on gpu-00 (attempt 2)"},
		{"four nodes", gang(4), "job abcdef01 running on gpu-00, gpu-01, gpu-02, gpu-03 (attempt 2)"},
		{"six nodes", gang(6), "job abcdef01 running on gpu-00, gpu-01, gpu-02, gpu-03, 2 more (attempt 2)"},
		{"cancel requested", func() *api.JobDetail { d := gang(1); d.Job.Reason = "cancel requested"; return d }(),
			"job abcdef01 running on gpu-00 (attempt 2): cancel requested"},
		{"queued", &api.JobDetail{Job: structs.Job{ID: testJobID, State: structs.JobQueued, Reason: "queued: not enough free GPUs"}},
			"job abcdef01 queued: not enough free GPUs"},
		{"queued, not yet looked at", &api.JobDetail{Job: structs.Job{ID: testJobID, State: structs.JobQueued}}, ""},
		{"ended", &api.JobDetail{Job: structs.Job{ID: testJobID, State: structs.JobFailed, Reason: "exited with code 7"}}, ""},
	}
	for _, tc := range cases {
		if got := stateLine(tc.d); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestAttemptLine_NamesTheRankOfAGangAndWhyItEnded(t *testing.T) {
	d := gang(2)
	if got, want := attemptLine(d, allocOf(d, 1, 2)), "attempt 2, rank 1, on gpu-01: running"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
	a := allocOf(d, 0, 2)
	a.State, a.Reason, a.GPUFault = structs.AllocKilled, "stopped", "GPU 3 on node gpu-00 unhealthy: XID 79"
	if got, want := attemptLine(d, a), "attempt 2, rank 0, on gpu-00: killed: GPU 3 on node gpu-00 unhealthy: XID 79"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
	a = allocOf(d, 1, 1)
	if got, want := attemptLine(d, a), "attempt 1, rank 1, on elsewher: lost"; got != want {
		t.Errorf("a node the answer does not name: %q, want %q", got, want)
	}
}
