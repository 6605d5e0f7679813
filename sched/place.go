package sched

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/skein-dev/skein/structs"
)

// Place plans the given queued jobs in the order given, greedily, without
// queue policy: no aging and no reservations. Jobs placed earlier in the
// pass consume resources for later ones. A job that does not fit is skipped
// (smaller ones behind it may still be placed) and reported in Plan.Blocked
// with a reason. A job listed twice is planned once; nil jobs are ignored.
// The leader uses Schedule; Place is the same pipeline for callers that
// already chose the order.
//
// Allocations carry JobID, NodeID, Rank, Attempt, GPUs, CPUs, MemoryMiB and
// the pending/run states; the leader stamps IDs and times.
func Place(s State, jobs []*structs.Job) structs.Plan {
	if len(jobs) == 0 {
		return structs.Plan{}
	}
	return newPlacer(s, time.Time{}, false).run(jobs)
}

// placer runs the pipeline for one pass.
type placer struct {
	l *ledger
	// fits is reused between jobs to spare allocations.
	fits []fit
	// backfill turns on the reservation for the first job that does not
	// fit; now is the pass's time in unix nanoseconds.
	backfill bool
	now      int64
	// res is the reservation of the first job that did not fit, once one
	// was made.
	res *reservation
	// blocked remembers the reason of every job shape that did not fit in
	// this pass. Resources only shrink during a pass, so a later job of the
	// same shape cannot fit either and gets the same reason without a scan.
	blocked map[shape]string
	// owners keeps each owner within its GPU limit, groups each account
	// and QoS within theirs; nil for none.
	owners *ownerBudget
	groups *groupBudget
	// reference turns the index and the blocked-shape memory off, so every
	// job checks every node: the slow, obvious pass the tests hold the
	// fast one to.
	reference bool
}

// newPlacer builds the ledger for a pass. With backfill, every live
// allocation's end is estimated as its start (or creation, before it
// started) plus its job's time limit.
func newPlacer(s State, now time.Time, backfill bool) *placer {
	p := &placer{backfill: backfill, blocked: make(map[shape]string)}
	var end func(*structs.Allocation) int64
	if backfill {
		p.now = now.UnixNano()
		end = func(a *structs.Allocation) int64 {
			start := a.StartedAt
			if start.IsZero() {
				start = a.CreatedAt
			}
			if start.IsZero() {
				start = now
			}
			return endAfter(start.UnixNano(), s.JobTimeLimit(a.JobID))
		}
	}
	p.l = buildLedger(s.AllNodes(), s.AllLiveAllocs(), end)
	return p
}

// endAfter is start plus limit in unix nanoseconds, endUnknown for no limit
// and capped below endUnknown for a limit too long to add.
func endAfter(start int64, limit time.Duration) int64 {
	switch {
	case limit <= 0:
		return endUnknown
	case int64(limit) >= endUnknown-start:
		return endUnknown - 1
	}
	return start + int64(limit)
}

// run plans the jobs in the order given.
func (p *placer) run(jobs []*structs.Job) structs.Plan {
	// Most jobs of a long queue wait: room for all of them up front spares
	// growing the list over and over.
	plan := structs.Plan{Blocked: make([]structs.JobBlocked, 0, len(jobs))}
	seen := make(map[string]bool, len(jobs))
	for _, j := range jobs {
		if j == nil || seen[j.ID] {
			continue
		}
		seen[j.ID] = true
		if reason := cmp.Or(p.owners.refuse(j), p.groups.refuse(j)); reason != "" {
			plan.Blocked = append(plan.Blocked, structs.JobBlocked{JobID: j.ID, Reason: reason})
			continue
		}
		allocs, reason := p.place(j)
		if allocs == nil {
			plan.Blocked = append(plan.Blocked, structs.JobBlocked{JobID: j.ID, Reason: reason})
			continue
		}
		p.owners.charge(j)
		p.groups.charge(j)
		plan.Placements = append(plan.Placements, structs.JobPlacement{JobID: j.ID, Allocations: allocs})
	}
	return plan
}

