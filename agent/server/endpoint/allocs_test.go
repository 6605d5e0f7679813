package endpoint

import (
	"errors"
	"strings"
	"testing"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/fsm"
	"github.com/skein-dev/skein/structs"
)

// allocState is a state with allocations, by job ID.
type allocState struct {
	*fakeState
	allocs map[string][]*structs.Allocation
}

func (s allocState) Allocs(jobID string) []*structs.Allocation { return s.allocs[jobID] }

func (s allocState) Job(id string) (*structs.Job, bool) {
	j, ok := s.jobs[id]
	return j, ok
}

// threeRanks is alice's running job 42 (ID j1), rank 0 on this node
// ("me"), rank 1 on n3 (its first attempt, on n2, failed), rank 2 on
// n2; and her queued job 43 (ID j2).
func threeRanks() allocState {
	st := allocState{fakeState: newFakeState(), allocs: map[string][]*structs.Allocation{}}
	st.jobs["j1"] = &structs.Job{ID: "j1", Number: 42, Owner: "alice", State: structs.JobRunning, Spec: structs.JobSpec{Nodes: 3}}
	st.jobs["j2"] = &structs.Job{ID: "j2", Number: 43, Owner: "alice", State: structs.JobQueued, Spec: structs.JobSpec{Nodes: 1}}
	st.allocs["j1"] = []*structs.Allocation{
		{ID: "a0", JobID: "j1", Rank: 0, Attempt: 1, NodeID: "me", State: structs.AllocRunning},
		{ID: "a1-old", JobID: "j1", Rank: 1, Attempt: 1, NodeID: "n2", State: structs.AllocFailed},
		{ID: "a1", JobID: "j1", Rank: 1, Attempt: 2, NodeID: "n3", State: structs.AllocRunning},
		{ID: "a2", JobID: "j1", Rank: 2, Attempt: 1, NodeID: "n2", State: structs.AllocRunning},
	}
	return st
}

func allocsOn(st AllocsState) Allocs { return Allocs{State: st, NodeID: "me", NodeName: "node-me"} }

func TestAllocs_PlanSignal_HereAndRelayedToEachOtherNodeOnce(t *testing.T) {
	st := threeRanks()
	st.allocs["j1"] = append(st.allocs["j1"], &structs.Allocation{ID: "a3", JobID: "j1", Rank: 3, Attempt: 1, NodeID: "n2", State: structs.AllocRunning})
	plan, err := allocsOn(st).PlanSignal(alice, "j1", api.SignalRequest{Signal: "sigusr1"}, false)
	if err != nil {
		t.Fatal(err)
	}
	if plan.Signal != "USR1" {
		t.Errorf("signal %q, want USR1", plan.Signal)
	}
	if len(plan.Local) != 1 || plan.Local[0].Alloc.ID != "a0" ||
		plan.Local[0].As != (api.SignalledAlloc{JobID: "j1", SlurmID: "42", Rank: 0, Node: "node-me"}) {
		t.Errorf("local %+v, want rank 0, named as job 42's on node-me", plan.Local)
	}
	if strings.Join(plan.Relay, ",") != "n2,n3" {
		t.Errorf("relay to %q, want n2 and n3, once each, not the failed attempt's node twice", plan.Relay)
	}
}

func TestAllocs_PlanSignal_PassedOnReachesOnlyThisNodesRanks(t *testing.T) {
	plan, err := allocsOn(threeRanks()).PlanSignal(alice, "j1", api.SignalRequest{Signal: "TERM"}, true)
	if err != nil || len(plan.Local) != 1 || len(plan.Relay) != 0 {
		t.Errorf("%+v, %v; want rank 0 here and no relay", plan, err)
	}
	_, err = Allocs{State: threeRanks(), NodeID: "n9", NodeName: "node-9"}.PlanSignal(alice, "j1", api.SignalRequest{Signal: "TERM"}, true)
	var c *Conflict
	if !errors.As(err, &c) || err.Error() != "no rank of job 42 runs on node node-9: only a running job's processes can be signalled" {
		t.Errorf("a node that runs no rank: %v, want a conflict naming it", err)
	}
}

