package fsm

import (
	"reflect"
	"testing"
	"time"

	"github.com/skein-dev/skein/structs"
)

// TestFSM_SnapshotRestoresTheNewIndexes proves that Restore rebuilds the
// live-per-node, array and dependents indexes: the restored FSM answers
// the queries that read them as the original does, and goes on exactly as
// it does through an array cancel and a GC.
func TestFSM_SnapshotRestoresTheNewIndexes(t *testing.T) {
	h := newHarness(t)
	h.register(node("n1", 2))
	h.register(node("n2", 1))
	s := spec(1, 1)
	s.Array = &structs.ArraySpec{Start: 0, End: 11} // IDs arr-10 and arr-11 sort before arr-2
	h.apply(structs.JobSubmitType, structs.JobSubmitRequest{JobID: "arr", Spec: s, SubmittedAt: h.at()})
	h.place("arr-10", alloc("t10", "n1", 0, gpuID("n1", 0)))
	h.place("arr-2", alloc("t2", "n2", 0, gpuID("n2", 0)))
	h.mustUpdate("n2", "t2", structs.AllocSucceeded, 0, "")
	h.finished("dep", spec(1, 0))
	h.finished("gone", spec(1, 0))
	child := spec(1, 0)
	child.After = []structs.Dependency{{JobID: "dep", Condition: structs.AfterOK}, {JobID: "gone", Condition: structs.AfterAny}}
	h.submit("child", child)
	h.apply(structs.JobCancelType, structs.JobCancelRequest{JobID: "child", At: h.at()})
	if err := h.gc(0, h.at(), "gone"); err != nil {
		t.Fatal(err)
	}
	h.submit("child2", child)

	g := restoreFresh(t, h.f)
	if err := checkIndexes(g.st); err != nil {
		t.Fatalf("restored indexes: %v", err)
	}
	for _, n := range []string{"n1", "n2"} {
		if !reflect.DeepEqual(g.NodeLiveAllocs(n), h.f.NodeLiveAllocs(n)) {
			t.Fatalf("restored live allocations of %s differ", n)
		}
	}
	wantTasks, _ := h.f.ArrayTasks("arr")
	if gotTasks, _ := g.ArrayTasks("arr"); !reflect.DeepEqual(gotTasks, wantTasks) {
		t.Fatal("restored array tasks differ")
	}
	n1, o1 := h.f.GCHolds()
	n2, o2 := g.GCHolds()
	if !reflect.DeepEqual(n1, n2) || !reflect.DeepEqual(o1, o2) || !n1["dep"] || !o1["arr"] {
		t.Fatalf("GC holds: original %v %v, restored %v %v", n1, o1, n2, o2)
	}

	other := &harness{t: t, f: g, idx: h.idx}
	far := h.at().Add(time.Hour)
	for _, x := range []*harness{h, other} {
		tasks, ok := x.apply(structs.JobCancelType, structs.JobCancelRequest{ArrayID: "arr", At: x.at()}).([]*structs.Job)
		if !ok || len(tasks) == 0 || tasks[len(tasks)-1].ID != "arr-11" {
			t.Fatalf("array cancel answered %+v", tasks)
		}
		x.mustUpdate("n1", "t10", structs.AllocKilled, 143, "")
		x.apply(structs.JobCancelType, structs.JobCancelRequest{JobID: "child2", At: x.at()})
		if err := x.gc(0, far, "arr-0", "arr-2", "arr-10", "dep", "child", "child2"); err != nil {
			t.Fatal(err)
		}
	}
	if g.Hash() != h.f.Hash() {
		t.Fatal("original and restored FSM diverged after the same entries")
	}
	if err := checkIndexes(g.st); err != nil {
		t.Fatal(err)
	}
}
