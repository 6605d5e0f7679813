package sched

import (
	"testing"
	"time"

	"github.com/skein-dev/skein/structs"
)

// named makes a job a singleton of one name, submitted at minute m of t0.
func named(name string, singleton bool) func(*structs.JobSpec) {
	return func(s *structs.JobSpec) { s.Name, s.Singleton = name, singleton }
}

func submittedAt(j *structs.Job, owner string, minute int) *structs.Job {
	j.Owner, j.SubmittedAt = owner, t0.Add(time.Duration(minute)*time.Minute)
	return j
}

func TestDecide_Singleton(t *testing.T) {
	nodes := []*structs.Node{gpuNode("n1", 8, "H100", 80)}
	holderRunning := runningJob("r", 0, false, 0)
	holderRunning.Owner, holderRunning.Spec.Name = "alice", "nightly"
	cases := []struct {
		name    string
		queued  []*structs.Job
		running []*structs.Job
		placed  []string
		// blocked maps the jobs held back to their reasons.
		blocked map[string]string
	}{
		{name: "alone: placed",
			queued: []*structs.Job{submittedAt(job("a", 1, named("nightly", true)), "alice", 0)},
			placed: []string{"a"}},
		{name: "a running job of the name and user holds it",
			queued:  []*structs.Job{submittedAt(job("a", 1, named("nightly", true)), "alice", 0)},
			running: []*structs.Job{holderRunning},
			blocked: map[string]string{"a": "waiting for job r (running): singleton, of the same name nightly and user"}},
		{name: "of two queued, the first submitted runs, whatever the priorities",
			queued: []*structs.Job{
				submittedAt(job("late", 1, named("nightly", true), func(s *structs.JobSpec) { s.Priority = 9 }), "alice", 5),
				submittedAt(job("early", 1, named("nightly", true)), "alice", 1),
			},
			placed:  []string{"early"},
			blocked: map[string]string{"late": "waiting for job early (queued): singleton, of the same name nightly and user"}},
		{name: "an earlier job that is no singleton holds the name too (as in Slurm)",
			queued: []*structs.Job{
				submittedAt(job("plain", 1, named("nightly", false)), "alice", 0),
				submittedAt(job("single", 1, named("nightly", true)), "alice", 1),
			},
			placed:  []string{"plain"},
			blocked: map[string]string{"single": "waiting for job plain (queued): singleton, of the same name nightly and user"}},
		{name: "a later plain job runs beside a singleton",
			queued: []*structs.Job{
				submittedAt(job("single", 1, named("nightly", true)), "alice", 0),
				submittedAt(job("plain", 1, named("nightly", false)), "alice", 1),
			},
			placed: []string{"single", "plain"}},
		{name: "another user's or another name's jobs do not hold it",
			queued: []*structs.Job{
				submittedAt(job("bobs", 1, named("nightly", true)), "bob", 0),
				submittedAt(job("other", 1, named("weekly", true)), "alice", 0),
				submittedAt(job("mine", 1, named("nightly", true)), "alice", 2),
			},
			running: []*structs.Job{func() *structs.Job {
				r := runningJob("r", 0, false, 0)
				r.Owner, r.Spec.Name = "bob", "weekly"
				return r
			}()},
			placed: []string{"bobs", "other", "mine"}},
		{name: "an earlier job in its restart backoff still holds the name",
			queued: []*structs.Job{
				func() *structs.Job {
					j := submittedAt(job("backoff", 1, named("nightly", true)), "alice", 0)
					j.NotBefore = t0.Add(time.Hour)
					return j
				}(),
				submittedAt(job("next", 1, named("nightly", true)), "alice", 1),
			},
			blocked: map[string]string{"next": "waiting for job backoff (queued): singleton, of the same name nightly and user"}},
		{name: "array tasks of one submission run by index",
			queued: func() []*structs.Job {
				var out []*structs.Job
				for _, i := range []int{10, 2} {
					j := submittedAt(job(structs.ArrayTaskID("arr", i), 1, named("sweep", true)), "alice", 0)
					j.ArrayID, j.ArrayIndex = "arr", i
					out = append(out, j)
				}
				return out
			}(),
			placed:  []string{"arr-2"},
			blocked: map[string]string{"arr-10": "waiting for job arr-2 (queued): singleton, of the same name sweep and user"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := fakeView{fakeState: fakeState{nodes: nodes}, queued: tc.queued, running: tc.running}
			d := Decide(v, Inputs{Now: t0})
			for _, id := range tc.placed {
				if placedOn(d.Plan, id) == nil {
					t.Errorf("job %s not placed: %q", id, blockedReason(d.Plan, id))
				}
			}
			for id, want := range tc.blocked {
				if got := blockedReason(d.Plan, id); got != want {
					t.Errorf("job %s: reason %q, want %q", id, got, want)
				}
				if placedOn(d.Plan, id) != nil {
					t.Errorf("job %s placed", id)
				}
			}
			if got, want := len(d.Plan.Placements), len(tc.placed); got != want {
				t.Errorf("%d placements, want %d: %+v", got, want, d.Plan.Placements)
			}
		})
	}
}
