package sched

import (
	"cmp"
	"slices"

	"github.com/skein-dev/skein/structs"
)

// Preemptions answers, for a queued job that does not fit now, which
// running jobs to stop so that it would: the IDs of the victims, cheapest
// first, or nil when the job fits already or when stopping every candidate
// would still not make room. It is NewPreemptor(s, running).Victims(job).
func Preemptions(s State, job *structs.Job, running []*structs.Job) []string {
	return NewPreemptor(s, running).Victims(job)
}

// Preemptor answers preemption questions on one view of the cluster: the
// ledger and the candidates are built once, for every blocked job of a
// scheduling pass.
//
// A candidate is a running job of running that is Preemptible, is not
// being cancelled or preempted already, and whose live allocations in s
// are all still meant to run (one being stopped frees its resources
// anyway). For a given job, only candidates of strictly lower priority
// count, and only those holding something on a node the job could ever
// use. A candidate is taken whole: every rank of a gang is stopped.
//
// Cheapest means lowest priority first, then least work lost (the most
// recently started), then job ID. Candidates are added in that order until
// the job fits; then each chosen victim, most expensive first, is dropped
// again when the job still fits without it. So every victim returned is
// needed: without any one of them the job does not fit.
//
// Like Place, a Preemptor is pure and deterministic; it does not check a
// job's queue position or backoff, which are the caller's business.
type Preemptor struct {
	l *ledger
	// cands are sorted cheapest first.
	cands []*candidate
	// qos, when some QoS preempts another, makes the running jobs of
	// the preempted QoS candidates too (structs.MayPreempt).
	qos *structs.AccountTable
}

// NewPreemptor builds the ledger of s and the candidates among running.
func NewPreemptor(s State, running []*structs.Job) *Preemptor {
	return newPreemptor(s, running, nil)
}

// newPreemptor is NewPreemptor with the QoS preemption rules of qos.
func newPreemptor(s State, running []*structs.Job, qos *structs.AccountTable) *Preemptor {
	if !qosPreempts(qos) {
		qos = nil
	}
	l := newLedger(s.AllNodes(), s.AllLiveAllocs())
	return &Preemptor{l: l, cands: candidates(l, s.AllLiveAllocs(), running, qos), qos: qos}
}

// qosPreempts reports whether any QoS of t preempts another.
func qosPreempts(t *structs.AccountTable) bool {
	if t == nil {
		return false
	}
	for _, q := range t.QoS {
		if len(q.Preempt) > 0 {
			return true
		}
	}
	return false
}

// Exclude makes jobs no longer candidates, such as victims the caller has
// just chosen for another job.
func (p *Preemptor) Exclude(jobIDs []string) {
	p.cands = slices.DeleteFunc(p.cands, func(c *candidate) bool { return slices.Contains(jobIDs, c.job.ID) })
}

// Victims returns the cheapest victims that let job fit, cheapest first, or
// nil (see Preemptor). The Preemptor is left as it was.
func (p *Preemptor) Victims(job *structs.Job) []string {
	l := p.l
	if job == nil || len(l.nodes) == 0 {
		return nil
	}
	r, err := newRequest(job, l)
	if err != nil {
		return nil
	}
	f := newFitCount(r, l)
	if f.fits() {
		return nil
	}
	var eligible []*candidate
	for _, c := range p.cands {
		if p.qos == nil && c.job.Spec.Priority >= job.Spec.Priority {
			break // cheapest first: the rest are not lower either
		}
		if c.job.ID != job.ID && structs.MayPreempt(p.qos, job, c.job) && c.usableBy(r, l) {
			eligible = append(eligible, c)
		}
	}
	// Can all of them together make room? If not, no set can.
	for _, c := range eligible {
		f.giveBack(c)
	}
	enough := f.fits()
	for _, c := range eligible {
		f.takeBack(c)
	}
	if !enough {
		return nil
	}
	var chosen []*candidate
	for _, c := range eligible {
		f.giveBack(c)
		chosen = append(chosen, c)
		if f.fits() {
			break
		}
	}
	for i := len(chosen) - 1; i >= 0; i-- {
		f.takeBack(chosen[i])
		if f.fits() {
			chosen = slices.Delete(chosen, i, i+1)
			continue
		}
		f.giveBack(chosen[i])
	}
	ids := make([]string, len(chosen))
	for i, c := range chosen {
		f.takeBack(c)
		ids[i] = c.job.ID
	}
	return ids
}

// fitCount keeps, while candidates are given back and taken back, which
// nodes one rank of r fits on, re-checking only the nodes a candidate
// touches.
type fitCount struct {
	r  *request
	l  *ledger
	ok []bool
	n  int
}

