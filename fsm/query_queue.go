package fsm

import (
	"cmp"
	"slices"

	"github.com/skein-dev/skein/structs"
)

// QueuePage returns copies of at most limit queued jobs from offset on, in
// queue order (as State's Queued: priority, highest first, then submission
// time, then ID; jobs whose cancel is pending are left out), and how many
// jobs the queue holds. It copies only the page, and for a page near the
// queue's head it keeps only the first offset+limit jobs in order while it
// reads the queue, so the overview's head of a long queue costs one pass.
func (f *FSM) QueuePage(offset, limit int) ([]*structs.Job, int) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	offset, limit = max(offset, 0), max(limit, 0)
	size := 0
	for _, j := range f.st.queued {
		if !j.StopRequested {
			size++
		}
	}
	keep := min(offset+limit, size)
	var head []*structs.Job
	if keep*4 < size {
		head = f.st.queueHead(keep)
	} else {
		head = make([]*structs.Job, 0, size)
		for _, j := range f.st.queued {
			if !j.StopRequested {
				head = append(head, j)
			}
		}
		slices.SortFunc(head, queueOrder)
	}
	page := head[min(offset, len(head)):min(keep, len(head))]
	out := make([]*structs.Job, len(page))
	for i, j := range page {
		out[i] = j.Copy()
	}
	return out, size
}

// queueHead returns the first n jobs of the queue, in order (the state's
// own): each job is inserted into the kept ones when it sorts before the
// last of them.
func (s *state) queueHead(n int) []*structs.Job {
	head := make([]*structs.Job, 0, n+1)
	for _, j := range s.queued {
		if j.StopRequested || n == 0 || len(head) == n && queueOrder(j, head[n-1]) >= 0 {
			continue
		}
		i, _ := slices.BinarySearchFunc(head, j, queueOrder)
		head = slices.Insert(head, i, j)
		if len(head) > n {
			head = head[:n]
		}
	}
	return head
}

// queueOrder is the order the scheduler takes queued jobs in.
func queueOrder(a, b *structs.Job) int {
	return cmp.Or(cmp.Compare(b.Spec.Priority, a.Spec.Priority),
		a.SubmittedAt.Compare(b.SubmittedAt), cmp.Compare(a.ID, b.ID))
}
