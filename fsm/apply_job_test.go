package fsm

import (
	"strings"
	"testing"

	"github.com/skein-dev/skein/structs"
)

func TestFSM_NodeRegister_UpsertsAndKeepsFirstRegisteredAt(t *testing.T) {
	h := newHarness(t)
	n := node("n1", 2)
	n.Role = structs.RoleLeader
	h.register(n)
	first, ok := h.f.Node("n1")
	if !ok {
		t.Fatal("node not found after register")
	}
	if !first.RegisteredAt.Equal(t0) || first.ModifyIndex != 1 || first.Role != "" {
		t.Fatalf("first register: registered_at %v, modify_index %d, role %q", first.RegisteredAt, first.ModifyIndex, first.Role)
	}

	n.GPUs[1].Healthy = false
	n.Status = ""
	h.register(n)
	got, _ := h.f.Node("n1")
	if !got.RegisteredAt.Equal(first.RegisteredAt) {
		t.Fatalf("registered_at changed to %v, want %v", got.RegisteredAt, first.RegisteredAt)
	}
	if got.ModifyIndex != 2 || got.GPUs[1].Healthy || got.Status != structs.NodeReady {
		t.Fatalf("second register not applied: %+v", got)
	}
}

func TestFSM_NodeRegister_RejectsInvalidNode(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(n *structs.Node)
		want   string
	}{
		{"empty id", func(n *structs.Node) { n.ID = "" }, "empty node id"},
		{"unknown status", func(n *structs.Node) { n.Status = "asleep" }, `unknown status "asleep"`},
		{"gpu without uuid", func(n *structs.Node) { n.GPUs[1].UUID = "" }, "GPU 1 has no UUID"},
		{"gpu listed twice", func(n *structs.Node) { n.GPUs[1].UUID = n.GPUs[0].UUID }, "listed twice"},
		{"driver version too long", func(n *structs.Node) { n.GPUDriver = strings.Repeat("5", 65) }, "longer than 64 bytes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.register(node("other", 1))
			before := h.f.Hash()
			n := node("n1", 2)
			tc.mutate(&n)
			err := h.applyErr(structs.NodeRegisterType, structs.NodeRegisterRequest{Node: n, At: h.at()})
			wantErrIs(t, err, ErrInvalidRequest, tc.want)
			if h.f.Hash() != before {
				t.Fatal("state changed after a refused register")
			}
		})
	}
}

func TestFSM_Submit_CreatesQueuedJob(t *testing.T) {
	h := newHarness(t)
	s := spec(0, 1)
	s.Env = map[string]string{"A": "1"}
	j := h.submit("job1", s)
	if j.State != structs.JobQueued || j.Spec.Nodes != 1 || j.CreateIndex != 1 || j.ModifyIndex != 1 ||
		j.Attempts != 0 || !j.SubmittedAt.Equal(t0) {
		t.Fatalf("unexpected job: %+v", j)
	}
	j.Spec.Env["A"] = "changed"
	if got := h.job("job1"); got.Spec.Env["A"] != "1" {
		t.Fatal("the returned job shares its env map with the FSM")
	}
}

func TestFSM_SubmitIsIdempotent(t *testing.T) {
	h := newHarness(t)
	first := h.apply(structs.JobSubmitType, structs.JobSubmitRequest{RequestID: "r1", JobID: "job1", Spec: spec(1, 0), SubmittedAt: t0}).(*structs.Job)
	before := h.f.Hash()
	again := h.apply(structs.JobSubmitType, structs.JobSubmitRequest{RequestID: "r1", JobID: "job2", Spec: spec(1, 0), SubmittedAt: t0})
	j, ok := again.(*structs.Job)
	if !ok || j.ID != first.ID {
		t.Fatalf("second submit returned %v, want job %s", again, first.ID)
	}
	if h.f.Hash() != before || len(h.f.Jobs()) != 1 {
		t.Fatal("second submit with the same request id changed state")
	}
	if got, ok := h.f.JobByRequestID("r1"); !ok || got.ID != "job1" {
		t.Fatalf("JobByRequestID = %v, %v", got, ok)
	}
	if _, ok := h.f.JobByRequestID("r2"); ok {
		t.Fatal("JobByRequestID found an unknown request id")
	}
}

func TestFSM_Submit_RejectsBadRequests(t *testing.T) {
	long := make([]byte, structs.MaxRequestIDLen+1)
	for i := range long {
		long[i] = 'x'
	}
	cases := []struct {
		name   string
		req    structs.JobSubmitRequest
		target error
		want   string
	}{
		{"empty job id", structs.JobSubmitRequest{Spec: spec(1, 0)}, ErrInvalidRequest, "empty job id"},
		{"job id in use", structs.JobSubmitRequest{JobID: "existing", Spec: spec(1, 0)}, ErrJobExists, "job existin"},
		{"empty command", structs.JobSubmitRequest{JobID: "j", Spec: structs.JobSpec{}}, nil, "command: empty"},
		{"too many gpus", structs.JobSubmitRequest{JobID: "j", Spec: spec(1, structs.MaxGPUsPerNode+1)}, nil, "gpus:"},
		{"request id too long", structs.JobSubmitRequest{JobID: "j", RequestID: string(long), Spec: spec(1, 0)}, nil, "request_id"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.submit("existing", spec(1, 0))
			before := h.f.Hash()
			err := h.applyErr(structs.JobSubmitType, tc.req)
			wantErrIs(t, err, tc.target, tc.want)
			if h.f.Hash() != before {
				t.Fatal("state changed after a refused submit")
			}
		})
	}
}

