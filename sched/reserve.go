package sched

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/skein-dev/skein/structs"
)

// reservation is what the first job in line that does not fit holds for
// later: r.nodes specific nodes, on which it can start at start, when the
// running work on them ends by its time limits. Jobs behind it may still
// start now where they do not delay it (EASY backfill): a job that ends
// before start may use anything; any other job may use only a reserved
// node's spare, what that node will have beyond the head's needs at start.
type reservation struct {
	job   *structs.Job
	nodes int
	gpus  int // per rank
	// exclusive is set for an --exclusive head: a reserved node then has
	// no spare at all.
	exclusive bool
	// start is when the head can start, in unix nanoseconds; endUnknown
	// when it waits for work without a time limit.
	start int64
	// spare is, per ledger index, what a reserved node keeps at start
	// beyond the head's needs; on is false for the nodes not reserved.
	spare []spare
}

type spare struct {
	on   bool
	gpus int
	cpus int   // MaxInt when the node does not track CPUs
	mem  int64 // MaxInt64 when the node does not track memory
}

// endsBefore reports whether work ending at end (endUnknown: never) gives
// its resources back by the time the head starts. Nothing without a time
// limit does, not even before a start that is itself unknown.
func (res *reservation) endsBefore(end int64) bool {
	return end != endUnknown && end <= res.start
}

// event is resources a node gets back at a time.
type event struct {
	at   int64
	gpus int
	cpus int
	mem  int64
}

// reserve finds where and when the head job r can run: on each node that
// could ever host one rank, the earliest time it could, given the end of
// every allocation there (live or granted in this pass); then the r.nodes
// nodes that are ready first, ties to the lower node ID. It returns nil when
// fewer than r.nodes nodes could ever host a rank (down, wrong labels,
// container engine or model, or too small), so that job holds nothing back.
func (p *placer) reserve(r *request) *reservation {
	type cand struct {
		node int
		at   int64
	}
	var cands []cand
	var evs []event
	for i := range p.l.nodes {
		var at int64
		var ok bool
		if at, ok, evs = p.earliest(r, i, evs); ok {
			cands = append(cands, cand{i, at})
		}
	}
	if len(cands) < r.nodes {
		return nil
	}
	slices.SortFunc(cands, func(a, b cand) int { return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.node, b.node)) })
	chosen := cands[:r.nodes]
	res := &reservation{job: r.job, nodes: r.nodes, gpus: r.gpus, exclusive: r.exclusive,
		start: chosen[len(chosen)-1].at, spare: make([]spare, len(p.l.nodes))}
	for _, c := range chosen {
		res.spare[c.node] = p.spareAt(r, c.node, res.start)
	}
	return res
}

// earliest is when node i could host one rank of r (p.now when it can at
// once), and false when it never could: when it has the resources
// (earliestFree), and no --exclusive job holds it, nor, for an
// --exclusive r, any job. evs is scratch space, returned for reuse.
func (p *placer) earliest(r *request, i int, evs []event) (int64, bool, []event) {
	at, ok, evs := p.earliestFree(r, i, evs)
	if !ok {
		return at, ok, evs
	}
	ns := &p.l.nodes[i]
	if ns.exclusive > 0 {
		at = max(at, ns.exclusiveUntil)
	}
	if r.exclusive && ns.live > 0 {
		at = max(at, ns.busyUntil)
	}
	return at, true, evs
}

