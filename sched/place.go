package sched

import (
	"fmt"
	"slices"

	"github.com/skein-dev/skein/structs"
)

// Place plans the given queued jobs, in the order given (the caller sorts:
// priority, then age). Jobs placed earlier in the pass consume resources for
// later ones. A job that does not fit is skipped (smaller ones behind it may
// still be placed) and reported in Plan.Blocked with a reason. A job listed
// twice is planned once; nil jobs are ignored.
//
// Allocations carry JobID, NodeID, Rank, Attempt, GPUs, CPUs, MemoryMiB and
// the pending/run states; the leader stamps IDs and times.
func Place(s State, jobs []*structs.Job) structs.Plan {
	var plan structs.Plan
	if len(jobs) == 0 {
		return plan
	}
	p := &placer{l: newLedger(s.AllNodes(), s.AllLiveAllocs())}
	seen := make(map[string]bool, len(jobs))
	for _, j := range jobs {
		if j == nil || seen[j.ID] {
			continue
		}
		seen[j.ID] = true
		allocs, reason := p.place(j)
		if allocs == nil {
			plan.Blocked = append(plan.Blocked, structs.JobBlocked{JobID: j.ID, Reason: reason})
			continue
		}
		plan.Placements = append(plan.Placements, structs.JobPlacement{JobID: j.ID, Allocations: allocs})
	}
	return plan
}

// placer runs the pipeline for one pass.
type placer struct {
	l *ledger
	// fits is reused between jobs to spare allocations.
	fits []fit
}

// place plans every rank of one job, or none and says why.
func (p *placer) place(j *structs.Job) ([]structs.Allocation, string) {
	if len(p.l.nodes) == 0 {
		return nil, ErrNoNodes.Error()
	}
	r, err := newRequest(j, p.l)
	if err != nil {
		return nil, err.Error()
	}
	var t tally
	score := scorerFor(j)
	p.fits = p.fits[:0]
	for i := range p.l.nodes {
		f, code, arg := r.check(i, &p.l.nodes[i])
		if code != reasonNone {
			t.add(code, arg)
			continue
		}
		f.score = score(f)
		if r.nodes == 1 && len(p.fits) == 1 {
			if better(f, p.fits[0]) < 0 {
				p.fits[0] = f
			}
			continue
		}
		p.fits = append(p.fits, f)
	}
	if len(p.fits) < r.nodes {
		reason := t.render(r)
		if r.nodes > 1 {
			head := fmt.Sprintf("needs %d nodes, %d feasible", r.nodes, len(p.fits))
			if reason == "" {
				return nil, head
			}
			return nil, head + "; " + reason
		}
		return nil, reason
	}
	if r.nodes > 1 {
		slices.SortFunc(p.fits, better)
	}
	return p.commit(r, p.fits[:r.nodes])
}

// commit takes the resources of every rank, rank 0 on the first fit, and
// keeps them only when all ranks got theirs.
func (p *placer) commit(r *request, fits []fit) ([]structs.Allocation, string) {
	t := p.l.begin()
	allocs := make([]structs.Allocation, 0, len(fits))
	for rank, f := range fits {
		ns := &p.l.nodes[f.node]
		uuids, err := t.take(f.node, chooseGPUs(r, ns), r.cpus, r.mem)
		if err != nil {
			t.rollback()
			return nil, err.Error()
		}
		allocs = append(allocs, structs.Allocation{
			JobID:        r.job.ID,
			NodeID:       ns.node.ID,
			Rank:         rank,
			Attempt:      r.job.Attempts + 1,
			GPUs:         uuids,
			CPUs:         r.cpus,
			MemoryMiB:    r.mem,
			State:        structs.AllocPending,
			DesiredState: structs.DesiredRun,
		})
	}
	t.commit()
	return allocs, ""
}

// chooseGPUs picks the GPUs for one rank on a node that passed the filters:
// of the free GPUs that match the job's model and memory, the set with the
// best interconnect (BestGPUs), in index order.
func chooseGPUs(r *request, ns *nodeState) []int {
	slots := make([]int, 0, len(ns.gpus))
	cand := make([]int, 0, len(ns.gpus))
	for s := range ns.gpus {
		if g := &ns.gpus[s]; g.free && r.matches(g) {
			slots = append(slots, s)
			cand = append(cand, g.pos)
		}
	}
	chosen := BestGPUs(ns.node.GPUs, cand, r.gpus)
	for i, c := range chosen {
		slots[i] = slots[c]
	}
	return slots[:len(chosen)]
}