func TestAllocs_PlanSignal_Refusals(t *testing.T) {
	st := threeRanks()
	st.jobs["t0"] = &structs.Job{ID: "t0", ArrayID: "arr", Owner: "alice", State: structs.JobQueued}
	st.jobs["t1"] = &structs.Job{ID: "t1", ArrayID: "arr", Owner: "alice", State: structs.JobSucceeded}
	for _, c := range []struct {
		name  string
		id    Identity
		ref   string
		sig   string
		check func(error) bool
	}{
		{"an unknown signal", alice, "j1", "SIGFOO", func(err error) bool { return err != nil && strings.Contains(err.Error(), "FOO") }},
		{"no such job", alice, "zz", "TERM", func(err error) bool { return errors.Is(err, fsm.ErrJobNotFound) }},
		{"another user's job", bob, "j1", "TERM", func(err error) bool {
			return errors.Is(err, structs.ErrPermission) && strings.Contains(err.Error(), "signal of another user's job")
		}},
		{"a queued job", alice, "j2", "TERM", func(err error) bool {
			var c *Conflict
			return errors.As(err, &c) && err.Error() == "job 43 is queued: only a running job's processes can be signalled"
		}},
		{"an array with no task running", alice, "arr", "TERM", func(err error) bool {
			var c *Conflict
			return errors.As(err, &c) && strings.HasPrefix(err.Error(), "no task of array arr is running")
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if plan, err := allocsOn(st).PlanSignal(c.id, c.ref, api.SignalRequest{Signal: c.sig}, false); !c.check(err) {
				t.Errorf("%+v, %v; want it refused", plan, err)
			}
		})
	}
}

func TestAllocs_PassedOnToAWorker_FindsTheJobInItsView(t *testing.T) {
	a := Allocs{State: allocState{fakeState: newFakeState()}, View: threeRanks(), NodeID: "me", NodeName: "node-me"}
	if plan, err := a.PlanSignal(alice, "j1", api.SignalRequest{Signal: "TERM"}, true); err != nil || len(plan.Local) != 1 {
		t.Errorf("signal passed on: %+v, %v; want rank 0 found in the view", plan, err)
	}
	if plan, err := a.PlanExec(alice, "j1", api.ExecRequest{Command: []string{"ls"}}, false, true); err != nil || !plan.Local || plan.Alloc.ID != "a0" {
		t.Errorf("exec passed on: %+v, %v; want rank 0 found in the view", plan, err)
	}
	if _, err := a.PlanSignal(alice, "j1", api.SignalRequest{Signal: "TERM"}, false); !errors.Is(err, fsm.ErrJobNotFound) {
		t.Errorf("asked directly: %v, want the state's not found: the view answers only what a server passed on", err)
	}
}

func TestAllocs_PlanExec_TheNewestAttemptOfTheRankWhereItRuns(t *testing.T) {
	a := allocsOn(threeRanks())
	plan, err := a.PlanExec(alice, "j1", api.ExecRequest{Command: []string{"nvidia-smi"}, Rank: 1}, false, false)
	if err != nil || plan.Local || plan.Alloc.ID != "a1" || plan.Job.ID != "j1" {
		t.Errorf("rank 1: %+v, %v; want its second attempt, on n3", plan, err)
	}
	plan, err = a.PlanExec(alice, "j1", api.ExecRequest{Command: []string{"bash"}, TTY: true}, true, false)
	if err != nil || !plan.Local || plan.Alloc.ID != "a0" {
		t.Errorf("rank 0 in a terminal: %+v, %v; want it here", plan, err)
	}
}

