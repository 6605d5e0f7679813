package fsm

import (
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/skein-dev/skein/structs"
)

func intp(v int) *int { return &v }

// setLimits applies a LimitsSet entry and fails the test if it is refused.
func (h *harness) setLimits(req structs.LimitsSetRequest) *structs.LimitTable {
	h.t.Helper()
	resp := h.apply(structs.LimitsSetType, req)
	tab, ok := resp.(*structs.LimitTable)
	if !ok {
		h.t.Fatalf("limits set: got %v", resp)
	}
	return tab
}

// submitAs submits a job of owner; an array when tasks > 0.
func (h *harness) submitAs(owner, id string, tasks int, s structs.JobSpec) any {
	h.t.Helper()
	if tasks > 0 {
		s.Array = &structs.ArraySpec{Start: 0, End: tasks - 1}
	}
	return h.apply(structs.JobSubmitType, structs.JobSubmitRequest{
		RequestID: "r-" + id, JobID: id, Owner: owner, Spec: s, SubmittedAt: h.at()})
}

func TestFSM_SubmitOverQueuedLimitIsRefusedWhole(t *testing.T) {
	h := newHarness(t)
	h.setLimits(structs.LimitsSetRequest{User: "alice", Limits: structs.Limits{MaxQueued: intp(5)}})
	for i := range 3 {
		if _, ok := h.submitAs("alice", fmt.Sprintf("j%d", i), 0, spec(1, 0)).(*structs.Job); !ok {
			t.Fatalf("submit %d refused", i)
		}
	}
	before, jobs := h.f.Hash(), len(h.f.Jobs())
	err, _ := h.submitAs("alice", "arr", 3, spec(1, 0)).(error)
	wantErrIs(t, err, ErrLimit, "limit: alice may have 5 queued jobs (has 3, this array adds 3)")
	if h.f.Hash() != before || len(h.f.Jobs()) != jobs {
		t.Fatal("a refused array changed the state")
	}
	if got := h.f.LimitUsage("alice"); got.Queued != 3 {
		t.Fatalf("alice's queued count %d after a refused submit, want 3", got.Queued)
	}
	if err := h.f.CheckSubmitLimits("alice", spec(1, 0)); err != nil {
		t.Fatalf("CheckSubmitLimits refuses a job that fits: %v", err)
	}
	// Another user is held to the defaults only.
	if _, ok := h.submitAs("bob", "bobarr", 3, spec(1, 0)).(*structs.Job); !ok {
		t.Fatal("bob's array refused")
	}
	if _, ok := h.submitAs("alice", "arr2", 2, spec(1, 0)).(*structs.Job); !ok {
		t.Fatal("an array that fits alice's limit exactly was refused")
	}
	err, _ = h.submitAs("alice", "one-more", 0, spec(1, 0)).(error)
	wantErrIs(t, err, ErrLimit, "alice may have 5 queued jobs (has 5, this job adds 1)")
}

func TestFSM_SubmitRetryOverLimitReturnsTheFirstJob(t *testing.T) {
	h := newHarness(t)
	h.setLimits(structs.LimitsSetRequest{Default: true, Limits: structs.Limits{MaxQueued: intp(1)}})
	first, ok := h.submitAs("", "j1", 0, spec(1, 0)).(*structs.Job)
	if !ok {
		t.Fatal("first submit refused")
	}
	again, ok := h.submitAs("", "j1", 0, spec(1, 0)).(*structs.Job)
	if !ok || again.ID != first.ID {
		t.Fatalf("retry of an accepted submit got %v, want job %s", again, first.ID)
	}
	err, _ := h.submitAs("", "j2", 0, spec(1, 0)).(error)
	wantErrIs(t, err, ErrLimit, `user "" may have 1 queued jobs (has 1, this job adds 1)`)
}

func TestFSM_ArrayLimitCountsTasks(t *testing.T) {
	h := newHarness(t)
	h.setLimits(structs.LimitsSetRequest{User: "alice", Limits: structs.Limits{MaxArray: intp(4)}})
	err, _ := h.submitAs("alice", "big", 5, spec(1, 0)).(error)
	wantErrIs(t, err, ErrLimit, "alice may submit arrays of at most 4 tasks (this one has 5)")
	if len(h.f.Jobs()) != 0 {
		t.Fatal("a refused array created tasks")
	}
	if _, ok := h.submitAs("alice", "fits", 4, spec(1, 0)).(*structs.Job); !ok {
		t.Fatal("an array of the limit's size was refused")
	}
	if got := h.f.LimitUsage("alice").Queued; got != 4 {
		t.Fatalf("alice has %d queued, want the array's 4 tasks", got)
	}
}

