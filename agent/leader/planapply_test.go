package leader

import (
	"fmt"
	"slices"
	"testing"

	"github.com/skein-dev/skein/structs"
)

func TestSplitPlan_BoundsEveryEntryAndKeepsGangsAndPreemptionsWhole(t *testing.T) {
	var plan structs.Plan
	for i, n := range []int{1, 3, 1, 1, 4, 2, 1, 5, 1} {
		plan.Placements = append(plan.Placements, structs.JobPlacement{JobID: fmt.Sprint("p", i), Allocations: make([]structs.Allocation, n)})
	}
	for i := range 11 {
		plan.Blocked = append(plan.Blocked, structs.JobBlocked{JobID: fmt.Sprint("b", i)})
	}
	for i := range 4 {
		plan.Cancels = append(plan.Cancels, structs.JobCancel{JobID: fmt.Sprint("c", i)})
	}
	for i, victims := range []int{1, 2} {
		plan.Preemptions = append(plan.Preemptions, structs.Preemption{For: fmt.Sprint("f", i), Victims: make([]string, victims)})
	}
	const maxAllocs, maxReasons = 4, 3
	parts := SplitPlan(plan, maxAllocs, maxReasons)

	var placed, blocked, cancelled, preempting []string
	for i, p := range parts {
		allocs, reasons := 0, 0
		for _, pl := range p.Placements {
			allocs += len(pl.Allocations)
			placed = append(placed, pl.JobID)
		}
		for _, b := range p.Blocked {
			reasons++
			blocked = append(blocked, b.JobID)
		}
		for _, c := range p.Cancels {
			reasons++
			cancelled = append(cancelled, c.JobID)
		}
		for _, pr := range p.Preemptions {
			reasons += 1 + len(pr.Victims)
			preempting = append(preempting, pr.For)
		}
		if (allocs > maxAllocs && len(p.Placements) > 1) || reasons > maxReasons || planEmpty(p) {
			t.Errorf("entry %d holds %d allocations in %d placements and %d reasons", i, allocs, len(p.Placements), reasons)
		}
	}
	ids := func(n int, prefix string) []string {
		var out []string
		for i := range n {
			out = append(out, fmt.Sprint(prefix, i))
		}
		return out
	}
	if !slices.Equal(placed, ids(9, "p")) || !slices.Equal(blocked, ids(11, "b")) ||
		!slices.Equal(cancelled, ids(4, "c")) || !slices.Equal(preempting, ids(2, "f")) {
		t.Fatalf("entries carry placements %v, blocked %v, cancels %v, preemptions %v: want every one once, in order",
			placed, blocked, cancelled, preempting)
	}
	if len(SplitPlan(structs.Plan{}, maxAllocs, maxReasons)) != 0 {
		t.Fatal("an empty plan made an entry")
	}
}

func TestWithoutRefused_DropsRefusedPartsAndEmptyPreemptions(t *testing.T) {
	plan := structs.Plan{
		Placements:  []structs.JobPlacement{{JobID: "a"}, {JobID: "b"}},
		Cancels:     []structs.JobCancel{{JobID: "c"}, {JobID: "d"}},
		Preemptions: []structs.Preemption{{For: "f", Victims: []string{"v1", "v2"}, Attempts: []int{1, 2}}, {For: "g", Victims: []string{"v3"}}},
		Blocked:     []structs.JobBlocked{{JobID: "x", Reason: "waiting"}},
	}
	got := withoutRefused(plan, &structs.PlanResult{
		Rejected:        []structs.JobBlocked{{JobID: "a"}},
		RejectedCancels: []structs.JobBlocked{{JobID: "d"}},
		RejectedVictims: []structs.JobBlocked{{JobID: "v1"}, {JobID: "v3"}},
	})
	want := structs.Plan{
		Placements:  []structs.JobPlacement{{JobID: "b"}},
		Cancels:     []structs.JobCancel{{JobID: "c"}},
		Preemptions: []structs.Preemption{{For: "f", Victims: []string{"v2"}, Attempts: []int{2}}},
		Blocked:     plan.Blocked,
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("withoutRefused = %+v, want %+v", got, want)
	}
}