func TestFSM_Cancel_QueuedJobEndsAtOnce(t *testing.T) {
	cases := []struct {
		name, reason, want string
	}{
		{"default reason", "", "cancelled by user"},
		{"given reason", "wrong dataset", "wrong dataset"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.submit("job1", spec(1, 0))
			resp := h.apply(structs.JobCancelType, structs.JobCancelRequest{JobID: "job1", Reason: tc.reason, At: t0})
			j, ok := resp.(*structs.Job)
			if !ok || j.State != structs.JobCancelled || j.Reason != tc.want || !j.FinishedAt.Equal(t0) || j.ModifyIndex != 2 {
				t.Fatalf("cancel returned %+v", resp)
			}
		})
	}
}

func TestFSM_Cancel_RunningJobEndsWhenAllocsStop(t *testing.T) {
	cases := []struct {
		name, reason, want string
	}{
		{"default reason", "", "cancelled by user"},
		{"given reason", "preempted by ops", "preempted by ops"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.register(node("n1", 1))
			h.register(node("n2", 1))
			h.submit("job1", spec(2, 1))
			h.place("job1", alloc("a0", "n1", 0, gpuID("n1", 0)), alloc("a1", "n2", 1, gpuID("n2", 0)))
			h.mustUpdate("n1", "a0", structs.AllocRunning, 0, "")

			j := h.apply(structs.JobCancelType, structs.JobCancelRequest{JobID: "job1", Reason: tc.reason, At: h.at()}).(*structs.Job)
			if j.State != structs.JobRunning || !j.StopRequested {
				t.Fatalf("after cancel: state %s, stop_requested %v", j.State, j.StopRequested)
			}
			for _, a := range h.f.Allocs("job1") {
				if a.DesiredState != structs.DesiredStop {
					t.Fatalf("alloc %s desired %s, want stop", a.ID, a.DesiredState)
				}
			}
			if q := h.f.State().Queued; len(q) != 0 {
				t.Fatalf("cancelling job is queued: %v", q)
			}
			// A second cancel while stopping changes nothing.
			before := h.f.Hash()
			if _, ok := h.apply(structs.JobCancelType, structs.JobCancelRequest{JobID: "job1", At: h.at()}).(*structs.Job); !ok || h.f.Hash() != before {
				t.Fatal("second cancel of a stopping job changed state or failed")
			}

			h.mustUpdate("n1", "a0", structs.AllocKilled, 143, "")
			if got := h.job("job1"); got.State != structs.JobRunning {
				t.Fatalf("job %s before its last alloc stopped", got.State)
			}
			h.mustUpdate("n2", "a1", structs.AllocKilled, 143, "")
			got := h.job("job1")
			if got.State != structs.JobCancelled || got.Reason != tc.want || got.FinishedAt.IsZero() {
				t.Fatalf("after the allocs stopped: %+v", got)
			}
		})
	}
}

func TestFSM_Cancel_RejectsUnknownAndFinishedJobs(t *testing.T) {
	h := newHarness(t)
	h.submit("job1", spec(1, 0))
	h.apply(structs.JobCancelType, structs.JobCancelRequest{JobID: "job1", At: t0})
	before := h.f.Hash()

	cases := []struct {
		name   string
		jobID  string
		target error
		want   string
	}{
		{"unknown job", "nope", ErrJobNotFound, "job nope"},
		{"finished job", "job1", ErrJobFinished, "cancelled"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := h.applyErr(structs.JobCancelType, structs.JobCancelRequest{JobID: tc.jobID, At: t0})
			wantErrIs(t, err, tc.target, tc.want)
			if h.f.Hash() != before {
				t.Fatal("state changed after a refused cancel")
			}
		})
	}
}

func TestFSM_SubmitArrayCreatesOneJobPerIndex(t *testing.T) {
	h := newHarness(t)
	s := spec(1, 1)
	s.Array = &structs.ArraySpec{Start: 3, End: 5, MaxRunning: 2}
	resp := h.apply(structs.JobSubmitType, structs.JobSubmitRequest{RequestID: "r", JobID: "arr", Spec: s, SubmittedAt: h.at()})
	first, ok := resp.(*structs.Job)
	if !ok || first.ID != "arr-3" || first.ArrayID != "arr" || first.ArrayIndex != 3 {
		t.Fatalf("submit returned %+v", resp)
	}
	for i := 3; i <= 5; i++ {
		j := h.job(structs.ArrayTaskID("arr", i))
		if j.ArrayID != "arr" || j.ArrayIndex != i || j.State != structs.JobQueued {
			t.Fatalf("task %d: %+v", i, j)
		}
		if structs.ArrayOf(j.ID) != "arr" {
			t.Fatalf("ArrayOf(%s) = %q", j.ID, structs.ArrayOf(j.ID))
		}
	}
	// Idempotent like any submission; the request answers with the first task.
	before := h.f.Hash()
	again := h.apply(structs.JobSubmitType, structs.JobSubmitRequest{RequestID: "r", JobID: "arr2", Spec: s, SubmittedAt: h.at()})
	if j, ok := again.(*structs.Job); !ok || j.ID != "arr-3" || h.f.Hash() != before {
		t.Fatalf("repeated array submit: %+v", again)
	}
	if n := len(h.f.Jobs()); n != 3 {
		t.Fatalf("%d jobs, want 3", n)
	}
}
