package sched

import (
	"math/bits"

	"github.com/skein-dev/skein/structs"
)

// Affinity of a pair of GPUs, as bits: what the two share. A pair's weight
// is the sum of its bits, so an NVLink pair (4) outweighs any pair without
// one (at most 3).
const (
	linkNUMA   = 1 // same NUMA node
	linkPCIe   = 2 // same PCIe switch
	linkNVLink = 4 // a direct NVLink, or both GPUs on the node's NVSwitch
)

// Tiers of a set of GPUs, best first.
const (
	tierAcross    = iota // nothing shared by all
	tierNUMA             // all on one NUMA node
	tierPCIe             // all behind one PCIe switch
	tierNVLinked         // connected through NVLink, some pairs over hops
	tierAllNVLink        // every pair linked directly (or all on NVSwitch)
)

// maxExhaustive bounds the number of k-subsets BestGPUs scores one by one;
// above it (more than about 14 candidates) it grows sets greedily instead.
const maxExhaustive = 4096

// maxTopologyGPUs is the most candidates whose topology BestGPUs weighs;
// beyond it (a malformed node) it takes the lowest-indexed ones.
const maxTopologyGPUs = 64

// BestGPUs chooses k GPUs of one node for one rank, preferring the set with
// the best interconnect. gpus is the node's inventory and cand the positions
// in gpus of the GPUs the rank may use (free, right model and memory), in
// ascending GPU index. It returns k positions in cand, ascending, so the
// chosen GPUs come in index order and CUDA_VISIBLE_DEVICES reads the same on
// every node. It returns nil when k is outside 1..len(cand).
//
// Sets are compared by, in order:
//
//  1. tier: every pair NVLinked (directly, or all on NVSwitch), then
//     connected through NVLink, then behind one PCIe switch, then on one
//     NUMA node, then anything;
//  2. the sum of the pairs' weights inside the set (NVLink 4 + PCIe
//     switch 2 + NUMA node 1), higher is better;
//  3. the sum of the weights between the set and the candidates left out,
//     lower is better, so a set does not break up a well-connected group
//     that a later job could use whole;
//  4. the lowest GPU indexes.
//
// GPUs that carry no topology (no NVLink peers, no NVSwitch, no PCIe
// switch, one NUMA node) all tie, so the lowest-indexed ones are chosen.
// Up to maxExhaustive subsets are all scored; beyond that each candidate
// seeds a greedy set and the best of those wins. Pure and deterministic.
func BestGPUs(gpus []structs.GPU, cand []int, k int) []int {
	n := len(cand)
	if k < 1 || k > n {
		return nil
	}
	if k == n || n > maxTopologyGPUs {
		return firstK(k)
	}
	var t topo
	t.init(gpus, cand)
	if subsets(n, k) <= maxExhaustive {
		return t.exhaustive(k)
	}
	return t.greedy(k)
}

func firstK(k int) []int {
	out := make([]int, k)
	for i := range out {
		out[i] = i
	}
	return out
}

// topo is the pairwise affinity of the candidates, indexed by position in
// cand.
type topo struct {
	n int
	// w is the n*n matrix of pair weights (0 on the diagonal).
	w [maxTopologyGPUs * maxTopologyGPUs]uint8
	// nv, pcie and numa are, per candidate, the candidates sharing that
	// link with it, itself included.
	nv, pcie, numa [maxTopologyGPUs]uint64
	// row is each candidate's total weight to all other candidates.
	row [maxTopologyGPUs]int
}

// init fills in the affinities of the candidates.
func (t *topo) init(gpus []structs.GPU, cand []int) {
	t.n = len(cand)
	for a := range t.n {
		self := uint64(1) << a
		t.nv[a] |= self
		t.pcie[a] |= self
		t.numa[a] |= self
		ga := &gpus[cand[a]]
		for b := a + 1; b < t.n; b++ {
			gb := &gpus[cand[b]]
			var link uint8
			if ga.NUMANode >= 0 && ga.NUMANode == gb.NUMANode {
				link |= linkNUMA
				t.numa[a] |= 1 << b
				t.numa[b] |= self
			}
			if ga.PCIeSwitch != "" && ga.PCIeSwitch == gb.PCIeSwitch {
				link |= linkPCIe
				t.pcie[a] |= 1 << b
				t.pcie[b] |= self
			}
			if nvlinked(ga, gb) {
				link |= linkNVLink
				t.nv[a] |= 1 << b
				t.nv[b] |= self
			}
			w := link&linkNUMA + link&linkPCIe + link&linkNVLink
			t.w[a*t.n+b], t.w[b*t.n+a] = w, w
			t.row[a] += int(w)
			t.row[b] += int(w)
		}
	}
}

