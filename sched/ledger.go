package sched

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/skein-dev/skein/structs"
)

// ledger is the one accounting object of a Place pass. It is built from the
// registered nodes and the live allocations, and it is the only thing that
// hands out GPUs, CPUs and memory. Every grant goes through a txn, so a gang
// can take resources on several nodes and give them all back if one rank
// does not fit.
type ledger struct {
	// nodes are sorted by ID, which makes the ledger index a deterministic
	// tie-break.
	nodes []nodeState
	// models are the distinct lower-case GPU models of the inventory; a
	// request matches each once per job, not once per GPU.
	models []string
	// uniform is set when every node's GPUs share one model and one memory
	// size, so a node's free matching GPUs are all its free GPUs or none.
	uniform bool
	// byFree indexes the ready nodes by free GPU count: byFree[k] holds the
	// nodes with k free GPUs, ordered by (cpuKey, ledger index), which is
	// the order better ranks fits of equal score in.
	byFree [][]int32
	// imageHolders memoizes holders per image reference.
	imageHolders map[string][]bool
	// replicas counts, per service ID, its live replicas on each node
	// (by ledger index), grants of this pass included.
	replicas map[string][]int
}

// nodeState is what one node has left in this pass.
type nodeState struct {
	node  *structs.Node
	ready bool
	// gpus are sorted by GPU index (then UUID).
	gpus []gpuSlot
	// freeGPUs counts the slots whose free flag is set.
	freeGPUs int
	// cpuTracked is false for a node that reports 0 CPUs: its CPUs are not
	// accounted and never filter. memTracked likewise for memory.
	cpuTracked bool
	freeCPUs   int
	memTracked bool
	freeMem    int64
	// holds are the CPUs and memory that live allocations and grants of
	// this pass hold on the node, with when they are expected back.
	holds []hold
	// live counts the live allocations and grants of this pass on the
	// node, exclusive those of them that are --exclusive jobs';
	// busyUntil and exclusiveUntil are when the last of each is expected
	// to end (unix nanoseconds; endUnknown when one may never end).
	live, exclusive           int
	busyUntil, exclusiveUntil int64
}

// hold is CPUs and memory held on a node until a time (unix nanoseconds;
// endUnknown when the holder has no time limit).
type hold struct {
	until int64
	cpus  int
	mem   int64
}

// endUnknown is the end of work without a time limit: it may never end.
const endUnknown int64 = math.MaxInt64

// gpuSlot is one GPU of a node as the ledger sees it.
type gpuSlot struct {
	index  int
	pos    int // in node.GPUs
	uuid   string
	model  int // index into ledger.models
	memMiB int64
	// usable is set for a placeable GPU (healthy, not cordoned, no foreign
	// processes) with a UUID unique in the cluster: one that is free now
	// or will be when its holder ends.
	usable bool
	// free is set for a usable GPU that no live allocation and no grant of
	// this pass holds.
	free bool
	// until, on a usable GPU that is not free, is when its holder is
	// expected to end (unix nanoseconds, or endUnknown).
	until int64
	// out names why a GPU is out of service (reasonUnhealthy,
	// reasonCordoned, reasonForeign), reasonNone when it is in service.
	out reasonCode
}

// newLedger builds the accounting for a pass. Nil entries are ignored; of
// two nodes with one ID only the first (in input order) counts. A GPU whose
// UUID is empty or appears more than once in the inventory is never handed
// out, because an allocation could not say which device it means. A GPU held
// by a live allocation is busy wherever that allocation claims to run.
func newLedger(nodes []*structs.Node, allocs []*structs.Allocation) *ledger {
	return buildLedger(nodes, allocs, nil)
}