// earliestFree is when node i will have the GPUs, CPUs and memory of one
// rank of r free (p.now when it has them), and false when it never will.
func (p *placer) earliestFree(r *request, i int, evs []event) (int64, bool, []event) {
	ns := &p.l.nodes[i]
	if code, _ := r.static(ns); code != reasonNone {
		return 0, false, evs
	}
	evs = evs[:0]
	gpus, cpus, mem := 0, ns.freeCPUs, ns.freeMem
	for s := range ns.gpus {
		g := &ns.gpus[s]
		switch {
		case !g.usable || !r.matches(g):
		case g.free:
			gpus++
		default:
			evs = append(evs, event{at: g.until, gpus: 1})
		}
	}
	for _, h := range ns.holds {
		evs = append(evs, event{at: h.until, cpus: h.cpus, mem: h.mem})
	}
	enough := func() bool {
		return gpus >= r.gpus &&
			(!ns.cpuTracked || r.cpus <= 0 || cpus >= r.cpus) &&
			(!ns.memTracked || r.mem <= 0 || mem >= r.mem)
	}
	if enough() {
		return p.now, true, evs
	}
	slices.SortFunc(evs, func(a, b event) int { return cmp.Compare(a.at, b.at) })
	for _, e := range evs {
		gpus, cpus, mem = gpus+e.gpus, cpus+e.cpus, mem+e.mem
		if enough() {
			return e.at, true, evs
		}
	}
	return 0, false, evs
}

// spareAt is what node i will have at time at beyond one rank of r.
func (p *placer) spareAt(r *request, i int, at int64) spare {
	ns := &p.l.nodes[i]
	sp := spare{on: true, cpus: math.MaxInt, mem: math.MaxInt64}
	for s := range ns.gpus {
		g := &ns.gpus[s]
		if g.usable && r.matches(g) && (g.free || g.until <= at) {
			sp.gpus++
		}
	}
	sp.gpus -= r.gpus
	cpus, mem := ns.freeCPUs, ns.freeMem
	for _, h := range ns.holds {
		if h.until <= at {
			cpus += h.cpus
			mem += h.mem
		}
	}
	if ns.cpuTracked {
		sp.cpus = cpus - max(r.cpus, 0)
	}
	if ns.memTracked {
		sp.mem = mem - max(r.mem, 0)
	}
	return sp
}

// reserved reports whether one rank of r on node i would delay the head:
// r may outlast the wait and would take more than the node's spare, or
// would share the node with an --exclusive head, or is --exclusive itself.
func (p *placer) reserved(r *request, i int) bool {
	if r.mayUseReserved {
		return false
	}
	sp := &p.res.spare[i]
	return sp.on && (p.res.exclusive || r.exclusive || (r.gpus > 0 && r.gpus > sp.gpus) ||
		(r.cpus > 0 && r.cpus > sp.cpus) || (r.mem > 0 && r.mem > sp.mem))
}

// charge takes one rank of a job that may outlast the wait from node i's
// spare.
func (res *reservation) charge(i int, r *request) {
	if sp := &res.spare[i]; sp.on {
		sp.gpus -= r.gpus
		sp.cpus -= r.cpus
		sp.mem -= r.mem
	}
}

// describe is the head's part of its blocked reason: "first in line: 16
// GPUs on 2 nodes reserved from ~14:05 UTC".
func (res *reservation) describe(now int64) string {
	what := plural(res.nodes, "node")
	if res.gpus > 0 {
		what = plural(res.gpus*res.nodes, "GPU") + " on " + what
	}
	return "first in line: " + what + " reserved " + res.when(now)
}

// blocks is why a reserved node refuses a job that may outlast the wait.
func (res *reservation) blocks(r *request, now int64) string {
	why := " (this job's time limit ends later)"
	if r.end == endUnknown {
		why = " (a job without a time limit cannot backfill)"
	}
	return "reserved for higher-priority job " + structs.ShortID(res.job.ID) + " " + res.when(now) + why
}

// when says when the reservation starts, to the minute, so that the reason
// stays the same from pass to pass and the leader has nothing to rewrite.
func (res *reservation) when(now int64) string {
	switch {
	case res.start == endUnknown:
		return "for when running jobs without a time limit end"
	case res.start < now:
		return "for when jobs past their time limit stop"
	}
	t := time.Unix(0, res.start).UTC()
	if time.Duration(res.start-now) < 20*time.Hour {
		return "from ~" + t.Format("15:04") + " UTC"
	}
	return "from ~" + t.Format("Jan 2 15:04") + " UTC"
}
