package fsm

import (
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/structs"
)

func boolp(b bool) *bool { return &b }

func TestFSM_JobUpdate_HoldReleaseAndChangeAQueuedJob(t *testing.T) {
	h := newHarness(t)
	h.register(node("n1", 4))
	h.submit("j", spec(1, 1))
	name, limit, prio := "renamed", structs.Duration(time.Hour), 5
	h.apply(structs.JobUpdateType, structs.JobUpdateRequest{JobID: "j", Hold: boolp(true), Name: &name, TimeLimit: &limit, Priority: &prio})
	j := h.job("j")
	if !j.Held || j.Reason != reasonHeld || j.Spec.Name != "renamed" || j.Spec.TimeLimit != limit || j.Spec.Priority != 5 {
		t.Fatalf("after hold and update: held %v reason %q spec %+v", j.Held, j.Reason, j.Spec)
	}
	if slicesHasJob(h.f.State().Queued, "j") {
		t.Fatal("a held job is in the scheduler's queue")
	}
	h.apply(structs.JobUpdateType, structs.JobUpdateRequest{JobID: "j", Hold: boolp(false)})
	if j := h.job("j"); j.Held || j.Reason != "" || !slicesHasJob(h.f.State().Queued, "j") {
		t.Fatalf("after release: held %v reason %q, in queue %v", j.Held, j.Reason, slicesHasJob(h.f.State().Queued, "j"))
	}
	g := restoreFresh(t, h.f)
	if g.Hash() != h.f.Hash() {
		t.Fatal("restored state differs")
	}
}

func TestFSM_JobUpdate_RefusesWhatIsNotQueuedOrInvalidAndChangesNothing(t *testing.T) {
	h := newHarness(t)
	h.register(node("n1", 4))
	h.submit("run", spec(1, 1))
	h.place("run", alloc("run0", "n1", 0, gpuID("n1", 0)))
	h.submit("q", spec(1, 1))
	bad := 5000
	before := h.f.Hash()
	for _, tc := range []struct {
		name string
		req  structs.JobUpdateRequest
		want error
		text string
	}{
		{"nothing to change", structs.JobUpdateRequest{JobID: "q"}, ErrInvalidRequest, "nothing to change"},
		{"running job", structs.JobUpdateRequest{JobID: "run", Hold: boolp(true)}, ErrInvalidRequest, "only a job waiting in the queue"},
		{"unknown job", structs.JobUpdateRequest{JobID: "nope", Hold: boolp(true)}, ErrJobNotFound, "job nope"},
		{"bad priority", structs.JobUpdateRequest{JobID: "q", Priority: &bad}, nil, "priority"},
		{"unknown array", structs.JobUpdateRequest{ArrayID: "arr", Hold: boolp(true)}, ErrJobNotFound, "job array arr"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := h.applyErr(structs.JobUpdateType, tc.req)
			if tc.want != nil {
				wantErrIs(t, err, tc.want, tc.text)
			} else if err == nil || !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("error %v, want one naming %s", err, tc.text)
			}
		})
	}
	if h.f.Hash() != before {
		t.Fatal("a refused update changed state")
	}
}

func TestFSM_JobUpdate_AnArraysQueuedTasksAndSubmittedHeld(t *testing.T) {
	h := newHarness(t)
	h.register(node("n1", 4))
	s := spec(1, 1)
	s.Array, s.Hold = &structs.ArraySpec{Start: 0, End: 2}, true
	h.submit("arr", s)
	for i := range 3 {
		if j := h.job(structs.ArrayTaskID("arr", i)); !j.Held || j.Reason != reasonSubmittedHeld {
			t.Fatalf("task %d submitted with --hold: held %v reason %q", i, j.Held, j.Reason)
		}
	}
	resp := h.apply(structs.JobUpdateType, structs.JobUpdateRequest{ArrayID: "arr", Hold: boolp(false)})
	if jobs, ok := resp.([]*structs.Job); !ok || len(jobs) != 3 || jobs[0].Held {
		t.Fatalf("array release answered %v, want the 3 tasks released", resp)
	}
	if n := len(h.f.State().Queued); n != 3 {
		t.Fatalf("%d tasks queued for the scheduler after release, want 3", n)
	}
}

func slicesHasJob(jobs []*structs.Job, id string) bool {
	for _, j := range jobs {
		if j.ID == id {
			return true
		}
	}
	return false
}
