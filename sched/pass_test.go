package sched

import (
	"slices"
	"testing"
	"time"

	"github.com/skein-dev/skein/structs"
)

func TestDecide_JobsInRestartBackoffWaitSilentlyAndWakeAtTheEarliestEnd(t *testing.T) {
	later, soon, over := job("later", 1), job("soon", 1), job("over", 1)
	later.NotBefore = t0.Add(2 * time.Minute)
	soon.NotBefore = t0.Add(time.Minute)
	over.NotBefore = t0 // its backoff ends now: it may run
	v := fakeView{fakeState: fakeState{nodes: []*structs.Node{gpuNode("n1", 8, "H100", 80)}},
		queued: []*structs.Job{later, soon, over}}

	d := Decide(v, Inputs{Now: t0})
	if got := placedIDs(d.Plan); !slices.Equal(got, []string{"over"}) {
		t.Fatalf("placed %v, want [over]: jobs in backoff must wait", got)
	}
	if len(d.Plan.Blocked) != 0 {
		t.Fatalf("blocked %+v: a job in backoff waits without a reason", d.Plan.Blocked)
	}
	if !d.Wake.Equal(soon.NotBefore) {
		t.Fatalf("wake at %v, want %v (the earliest end of a backoff)", d.Wake, soon.NotBefore)
	}

	if d := Decide(v, Inputs{Now: later.NotBefore}); !d.Wake.IsZero() || len(d.Plan.Placements) != 3 {
		t.Fatalf("once every backoff is over: wake %v, %d placed; want zero and 3", d.Wake, len(d.Plan.Placements))
	}
}

func TestDecide_WritesOnlyReasonsThatChanged(t *testing.T) {
	full := fakeState{
		nodes:  []*structs.Node{gpuNode("n1", 4, "H100", 80)},
		allocs: []*structs.Allocation{running("busy", "n1", 0, 0, gpus("n1", 0, 4)...)},
	}
	same, stale := job("same", 4), job("stale", 4, prio(-1))
	v := fakeView{fakeState: full, queued: []*structs.Job{same, stale}}
	first := Decide(v, Inputs{Now: t0})
	if len(first.Plan.Blocked) != 2 {
		t.Fatalf("blocked %+v, want both jobs with their reasons", first.Plan.Blocked)
	}
	same.Reason = blockedReason(first.Plan, "same")
	stale.Reason = "an old reason"

	d := Decide(v, Inputs{Now: t0})
	if len(d.Plan.Blocked) != 1 || d.Plan.Blocked[0].JobID != "stale" ||
		d.Plan.Blocked[0].Reason != blockedReason(first.Plan, "stale") {
		t.Fatalf("blocked %+v, want only stale's new reason", d.Plan.Blocked)
	}
}

func TestDecide_AnEmptyQueueDecidesNothing(t *testing.T) {
	v := fakeView{fakeState: fakeState{nodes: []*structs.Node{gpuNode("n1", 4, "H100", 80)}}}
	d := Decide(v, Inputs{Now: t0, Silent: map[string]bool{"n1": true}})
	if d.Plan.Placements != nil || d.Plan.Blocked != nil || d.Plan.Cancels != nil || d.Plan.Preemptions != nil || !d.Wake.IsZero() {
		t.Fatalf("decision %+v, want none", d)
	}
}

// placedIDs lists the jobs a plan places, in plan order.
func placedIDs(p structs.Plan) []string {
	out := []string{}
	for _, jp := range p.Placements {
		out = append(out, jp.JobID)
	}
	return out
}
