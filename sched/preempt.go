package sched

import (
	"cmp"
	"slices"

	"github.com/skein-dev/skein/structs"
)

// Preemptions answers, for a queued job that does not fit now, which
// running jobs to stop so that it would: the IDs of the victims, cheapest
// first, or nil when the job fits already or when stopping every candidate
// would still not make room.
//
// A candidate is a running job of running, other than job, that is
// Preemptible, has a strictly lower priority than job, is not being
// cancelled or preempted already, and whose live allocations in s are all
// still meant to run (one being stopped frees its resources anyway). A
// candidate is taken whole: every rank of a gang is stopped.
//
// Cheapest means lowest priority first, then least work lost (the most
// recently started), then job ID. Candidates are added in that order until
// the job fits; then each chosen victim, most expensive first, is dropped
// again when the job still fits without it. So every victim returned is
// needed: without any one of them the job does not fit.
//
// Like Place, Preemptions is pure and deterministic; it does not check a
// job's queue position or backoff, which are the caller's business.
func Preemptions(s State, job *structs.Job, running []*structs.Job) []string {
	if job == nil {
		return nil
	}
	l := newLedger(s.AllNodes(), s.AllLiveAllocs())
	if len(l.nodes) == 0 {
		return nil
	}
	r, err := newRequest(job, l)
	if err != nil || fitsNow(r, l) {
		return nil
	}
	cands := candidates(l, r, s.AllLiveAllocs(), running)
	var chosen []*candidate
	fits := false
	for _, c := range cands {
		l.giveBack(c)
		chosen = append(chosen, c)
		if fitsNow(r, l) {
			fits = true
			break
		}
	}
	if !fits {
		return nil
	}
	for i := len(chosen) - 1; i >= 0; i-- {
		l.takeBack(chosen[i])
		if fitsNow(r, l) {
			chosen = slices.Delete(chosen, i, i+1)
			continue
		}
		l.giveBack(chosen[i])
	}
	ids := make([]string, len(chosen))
	for i, c := range chosen {
		ids[i] = c.job.ID
	}
	return ids
}

// candidate is a job that may be preempted and what stopping it would give
// back to the ledger.
type candidate struct {
	job *structs.Job
	// gpus are the GPU slots that become free when the job stops: those
	// its live allocations hold of healthy GPUs with a UUID unique in the
	// inventory, wherever the allocations claim to run.
	gpus []slotRef
	// uses are the CPUs and memory its allocations hold, per node.
	uses []nodeUse
}

type slotRef struct{ node, slot int }

type nodeUse struct {
	node int // ledger index
	cpus int
	mem  int64
}

// candidates returns the jobs of running that may be preempted for r, with
// what each holds, cheapest first. A job whose allocations are all on nodes
// r could never use is left out: stopping it could not help.
func candidates(l *ledger, r *request, live []*structs.Allocation, running []*structs.Job) []*candidate {
	prio := r.job.Spec.Priority
	byJob := map[string]*candidate{}
	var out []*candidate
	for _, j := range running {
		if j == nil || j.ID == r.job.ID || byJob[j.ID] != nil || j.State != structs.JobRunning ||
			!j.Spec.Preemptible || j.Spec.Priority >= prio || j.StopRequested || j.PreemptedBy != "" {
			continue
		}
		c := &candidate{job: j}
		byJob[j.ID] = c
		out = append(out, c)
	}
	usable := map[*candidate]bool{}
	stopping := map[*candidate]bool{}
	slots := l.freeableSlots()
	for _, a := range live {
		if a == nil || !a.Live() {
			continue
		}
		c := byJob[a.JobID]
		if c == nil {
			continue
		}
		if a.DesiredState == structs.DesiredStop {
			stopping[c] = true
		}
		for _, u := range a.GPUs {
			if ref, ok := slots[u]; ok && !l.nodes[ref.node].gpus[ref.slot].free {
				c.gpus = append(c.gpus, ref)
				if r.couldUse(&l.nodes[ref.node]) {
					usable[c] = true
				}
			}
		}
		if n := l.nodeIndex(a.NodeID); n >= 0 {
			c.uses = append(c.uses, nodeUse{node: n, cpus: a.CPUs, mem: a.MemoryMiB})
			if r.couldUse(&l.nodes[n]) {
				usable[c] = true
			}
		}
	}
	out = slices.DeleteFunc(out, func(c *candidate) bool { return !usable[c] || stopping[c] })
	slices.SortFunc(out, func(a, b *candidate) int {
		return cmp.Or(cmp.Compare(a.job.Spec.Priority, b.job.Spec.Priority),
			b.job.StartedAt.Compare(a.job.StartedAt), cmp.Compare(a.job.ID, b.job.ID))
	})
	return out
}

// couldUse reports whether a rank of r could ever run on the node, its
// current usage aside: ready, with every constraint and a GPU of the
// model and memory asked for.
func (r *request) couldUse(ns *nodeState) bool {
	if !ns.ready {
		return false
	}
	for _, c := range r.constraints {
		if v, ok := ns.node.Labels[c.key]; !ok || v != c.value {
			return false
		}
	}
	if r.gpus == 0 {
		return true
	}
	return slices.ContainsFunc(ns.gpus, func(g gpuSlot) bool { return r.matches(&g) })
}

// fitsNow reports whether every rank of r would find a node in the ledger
// as it stands, without taking anything.
func fitsNow(r *request, l *ledger) bool {
	n := 0
	for i := range l.nodes {
		if _, code, _ := r.check(i, &l.nodes[i]); code == reasonNone {
			if n++; n == r.nodes {
				return true
			}
		}
	}
	return false
}

// nodeIndex returns the ledger index of the node with the given ID, or -1.
func (l *ledger) nodeIndex(id string) int {
	i, ok := slices.BinarySearchFunc(l.nodes, id, func(ns nodeState, id string) int {
		return cmp.Compare(ns.node.ID, id)
	})
	if !ok {
		return -1
	}
	return i
}

// freeableSlots maps the UUID of every healthy GPU whose UUID appears once
// in the inventory (the GPUs the ledger may hand out once no allocation
// holds them) to its slot.
func (l *ledger) freeableSlots() map[string]slotRef {
	count := map[string]int{}
	for i := range l.nodes {
		for _, g := range l.nodes[i].node.GPUs {
			count[g.UUID]++
		}
	}
	out := map[string]slotRef{}
	for i := range l.nodes {
		ns := &l.nodes[i]
		for s, g := range ns.gpus {
			if g.uuid == "" || count[g.uuid] != 1 {
				continue
			}
			if k := slices.IndexFunc(ns.node.GPUs, func(x structs.GPU) bool { return x.UUID == g.uuid }); k >= 0 && ns.node.GPUs[k].Healthy {
				out[g.uuid] = slotRef{node: i, slot: s}
			}
		}
	}
	return out
}

// giveBack frees in the ledger what a candidate holds, as if it had stopped.
func (l *ledger) giveBack(c *candidate) { l.shift(c, true) }

// takeBack undoes giveBack.
func (l *ledger) takeBack(c *candidate) { l.shift(c, false) }

func (l *ledger) shift(c *candidate, free bool) {
	sign := -1
	if free {
		sign = 1
	}
	for _, ref := range c.gpus {
		ns := &l.nodes[ref.node]
		ns.gpus[ref.slot].free = free
		ns.freeGPUs += sign
	}
	for _, u := range c.uses {
		ns := &l.nodes[u.node]
		ns.freeCPUs += sign * u.cpus
		ns.freeMem += int64(sign) * u.mem
	}
}
