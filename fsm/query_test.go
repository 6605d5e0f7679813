package fsm

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/skein-dev/skein/structs"
)

func TestFSM_FindJob(t *testing.T) {
	h := newHarness(t)
	ids := []string{"abc12345aaaa", "abc12345bbbb", "abd00000", "abc", "q123",
		"d7e40d7d0000-1", "d7e40d7d0000-10", "d7e40d7d0000-2", "6f90813a-r0", "6f90813a-r1"}
	for _, id := range ids {
		h.submit(id, spec(1, 0))
	}
	for i := range 6 {
		h.submit(fmt.Sprintf("fff%05d", i), spec(1, 0))
	}
	cases := []struct {
		name   string
		query  string
		wantID string
		target error
		parts  []string
	}{
		{name: "exact id that is also a prefix", query: "abc", wantID: "abc"},
		{name: "unique prefix", query: "abd", wantID: "abd00000"},
		{name: "unique one-character prefix", query: "q", wantID: "q123"},
		{name: "ambiguous one-character prefix", query: "a", target: ErrAmbiguousID, parts: []string{"matches 4 jobs"}},
		{name: "ambiguous", query: "abc1", target: ErrAmbiguousID, parts: []string{"matches 2 jobs", "abc12345, abc12345"}},
		{name: "ambiguous lists five", query: "fff", target: ErrAmbiguousID, parts: []string{"matches 6 jobs", "fff00004, ..."}},
		{name: "array task as jobs shows it", query: "d7e40d7d-1", wantID: "d7e40d7d0000-1"},
		{name: "array task by a shorter prefix", query: "d7-10", wantID: "d7e40d7d0000-10"},
		{name: "service replica by a prefix", query: "6f90-r1", wantID: "6f90813a-r1"},
		{name: "full array id and index", query: "d7e40d7d0000-2", wantID: "d7e40d7d0000-2"},
		{name: "a suffix no job has", query: "d7e40d7d-3", target: ErrJobNotFound},
		{name: "a suffix on the wrong base", query: "abc-1", target: ErrJobNotFound},
		{name: "not found", query: "zzz", target: ErrJobNotFound, parts: []string{"job zzz"}},
		{name: "empty", query: "", target: ErrJobNotFound},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			j, err := h.f.FindJob(tc.query)
			if tc.target != nil {
				wantErrIs(t, err, tc.target, tc.parts...)
				return
			}
			if err != nil || j.ID != tc.wantID {
				t.Fatalf("FindJob(%q) = %v, %v; want %s", tc.query, j, err, tc.wantID)
			}
		})
	}
}

func TestFSM_QueriesAreOrdered(t *testing.T) {
	h := newHarness(t)
	for _, n := range []structs.Node{
		{ID: "z", Name: "b", Status: structs.NodeReady, GPUs: gpus("z", 2)},
		{ID: "y", Name: "a", Status: structs.NodeReady},
		{ID: "x", Name: "b", Status: structs.NodeReady},
	} {
		h.register(n)
	}
	if got := nodeIDs(h.f.Nodes()); !slices.Equal(got, []string{"y", "x", "z"}) {
		t.Fatalf("Nodes() order %v", got)
	}

	submit := func(id string, prio int, at time.Time) {
		s := spec(1, 1)
		s.Priority = prio
		h.apply(structs.JobSubmitType, structs.JobSubmitRequest{JobID: id, Spec: s, SubmittedAt: at})
	}
	submit("j3", 0, t0.Add(time.Minute))
	submit("j1", 0, t0)
	submit("j2", 0, t0)
	submit("hi", 5, t0.Add(time.Hour))
	if got := jobIDs(h.f.Jobs()); !slices.Equal(got, []string{"j1", "j2", "j3", "hi"}) {
		t.Fatalf("Jobs() order %v", got)
	}
	view := h.f.State()
	if got := jobIDs(view.Queued); !slices.Equal(got, []string{"hi", "j1", "j2", "j3"}) {
		t.Fatalf("queue order %v", got)
	}
	if view.Index != h.idx || len(view.AllNodes()) != 3 {
		t.Fatalf("view index %d nodes %d", view.Index, len(view.AllNodes()))
	}

	h.place("j2", alloc("b", "z", 0, gpuID("z", 1)))
	h.place("j1", alloc("a", "z", 0, gpuID("z", 0)))
	if got := allocIDs(h.f.NodeLiveAllocs("z")); !slices.Equal(got, []string{"b", "a"}) {
		t.Fatalf("NodeLiveAllocs order %v", got)
	}
	if got := allocIDs(h.f.State().AllLiveAllocs()); !slices.Equal(got, []string{"b", "a"}) {
		t.Fatalf("live allocs order %v", got)
	}
	counts := h.f.JobCounts()
	want := map[structs.JobState]int{structs.JobQueued: 2, structs.JobRunning: 2, structs.JobSucceeded: 0, structs.JobFailed: 0, structs.JobCancelled: 0}
	for st, n := range want {
		if c, ok := counts[st]; !ok || c != n {
			t.Fatalf("JobCounts()[%s] = %d, %v; want %d", st, c, ok, n)
		}
	}
}

