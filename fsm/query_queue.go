package fsm

import (
	"cmp"
	"slices"

	"github.com/skein-dev/skein/structs"
)

// QueuePage returns copies of at most limit queued jobs from offset on, in
// queue order (as State's Queued: priority, highest first, then submission
// time, then ID; jobs whose cancel is pending are left out), and how many
// jobs the queue holds. It copies only the page, so a page of a long queue
// costs a sort of the queue's pointers, not a copy of every queued job.
func (f *FSM) QueuePage(offset, limit int) ([]*structs.Job, int) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	queue := make([]*structs.Job, 0, len(f.st.queued))
	for _, j := range f.st.queued {
		if !j.StopRequested {
			queue = append(queue, j)
		}
	}
	slices.SortFunc(queue, queueOrder)
	page := queue[min(max(offset, 0), len(queue)):]
	page = page[:min(max(limit, 0), len(page))]
	out := make([]*structs.Job, len(page))
	for i, j := range page {
		out[i] = j.Copy()
	}
	return out, len(queue)
}

// queueOrder is the order the scheduler takes queued jobs in.
func queueOrder(a, b *structs.Job) int {
	return cmp.Or(cmp.Compare(b.Spec.Priority, a.Spec.Priority),
		a.SubmittedAt.Compare(b.SubmittedAt), cmp.Compare(a.ID, b.ID))
}