func newFitCount(r *request, l *ledger) *fitCount {
	f := &fitCount{r: r, l: l, ok: make([]bool, len(l.nodes))}
	for i := range l.nodes {
		f.recheck(i)
	}
	return f
}

// fits reports whether every rank of r would find a node, as the placement
// filters see the ledger now.
func (f *fitCount) fits() bool { return f.n >= f.r.nodes }

func (f *fitCount) recheck(i int) {
	_, code, _ := f.r.check(i, &f.l.nodes[i])
	if ok := code == reasonNone; ok != f.ok[i] {
		f.ok[i] = ok
		if ok {
			f.n++
		} else {
			f.n--
		}
	}
}

func (f *fitCount) giveBack(c *candidate) {
	f.l.shift(c, true)
	c.eachNode(f.recheck)
}

func (f *fitCount) takeBack(c *candidate) {
	f.l.shift(c, false)
	c.eachNode(f.recheck)
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
	node      int // ledger index
	cpus      int
	mem       int64
	exclusive bool // the allocation is an --exclusive job's
}

// candidates returns the jobs of running that may be preempted at all,
// with what each holds, cheapest first.
// With qos, running jobs of a QoS another preempts may be preempted too.
func candidates(l *ledger, live []*structs.Allocation, running []*structs.Job, qos *structs.AccountTable) []*candidate {
	byJob := make(map[string]*candidate, len(running))
	var out []*candidate
	for _, j := range running {
		if j == nil || byJob[j.ID] != nil || j.State != structs.JobRunning ||
			!(j.Spec.Preemptible || qos.Preempted(j.Spec.QoS)) || j.StopRequested || j.PreemptedBy != "" {
			continue
		}
		c := &candidate{job: j}
		byJob[j.ID] = c
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil
	}
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
			}
		}
		if n := l.nodeIndex(a.NodeID); n >= 0 {
			c.uses = append(c.uses, nodeUse{node: n, cpus: a.CPUs, mem: a.MemoryMiB, exclusive: a.Exclusive})
		}
	}
	out = slices.DeleteFunc(out, func(c *candidate) bool {
		return stopping[c] || (len(c.gpus) == 0 && len(c.uses) == 0)
	})
	slices.SortFunc(out, func(a, b *candidate) int {
		return cmp.Or(cmp.Compare(a.job.Spec.Priority, b.job.Spec.Priority),
			b.job.StartedAt.Compare(a.job.StartedAt), cmp.Compare(a.job.ID, b.job.ID))
	})
	return out
}

// eachNode calls f once for every ledger node the candidate holds
// something on (a node may come more than once).
func (c *candidate) eachNode(f func(node int)) {
	for _, ref := range c.gpus {
		f(ref.node)
	}
	for _, u := range c.uses {
		f(u.node)
	}
}

// usableBy reports whether the candidate holds something on a node r could
// ever use: stopping it could help.
func (c *candidate) usableBy(r *request, l *ledger) bool {
	usable := false
	c.eachNode(func(n int) { usable = usable || r.couldUse(&l.nodes[n]) })
	return usable
}

// couldUse reports whether a rank of r could ever run on the node, its
// current usage aside: ready, with every constraint, the container engine
// and mounts a job with an image needs, and a GPU of the model and memory
// asked for.
func (r *request) couldUse(ns *nodeState) bool {
	if code, _ := r.static(ns); code != reasonNone {
		return false
	}
	if r.gpus == 0 {
		return true
	}
	return slices.ContainsFunc(ns.gpus, func(g gpuSlot) bool { return r.matches(&g) })
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

// freeableSlots maps the UUID of every usable GPU (placeable, its UUID
// once in the inventory: the GPUs the ledger may hand out once no
// allocation holds them) to its slot. A victim's GPU that is not usable,
// say cordoned or failed, frees nothing by stopping.
func (l *ledger) freeableSlots() map[string]slotRef {
	total := 0
	for i := range l.nodes {
		total += len(l.nodes[i].gpus)
	}
	out := make(map[string]slotRef, total)
	for i := range l.nodes {
		for s, g := range l.nodes[i].gpus {
			if g.usable {
				out[g.uuid] = slotRef{node: i, slot: s}
			}
		}
	}
	return out
}

// shift frees in the ledger what a candidate holds, as if it had stopped
// (free), or takes it again: its GPUs, CPUs and memory, and its place on
// its nodes, which an --exclusive job counts.
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
		ns.live -= sign
		if u.exclusive {
			ns.exclusive -= sign
		}
	}
}
