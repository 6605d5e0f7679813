package fsm

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/skein-dev/skein/structs"
)

// gc applies a JobGC entry with the given retention, stamped at.
func (h *harness) gc(retention time.Duration, at time.Time, ids ...string) error {
	h.t.Helper()
	return h.applyErr(structs.JobGCType, structs.JobGCRequest{JobIDs: ids, Retention: structs.Duration(retention), At: at})
}

// finished runs a one-rank job on n1 to success and returns when it ended.
func (h *harness) finished(id string, s structs.JobSpec) time.Time {
	h.t.Helper()
	h.apply(structs.JobSubmitType, structs.JobSubmitRequest{RequestID: "req-" + id, JobID: id, Spec: s, SubmittedAt: h.at()})
	h.place(id, alloc(id+"0", "n1", 0))
	h.mustUpdate("n1", id+"0", structs.AllocSucceeded, 0, "")
	return h.job(id).FinishedAt
}

// wantGone fails unless the job, its allocations and its request ID are
// gone from every query.
func wantGone(t *testing.T, f *FSM, id string) {
	t.Helper()
	if _, ok := f.Job(id); ok {
		t.Fatalf("job %s still there", id)
	}
	if _, ok := f.Alloc(id + "0"); ok || len(f.Allocs(id)) != 0 {
		t.Fatalf("allocations of job %s still there", id)
	}
	if _, ok := f.JobByRequestID("req-" + id); ok {
		t.Fatalf("request id of job %s still answers", id)
	}
	for _, a := range f.NodeLiveAllocs("n1") {
		if a.JobID == id {
			t.Fatalf("node n1 still lists allocation %s of job %s", a.ID, id)
		}
	}
}

// wantSameAfterRestore fails unless the indexes hold and a restored copy
// has the same state.
func wantSameAfterRestore(t *testing.T, f *FSM) {
	t.Helper()
	if err := checkIndexes(f.st); err != nil {
		t.Fatal(err)
	}
	g := restoreFresh(t, f)
	if g.Hash() != f.Hash() || !reflect.DeepEqual(g.Jobs(), f.Jobs()) {
		t.Fatal("restored state differs")
	}
	if err := checkIndexes(g.st); err != nil {
		t.Fatalf("restored indexes: %v", err)
	}
}

func TestFSM_GCRemovesExpiredJobsAndKeepsTheRest(t *testing.T) {
	h := newHarness(t)
	h.register(node("n1", 1))
	oldAt := h.finished("old", spec(1, 0))
	h.finished("young", spec(1, 0))
	h.submit("queued", spec(1, 0))
	h.submit("running", spec(1, 0))
	h.place("running", alloc("running0", "n1", 0))
	// At is exactly old's end plus the retention: expired, young not yet.
	const retention = time.Hour
	at := oldAt.Add(retention)

	err := h.gc(retention, at, "queued", "old", "young", "ghost", "running")
	wantErrIs(t, err, ErrJobRetained, "job queued: job must be kept: it is queued, not finished",
		"job running: job must be kept: it is running", "job young: job must be kept: finished at")
	wantErrIs(t, err, ErrJobNotFound, "job ghost")
	wantGone(t, h.f, "old")
	for _, id := range []string{"young", "queued", "running"} {
		h.job(id)
	}
	for _, id := range []string{"young0", "running0"} {
		if _, ok := h.f.Alloc(id); !ok {
			t.Fatalf("allocation %s of a kept job is gone after GC", id)
		}
	}
	wantSameAfterRestore(t, h.f)

	// A repeated entry removes nothing more, and says the job is gone.
	before := h.f.Hash()
	wantErrIs(t, h.gc(retention, at, "old"), ErrJobNotFound, "job old")
	if h.f.Hash() != before {
		t.Fatal("a repeated GC changed the state")
	}
}

func TestFSM_GCKeepsJobsThatUnfinishedJobsDependOn(t *testing.T) {
	h := newHarness(t)
	h.register(node("n1", 1))
	h.finished("dep", spec(1, 0))
	for _, id := range []string{"c2", "c1"} {
		s := spec(1, 0)
		s.After = []structs.Dependency{{JobID: "dep", Condition: structs.AfterOK}}
		h.submit(id, s)
	}
	far := h.at().Add(time.Hour)
	// Whatever the map order, the lowest unfinished dependent is named.
	wantErrIs(t, h.gc(0, far, "dep"), ErrJobRetained, "job dep: job must be kept: job c1, which is queued, depends on it")
	h.apply(structs.JobCancelType, structs.JobCancelRequest{JobID: "c1", At: h.at()})
	wantErrIs(t, h.gc(0, far, "dep"), ErrJobRetained, "job c2, which is queued")
	h.apply(structs.JobCancelType, structs.JobCancelRequest{JobID: "c2", At: h.at()})

	if err := h.gc(0, far, "c1", "dep"); err != nil {
		t.Fatal(err)
	}
	wantGone(t, h.f, "dep")
	wantSameAfterRestore(t, h.f)
	if err := h.gc(0, far, "c2"); err != nil {
		t.Fatal(err)
	}
	if len(h.f.st.dependents) != 0 {
		t.Fatalf("dependents index keeps %v", setIDs(h.f.st.dependents))
	}
}

