package fsm

import (
	"testing"
	"time"

	"github.com/skein-dev/skein/structs"
)

func TestFSM_JobNumbers_IncreaseAndNameTheirJobs(t *testing.T) {
	h := newHarness(t)
	h.numbersOn()
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
	h.numbersOn()
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
	h.numbersOn()
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

// numbersOn turns job numbers on, as a leader does once every node
// applies the entry.
func (h *harness) numbersOn() {
	h.t.Helper()
	if err := h.applyErr(structs.JobNumbersStartType, struct{}{}); err != nil {
		h.t.Fatalf("job numbers start: %v", err)
	}
}

// TestFSM_JobNumbers_TurnedOnNumberEveryJobInOrderAndReplicasAgree: until
// numbers are on a job gets none (a node of the release before may be in
// the cluster); the entry that turns them on numbers every job so far in
// the order it was made, an array's tasks by index; later jobs get the
// next. A replica that restored a snapshot from before the entry and
// applies the rest of the log numbers every job as the others do.
func TestFSM_JobNumbers_TurnedOnNumberEveryJobInOrderAndReplicasAgree(t *testing.T) {
	h := newHarness(t)
	h.register(node("n1", 4))
	a := h.submit("zz", spec(1, 0))
	arr := spec(1, 0)
	arr.Array = &structs.ArraySpec{Start: 0, End: 2}
	h.submit("arr", arr)
	b := h.submit("aa", spec(1, 0))
	if a.Number != 0 || b.Number != 0 || h.f.JobNumbersOn() {
		t.Fatalf("numbers %d and %d before they are on, want none", a.Number, b.Number)
	}
	before := snapshotBytes(t, h.f)
	replica := &harness{t: t, f: New(nil), idx: h.idx}
	if err := replica.f.Restore(readCloser(before)); err != nil {
		t.Fatal(err)
	}
	h.numbersOn()
	h.numbersOn() // a second start changes nothing
	c := h.submit("c", spec(1, 0))
	for id, want := range map[string]uint64{"zz": 1, "arr-0": 2, "arr-1": 3, "arr-2": 4, "aa": 5} {
		if j := h.job(id); j.Number != want {
			t.Errorf("job %s: number %d, want %d", id, j.Number, want)
		}
	}
	if task := h.job("arr-2"); task.ArrayNumber != 2 || task.SlurmID() != "2_2" {
		t.Errorf("array task arr-2: array number %d (%s), want 2 (2_2)", task.ArrayNumber, task.SlurmID())
	}
	if c.Number != 6 {
		t.Errorf("the job after the start: number %d, want 6", c.Number)
	}
	if j, err := h.f.FindJob("5"); err != nil || j.ID != "aa" {
		t.Errorf("FindJob(5) = %v, %v; want aa", j, err)
	}
	replica.numbersOn() // the same entries, from the same index
	replica.numbersOn()
	replica.submit("c", spec(1, 0))
	if replica.f.Hash() != h.f.Hash() {
		t.Fatal("a replica restored from before the start numbers its jobs otherwise")
	}
	after := restoreFresh(t, h.f)
	if !after.JobNumbersOn() || after.Hash() != h.f.Hash() {
		t.Fatal("a snapshot taken once numbers are on does not keep them on")
	}
}
