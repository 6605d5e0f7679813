package fsm

import (
	"fmt"
	"slices"
	"testing"

	"github.com/skein-dev/skein/structs"
)

func TestQueuePage_PagesThroughTheQueueInSchedulingOrder(t *testing.T) {
	h := newHarness(t)
	for i := range 7 {
		s := spec(1, 1)
		s.Priority = i % 3
		h.submit(fmt.Sprintf("job-%d", i), s)
	}
	h.apply(structs.JobCancelType, structs.JobCancelRequest{JobID: "job-4", At: h.at()})
	var want []string
	for _, j := range h.f.State().Queued {
		want = append(want, j.ID)
	}
	var got []string
	for offset := 0; ; offset += 3 {
		page, total := h.f.QueuePage(offset, 3)
		if total != len(want) {
			t.Fatalf("total %d, want %d", total, len(want))
		}
		if len(page) == 0 {
			break
		}
		for _, j := range page {
			got = append(got, j.ID)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("pages hold %v, want the queue %v", got, want)
	}
	if len(want) != 6 || slices.Contains(want, "job-4") {
		t.Fatalf("queue %v: want the 6 jobs not cancelled", want)
	}
	if page, _ := h.f.QueuePage(100, 3); len(page) != 0 {
		t.Fatalf("past the end: %d jobs, want none", len(page))
	}
	if page, _ := h.f.QueuePage(-1, -1); len(page) != 0 {
		t.Fatalf("negative limit: %d jobs, want none", len(page))
	}
}
