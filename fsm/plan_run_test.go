package fsm

import (
	"reflect"
	"testing"

	"github.com/skein-dev/skein/structs"
)

func TestFSM_PlanCancelEndsAQueuedJobAsAUserCancelDoes(t *testing.T) {
	h := newHarness(t)
	h.submit("byplan", spec(1, 0))
	h.submit("byuser", spec(1, 0))
	at := h.at()
	if res := h.plan(structs.Plan{Cancels: []structs.JobCancel{{JobID: "byplan", Reason: "dependency d1 failed"}}}); !reflect.DeepEqual(res, &structs.PlanResult{}) {
		t.Fatalf("plan refused a valid cancel: %+v", res)
	}
	planned := h.job("byplan")
	h.apply(structs.JobCancelType, structs.JobCancelRequest{JobID: "byuser", Reason: "dependency d1 failed", At: at})
	user := h.job("byuser")
	// Same end state; only the identity and the entry differ.
	user.ID, user.Number, user.SubmittedAt, user.CreateIndex, user.ModifyIndex = planned.ID, planned.Number, planned.SubmittedAt, planned.CreateIndex, planned.ModifyIndex
	if !reflect.DeepEqual(planned, user) {
		t.Fatalf("plan cancel: %+v\nuser cancel: %+v", planned, user)
	}
	if planned.State != structs.JobCancelled || planned.Reason != "dependency d1 failed" || !planned.FinishedAt.Equal(at) {
		t.Fatalf("cancelled by plan: %+v", planned)
	}
	h.submit("quiet", spec(1, 0))
	h.plan(structs.Plan{Cancels: []structs.JobCancel{{JobID: "quiet"}}})
	if j := h.job("quiet"); j.Reason != reasonPlanCancel {
		t.Fatalf("a plan cancel without a reason says %q, want %q", j.Reason, reasonPlanCancel)
	}
}

func TestFSM_PlanPreemptionMarksAsJobPreemptDoes(t *testing.T) {
	byPlan, byEntry := lowRunning(t, 0), lowRunning(t, 0)
	res := byPlan.plan(structs.Plan{Preemptions: []structs.Preemption{{For: "high", Victims: []string{"low"}, Attempts: []int{1}}}})
	if !reflect.DeepEqual(res, &structs.PlanResult{}) {
		t.Fatalf("plan refused a valid preemption: %+v", res)
	}
	err := byEntry.applyErr(structs.JobPreemptType, structs.JobPreemptRequest{For: "high", Victims: []string{"low"}, Attempts: []int{1}, At: byEntry.at()})
	if err != nil {
		t.Fatal(err)
	}
	if byPlan.f.Hash() != byEntry.f.Hash() {
		t.Fatalf("plan preemption left\n%+v\nJobPreempt left\n%+v", byPlan.job("low"), byEntry.job("low"))
	}
	// Repeated in a later plan, it changes nothing and refuses nothing.
	before := byPlan.f.Hash()
	res = byPlan.plan(structs.Plan{Preemptions: []structs.Preemption{{For: "high", Victims: []string{"low"}}}})
	if !reflect.DeepEqual(res, &structs.PlanResult{}) || byPlan.f.Hash() != before {
		t.Fatalf("a repeated preemption changed the state or was refused: %+v", res)
	}
}

// mixedPlanState holds a running preemptible job "low" on n1's four GPUs,
// a queued urgent job "high" needing them, a queued "small" that fits on
// n2, a running "solid" on n2, and a cancelled job "done".
func mixedPlanState(t *testing.T) *harness {
	h := lowRunning(t, 0)
	h.register(node("n2", 2))
	h.submit("small", spec(1, 1))
	h.submit("solid", spec(1, 1))
	h.place("solid", alloc("solid0", "n2", 0, gpuID("n2", 0)))
	h.submit("done", spec(1, 0))
	h.apply(structs.JobCancelType, structs.JobCancelRequest{JobID: "done", At: h.at()})
	return h
}

// mixedPlan has a valid and a refused part of every kind.
func mixedPlan() structs.Plan {
	return structs.Plan{
		Cancels: []structs.JobCancel{
			{JobID: "ghost", Reason: "dependency gone"},
			{JobID: "done", Reason: "dependency gone"},
		},
		Preemptions: []structs.Preemption{
			{For: "high", Victims: []string{"low", "solid"}},
			{For: "done", Victims: []string{"low"}},
		},
		Placements: []structs.JobPlacement{
			{JobID: "small", Allocations: []structs.Allocation{alloc("s0", "n2", 0, gpuID("n2", 1))}},
			{JobID: "high", Allocations: []structs.Allocation{alloc("h0", "n1", 0, gpuID("n1", 0), gpuID("n1", 1), gpuID("n1", 2), gpuID("n1", 3))}},
		},
	}
}