// shape is everything about a job that decides whether it fits and what
// its blocked reason says.
type shape struct {
	nodes, gpus, cpus int
	gpuMem, mem       int64
	model             string
	constraints       string
	// container is "" for a job without an image, else a mark followed by
	// the mount sources.
	container string
	// class is how the job stands to the reservation: see placer.class.
	class     uint8
	exclusive bool
}

func shapeOf(j *structs.Job, class uint8) shape {
	s := &j.Spec
	sh := shape{
		nodes: max(s.Nodes, 1), gpus: s.GPUs, cpus: s.CPUs,
		gpuMem: int64(s.GPUMemoryMinMiB), mem: int64(s.MemoryMiB), model: s.GPUModel, class: class,
		exclusive: s.Exclusive,
	}
	if len(s.Constraints) > 0 {
		var b strings.Builder
		for _, k := range slices.Sorted(maps.Keys(s.Constraints)) {
			b.WriteString(k)
			b.WriteByte(0)
			b.WriteString(s.Constraints[k])
			b.WriteByte(0)
		}
		sh.constraints = b.String()
	}
	if s.Image != "" {
		var b strings.Builder
		b.WriteByte(1)
		for _, m := range s.Mounts {
			b.WriteString(m.Source)
			b.WriteByte(0)
		}
		sh.container = b.String()
	}
	return sh
}

// Classes of a job against the reservation.
const (
	classFree      uint8 = iota // no reservation yet, or the job ends before it starts
	classLimitLate              // the job's time limit ends after the reservation starts
	classNoLimit                // the job has no time limit
)

func (p *placer) class(end int64) uint8 {
	switch {
	case p.res == nil || p.res.endsBefore(end):
		return classFree
	case end == endUnknown:
		return classNoLimit
	}
	return classLimitLate
}

// place plans every rank of one job, or none and says why. The first job
// that does not fit, in a backfill pass, gets the reservation.
func (p *placer) place(j *structs.Job) ([]structs.Allocation, string) {
	if len(p.l.nodes) == 0 {
		return nil, ErrNoNodes.Error()
	}
	end := endUnknown
	if p.backfill {
		end = endAfter(p.now, time.Duration(j.Spec.TimeLimit))
	}
	key := shapeOf(j, p.class(end))
	if reason, ok := p.blocked[key]; ok && !p.reference {
		return nil, reason
	}
	r, err := newRequest(j, p.l)
	if err != nil {
		return nil, err.Error()
	}
	r.end = end
	r.mayUseReserved = p.res == nil || p.res.endsBefore(end)
	allocs, reason := p.fit(r)
	if allocs != nil {
		return allocs, ""
	}
	if p.backfill && p.res == nil {
		if res := p.reserve(r); res != nil {
			p.res = res
			clear(p.blocked)
			return nil, joinReasons(res.describe(p.now), reason)
		}
	}
	p.blocked[key] = reason
	return nil, reason
}

// fit finds nodes for every rank and commits them: through the free-GPU
// index when it ranks nodes exactly as scoring them would, else, and to
// count the reasons of a job that does not fit, by checking every node.
func (p *placer) fit(r *request) ([]structs.Allocation, string) {
	if p.indexRanksExactly(r) {
		if fits := p.scanIndex(r); len(fits) == r.nodes {
			return p.commit(r, fits)
		}
	}
	return p.scanAll(r)
}

// indexRanksExactly reports whether walking the free-GPU index ranks nodes
// for r exactly as scoring every node would: the score must depend only on
// the node's free matching GPUs, which must be all its free GPUs (no model
// or GPU-memory filter, or a uniform inventory), and ties must fall to free
// CPUs, then node index: so no node may hold the job's image, which breaks
// ties before the CPUs do, and the job may be no replica of a service with
// replicas placed, which count before the score. A scorer that looks at
// anything else must return false here for the jobs it scores.
func (p *placer) indexRanksExactly(r *request) bool {
	return !p.reference && r.holders == nil && r.replicas == nil && (p.l.uniform || (r.model == "" && r.gpuMem == 0))
}