func TestFSM_ClusterQueuedLimit(t *testing.T) {
	h := newHarness(t)
	h.setLimits(structs.LimitsSetRequest{Cluster: true, Limits: structs.Limits{MaxQueued: intp(4)}})
	h.submitAs("alice", "a", 2, spec(1, 0))
	h.submitAs("bob", "b", 2, spec(1, 0))
	before := h.f.Hash()
	err, _ := h.submitAs("carol", "c", 0, spec(1, 0)).(error)
	wantErrIs(t, err, ErrLimit, "the cluster may have 4 queued jobs (has 4, this job adds 1)")
	if h.f.Hash() != before {
		t.Fatal("a refused submit changed the state")
	}
	// A job leaving the queue makes room.
	h.apply(structs.JobCancelType, structs.JobCancelRequest{JobID: structs.ArrayTaskID("a", 0), At: h.at()})
	if _, ok := h.submitAs("carol", "c", 0, spec(1, 0)).(*structs.Job); !ok {
		t.Fatal("submit refused after a queued job was cancelled")
	}
}

func TestFSM_DefaultLimitsStopTheReportedFlood(t *testing.T) {
	// The flood the limits were made for: three --array 0-9999
	// submissions of one user queued 30,000 jobs.
	h := newHarness(t)
	if _, ok := h.submitAs("alice", "a1", structs.MaxArrayTasks, spec(1, 0)).(*structs.Job); !ok {
		t.Fatal("the first array of 10,000 was refused")
	}
	err, _ := h.submitAs("alice", "a2", structs.MaxArrayTasks, spec(1, 0)).(error)
	wantErrIs(t, err, ErrLimit, "alice may have 10000 queued jobs (has 10000, this array adds 10000)")
	if n := len(h.f.Jobs()); n != structs.MaxArrayTasks {
		t.Fatalf("%d jobs, want %d", n, structs.MaxArrayTasks)
	}
}

func TestFSM_OwnerCountersFollowJobs(t *testing.T) {
	h := newHarness(t)
	h.register(node("n1", 4))
	h.submitAs("alice", "j1", 0, spec(1, 2))
	spec2 := spec(1, 1)
	spec2.Restarts = 1
	h.submitAs("alice", "j2", 0, spec2)
	want := func(queued, gpus int) {
		t.Helper()
		if got := h.f.LimitUsage("alice"); got != (LimitUsage{Queued: queued, GPUs: gpus}) {
			t.Fatalf("alice's usage %+v, want queued %d, GPUs %d", got, queued, gpus)
		}
		if got := h.f.State().OwnerGPUs["alice"]; got != gpus {
			t.Fatalf("the scheduler's view says alice holds %d GPUs, want %d", got, gpus)
		}
	}
	want(2, 0)
	h.place("j1", alloc("a1", "n1", 0, gpuID("n1", 0), gpuID("n1", 1)))
	want(1, 2)
	h.place("j2", alloc("a2", "n1", 0, gpuID("n1", 2)))
	want(0, 3)
	h.mustUpdate("n1", "a2", structs.AllocFailed, 1, "boom") // restarts: back in the queue
	want(1, 2)
	h.mustUpdate("n1", "a1", structs.AllocSucceeded, 0, "")
	want(1, 0)
	if err := checkIndexes(h.f.st); err != nil {
		t.Fatal(err)
	}
}

func TestFSM_LimitsSetRefusalChangesNothing(t *testing.T) {
	h := newHarness(t)
	h.setLimits(structs.LimitsSetRequest{User: "alice", Limits: structs.Limits{MaxGPUs: intp(8)}})
	before := h.f.Hash()
	err := h.applyErr(structs.LimitsSetType, structs.LimitsSetRequest{User: "alice", Limits: structs.Limits{MaxGPUs: intp(-5)}})
	wantErrIs(t, err, nil, "max_gpus: -5 is out of range")
	if h.f.Hash() != before {
		t.Fatal("a refused limits entry changed the state")
	}
	if got := h.f.Limits().For("alice").MaxGPUs; got != 8 {
		t.Fatalf("alice's GPU limit %d, want 8", got)
	}
}

