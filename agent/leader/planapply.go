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
// encodes to about 300 bytes plus 45 per GPU, and a reason (a blocked
// job, a cancel, a preemption victim) to about 150, so a full entry stays
// near or under half a megabyte.
const (
	MaxEntryAllocs  = 1024
	MaxEntryReasons = 4096
)

// SplitPlan cuts a plan into plans of at most maxAllocs allocations (a
// job's placement is never cut: all or nothing stays one entry) and at
// most maxReasons reasons: blocked jobs, cancels, and preemptions counted
// as one plus their victims (a preemption is never cut). Preemptions,
// cancels and blocked reasons, in that order, ride in the entries that
// carry placements while room is left. The parts keep their order. An
// empty plan gives none.
func SplitPlan(p structs.Plan, maxAllocs, maxReasons int) []structs.Plan {
	var out []structs.Plan
	var cur structs.Plan
	allocs, reasons := 0, 0
	flush := func() {
		out = append(out, cur)
		cur, allocs, reasons = structs.Plan{}, 0, 0
	}
	for _, pl := range p.Placements {
		if allocs > 0 && allocs+len(pl.Allocations) > maxAllocs {
			flush()
		}
		cur.Placements = append(cur.Placements, pl)
		allocs += len(pl.Allocations)
	}
	// room makes room for n reasons in the current entry.
	room := func(n int) {
		if reasons > 0 && reasons+n > maxReasons {
			flush()
		}
		reasons += n
	}
	for _, pr := range p.Preemptions {
		room(1 + len(pr.Victims))
		cur.Preemptions = append(cur.Preemptions, pr)
	}
	for _, c := range p.Cancels {
		room(1)
		cur.Cancels = append(cur.Cancels, c)
	}
	for _, b := range p.Blocked {
		room(1)
		cur.Blocked = append(cur.Blocked, b)
	}
	if !planEmpty(cur) {
		out = append(out, cur)
	}
	return out
}

// commitPlan commits a plan as several PlanApply entries (SplitPlan), all
// in flight at once so that Raft batches them into few disk writes and
// replication rounds. Each entry is checked by the FSM on its own; since
// they come from one pass over one view, their order does not matter. It
// returns what the FSM refused, and the first error (the others are the
// same, typically: leadership lost), and how many entries were applied.
func (l *Leader) commitPlan(plan structs.Plan, at time.Time) (*structs.PlanResult, int, error) {
	parts := SplitPlan(plan, MaxEntryAllocs, MaxEntryReasons)
	var (
		mu      sync.Mutex
		wg      sync.WaitGroup
		all     structs.PlanResult
		applied int
		first   error
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
			applied++
			if res, ok := resp.(*structs.PlanResult); ok {
				all.Rejected = append(all.Rejected, res.Rejected...)
				all.RejectedCancels = append(all.RejectedCancels, res.RejectedCancels...)
				all.RejectedVictims = append(all.RejectedVictims, res.RejectedVictims...)
			}
		}()
	}
	wg.Wait()
	if first != nil {
		return &all, applied, fmt.Errorf("commit plan (%d entries): %w", len(parts), first)
	}
	return &all, applied, nil
}

// withoutRefused returns the plan without the parts res refused: refused
// placements and cancels, refused victims (and preemptions left with
// none).
func withoutRefused(p structs.Plan, res *structs.PlanResult) structs.Plan {
	refused := func(list []structs.JobBlocked) map[string]bool {
		ids := make(map[string]bool, len(list))
		for _, r := range list {
			ids[r.JobID] = true
		}
		return ids
	}
	placements, cancels, victims := refused(res.Rejected), refused(res.RejectedCancels), refused(res.RejectedVictims)
	out := structs.Plan{Blocked: p.Blocked}
	for _, pl := range p.Placements {
		if !placements[pl.JobID] {
			out.Placements = append(out.Placements, pl)
		}
	}
	for _, c := range p.Cancels {
		if !cancels[c.JobID] {
			out.Cancels = append(out.Cancels, c)
		}
	}
	for _, pr := range p.Preemptions {
		kept := structs.Preemption{For: pr.For}
		for i, v := range pr.Victims {
			if !victims[v] {
				kept.Victims = append(kept.Victims, v)
				if len(pr.Attempts) > 0 {
					kept.Attempts = append(kept.Attempts, pr.Attempts[i])
				}
			}
		}
		if len(kept.Victims) > 0 {
			out.Preemptions = append(out.Preemptions, kept)
		}
	}
	return out
}

// planEmpty reports whether a plan decides nothing.
func planEmpty(p structs.Plan) bool {
	return len(p.Placements) == 0 && len(p.Blocked) == 0 && len(p.Cancels) == 0 && len(p.Preemptions) == 0
}

// resultEmpty reports whether the FSM refused nothing.
func resultEmpty(r *structs.PlanResult) bool {
	return r == nil || len(r.Rejected) == 0 && len(r.RejectedCancels) == 0 && len(r.RejectedVictims) == 0
}