// scanIndex walks the free-GPU buckets from the best score (binpack: the
// fewest free GPUs that still fit; spread: the most) and returns the first
// r.nodes nodes that pass every filter, best first, or fewer when not
// enough do.
func (p *placer) scanIndex(r *request) []fit {
	p.fits = p.fits[:0]
	top := len(p.l.byFree) - 1
	if r.gpus > top {
		return p.fits
	}
	from, to, step := r.gpus, top, 1
	if r.job.Spec.Spread {
		from, to, step = top, r.gpus, -1
	}
	for b := from; ; b += step {
		bucket := p.l.byFree[b]
		for _, i := range bucket[p.l.firstWithCPUs(bucket, r.cpus):] {
			f, code, _ := r.check(int(i), &p.l.nodes[i])
			if code != reasonNone || p.reserved(r, int(i)) {
				continue
			}
			p.fits = append(p.fits, f)
			if len(p.fits) == r.nodes {
				return p.fits
			}
		}
		if b == to {
			return p.fits
		}
	}
}

// scanAll checks every node, counts why each one that fails does, and
// commits the best fits when there are enough.
func (p *placer) scanAll(r *request) ([]structs.Allocation, string) {
	var t tally
	var held string
	if !r.mayUseReserved {
		held = p.res.blocks(r, p.now)
	}
	score := scorerFor(r.job)
	p.fits = p.fits[:0]
	for i := range p.l.nodes {
		f, code, arg := r.check(i, &p.l.nodes[i])
		if code != reasonNone {
			t.add(code, arg)
			continue
		}
		if p.reserved(r, i) {
			t.add(reasonReserved, held)
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
			return nil, joinReasons(fmt.Sprintf("needs %d nodes, %d feasible", r.nodes, len(p.fits)), reason)
		}
		return nil, reason
	}
	if r.nodes > 1 {
		slices.SortFunc(p.fits, better)
	}
	return p.commit(r, p.fits[:r.nodes])
}

// joinReasons joins two parts of a blocked reason, either of which may be
// empty.
func joinReasons(a, b string) string {
	if a == "" || b == "" {
		return a + b
	}
	return a + "; " + b
}

// commit takes the resources of every rank, rank 0 on the best-connected
// fit (rank.go), and keeps them only when all ranks got theirs. In a backfill pass it records
// when the job is expected to give them back, for the reservation, and
// charges a job that may outlast the reservation to the reserved nodes'
// spare.
func (p *placer) commit(r *request, fits []fit) ([]structs.Allocation, string) {
	t := p.l.begin()
	allocs := make([]structs.Allocation, 0, len(fits))
	taken := make([][]int, 0, len(fits))
	fits = rankZeroFirst(p.l, fits)
	for rank, f := range fits {
		ns := &p.l.nodes[f.node]
		slots := chooseGPUs(r, ns)
		uuids, err := t.take(f.node, slots, r.cpus, r.mem)
		if err != nil {
			t.rollback()
			return nil, err.Error()
		}
		taken = append(taken, slots)
		allocs = append(allocs, structs.Allocation{
			JobID:        r.job.ID,
			NodeID:       ns.node.ID,
			Rank:         rank,
			Attempt:      r.job.Attempts + 1,
			GPUs:         uuids,
			CPUs:         r.cpus,
			MemoryMiB:    r.mem,
			Exclusive:    r.exclusive,
			State:        structs.AllocPending,
			DesiredState: structs.DesiredRun,
		})
	}
	t.commit()
	for _, f := range fits {
		p.l.nodes[f.node].occupy(r.exclusive, r.end)
	}
	if r.service != "" {
		for _, f := range fits {
			p.l.addReplica(r.service, f.node)
		}
	}
	if !p.backfill {
		return allocs, ""
	}
	for k, f := range fits {
		ns := &p.l.nodes[f.node]
		for _, s := range taken[k] {
			ns.gpus[s].until = r.end
		}
		if r.cpus != 0 || r.mem != 0 {
			ns.holds = append(ns.holds, hold{until: r.end, cpus: r.cpus, mem: r.mem})
		}
		if !r.mayUseReserved {
			p.res.charge(f.node, r)
		}
	}
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
