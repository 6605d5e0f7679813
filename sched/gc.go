package sched

import (
	"cmp"
	"slices"
	"time"

	"github.com/skein-dev/skein/structs"
)

// Expired is the state GC policy: of the finished jobs, it returns the IDs
// of those that have been finished for at least retention at now and that
// nothing still needs: no job that has not ended depends on them
// (dependedOn, by job ID) and no task of their array has not ended
// (openArrays, by array ID). At most limit IDs come back, the longest
// finished first, and they are sorted by ID. Jobs not in a terminal state
// are skipped. The FSM re-checks the same rule when it removes them.
func Expired(finished []*structs.Job, dependedOn, openArrays map[string]bool, now time.Time, retention time.Duration, limit int) []string {
	var due []*structs.Job
	for _, j := range finished {
		if j == nil || !j.State.Terminal() || now.Sub(j.FinishedAt) < retention ||
			dependedOn[j.ID] || (j.ArrayID != "" && openArrays[j.ArrayID]) {
			continue
		}
		due = append(due, j)
	}
	slices.SortFunc(due, func(a, b *structs.Job) int {
		return cmp.Or(a.FinishedAt.Compare(b.FinishedAt), cmp.Compare(a.ID, b.ID))
	})
	due = due[:min(len(due), max(limit, 0))]
	ids := make([]string, len(due))
	for i, j := range due {
		ids[i] = j.ID
	}
	slices.Sort(ids)
	return ids
}
