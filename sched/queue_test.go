package sched

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/skein-dev/skein/structs"
	"pgregory.net/rapid"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// queuedJob is a 1-GPU job with a priority, submitted at t0 plus ago.
func queuedJob(id string, priority int, submitted time.Duration) *structs.Job {
	j := job(id, 1, func(s *structs.JobSpec) { s.Priority = priority })
	j.SubmittedAt = t0.Add(submitted)
	return j
}

func ids(jobs []*structs.Job) []string {
	out := make([]string, len(jobs))
	for i, j := range jobs {
		out[i] = j.ID
	}
	return out
}

func TestQueueOrder_PriorityThenWaitThenID(t *testing.T) {
	restarted := queuedJob("restarted", 0, -time.Hour)
	restarted.NotBefore = t0.Add(-30 * time.Second)
	cases := []struct {
		name string
		now  time.Time
		jobs []*structs.Job
		want []string
	}{
		{
			name: "higher priority first, even when submitted later",
			now:  t0,
			jobs: []*structs.Job{queuedJob("low", 0, 0), queuedJob("high", 5, time.Second)},
			want: []string{"high", "low"},
		},
		{
			name: "first come first served within a priority",
			now:  t0.Add(time.Second),
			jobs: []*structs.Job{queuedJob("second", 3, 500*time.Millisecond), queuedJob("first", 3, 0)},
			want: []string{"first", "second"},
		},
		{
			name: "ID breaks a tie of priority and time",
			now:  t0,
			jobs: []*structs.Job{queuedJob("b", 1, 0), queuedJob("a", 1, 0)},
			want: []string{"a", "b"},
		},
		{
			name: "a minute of waiting is worth a priority point",
			now:  t0,
			// old has waited 3 minutes: effective 0+3, beats 2, ties 3 and
			// goes first among equals because it waited longer.
			jobs: []*structs.Job{queuedJob("p2", 2, 0), queuedJob("p3", 3, 0), queuedJob("old", 0, -3*time.Minute)},
			want: []string{"old", "p3", "p2"},
		},
		{
			name: "part of a step earns nothing",
			now:  t0,
			jobs: []*structs.Job{queuedJob("p1", 1, 0), queuedJob("old", 0, -59*time.Second)},
			want: []string{"p1", "old"},
		},
		{
			name: "a failed job ages from the end of its restart backoff",
			now:  t0,
			jobs: []*structs.Job{restarted, queuedJob("fresh", 0, -time.Minute)},
			want: []string{"fresh", "restarted"},
		},
		{
			name: "a clock behind the submission counts as no wait",
			now:  t0.Add(-time.Hour),
			jobs: []*structs.Job{queuedJob("future", 0, 0), queuedJob("p1", 1, time.Minute)},
			want: []string{"p1", "future"},
		},
		{
			name: "nil jobs are dropped",
			now:  t0,
			jobs: []*structs.Job{nil, queuedJob("a", 0, 0), nil},
			want: []string{"a"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := ids(queueOrder(tc.jobs, tc.now, 0, nil)); !slices.Equal(got, tc.want) {
				t.Errorf("order %v, want %v", got, tc.want)
			}
		})
	}
}

func TestQueueOrder_AgeStepIsConfigurable(t *testing.T) {
	jobs := []*structs.Job{queuedJob("p5", 5, 0), queuedJob("old", 0, -time.Hour)}
	if got := ids(queueOrder(jobs, t0, time.Hour, nil)); !slices.Equal(got, []string{"p5", "old"}) {
		t.Errorf("with an hour per point: %v, want p5 first", got)
	}
	if got := ids(queueOrder(jobs, t0, 10*time.Minute, nil)); !slices.Equal(got, []string{"old", "p5"}) {
		t.Errorf("with ten minutes per point: %v, want old first", got)
	}
}

// A job that has waited long enough is ahead of every job that joins the
// queue after it (later, not at the same instant), whatever their priorities: the aging bonus has no cap, so
// nothing is overtaken forever. "Long enough" is one step per point of
// priority it lacks against the highest allowed.
func TestQueueOrder_PropertyWaitingJobsEndUpAheadOfLaterArrivals(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		step := time.Duration(rapid.Int64Range(1, int64(time.Hour)).Draw(t, "step"))
		prio := func(label string) int {
			return rapid.IntRange(-structs.MaxPriority, structs.MaxPriority).Draw(t, label)
		}
		old := queuedJob("old", prio("oldPriority"), 0)
		lead := time.Duration(structs.MaxPriority-old.Spec.Priority) * step
		n := rapid.IntRange(1, 20).Draw(t, "later")
		jobs := []*structs.Job{old}
		for i := range n {
			after := lead + time.Duration(rapid.Int64Range(1, int64(100*step)).Draw(t, "after"))
			jobs = append(jobs, queuedJob(fmt.Sprintf("later%d", i), prio("priority"), after))
		}
		now := t0.Add(lead + time.Duration(rapid.Int64Range(0, int64(200*step)).Draw(t, "now")))
		if got := queueOrder(jobs, now, step, nil); got[0] != old {
			t.Fatalf("at %v the job waiting since %v is behind %v", now, t0, ids(got))
		}
	})
}