func TestFSM_LimitsSurviveSnapshotAndRestore(t *testing.T) {
	h := newHarness(t)
	if v := headerVersion(t, h.f); v != minSnapshotVersion {
		t.Fatalf("a state without limits writes version %d, want %d", v, minSnapshotVersion)
	}
	h.setLimits(structs.LimitsSetRequest{User: "alice", Limits: structs.Limits{MaxGPUs: intp(64), MaxQueued: intp(500)}})
	h.setLimits(structs.LimitsSetRequest{Default: true, Limits: structs.Limits{MaxArray: intp(1000)}})
	h.setLimits(structs.LimitsSetRequest{Cluster: true, Limits: structs.Limits{MaxQueued: intp(20000)}})
	h.register(node("n1", 2))
	h.submitAs("alice", "j1", 0, spec(1, 2))
	h.place("j1", alloc("a1", "n1", 0, gpuID("n1", 0), gpuID("n1", 1)))
	h.submitAs("alice", "j2", 0, spec(1, 1))
	if v := headerVersion(t, h.f); v != eventSnapshotVersion {
		t.Fatalf("a state with limits and events writes version %d, want %d", v, eventSnapshotVersion)
	}
	g := restoreFresh(t, h.f)
	if g.Hash() != h.f.Hash() {
		t.Fatal("hash differs after restore")
	}
	if got, want := g.Limits().For("alice"), (structs.UserLimits{MaxQueued: 500, MaxGPUs: 64, MaxArray: 1000}); got != want {
		t.Fatalf("alice's limits after restore %+v, want %+v", got, want)
	}
	if g.Limits().ClusterMaxQueued() != 20000 {
		t.Fatal("cluster limit lost in the snapshot")
	}
	if got := g.LimitUsage("alice"); got != (LimitUsage{Queued: 1, GPUs: 2}) {
		t.Fatalf("alice's usage after restore %+v, want queued 1, GPUs 2", got)
	}
	// Unsetting everything drops the limits record; the version stays
	// the event log's.
	h.setLimits(structs.LimitsSetRequest{User: "alice", Unset: true})
	h.setLimits(structs.LimitsSetRequest{Default: true, Unset: true})
	h.setLimits(structs.LimitsSetRequest{Cluster: true, Unset: true})
	if data := string(snapshotBytes(t, h.f)); strings.Contains(data, `{"type":"limits"`) {
		t.Fatal("a state whose limits were all unset still writes a limits record")
	}
	if v := headerVersion(t, h.f); v != eventSnapshotVersion {
		t.Fatalf("a state whose limits were all unset writes version %d, want %d", v, eventSnapshotVersion)
	}
}

func TestFSM_RestoreRefusesBadLimitsRecords(t *testing.T) {
	const v2, v3 = `{"version":2,"index":9}` + "\n", `{"version":3,"index":9}` + "\n"
	limits := `{"type":"limits","limits":{"cluster":{},"default":{"max_gpus":8}}}` + "\n"
	cases := []struct{ name, snap, want string }{
		{"limits in version 2", v2 + limits, "limits record in a version 2 snapshot"},
		{"limits twice", v3 + limits + limits, "limits twice"},
		{"empty", v3 + `{"type":"limits"}` + "\n", "limits record without limits"},
		{"bad value", v3 + `{"type":"limits","limits":{"cluster":{"max_queued":-7},"default":{}}}` + "\n", "cluster.max_queued"},
		{"bad user", v3 + `{"type":"limits","limits":{"cluster":{},"default":{},"users":{"a b":{"max_gpus":1}}}}` + "\n", "user"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := New(nil)
			err := f.Restore(readCloser([]byte(tc.snap)))
			wantErrIs(t, err, ErrBadSnapshot, tc.want)
			if !f.Limits().IsZero() {
				t.Fatal("a refused snapshot changed the limits")
			}
		})
	}
	f := New(nil)
	if err := f.Restore(readCloser([]byte(v3 + limits))); err != nil {
		t.Fatalf("a good version 3 snapshot: %v", err)
	}
	if f.Limits().For("x").MaxGPUs != 8 {
		t.Fatal("default GPU limit not restored")
	}
}

// headerVersion is the version in the header of a snapshot of f.
func headerVersion(t *testing.T, f *FSM) int {
	t.Helper()
	head, _, _ := strings.Cut(string(snapshotBytes(t, f)), "\n")
	var v int
	if _, err := fmt.Sscanf(head, `{"version":%d`, &v); err != nil {
		t.Fatalf("header %q: %v", head, err)
	}
	return v
}

// recountOwners counts, from the primary records alone, each owner's
// queued jobs and the GPUs its live allocations hold.
func recountOwners(s *state) (queued, gpus map[string]int) {
	queued, gpus = map[string]int{}, map[string]int{}
	for _, j := range s.jobs {
		if j.State == structs.JobQueued {
			queued[j.Owner]++
		}
	}
	for _, a := range s.allocs {
		if a.Live() && len(a.GPUs) > 0 {
			gpus[s.jobs[a.JobID].Owner] += len(a.GPUs)
		}
	}
	return queued, gpus
}

// checkOwnerCounters compares the FSM's counters with a recount.
func checkOwnerCounters(s *state) error {
	queued, gpus := recountOwners(s)
	switch {
	case !maps.Equal(s.ownerQueued, queued):
		return fmt.Errorf("owner queued counts %v, recount %v", s.ownerQueued, queued)
	case !maps.Equal(s.ownerGPUs, gpus):
		return fmt.Errorf("owner GPU counts %v, recount %v", s.ownerGPUs, gpus)
	}
	return nil
}
