package fsm

import (
	"reflect"
	"testing"

	"github.com/skein-dev/skein/structs"
)

// arrayUnderWay submits array "arr" with tasks 0..3 on a one-GPU node n1
// and n2: task 1 runs, task 2 has succeeded, tasks 0 and 3 wait.
func arrayUnderWay(t *testing.T) *harness {
	h := newHarness(t)
	h.register(node("n1", 1))
	h.register(node("n2", 1))
	s := spec(1, 1)
	s.Array = &structs.ArraySpec{Start: 0, End: 3}
	h.apply(structs.JobSubmitType, structs.JobSubmitRequest{JobID: "arr", Spec: s, SubmittedAt: h.at()})
	h.place("arr-1", alloc("t1", "n1", 0, gpuID("n1", 0)))
	h.mustUpdate("n1", "t1", structs.AllocRunning, 0, "")
	h.place("arr-2", alloc("t2", "n2", 0, gpuID("n2", 0)))
	h.mustUpdate("n2", "t2", structs.AllocSucceeded, 0, "")
	return h
}

// unindexed strips what differs between entries that make the same change
// at different log indexes.
func unindexed(jobs []*structs.Job, allocs []*structs.Allocation) ([]*structs.Job, []*structs.Allocation) {
	for _, j := range jobs {
		j.ModifyIndex = 0
	}
	for _, a := range allocs {
		a.ModifyIndex = 0
	}
	return jobs, allocs
}

func TestFSM_ArrayCancelEndsEveryUnfinishedTaskInOneEntry(t *testing.T) {
	whole, oneByOne := arrayUnderWay(t), arrayUnderWay(t)
	at := whole.at()
	idx := whole.idx
	resp := whole.apply(structs.JobCancelType, structs.JobCancelRequest{ArrayID: "arr", Reason: "wrong data", At: at})
	tasks, ok := resp.([]*structs.Job)
	if !ok || len(tasks) != 3 {
		t.Fatalf("array cancel answered %+v, want the 3 tasks it cancelled", resp)
	}
	for i, id := range []string{"arr-0", "arr-1", "arr-3"} {
		if tasks[i].ID != id {
			t.Fatalf("array cancel answered task %s in place %d, want %s", tasks[i].ID, i, id)
		}
	}
	if tasks[2].State != structs.JobCancelled || !tasks[1].StopRequested {
		t.Fatalf("array cancel answered %+v and %+v: want them as it left them", tasks[2], tasks[1])
	}
	if whole.f.Index() != idx+1 {
		t.Fatalf("array cancel took %d entries", whole.f.Index()-idx)
	}
	for _, id := range []string{"arr-0", "arr-1", "arr-3"} {
		oneByOne.apply(structs.JobCancelType, structs.JobCancelRequest{JobID: id, Reason: "wrong data", At: at})
	}
	var allocs [2][]*structs.Allocation
	for i, h := range []*harness{whole, oneByOne} {
		allocs[i] = append(h.f.Allocs("arr-1"), h.f.Allocs("arr-2")...)
	}
	wj, wa := unindexed(whole.f.Jobs(), allocs[0])
	oj, oa := unindexed(oneByOne.f.Jobs(), allocs[1])
	if !reflect.DeepEqual(wj, oj) || !reflect.DeepEqual(wa, oa) {
		t.Fatal("one array cancel differs from cancelling its tasks one by one")
	}
	if j := whole.job("arr-1"); !j.StopRequested || whole.alloc("t1").DesiredState != structs.DesiredStop {
		t.Fatalf("running task was not asked to stop: %+v", j)
	}
	if j := whole.job("arr-2"); j.State != structs.JobSucceeded {
		t.Fatalf("finished task changed to %s", j.State)
	}

	// While a task still stops, the array has not ended: cancelling it
	// again changes nothing. Once every task has ended it is refused.
	before := whole.f.Hash()
	if js, ok := whole.apply(structs.JobCancelType, structs.JobCancelRequest{ArrayID: "arr", At: whole.at()}).([]*structs.Job); !ok || len(js) != 1 || js[0].ID != "arr-1" || whole.f.Hash() != before {
		t.Fatalf("repeated array cancel: %+v", js)
	}
	whole.mustUpdate("n1", "t1", structs.AllocKilled, 143, "")
	err := whole.applyErr(structs.JobCancelType, structs.JobCancelRequest{ArrayID: "arr", At: whole.at()})
	wantErrIs(t, err, ErrJobFinished, "job array arr")
}

func TestFSM_ArrayCancelRefusesBadRequestsAndChangesNothing(t *testing.T) {
	h := arrayUnderWay(t)
	before := h.f.Hash()
	for _, c := range []struct {
		name   string
		req    structs.JobCancelRequest
		target error
		text   string
	}{
		{"unknown array", structs.JobCancelRequest{ArrayID: "nope"}, ErrJobNotFound, "job array nope"},
		{"a task is not an array", structs.JobCancelRequest{ArrayID: "arr-1"}, ErrJobNotFound, "job array arr-1"},
		{"both a job and an array", structs.JobCancelRequest{JobID: "arr-0", ArrayID: "arr"}, ErrInvalidRequest, "both"},
	} {
		t.Run(c.name, func(t *testing.T) {
			wantErrIs(t, h.applyErr(structs.JobCancelType, c.req), c.target, c.text)
			if h.f.Hash() != before {
				t.Fatal("a refused cancel changed the state")
			}
		})
	}
}

func TestFSM_ArrayTasksReadsTheArrayIndex(t *testing.T) {
	h := newHarness(t)
	for _, id := range []string{"abc", "abd"} {
		s := spec(1, 0)
		s.Array = &structs.ArraySpec{Start: 8, End: 11}
		h.apply(structs.JobSubmitType, structs.JobSubmitRequest{JobID: id, Spec: s, SubmittedAt: h.at()})
	}
	for _, f := range []*FSM{h.f, restoreFresh(t, h.f)} {
		tasks, err := f.ArrayTasks("abc")
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, j := range tasks {
			ids = append(ids, j.ID)
		}
		if want := []string{"abc-8", "abc-9", "abc-10", "abc-11"}; !reflect.DeepEqual(ids, want) {
			t.Fatalf("tasks %v, want %v in index order", ids, want)
		}
		_, err = f.ArrayTasks("ab")
		wantErrIs(t, err, ErrAmbiguousID, "2 arrays")
		_, err = f.ArrayTasks("abc-8")
		wantErrIs(t, err, ErrJobNotFound)
	}
}