// nvlinked reports whether two GPUs of a node talk over NVLink: both reach
// the node's NVSwitch, or either lists the other as a peer.
func nvlinked(a, b *structs.GPU) bool {
	if a.NVSwitch && b.NVSwitch {
		return true
	}
	for _, p := range a.NVLinkPeers {
		if p == b.Index {
			return true
		}
	}
	for _, p := range b.NVLinkPeers {
		if p == a.Index {
			return true
		}
	}
	return false
}

// score ranks a set of candidates given as a bit mask and its members:
// higher is better. Tier, inner weight and outer weight take separate bit
// ranges, so they compare in that order.
func (t *topo) score(set uint64, members []int) int64 {
	inner := 0
	outer := 0
	allNV, allPCIe, allNUMA := true, true, true
	for i, a := range members {
		allNV = allNV && t.nv[a]&set == set
		allPCIe = allPCIe && t.pcie[a]&set == set
		allNUMA = allNUMA && t.numa[a]&set == set
		outer += t.row[a]
		for _, b := range members[i+1:] {
			inner += int(t.w[a*t.n+b])
		}
	}
	outer -= 2 * inner
	tier := int64(tierAcross)
	switch {
	case allNV:
		tier = tierAllNVLink
	case t.nvConnected(set, members[0]):
		tier = tierNVLinked
	case allPCIe:
		tier = tierPCIe
	case allNUMA:
		tier = tierNUMA
	}
	// inner and outer are below 64*64*7 < 1<<15 each.
	return tier<<40 | int64(inner)<<20 | int64(1<<20-1-outer)
}

// nvConnected reports whether every member of set is reachable from start
// over NVLinks between members.
func (t *topo) nvConnected(set uint64, start int) bool {
	reached := uint64(1) << start
	frontier := reached
	for frontier != 0 {
		a := bits.TrailingZeros64(frontier)
		frontier &^= 1 << a
		next := t.nv[a] & set &^ reached
		reached |= next
		frontier |= next
	}
	return reached == set
}

// exhaustive scores every k-subset in lexicographic order and keeps the
// first best, which is the one with the lowest indexes among equals.
func (t *topo) exhaustive(k int) []int {
	var idx, best [maxTopologyGPUs]int
	for i := range k {
		idx[i] = i
	}
	bestScore := int64(-1)
	for {
		var set uint64
		for _, a := range idx[:k] {
			set |= 1 << a
		}
		if s := t.score(set, idx[:k]); s > bestScore {
			bestScore = s
			best = idx
		}
		i := k - 1
		for i >= 0 && idx[i] == t.n-k+i {
			i--
		}
		if i < 0 {
			break
		}
		idx[i]++
		for j := i + 1; j < k; j++ {
			idx[j] = idx[j-1] + 1
		}
	}
	out := make([]int, k)
	copy(out, best[:k])
	return out
}

// greedy grows one set from each candidate, each step adding the candidate
// with the most weight to the set so far (lowest index among equals), and
// keeps the best-scoring set (the earliest seed among equals).
func (t *topo) greedy(k int) []int {
	var members, sorted, best [maxTopologyGPUs]int
	var gain [maxTopologyGPUs]int
	bestScore := int64(-1)
	for seed := range t.n {
		set := uint64(1) << seed
		members[0] = seed
		for b := range t.n {
			gain[b] = int(t.w[seed*t.n+b])
		}
		for size := 1; size < k; size++ {
			pick := -1
			for b := range t.n {
				if set&(1<<b) == 0 && (pick < 0 || gain[b] > gain[pick]) {
					pick = b
				}
			}
			set |= 1 << pick
			members[size] = pick
			for b := range t.n {
				gain[b] += int(t.w[pick*t.n+b])
			}
		}
		if s := t.score(set, ascending(set, sorted[:0])); s > bestScore {
			bestScore = s
			best = sorted
		}
	}
	out := make([]int, k)
	copy(out, best[:k])
	return out
}

// ascending writes the members of set into buf in increasing order.
func ascending(set uint64, buf []int) []int {
	for set != 0 {
		a := bits.TrailingZeros64(set)
		set &^= 1 << a
		buf = append(buf, a)
	}
	return buf
}

// subsets is n choose k, capped just above maxExhaustive.
func subsets(n, k int) int {
	k = min(k, n-k)
	c := 1
	for i := 1; i <= k; i++ {
		c = c * (n - k + i) / i
		if c > maxExhaustive {
			return c
		}
	}
	return c
}
