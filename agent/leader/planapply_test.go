package leader

import (
	"fmt"
	"slices"
	"testing"

	"github.com/skein-dev/skein/structs"
)

func TestSplitPlan_BoundsEveryEntryAndKeepsGangsWhole(t *testing.T) {
	var plan structs.Plan
	sizes := []int{1, 3, 1, 1, 4, 2, 1, 5, 1}
	for i, n := range sizes {
		plan.Placements = append(plan.Placements, structs.JobPlacement{JobID: fmt.Sprint("p", i), Allocations: make([]structs.Allocation, n)})
	}
	for i := range 11 {
		plan.Blocked = append(plan.Blocked, structs.JobBlocked{JobID: fmt.Sprint("b", i)})
	}
	parts := SplitPlan(plan, 4, 3)

	var placed, blocked []string
	for i, p := range parts {
		allocs := 0
		for _, pl := range p.Placements {
			allocs += len(pl.Allocations)
			placed = append(placed, pl.JobID)
		}
		for _, b := range p.Blocked {
			blocked = append(blocked, b.JobID)
		}
		if (allocs > 4 && len(p.Placements) > 1) || len(p.Blocked) > 3 || (len(p.Placements) == 0 && len(p.Blocked) == 0) {
			t.Errorf("entry %d holds %d allocations in %d placements and %d blocked", i, allocs, len(p.Placements), len(p.Blocked))
		}
	}
	var wantPlaced, wantBlocked []string
	for _, p := range plan.Placements {
		wantPlaced = append(wantPlaced, p.JobID)
	}
	for _, b := range plan.Blocked {
		wantBlocked = append(wantBlocked, b.JobID)
	}
	if !slices.Equal(placed, wantPlaced) || !slices.Equal(blocked, wantBlocked) {
		t.Fatalf("entries carry placements %v and blocked %v, want every one once, in order", placed, blocked)
	}
	if len(SplitPlan(structs.Plan{}, 4, 3)) != 0 {
		t.Fatal("an empty plan made an entry")
	}
}
