package leader

import (
	"fmt"
	"sync"
	"time"

	"github.com/skein-dev/skein/structs"
)

// Bounds on one PlanApply entry. A pass over a large queue can place tens
// of thousands of jobs; one entry holding them all would be tens of
// megabytes that every follower must receive, store and decode before it
// applies anything, and one slow fsync for the leader. An allocation
// encodes to about 300 bytes plus 45 per GPU and a blocked reason to about
// 150, so a full entry stays near or under half a megabyte.
const (
	MaxEntryAllocs  = 1024
	MaxEntryBlocked = 4096
)

// SplitPlan cuts a plan into plans of at most maxAllocs allocations (a
// job's placement is never cut: all or nothing stays one entry) and at most
// maxBlocked blocked reasons, in order. Blocked reasons ride in the entries
// that carry placements while room is left. An empty plan gives none.
func SplitPlan(p structs.Plan, maxAllocs, maxBlocked int) []structs.Plan {
	var out []structs.Plan
	var cur structs.Plan
	allocs := 0
	for _, pl := range p.Placements {
		if allocs > 0 && allocs+len(pl.Allocations) > maxAllocs {
			out = append(out, cur)
			cur, allocs = structs.Plan{}, 0
		}
		cur.Placements = append(cur.Placements, pl)
		allocs += len(pl.Allocations)
	}
	blocked := p.Blocked
	for len(blocked) > 0 || len(cur.Placements) > 0 {
		n := min(len(blocked), maxBlocked-len(cur.Blocked))
		cur.Blocked = append(cur.Blocked, blocked[:n]...)
		blocked = blocked[n:]
		out = append(out, cur)
		cur = structs.Plan{}
	}
	return out
}

// applyPlan commits a plan as several PlanApply entries (splitPlan), all
// in flight at once so that Raft batches them into few disk writes and
// replication rounds. Each entry is checked by the FSM on its own; since
// they come from one pass over one view, their order does not matter. It
// reports whether the FSM rejected any placement, and the first error (the
// others are the same, typically: leadership lost).
func (l *Leader) applyPlan(plan structs.Plan, at time.Time) (rejected bool, err error) {
	parts := SplitPlan(plan, MaxEntryAllocs, MaxEntryBlocked)
	var (
		mu     sync.Mutex
		wg     sync.WaitGroup
		reject structs.JobBlocked
		n      int
		first  error
	)
	for _, part := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := l.cfg.Apply(structs.PlanApplyType, structs.PlanApplyRequest{Plan: part, At: at})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if first == nil {
					first = err
				}
				return
			}
			if res, ok := resp.(*structs.PlanResult); ok && len(res.Rejected) > 0 {
				if n == 0 {
					reject = res.Rejected[0]
				}
				n += len(res.Rejected)
			}
		}()
	}
	wg.Wait()
	if n > 0 {
		l.log.Warn("placements rejected on commit", "count", n, "first", reject.Reason)
	}
	if first != nil {
		return n > 0, fmt.Errorf("commit plan (%d entries): %w", len(parts), first)
	}
	return n > 0, nil
}
