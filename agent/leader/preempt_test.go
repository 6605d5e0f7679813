package leader

import (
	"fmt"
	"testing"
	"time"

	"github.com/skein-dev/skein/structs"
)

func TestHoldBehindPreemptions_KeepsTheFreedGPUsForThePreemptingJob(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	mk := func(id string, prio, minute int) *structs.Job {
		return &structs.Job{ID: id, State: structs.JobQueued, SubmittedAt: at.Add(time.Duration(minute) * time.Minute),
			Spec: structs.JobSpec{Priority: prio}}
	}
	top, urgent, other, also, low := mk("top", 20, 5), mk("urgent", 10, 1), mk("other", 10, 2), mk("also", 5, 0), mk("low", 0, 0)
	queued := []*structs.Job{top, urgent, other, also, low}
	preempting := map[string]int{"urgent": 1, "also": 2}
	keep, held := holdBehindPreemptions(queued, queued, preempting)
	var kept, heldIDs []string
	for _, j := range keep {
		kept = append(kept, j.ID)
	}
	for _, b := range held {
		heldIDs = append(heldIDs, b.JobID)
	}
	if fmt.Sprint(kept) != "[top urgent also]" || fmt.Sprint(heldIDs) != "[other low]" {
		t.Fatalf("kept %v, held %v; want [top urgent also] kept, [other low] held", kept, heldIDs)
	}
	if keep, held := holdBehindPreemptions(queued, queued, nil); len(keep) != len(queued) || held != nil {
		t.Fatalf("with no preemption under way %d of %d jobs kept, %d held", len(keep), len(queued), len(held))
	}
}