// buildLedger is newLedger that also records when each live allocation is
// expected to give its resources back: end(a), in unix nanoseconds or
// endUnknown. A nil end makes every end unknown.
func buildLedger(nodes []*structs.Node, allocs []*structs.Allocation, end func(*structs.Allocation) int64) *ledger {
	list := make([]*structs.Node, 0, len(nodes))
	for _, n := range nodes {
		if n != nil {
			list = append(list, n)
		}
	}
	slices.SortStableFunc(list, func(a, b *structs.Node) int { return cmp.Compare(a.ID, b.ID) })
	list = slices.CompactFunc(list, func(a, b *structs.Node) bool { return a.ID == b.ID })

	seen := make(map[string]int)
	for _, n := range list {
		for i := range n.GPUs {
			seen[n.GPUs[i].UUID]++
		}
	}
	// held maps each held GPU to the latest end of its holders.
	held := make(map[string]int64)
	ends := make([]int64, len(allocs))
	for i, a := range allocs {
		if a == nil || !a.Live() {
			continue
		}
		ends[i] = endUnknown
		if end != nil {
			ends[i] = end(a)
		}
		for _, u := range a.GPUs {
			if until, ok := held[u]; !ok || ends[i] > until {
				held[u] = ends[i]
			}
		}
	}

	l := &ledger{nodes: make([]nodeState, len(list)), uniform: true}
	byID := make(map[string]*nodeState, len(list))
	indexOf := make(map[string]int, len(list))
	modelIDs := make(map[string]int)
	for i, n := range list {
		ns := &l.nodes[i]
		*ns = nodeState{
			node:       n,
			ready:      n.Status == structs.NodeReady && n.Drain == nil,
			gpus:       make([]gpuSlot, len(n.GPUs)),
			cpuTracked: n.CPUs > 0,
			freeCPUs:   n.CPUs,
			memTracked: n.MemoryMiB > 0,
			freeMem:    n.MemoryMiB,
		}
		for j := range n.GPUs {
			g := &n.GPUs[j]
			m := strings.ToLower(g.Model)
			id, ok := modelIDs[m]
			if !ok {
				id = len(l.models)
				modelIDs[m] = id
				l.models = append(l.models, m)
			}
			out := outOfService(g)
			usable := out == reasonNone && g.UUID != "" && seen[g.UUID] == 1
			until, isHeld := held[g.UUID]
			free := usable && !isHeld
			ns.gpus[j] = gpuSlot{index: g.Index, pos: j, uuid: g.UUID, model: id, memMiB: g.MemoryMiB,
				usable: usable, free: free, until: until, out: out}
			if free {
				ns.freeGPUs++
			}
			if first := &ns.gpus[0]; first.model != id || first.memMiB != g.MemoryMiB {
				l.uniform = false
			}
		}
		slices.SortStableFunc(ns.gpus, func(a, b gpuSlot) int {
			return cmp.Or(cmp.Compare(a.index, b.index), cmp.Compare(a.uuid, b.uuid))
		})
		byID[n.ID] = ns
		indexOf[n.ID] = i
	}
	for i, a := range allocs {
		if a == nil || !a.Live() {
			continue
		}
		if ns, ok := byID[a.NodeID]; ok {
			if svc, ok := structs.ReplicaService(a.JobID); ok {
				l.addReplica(svc, indexOf[a.NodeID])
			}
			ns.occupy(a.Exclusive, ends[i])
			ns.freeCPUs -= a.CPUs
			ns.freeMem -= a.MemoryMiB
			if a.CPUs != 0 || a.MemoryMiB != 0 {
				ns.holds = append(ns.holds, hold{until: ends[i], cpus: a.CPUs, mem: a.MemoryMiB})
			}
		}
	}
	l.buildIndex()
	return l
}

// occupy counts one more allocation (an --exclusive job's, when
// exclusive) on the node, expected to end at until.
func (ns *nodeState) occupy(exclusive bool, until int64) {
	ns.live++
	ns.busyUntil = max(ns.busyUntil, until)
	if exclusive {
		ns.exclusive++
		ns.exclusiveUntil = max(ns.exclusiveUntil, until)
	}
}