func TestFSM_QueriesReturnCopies(t *testing.T) {
	h := newHarness(t)
	n := node("n1", 2)
	n.Labels = map[string]string{"rack": "r1"}
	n.GPUs[0].NVLinkPeers = []int{1}
	h.register(n)
	s := spec(1, 1)
	s.Env, s.Constraints = map[string]string{"A": "1"}, map[string]string{"rack": "r1"}
	h.submit("j", s)
	h.place("j", alloc("a0", "n1", 0, gpuID("n1", 0)))
	before := h.f.Hash()

	gotNode, _ := h.f.Node("n1")
	gotNode.Labels["rack"] = "x"
	gotNode.GPUs[0].NVLinkPeers[0] = 7
	gotNode.GPUs[1].Healthy = false
	gotJob, _ := h.f.Job("j")
	gotJob.Spec.Command[0] = "rm"
	gotJob.Spec.Env["A"] = "x"
	gotJob.Spec.Constraints["rack"] = "x"
	gotJob.State = structs.JobFailed
	h.f.Allocs("j")[0].GPUs[0] = "stolen"
	h.f.NodeLiveAllocs("n1")[0].State = structs.AllocFailed
	view := h.f.State() // its nodes are shared, read-only: see below
	view.LiveAllocs[0].GPUs[0] = "stolen"
	h.f.Jobs()[0].Spec.Env["A"] = "y"

	if h.f.Hash() != before {
		t.Fatal("changing query results changed FSM state")
	}
}

// TestFSM_StateSharesNodesThatApplyNeverChanges: the scheduler's view
// shares the state's nodes rather than copying them, so a node once stored
// is never changed: a status change, a GPU fault and a cordon each store a
// changed copy, and a view taken before keeps the node as it was.
func TestFSM_StateSharesNodesThatApplyNeverChanges(t *testing.T) {
	h := newHarness(t)
	h.register(node("n1", 2))
	view := h.f.State()
	was := view.Nodes[0].Copy()

	if err := h.nodeStatus("n1", structs.NodeDraining); err != nil {
		t.Fatal(err)
	}
	if err := h.health("n1", h.fault("n1", 0, "XID 79")); err != nil {
		t.Fatal(err)
	}
	if err := h.cordon("n1", 1, true, "fan"); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(view.Nodes[0], was) {
		t.Errorf("a view's node changed under it:\n%+v\nwas\n%+v", view.Nodes[0], was)
	}
	now, _ := h.f.Node("n1")
	if now.Status != structs.NodeDraining || now.GPUs[0].Healthy || !now.GPUs[1].Cordoned {
		t.Errorf("the state's node is %s, GPU 0 healthy %v, GPU 1 cordoned %v: want draining, a fault and a cordon",
			now.Status, now.GPUs[0].Healthy, now.GPUs[1].Cordoned)
	}
	if got := h.f.State().Nodes[0]; !reflect.DeepEqual(got, now) {
		t.Errorf("a new view holds %+v, the state %+v", got, now)
	}
}

func nodeIDs(ns []*structs.Node) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = n.ID
	}
	return out
}

