package fsm

import (
	"testing"
	"time"

	"github.com/skein-dev/skein/structs"
)

func TestFSM_JobNumbers_IncreaseAndNameTheirJobs(t *testing.T) {
	h := newHarness(t)
	h.register(node("n1", 4))
	a := h.submit("a", spec(1, 0))
	b := h.submit("b", spec(1, 0))
	arr := spec(1, 0)
	arr.Array = &structs.ArraySpec{Start: 2, End: 4}
	first := h.submit("arr", arr)
	if a.Number != 1 || b.Number != 2 || first.Number != 3 || first.ArrayNumber != 3 {
		t.Fatalf("numbers a=%d b=%d array's first=%d/%d, want 1, 2, 3/3", a.Number, b.Number, first.Number, first.ArrayNumber)
	}
	for i, want := range map[int]uint64{2: 3, 3: 4, 4: 5} {
		task := h.job(structs.ArrayTaskID("arr", i))
		if task.Number != want || task.ArrayNumber != 3 || task.SlurmID() != "3_"+string(rune('0'+i)) {
			t.Fatalf("task %d: number %d array %d (%s), want %d of 3", i, task.Number, task.ArrayNumber, task.SlurmID(), want)
		}
	}
	for q, want := range map[string]string{"1": "a", "2": "b", "3_2": "arr-2", "3_4": "arr-4", "4": "arr-3", "a": "a"} {
		j, err := h.f.FindJob(q)
		if err != nil || j.ID != want {
			t.Fatalf("FindJob(%q) = %v, %v; want job %s", q, j, err, want)
		}
	}
	_, err := h.f.FindJob("3")
	wantErrIs(t, err, ErrAmbiguousID, "job 3", "an array of 3 tasks (3_2, 3_3, 3_4)")
	_, err = h.f.FindJob("3_9")
	wantErrIs(t, err, ErrJobNotFound, "job 3_9")
	_, err = h.f.FindJob("99")
	wantErrIs(t, err, ErrJobNotFound, "job 99")
	tasks, err := h.f.ArrayTasks("3")
	if err != nil || len(tasks) != 3 || tasks[0].ID != "arr-2" {
		t.Fatalf("ArrayTasks(3) = %d tasks, %v; want the 3 of arr", len(tasks), err)
	}
	if _, err := h.f.ArrayTasks("1"); err == nil {
		t.Fatal("ArrayTasks(1) found an array for a plain job's number")
	}
}

func TestFSM_JobNumbers_NeverGivenTwiceAcrossGCAndRestore(t *testing.T) {
	h := newHarness(t)
	h.register(node("n1", 4))
	h.finished("old", spec(1, 0))
	last := h.finished("newest", spec(1, 0))
	if err := h.gc(time.Minute, last.Add(time.Hour), "old", "newest"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.f.FindJob("2"); err == nil {
		t.Fatal("the number of a collected job still names it")
	}
	g := restoreFresh(t, h.f)
	if g.Hash() != h.f.Hash() {
		t.Fatal("restored state differs")
	}
	other := &harness{t: t, f: g, idx: h.idx}
	for _, x := range []*harness{h, other} {
		if j := x.submit("next", spec(1, 0)); j.Number != 3 {
			t.Fatalf("the next job after 2 collected ones got number %d, want 3", j.Number)
		}
	}
}

func TestFSM_JobNumbers_ServiceReplicasHaveOne(t *testing.T) {
	h := newHarness(t)
	h.register(node("n1", 4))
	h.submit("a", spec(1, 0))
	h.registerService(service("web", 2, 0))
	seen := map[uint64]bool{}
	for _, j := range h.f.Jobs() {
		if j.Number == 0 || seen[j.Number] {
			t.Fatalf("job %s has number %d, want a new one", j.ID, j.Number)
		}
		seen[j.Number] = true
	}
	if len(seen) != 3 {
		t.Fatalf("%d jobs numbered, want 3", len(seen))
	}
}