// addReplica counts a replica of service svc on node i.
func (l *ledger) addReplica(svc string, i int) {
	if l.replicas == nil {
		l.replicas = make(map[string][]int)
	}
	if l.replicas[svc] == nil {
		l.replicas[svc] = make([]int, len(l.nodes))
	}
	l.replicas[svc][i]++
}

// holders says, per node, whether it holds the image ref (its engine
// lists it, ContainerEngine.Holds), or nil when no node does. It is worked
// out once per image and pass: a pass over many jobs of one image pays for
// one walk of the nodes' image lists.
func (l *ledger) holders(ref string) []bool {
	if h, ok := l.imageHolders[ref]; ok {
		return h
	}
	var h []bool
	for i := range l.nodes {
		if l.nodes[i].node.Containers.Holds(ref) {
			if h == nil {
				h = make([]bool, len(l.nodes))
			}
			h[i] = true
		}
	}
	if l.imageHolders == nil {
		l.imageHolders = make(map[string][]bool)
	}
	l.imageHolders[ref] = h
	return h
}

// outOfService names the health state that keeps work off a GPU.
func outOfService(g *structs.GPU) reasonCode {
	switch g.HealthState() {
	case structs.GPUUnhealthy:
		return reasonUnhealthy
	case structs.GPUCordoned:
		return reasonCordoned
	case structs.GPUForeign:
		return reasonForeign
	}
	return reasonNone
}

// grant is what one take handed out, kept so a rollback can return it.
type grant struct {
	node  int
	slots []int
	cpus  int
	mem   int64
}

// txn is a tentative set of grants on a ledger: commit keeps them, rollback
// returns them. A txn is used once.
type txn struct {
	l      *ledger
	grants []grant
}

func (l *ledger) begin() *txn { return &txn{l: l} }

// take hands out the GPU slots, CPUs and memory of one node and returns the
// GPU UUIDs in slot order. It fails, taking nothing, when any slot is not
// free (asked for twice included) or a tracked CPU or memory amount would go
// below zero.
func (t *txn) take(node int, slots []int, cpus int, mem int64) ([]string, error) {
	ns := &t.l.nodes[node]
	if ns.cpuTracked && cpus > 0 && cpus > ns.freeCPUs {
		return nil, fmt.Errorf("take %d CPUs on node %s: %w", cpus, ns.node.ID, errNotFree)
	}
	if ns.memTracked && mem > 0 && mem > ns.freeMem {
		return nil, fmt.Errorf("take %s memory on node %s: %w", structs.FormatMiB(mem), ns.node.ID, errNotFree)
	}
	t.l.unindex(node)
	defer t.l.index(node)
	uuids := make([]string, 0, len(slots))
	for i, s := range slots {
		if s < 0 || s >= len(ns.gpus) || !ns.gpus[s].free {
			t.l.release(node, slots[:i])
			return nil, fmt.Errorf("take GPU slot %d on node %s: %w", s, ns.node.ID, errNotFree)
		}
		ns.gpus[s].free = false
		ns.freeGPUs--
		uuids = append(uuids, ns.gpus[s].uuid)
	}
	ns.freeCPUs -= cpus
	ns.freeMem -= mem
	t.grants = append(t.grants, grant{node: node, slots: slots, cpus: cpus, mem: mem})
	return uuids, nil
}

// commit makes the grants final.
func (t *txn) commit() { t.grants = nil }

// rollback returns every grant of the txn to the ledger.
func (t *txn) rollback() {
	for i := len(t.grants) - 1; i >= 0; i-- {
		g := t.grants[i]
		t.l.unindex(g.node)
		t.l.release(g.node, g.slots)
		t.l.nodes[g.node].freeCPUs += g.cpus
		t.l.nodes[g.node].freeMem += g.mem
		t.l.index(g.node)
	}
	t.grants = nil
}

// release marks GPU slots that a take handed out free again.
func (l *ledger) release(node int, slots []int) {
	ns := &l.nodes[node]
	for _, s := range slots {
		ns.gpus[s].free = true
		ns.freeGPUs++
	}
}