func jobIDs(js []*structs.Job) []string {
	out := make([]string, len(js))
	for i, j := range js {
		out[i] = j.ID
	}
	return out
}

func allocIDs(as []*structs.Allocation) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.ID
	}
	return out
}

func TestFSM_StateCarriesTheTimeLimitsOfRunningJobs(t *testing.T) {
	h := newHarness(t)
	h.register(node("n1", 3))
	limited := spec(1, 1)
	limited.TimeLimit = structs.Duration(90 * time.Minute)
	h.submit("limited", limited)
	h.submit("open", spec(1, 1))
	h.submit("waiting", limited)
	h.place("limited", alloc("a", "n1", 0, gpuID("n1", 0)))
	h.place("open", alloc("b", "n1", 0, gpuID("n1", 1)))

	view := h.f.State()
	if got := view.JobTimeLimit("limited"); got != 90*time.Minute {
		t.Errorf("limit of the running limited job = %v, want 1h30m", got)
	}
	if got := view.JobTimeLimit("open"); got != 0 {
		t.Errorf("limit of the running job without one = %v, want 0", got)
	}
	if _, ok := view.TimeLimits["waiting"]; ok || len(view.TimeLimits) != 1 {
		t.Errorf("TimeLimits = %v, want only the running limited job", view.TimeLimits)
	}
}

func TestFSM_LiveAllocCountsCountsOnlyLiveAllocationsPerNode(t *testing.T) {
	h := newHarness(t)
	h.register(node("n1", 2))
	h.register(node("n2", 2))
	h.submit("a", spec(2, 1))
	h.submit("b", spec(1, 1))
	h.submit("c", spec(1, 0))
	h.place("a", alloc("a0", "n1", 0, gpuID("n1", 0)), alloc("a1", "n2", 1, gpuID("n2", 0)))
	h.place("b", alloc("b0", "n1", 0, gpuID("n1", 1)))
	h.place("c", alloc("c0", "n2", 0))
	h.mustUpdate("n2", "c0", structs.AllocSucceeded, 0, "")
	if got, want := h.f.LiveAllocCounts(), map[string]int{"n1": 2, "n2": 1}; !maps.Equal(got, want) {
		t.Fatalf("live counts %v, want %v", got, want)
	}
}

func TestFSM_StateCarriesRunningJobsAndTheStatesOfDependencies(t *testing.T) {
	h := newHarness(t)
	h.register(node("n1", 2))
	h.register(node("n2", 2))
	h.submit("run", spec(2, 1))
	h.submit("done", spec(1, 1))
	h.place("run", alloc("r0", "n1", 0, gpuID("n1", 0)), alloc("r1", "n2", 1, gpuID("n2", 0)))
	h.place("done", alloc("d0", "n1", 0, gpuID("n1", 1)))
	h.mustUpdate("n1", "d0", structs.AllocSucceeded, 0, "")
	child := spec(1, 1)
	child.After = []structs.Dependency{{JobID: "done", Condition: structs.AfterOK},
		{JobID: "run", Condition: structs.AfterAny}, {JobID: "missing", Condition: structs.AfterAny}}
	h.submit("child", child)
	h.submit("other", spec(1, 1))
	before := h.f.Hash()

	view := h.f.State()
	if got := jobIDs(view.RunningJobs()); !slices.Equal(got, []string{"run"}) {
		t.Errorf("running jobs %v, want [run] once, though it holds two allocations", got)
	}
	want := map[string]structs.JobState{"done": structs.JobSucceeded, "run": structs.JobRunning}
	if !maps.Equal(view.DepStates, want) {
		t.Errorf("dependency states %v, want %v (missing absent, other depended on by none)", view.DepStates, want)
	}
	if st, ok := view.JobState("missing"); ok {
		t.Errorf("a dependency that does not exist reads as %q", st)
	}
	if got := jobIDs(view.QueuedJobs()); !slices.Equal(got, []string{"child", "other"}) {
		t.Errorf("queued jobs %v, want [child other]", got)
	}
	view.Running[0].Spec.Command[0] = "rm"
	if h.f.Hash() != before {
		t.Fatal("changing the view's running jobs changed FSM state")
	}
}