func TestAllocs_PlanExec_Refusals(t *testing.T) {
	st := threeRanks()
	st.allocs["j1"][0].State = structs.AllocPending
	isConflict := func(want string) func(error) bool {
		return func(err error) bool {
			var c *Conflict
			return errors.As(err, &c) && err.Error() == want
		}
	}
	isField := func(field string) func(error) bool {
		return func(err error) bool {
			var fe *structs.FieldError
			return errors.As(err, &fe) && fe.Field == field
		}
	}
	for _, c := range []struct {
		name     string
		id       Identity
		ref      string
		req      api.ExecRequest
		upgraded bool
		check    func(error) bool
	}{
		{"no command", alice, "j1", api.ExecRequest{}, false, isField("command")},
		{"too many words", alice, "j1", api.ExecRequest{Command: append([]string{"sh"}, make([]string, MaxExecArgs)...)}, false, isField("command")},
		{"too many bytes", alice, "j1", api.ExecRequest{Command: []string{strings.Repeat("x", MaxExecBytes+1)}}, false, isField("command")},
		{"a terminal's name with a space", alice, "j1", api.ExecRequest{Command: []string{"sh"}, Term: "x term"}, false, isField("term")},
		{"a terminal without an upgrade", alice, "j1", api.ExecRequest{Command: []string{"sh"}, TTY: true}, false, isField("tty")},
		{"a rank out of range", alice, "j1", api.ExecRequest{Command: []string{"sh"}, Rank: 3}, false, isField("rank")},
		{"another user's job", bob, "j1", api.ExecRequest{Command: []string{"sh"}}, false, func(err error) bool {
			return errors.Is(err, structs.ErrPermission) && strings.Contains(err.Error(), "run commands in of another user's job")
		}},
		{"a queued job", alice, "j2", api.ExecRequest{Command: []string{"sh"}}, false,
			isConflict("job 43 is queued: commands run only beside a running job")},
		{"a rank not running yet", alice, "j1", api.ExecRequest{Command: []string{"sh"}}, false,
			isConflict("rank 0 of job 42 is not running yet")},
	} {
		t.Run(c.name, func(t *testing.T) {
			if plan, err := allocsOn(st).PlanExec(c.id, c.ref, c.req, c.upgraded, false); !c.check(err) {
				t.Errorf("%+v, %v; want it refused", plan, err)
			}
		})
	}
}

func TestAllocs_LogsOf_RefusesAnotherUsersJobAndARankItHasNot(t *testing.T) {
	a := allocsOn(threeRanks())
	if job, err := a.LogsOf(alice, "j1", 2); err != nil || job.ID != "j1" {
		t.Errorf("her own job's rank 2: %v, %v", job, err)
	}
	if _, err := a.LogsOf(bob, "j1", 0); !errors.Is(err, structs.ErrPermission) || !strings.Contains(err.Error(), "read the logs of another user's job") {
		t.Errorf("another user's job: %v, want a permission refused", err)
	}
	var bad *BadRequest
	if _, err := a.LogsOf(alice, "j1", 3); !errors.As(err, &bad) || err.Error() != "rank 3: job j1 has ranks 0..2" {
		t.Errorf("rank 3 of 3: %v, want a bad request naming the ranks", err)
	}
	if _, err := a.LogsOf(alice, "zz", 0); !errors.Is(err, fsm.ErrJobNotFound) {
		t.Errorf("no such job: %v", err)
	}
}

func TestAllocs_LogAlloc_TheAttemptAskedOrWaitForOne(t *testing.T) {
	st := threeRanks()
	st.jobs["j1"].Attempts = 2
	a := allocsOn(st)
	for _, c := range []struct {
		name          string
		job           string
		rank, attempt int
		follow        bool
		want, err     string // the allocation's ID; the error's text
	}{
		{"the newest attempt", "j1", 1, 0, false, "a1", ""},
		{"the first attempt", "j1", 1, 1, false, "a1-old", ""},
		{"an attempt the job never made", "j1", 1, 3, false, "", "job j1 has no attempt 3: its attempts are 1..2"},
		{"a queued job", "j2", 0, 0, false, "", "job j2 has not started, so it has no logs yet"},
		{"a queued job, followed", "j2", 0, 0, true, "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			alloc, err := a.LogAlloc(c.job, c.rank, c.attempt, c.follow)
			switch {
			case c.err != "":
				if err == nil || err.Error() != c.err {
					t.Errorf("%v, %v; want %q", alloc, err, c.err)
				}
			case err != nil:
				t.Errorf("%v", err)
			case c.want == "" && alloc != nil, c.want != "" && (alloc == nil || alloc.ID != c.want):
				t.Errorf("%+v, want %q (none: wait)", alloc, c.want)
			}
		})
	}
}
