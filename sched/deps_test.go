package sched

import (
	"testing"

	"github.com/skein-dev/skein/structs"
)

// after makes a job wait for others with one condition.
func after(cond string, ids ...string) func(*structs.JobSpec) {
	return func(s *structs.JobSpec) {
		for _, id := range ids {
			s.After = append(s.After, structs.Dependency{JobID: id, Condition: cond})
		}
	}
}

func TestDecide_Dependencies(t *testing.T) {
	states := map[string]structs.JobState{
		"queued": structs.JobQueued, "running": structs.JobRunning, "succeeded": structs.JobSucceeded,
		"failed": structs.JobFailed, "halted": structs.JobCancelled, "late": structs.JobTimedOut, "done": structs.JobSucceeded,
	}
	cases := []struct {
		name        string
		after       []func(*structs.JobSpec)
		wantBlocked string
		wantCancel  string // neither: the job is placed
	}{
		{name: "no dependency: placed"},
		{name: "a running dependency: waits",
			after: []func(*structs.JobSpec){after(structs.AfterOK, "running")}, wantBlocked: "waiting for job running (running)"},
		{name: "a queued dependency: waits",
			after: []func(*structs.JobSpec){after(structs.AfterAny, "queued")}, wantBlocked: "waiting for job queued (queued)"},
		{name: "ok after success: placed",
			after: []func(*structs.JobSpec){after(structs.AfterOK, "succeeded")}},
		{name: "ok after failure: cancelled",
			after: []func(*structs.JobSpec){after(structs.AfterOK, "failed")}, wantCancel: "dependency failed failed: never satisfied (afterok)"},
		{name: "ok after a cancel: cancelled",
			after: []func(*structs.JobSpec){after(structs.AfterOK, "halted")}, wantCancel: "dependency halted cancelled: never satisfied (afterok)"},
		{name: "ok after a time-out: cancelled",
			after: []func(*structs.JobSpec){after(structs.AfterOK, "late")}, wantCancel: "dependency late timed_out: never satisfied (afterok)"},
		{name: "notok after failure: placed",
			after: []func(*structs.JobSpec){after(structs.AfterNotOK, "failed")}},
		{name: "notok after a cancel: placed",
			after: []func(*structs.JobSpec){after(structs.AfterNotOK, "halted")}},
		{name: "notok after a time-out: placed",
			after: []func(*structs.JobSpec){after(structs.AfterNotOK, "late")}},
		{name: "notok after success: cancelled",
			after: []func(*structs.JobSpec){after(structs.AfterNotOK, "done")}, wantCancel: "dependency done succeeded: never satisfied (afternotok)"},
		{name: "notok on a running job: waits",
			after: []func(*structs.JobSpec){after(structs.AfterNotOK, "running")}, wantBlocked: "waiting for job running (running)"},
		{name: "any after failure: placed",
			after: []func(*structs.JobSpec){after(structs.AfterAny, "failed")}},
		{name: "a dependency that does not exist: cancelled",
			after: []func(*structs.JobSpec){after(structs.AfterAny, "gone")}, wantCancel: "dependency gone does not exist"},
		{name: "a cancel wins over a wait",
			after:      []func(*structs.JobSpec){after(structs.AfterOK, "running", "failed")},
			wantCancel: "dependency failed failed: never satisfied (afterok)"},
		{name: "the last dependency not ended is named",
			after:       []func(*structs.JobSpec){after(structs.AfterOK, "queued", "succeeded", "running")},
			wantBlocked: "waiting for job running (running)"},
		{name: "every condition met: placed",
			after: []func(*structs.JobSpec){after(structs.AfterOK, "succeeded"), after(structs.AfterAny, "failed", "halted")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			j := job("j", 1, tc.after...)
			v := fakeView{fakeState: fakeState{nodes: []*structs.Node{gpuNode("n1", 4, "H100", 80)}},
				queued: []*structs.Job{j}, states: states}
			d := Decide(v, Inputs{Now: t0})
			if got := blockedReason(d.Plan, "j"); got != tc.wantBlocked {
				t.Errorf("blocked reason %q, want %q", got, tc.wantBlocked)
			}
			if got := cancelReason(d.Plan, "j"); got != tc.wantCancel {
				t.Errorf("cancel reason %q, want %q", got, tc.wantCancel)
			}
			wantPlaced := tc.wantBlocked == "" && tc.wantCancel == ""
			if placed := placedOn(d.Plan, "j") != nil; placed != wantPlaced {
				t.Errorf("placed %v, want %v", placed, wantPlaced)
			}
		})
	}
}