func TestFSM_PlanReportsEveryRefusedPartAndAppliesTheRest(t *testing.T) {
	h := mixedPlanState(t)
	res := h.plan(mixedPlan())
	want := &structs.PlanResult{
		Rejected: []structs.JobBlocked{{JobID: "high",
			Reason: "allocation 0: GPU " + gpuID("n1", 0) + " on node name-n1 is held by allocation low0 of job low"}},
		RejectedCancels: []structs.JobBlocked{
			{JobID: "ghost", Reason: "job not found"},
			{JobID: "done", Reason: "job is cancelled, not queued"},
		},
		RejectedVictims: []structs.JobBlocked{
			{JobID: "solid", Reason: "victim solid: cannot be preempted: not submitted as preemptible"},
			{JobID: "low", Reason: "preempting job done: cannot be preempted: it is cancelled, not waiting in the queue"},
		},
	}
	if !reflect.DeepEqual(res, want) {
		t.Fatalf("plan result\n%+v\nwant\n%+v", res, want)
	}
	if j := h.job("low"); j.PreemptedBy != "high" {
		t.Fatalf("the valid victim was not preempted: %+v", j)
	}
	if j := h.job("small"); j.State != structs.JobRunning {
		t.Fatalf("the valid placement was not applied: %s", j.State)
	}
	if a := h.alloc("solid0"); a.DesiredState != structs.DesiredRun {
		t.Fatal("a refused victim was asked to stop")
	}
	if err := checkIndexes(h.f.st); err != nil {
		t.Fatal(err)
	}
}

func TestFSM_PlanAppliesCancelsThenPreemptionsThenPlacements(t *testing.T) {
	h := lowRunning(t, 0)
	h.register(node("n2", 1))
	res := h.plan(structs.Plan{
		Cancels:     []structs.JobCancel{{JobID: "high", Reason: "dependency failed"}},
		Preemptions: []structs.Preemption{{For: "high", Victims: []string{"low"}}},
		Placements:  []structs.JobPlacement{{JobID: "high", Allocations: []structs.Allocation{alloc("h0", "n2", 0, gpuID("n2", 0))}}},
		Blocked:     []structs.JobBlocked{{JobID: "high", Reason: "no room"}},
	})
	if len(res.RejectedCancels) != 0 || len(res.RejectedVictims) != 1 || len(res.Rejected) != 1 {
		t.Fatalf("a job cancelled by the plan was still preempted for or placed: %+v", res)
	}
	if j := h.job("high"); j.State != structs.JobCancelled || j.Reason != "dependency failed" {
		t.Fatalf("cancelled job after the plan: %+v", j)
	}
	if j := h.job("low"); j.PreemptedBy != "" {
		t.Fatal("a victim was stopped for a job the same plan cancelled")
	}
}

func TestFSM_CheckPlanAgreesWithApplyAndChangesNothing(t *testing.T) {
	h := mixedPlanState(t)
	idx, hash := h.f.Index(), h.f.Hash()
	checked := h.f.CheckPlan(mixedPlan())
	if h.f.Index() != idx || h.f.Hash() != hash {
		t.Fatal("CheckPlan changed the state")
	}
	if applied := h.plan(mixedPlan()); !reflect.DeepEqual(checked, applied) {
		t.Fatalf("CheckPlan\n%+v\nApply\n%+v", checked, applied)
	}
	// Apply sees the parts of its entry before each part; CheckPlan sees
	// committed state only, so it refuses less, never more.
	h.submit("twice", spec(1, 0))
	p := structs.Plan{
		Cancels:    []structs.JobCancel{{JobID: "twice"}},
		Placements: []structs.JobPlacement{{JobID: "twice", Allocations: []structs.Allocation{alloc("t0", "n2", 0)}}},
	}
	if res := h.f.CheckPlan(p); !reflect.DeepEqual(res, &structs.PlanResult{}) {
		t.Fatalf("CheckPlan refused parts that pass on committed state: %+v", res)
	}
	if res := h.plan(p); len(res.Rejected) != 1 {
		t.Fatalf("Apply placed a job its own entry cancelled: %+v", res)
	}
}
