package endpoint

import (
	"testing"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/fsm"
	"github.com/skein-dev/skein/structs"
)

// queueState is a queue of jobs without fair share's accounts: a pass
// orders it by priority, then by time waited.
type queueState struct{ queued []*structs.Job }

func (s queueState) State() *fsm.StateView { return &fsm.StateView{Queued: s.queued} }
func (s queueState) FairShare() fsm.FairShare {
	return fsm.FairShare{Accounts: &structs.AccountTable{}}
}

// threeQueued are alice's urgent job (--priority 100), and bob's and
// alice's plain ones, bob's submitted first.
func threeQueued(at time.Time) Queue {
	return Queue{State: queueState{queued: []*structs.Job{
		{ID: "urgent-1", Owner: "alice", SubmittedAt: at, Spec: structs.JobSpec{Priority: 100}},
		{ID: "bobs-01", Owner: "bob", SubmittedAt: at.Add(-time.Minute)},
		{ID: "plain-1", Owner: "alice", SubmittedAt: at},
	}}}
}

func TestQueue_Priorities_InTheOrderAPassTakesThem(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	info := threeQueued(at).Priorities(at, 2, nil)
	if info.Total != 3 || info.Weights != nil || len(info.Jobs) != 2 {
		t.Fatalf("%+v: want 3 in all, no weights without fair share, the first 2", info)
	}
	if info.Jobs[0].JobID != "urgent-1" || info.Jobs[0].Position != 1 || info.Jobs[1].JobID != "bobs-01" || info.Jobs[1].Position != 2 {
		t.Errorf("jobs %+v: want the urgent one first, then the one that waited longer", info.Jobs)
	}
	alices := threeQueued(at).Priorities(at, 10, func(p *api.JobPriority) bool { return p.Owner == "alice" })
	if len(alices.Jobs) != 2 || alices.Jobs[1].JobID != "plain-1" || alices.Jobs[1].Position != 3 || alices.Total != 3 {
		t.Errorf("alice's: %+v, want her two jobs at their places in the whole queue", alices)
	}
}

func TestQueue_Place_SaysWhatPutsTheJobAheadFirst(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	q := threeQueued(at)
	if p := q.Place("urgent-1", at); p == nil || p.Position != 1 || p.Ahead != nil || p.Total != 3 {
		t.Errorf("the first: %+v, want first of 3 with none ahead", p)
	}
	p := q.Place("plain-1", at)
	if p == nil || p.Position != 3 || p.Ahead == nil || p.Ahead.JobID != "bobs-01" {
		t.Fatalf("the last: %+v, want third behind bob's", p)
	}
	if want := "behind job bobs-01 (bob): priority 1 (its --priority 0 plus a point per minute waited) against 0"; p.Behind != want {
		t.Errorf("behind %q, want %q: bob's job named, and the minute it waited longer", p.Behind, want)
	}
	if p := q.Place("running-1", at); p != nil {
		t.Errorf("a job not in the queue: %+v, want nil", p)
	}
}

func TestQueue_Share_WithoutAccountsIsOffAndEmpty(t *testing.T) {
	info := Queue{State: queueState{}}.Share()
	if info.On || info.Rows == nil || len(info.Rows) != 0 {
		t.Errorf("%#v: want fair share off and an empty list", info)
	}
}
