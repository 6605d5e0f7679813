package sched

import (
	"slices"
	"testing"
	"time"

	"github.com/skein-dev/skein/structs"
)

func TestExpired(t *testing.T) {
	const retention = time.Hour
	done := func(id string, st structs.JobState, finishedAgo time.Duration) *structs.Job {
		j := job(id, 1)
		j.State, j.FinishedAt = st, t0.Add(-finishedAgo)
		return j
	}
	inArray := func(j *structs.Job, arr string) *structs.Job { j.ArrayID = arr; return j }
	cases := []struct {
		name       string
		finished   []*structs.Job
		dependedOn map[string]bool
		openArrays map[string]bool
		limit      int
		want       []string
	}{
		{
			name: "every terminal state expires after the retention, sorted by ID",
			finished: []*structs.Job{done("d", structs.JobTimedOut, 2*time.Hour), done("a", structs.JobSucceeded, retention),
				done("c", structs.JobCancelled, 3*time.Hour), done("b", structs.JobFailed, 90*time.Minute)},
			limit: 10,
			want:  []string{"a", "b", "c", "d"},
		},
		{
			name:     "a job finished for less than the retention stays",
			finished: []*structs.Job{done("young", structs.JobSucceeded, retention-time.Second), done("old", structs.JobFailed, 2*time.Hour)},
			limit:    10,
			want:     []string{"old"},
		},
		{
			name:     "a job that has not ended stays",
			finished: []*structs.Job{done("queued", structs.JobQueued, 2*time.Hour), done("running", structs.JobRunning, 2*time.Hour)},
			limit:    10,
		},
		{
			name:       "a job a live job depends on stays",
			finished:   []*structs.Job{done("needed", structs.JobSucceeded, 2*time.Hour), done("free", structs.JobSucceeded, 2*time.Hour)},
			dependedOn: map[string]bool{"needed": true},
			limit:      10,
			want:       []string{"free"},
		},
		{
			name: "a task of an array with a task still going stays",
			finished: []*structs.Job{inArray(done("open-0", structs.JobSucceeded, 2*time.Hour), "open"),
				inArray(done("closed-0", structs.JobFailed, 2*time.Hour), "closed")},
			openArrays: map[string]bool{"open": true},
			limit:      10,
			want:       []string{"closed-0"},
		},
		{
			name: "at most limit, the longest finished first",
			finished: []*structs.Job{done("a", structs.JobSucceeded, 2*time.Hour), done("b", structs.JobSucceeded, 5*time.Hour),
				done("c", structs.JobSucceeded, 4*time.Hour), done("d", structs.JobSucceeded, 5*time.Hour)},
			limit: 3,
			want:  []string{"b", "c", "d"},
		},
		{
			name:     "a limit of zero removes nothing",
			finished: []*structs.Job{done("a", structs.JobSucceeded, 2*time.Hour)},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Expired(tc.finished, tc.dependedOn, tc.openArrays, t0, retention, tc.limit)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("expired %v, want %v", got, tc.want)
			}
		})
	}
}
