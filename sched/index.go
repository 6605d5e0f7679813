package sched

import (
	"cmp"
	"math"
	"slices"
)

// The free-GPU index lets a pass find the best node for a job without
// looking at every node. Ready nodes sit in one bucket per free GPU count;
// a bucket is kept sorted by (cpuKey, ledger index). For a job whose
// matching GPUs are a node's free GPUs (no model or memory filter, or a
// uniform inventory), every node in a bucket has the same score, and inside
// a bucket the order is exactly better's tie-break, so walking the buckets
// from the best score and stopping at the first nodes that pass gives the
// same pick as scoring every node.

// cpuKey orders nodes by free CPUs, untracked CPUs last (they leave the
// most: better counts them as MaxInt CPUs left).
func cpuKey(ns *nodeState) int {
	if !ns.cpuTracked {
		return math.MaxInt
	}
	return ns.freeCPUs
}

// entryCmp compares the node at ledger index i with the entry (key, node).
func (l *ledger) entryCmp(i int32, key, node int) int {
	return cmp.Or(cmp.Compare(cpuKey(&l.nodes[i]), key), cmp.Compare(int(i), node))
}

// buildIndex fills byFree from scratch.
func (l *ledger) buildIndex() {
	most := 0
	for i := range l.nodes {
		most = max(most, len(l.nodes[i].gpus))
	}
	l.byFree = make([][]int32, most+1)
	for i := range l.nodes {
		if ns := &l.nodes[i]; ns.ready {
			l.byFree[ns.freeGPUs] = append(l.byFree[ns.freeGPUs], int32(i))
		}
	}
	for _, b := range l.byFree {
		slices.SortFunc(b, func(x, y int32) int { return l.entryCmp(x, cpuKey(&l.nodes[y]), int(y)) })
	}
}

// unindex takes a node out of its bucket before its free GPUs or CPUs
// change; index puts it back after.
func (l *ledger) unindex(node int) {
	ns := &l.nodes[node]
	if !ns.ready {
		return
	}
	b := l.byFree[ns.freeGPUs]
	if at, ok := slices.BinarySearchFunc(b, cpuKey(ns), func(x int32, key int) int { return l.entryCmp(x, key, node) }); ok {
		l.byFree[ns.freeGPUs] = slices.Delete(b, at, at+1)
	}
}

func (l *ledger) index(node int) {
	ns := &l.nodes[node]
	if !ns.ready {
		return
	}
	b := l.byFree[ns.freeGPUs]
	at, _ := slices.BinarySearchFunc(b, cpuKey(ns), func(x int32, key int) int { return l.entryCmp(x, key, node) })
	l.byFree[ns.freeGPUs] = slices.Insert(b, at, int32(node))
}

// firstWithCPUs is the position of the first node in bucket b with at least
// cpus free CPUs (or untracked CPUs); the nodes before it fail the CPU
// filter.
func (l *ledger) firstWithCPUs(b []int32, cpus int) int {
	if cpus <= 0 {
		return 0
	}
	at, _ := slices.BinarySearchFunc(b, cpus, func(x int32, key int) int {
		return cmp.Compare(cpuKey(&l.nodes[x]), key)
	})
	return at
}
