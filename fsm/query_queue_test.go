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
	// A page near the head of a long queue is kept while the queue is
	// read, a page further on is sorted from all of it: both agree.
	for i := range 40 {
		s := spec(1, 1)
		s.Priority = i % 5
		h.submit(fmt.Sprintf("more-%d", i), s)
	}
	var all []string
	for _, j := range h.f.State().Queued {
		all = append(all, j.ID)
	}
	for _, pg := range [][2]int{{0, 1}, {0, 5}, {3, 4}, {10, 30}, {40, 10}, {0, 100}} {
		page, total := h.f.QueuePage(pg[0], pg[1])
		var ids []string
		for _, j := range page {
			ids = append(ids, j.ID)
		}
		if want := all[min(pg[0], len(all)):min(pg[0]+pg[1], len(all))]; !slices.Equal(ids, want) || total != len(all) {
			t.Fatalf("QueuePage(%d, %d) = %v of %d, want %v of %d", pg[0], pg[1], ids, total, want, len(all))
		}
	}
	if page, _ := h.f.QueuePage(100, 3); len(page) != 0 {
		t.Fatalf("past the end: %d jobs, want none", len(page))
	}
	if page, _ := h.f.QueuePage(-1, -1); len(page) != 0 {
		t.Fatalf("negative limit: %d jobs, want none", len(page))
	}
}