func TestFSM_GCKeepsArrayTasksWhileATaskHasNotEnded(t *testing.T) {
	h := newHarness(t)
	s := spec(1, 0)
	s.Array = &structs.ArraySpec{Start: 0, End: 2}
	h.apply(structs.JobSubmitType, structs.JobSubmitRequest{JobID: "arr", Spec: s, SubmittedAt: h.at()})
	h.apply(structs.JobCancelType, structs.JobCancelRequest{JobID: "arr-0", At: h.at()})
	far := h.at().Add(time.Hour)
	wantErrIs(t, h.gc(0, far, "arr-0"), ErrJobRetained, "job arr-0: job must be kept: task arr-1 of its array is queued")

	h.apply(structs.JobCancelType, structs.JobCancelRequest{ArrayID: "arr", At: h.at()})
	if err := h.gc(0, far, "arr-0", "arr-2"); err != nil {
		t.Fatal(err)
	}
	if tasks, err := h.f.ArrayTasks("arr"); err != nil || len(tasks) != 1 || tasks[0].ID != "arr-1" {
		t.Fatalf("array after removing two tasks: %v, %v", tasks, err)
	}
	wantSameAfterRestore(t, h.f)
	if err := h.gc(0, far, "arr-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.f.ArrayTasks("arr"); err == nil || len(h.f.st.arrayTasks) != 0 {
		t.Fatalf("a removed array is still indexed: %v", setIDs(h.f.st.arrayTasks))
	}
	wantErrIs(t, h.applyErr(structs.JobCancelType, structs.JobCancelRequest{ArrayID: "arr", At: h.at()}), ErrJobNotFound)
}

func TestFSM_GCRefusesBadRequestsAndChangesNothing(t *testing.T) {
	h := newHarness(t)
	h.register(node("n1", 1))
	h.finished("old", spec(1, 0))
	before := h.f.Hash()
	far := h.at().Add(time.Hour)
	tooMany := make([]string, MaxGCJobs+1)
	for i := range tooMany {
		tooMany[i] = "old"
	}
	for _, c := range []struct {
		name string
		req  structs.JobGCRequest
		text string
	}{
		{"no jobs", structs.JobGCRequest{At: far}, "no jobs"},
		{"too many jobs", structs.JobGCRequest{JobIDs: tooMany, At: far}, "1001 jobs, more than the limit of 1000"},
		{"no time", structs.JobGCRequest{JobIDs: []string{"old"}}, "no time stamped"},
	} {
		t.Run(c.name, func(t *testing.T) {
			wantErrIs(t, h.applyErr(structs.JobGCType, c.req), ErrInvalidRequest, c.text)
			if h.f.Hash() != before {
				t.Fatal("a refused GC changed the state")
			}
		})
	}
}

func TestFSM_GCQueriesFollowTheGCRule(t *testing.T) {
	h := newHarness(t)
	h.register(node("n1", 1))
	endB := h.finished("b", spec(1, 0))
	endA := h.finished("a", spec(1, 0))
	h.finished("late", spec(1, 0))
	child := spec(1, 0)
	child.After = []structs.Dependency{{JobID: "a", Condition: structs.AfterAny}}
	h.submit("child", child)
	s := spec(1, 0)
	s.Array = &structs.ArraySpec{Start: 0, End: 1}
	h.apply(structs.JobSubmitType, structs.JobSubmitRequest{JobID: "arr", Spec: s, SubmittedAt: endB})
	h.apply(structs.JobCancelType, structs.JobCancelRequest{JobID: "arr-0", At: endB})

	const retention = time.Minute
	at := endA.Add(retention)
	var ids []string
	for _, j := range h.f.ExpiredJobs(retention, at) {
		ids = append(ids, j.ID)
	}
	// Oldest first; "late" has not been finished for a minute yet.
	if want := []string{"arr-0", "b", "a"}; !slices.Equal(ids, want) {
		t.Fatalf("expired jobs %v, want %v", ids, want)
	}
	needed, open := h.f.GCHolds()
	if !reflect.DeepEqual(needed, map[string]bool{"a": true}) || !reflect.DeepEqual(open, map[string]bool{"arr": true}) {
		t.Fatalf("holds: needed %v, open arrays %v", needed, open)
	}
	// What is expired and not held is exactly what the entry removes.
	err := h.gc(retention, at, ids...)
	wantErrIs(t, err, ErrJobRetained, "job a:", "job arr-0:")
	if _, ok := h.f.Job("b"); ok {
		t.Fatal("expired job b, held by nothing, was kept")
	}
}
