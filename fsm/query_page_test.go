package fsm

import (
	"errors"
	"fmt"
	"testing"

	"github.com/skein-dev/skein/structs"
)

func TestFSM_JobsPageWalksEveryJobOnceWhileJobsAreAdded(t *testing.T) {
	h := newHarness(t)
	want := map[string]bool{}
	add := func(n int) {
		for range n {
			id := fmt.Sprintf("j%03d", len(want))
			tasks := 0
			if len(want)%5 == 0 {
				tasks = 12 // arrays: tasks share a create index, and 10 sorts before 2 as a string
			}
			if _, ok := h.submitAs("alice", id, tasks, spec(1, 0)).(*structs.Job); !ok {
				t.Fatalf("submit %s refused", id)
			}
			if tasks == 0 {
				want[id] = true
			}
			for i := range tasks {
				want[structs.ArrayTaskID(id, i)] = true
			}
		}
	}
	add(7)
	seen := map[string]int{}
	var cursor JobCursor
	var last *structs.Job
	for pages := 0; ; pages++ {
		if pages > 100 {
			t.Fatal("paging does not end")
		}
		page, more := h.f.JobsPage(cursor, 5, nil)
		for _, j := range page {
			seen[j.ID]++
			if last != nil && CursorOf(last).compare(j) <= 0 {
				t.Fatalf("job %s listed after %s, out of order", j.ID, last.ID)
			}
			last = j
		}
		if len(page) > 0 {
			// Round-trip the cursor as a client would.
			c, err := ParseJobCursor(CursorOf(page[len(page)-1]).String())
			if err != nil {
				t.Fatal(err)
			}
			cursor = c
		}
		if pages < 6 {
			add(2) // new jobs arrive while the client pages
			more = true
		}
		if !more {
			break
		}
	}
	for id := range want {
		if seen[id] != 1 {
			t.Errorf("job %s listed %d times, want once", id, seen[id])
		}
	}
	if len(seen) != len(want) {
		t.Errorf("listed %d jobs, want %d", len(seen), len(want))
	}
}

func TestFSM_JobsPageFilters(t *testing.T) {
	h := newHarness(t)
	for i := range 6 {
		owner := []string{"alice", "bob"}[i%2]
		h.submitAs(owner, fmt.Sprintf("j%d", i), 0, spec(1, 0))
	}
	page, more := h.f.JobsPage(JobCursor{}, 2, func(j *structs.Job) bool { return j.Owner == "bob" })
	if len(page) != 2 || !more || page[0].ID != "j1" || page[1].ID != "j3" {
		t.Fatalf("first page of bob's jobs %v (more %v), want j1, j3 and more", jobIDs(page), more)
	}
	page, more = h.f.JobsPage(CursorOf(page[1]), 2, func(j *structs.Job) bool { return j.Owner == "bob" })
	if len(page) != 1 || more || page[0].ID != "j5" {
		t.Fatalf("second page %v (more %v), want j5 and no more", jobIDs(page), more)
	}
}

func TestParseJobCursor_RefusesWhatItDidNotWrite(t *testing.T) {
	for _, s := range []string{"x", "1.2", "a.1.j", "1.b.j", "1.2.", "-1.0.j"} {
		_, err := ParseJobCursor(s)
		var fe *structs.FieldError
		if !errors.As(err, &fe) || fe.Field != "after" {
			t.Errorf("ParseJobCursor(%q) = %v, want a FieldError on after", s, err)
		}
	}
	c := JobCursor{CreateIndex: 12, ArrayIndex: 3, ID: "abc.def-3"}
	if got, err := ParseJobCursor(c.String()); err != nil || got != c {
		t.Fatalf("round trip of %v gave %v, %v", c, got, err)
	}
}
