package fsm

import (
	"strings"
	"testing"

	"github.com/skein-dev/skein/structs"
)

// requeue applies a JobRequeue entry by alice.
func (h *harness) requeue(id string) any {
	h.t.Helper()
	return h.apply(structs.JobRequeueType, structs.JobRequeueRequest{JobID: id, By: "alice", At: h.at()})
}

func TestFSM_JobRequeue_StopsTheAttemptAndQueuesItAgainWithoutARestart(t *testing.T) {
	h := newHarness(t)
	h.register(node("n1", 2))
	h.register(node("n2", 2))
	h.submit("g", spec(2, 1)) // no restarts: a requeue uses none
	h.place("g", alloc("g0", "n1", 0, gpuID("n1", 0)), alloc("g1", "n2", 1, gpuID("n2", 0)))
	h.mustUpdate("n1", "g0", structs.AllocRunning, 0, "")
	h.mustUpdate("n2", "g1", structs.AllocRunning, 0, "")

	j, ok := h.requeue("g").(*structs.Job)
	if !ok || j.State != structs.JobRunning || j.Evicted == "" || !strings.Contains(j.Reason, "requeue") {
		t.Fatalf("requeue of a running job: %+v", h.requeue("g"))
	}
	for _, id := range []string{"g0", "g1"} {
		if a := h.alloc(id); a.DesiredState != structs.DesiredStop || !strings.Contains(a.Reason, "by alice") {
			t.Fatalf("%s: desired %s, reason %q; want it stopping, saying who requeued it", id, a.DesiredState, a.Reason)
		}
	}
	// Asked again while it stops: nothing more happens.
	if again, ok := h.requeue("g").(*structs.Job); !ok || again.Evictions != 0 {
		t.Fatalf("a second requeue while it stops: %+v", again)
	}
	// A rank that trapped SIGTERM and exited 0 was still stopped.
	h.mustUpdate("n1", "g0", structs.AllocKilled, 0, "")
	h.mustUpdate("n2", "g1", structs.AllocKilled, 143, "")
	j = h.job("g")
	if j.State != structs.JobQueued || j.Evictions != 1 || j.Evicted != "" || j.RestartsUsed() != 0 || !j.NotBefore.IsZero() {
		t.Fatalf("after the requeue: %s, evictions %d, evicted %q, restarts used %d, not before %v",
			j.State, j.Evictions, j.Evicted, j.RestartsUsed(), j.NotBefore)
	}
	if !strings.Contains(j.Reason, "requeued with scontrol requeue by alice") {
		t.Fatalf("reason %q, want it to say who requeued it", j.Reason)
	}
	// Placed again: the second attempt, on the same nodes or others.
	h.place("g", alloc("g0b", "n2", 0, gpuID("n2", 1)), alloc("g1b", "n1", 1, gpuID("n1", 1)))
	if j = h.job("g"); j.State != structs.JobRunning || j.Attempts != 2 {
		t.Fatalf("placed again: %s, attempt %d", j.State, j.Attempts)
	}
	got := restoreFresh(t, h.f)
	if got.Hash() != h.f.Hash() {
		t.Fatal("a restored snapshot differs from the state it was taken of")
	}
}

func TestFSM_JobRequeue_LeavesAQueuedJobAndRefusesTheOthers(t *testing.T) {
	h := newHarness(t)
	h.register(node("n1", 2))
	h.submit("q", spec(1, 4)) // more GPUs than any node: stays queued
	before := h.f.Hash()
	if j, ok := h.requeue("q").(*structs.Job); !ok || j.State != structs.JobQueued {
		t.Fatalf("requeue of a queued job: %+v", h.requeue("q"))
	}
	if h.f.Hash() != before {
		t.Fatal("requeue of a queued job changed the state")
	}

	h.submit("done", spec(1, 1))
	h.place("done", alloc("d0", "n1", 0, gpuID("n1", 0)))
	h.mustUpdate("n1", "d0", structs.AllocSucceeded, 0, "")
	wantErrIs(t, h.applyErr(structs.JobRequeueType, structs.JobRequeueRequest{JobID: "done", At: h.at()}),
		ErrJobFinished, "succeeded", "only a running or pending job is requeued")

	h.submit("c", spec(1, 1))
	h.place("c", alloc("c0", "n1", 0, gpuID("n1", 1)))
	h.mustUpdate("n1", "c0", structs.AllocRunning, 0, "")
	h.apply(structs.JobCancelType, structs.JobCancelRequest{JobID: "c", At: h.at()})
	wantErrIs(t, h.applyErr(structs.JobRequeueType, structs.JobRequeueRequest{JobID: "c", At: h.at()}),
		ErrInvalidRequest, "being cancelled")

	wantErrIs(t, h.applyErr(structs.JobRequeueType, structs.JobRequeueRequest{JobID: "nope", At: h.at()}), ErrJobNotFound)
}
