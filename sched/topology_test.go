package sched

import (
	"fmt"
	"math/bits"
	"slices"
	"testing"

	"github.com/skein-dev/skein/structs"
	"pgregory.net/rapid"
)

// layout returns n GPUs on two NUMA nodes (the lower half on 0), two per
// PCIe switch, with NVLink as named: "nvswitch" (all), "pairs" (0-1, 2-3,
// ...), "quads" (0-3 and 4-7 all linked), or "" (none).
func layout(n int, nvlink string) []structs.GPU {
	gpus := make([]structs.GPU, n)
	for i := range gpus {
		g := structs.GPU{Index: i, UUID: fmt.Sprintf("g%d", i), Healthy: true,
			NUMANode: i * 2 / n, PCIeSwitch: fmt.Sprintf("sw%d", i/2)}
		switch nvlink {
		case "nvswitch":
			g.NVSwitch = true
		case "pairs":
			if i^1 < n {
				g.NVLinkPeers = []int{i ^ 1}
			}
		case "quads":
			for p := i &^ 3; p < min(i&^3+4, n); p++ {
				if p != i {
					g.NVLinkPeers = append(g.NVLinkPeers, p)
				}
			}
		}
		gpus[i] = g
	}
	return gpus
}

// pick runs BestGPUs over every GPU not busy and returns the chosen GPU
// indexes.
func pick(gpus []structs.GPU, busy []int, k int) []int {
	var cand []int
	for pos, g := range gpus {
		if !slices.Contains(busy, g.Index) {
			cand = append(cand, pos)
		}
	}
	chosen := BestGPUs(gpus, cand, k)
	if chosen == nil {
		return nil
	}
	out := make([]int, len(chosen))
	for i, c := range chosen {
		out[i] = gpus[cand[c]].Index
	}
	return out
}

func TestBestGPUs_PrefersTheBestConnectedSet(t *testing.T) {
	plain := func(n int) []structs.GPU {
		gpus := make([]structs.GPU, n)
		for i := range gpus {
			gpus[i] = structs.GPU{Index: i, Healthy: true}
		}
		return gpus
	}
	chain := func() []structs.GPU {
		// 0-1-2 linked in a chain on NUMA node 0; 3, 4 and 5 share a PCIe
		// switch on NUMA node 1.
		gpus := plain(6)
		for i := range gpus {
			gpus[i].NUMANode = i / 3
		}
		gpus[0].NVLinkPeers, gpus[1].NVLinkPeers, gpus[2].NVLinkPeers = []int{1}, []int{0, 2}, []int{1}
		for i := 3; i < 6; i++ {
			gpus[i].PCIeSwitch = "sw"
		}
		return gpus
	}
	oneWay := func() []structs.GPU {
		// Only GPU 5 lists its link to GPU 2.
		gpus := plain(8)
		gpus[5].NVLinkPeers = []int{2}
		return gpus
	}
	tests := []struct {
		name string
		gpus []structs.GPU
		busy []int
		k    int
		want []int
	}{
		{name: "no topology takes the lowest indexes", gpus: plain(8), busy: []int{1}, k: 3, want: []int{0, 2, 3}},
		{name: "NVSwitch node keeps a set on one NUMA node", gpus: layout(8, "nvswitch"), k: 4, want: []int{0, 1, 2, 3}},
		{name: "NVSwitch node avoids splitting NUMA nodes", gpus: layout(8, "nvswitch"), busy: []int{0}, k: 4, want: []int{4, 5, 6, 7}},
		{name: "NVSwitch node, one GPU", gpus: layout(8, "nvswitch"), busy: []int{0, 1, 2}, k: 1, want: []int{3}},
		{name: "NVLink pair over lower indexes", gpus: layout(8, "pairs"), busy: []int{0}, k: 2, want: []int{2, 3}},
		{name: "one GPU goes where its pair is already broken", gpus: layout(8, "pairs"), busy: []int{0}, k: 1, want: []int{1}},
		{name: "one GPU, broken pair further up", gpus: layout(8, "pairs"), busy: []int{4}, k: 1, want: []int{5}},
		{name: "two pairs on one NUMA node", gpus: layout(8, "pairs"), busy: []int{1}, k: 4, want: []int{4, 5, 6, 7}},
		{name: "whole pairs when no set is NVLinked", gpus: layout(8, "pairs"), busy: []int{0, 4}, k: 4, want: []int{2, 3, 6, 7}},
		{name: "NVLink island of four", gpus: layout(8, "quads"), busy: []int{1}, k: 4, want: []int{4, 5, 6, 7}},
		{name: "three of an island", gpus: layout(8, "quads"), busy: []int{6}, k: 3, want: []int{4, 5, 7}},
		{name: "same PCIe switch", gpus: layout(8, ""), busy: []int{1}, k: 2, want: []int{2, 3}},
		{name: "same NUMA node when no switch is free", gpus: layout(8, ""), busy: []int{1, 3, 5, 7}, k: 2, want: []int{0, 2}},
		{name: "the NUMA node with room", gpus: layout(8, ""), busy: []int{1, 2, 3}, k: 3, want: []int{4, 5, 6}},
		{name: "across NUMA nodes when it must", gpus: layout(8, ""), busy: []int{1, 2, 5}, k: 4, want: []int{0, 4, 6, 7}},
		{name: "NVLink chain beats a PCIe switch", gpus: chain(), k: 3, want: []int{0, 1, 2}},
		{name: "a link listed by one side counts", gpus: oneWay(), k: 2, want: []int{2, 5}},
		{name: "every GPU", gpus: layout(8, "pairs"), busy: []int{3}, k: 7, want: []int{0, 1, 2, 4, 5, 6, 7}},
		{name: "big node, greedy, one NUMA node", gpus: layout(16, "pairs"), busy: []int{0}, k: 8,
			want: []int{8, 9, 10, 11, 12, 13, 14, 15}},
		{name: "big node, greedy, NVSwitch", gpus: layout(32, "nvswitch"), busy: []int{3}, k: 12,
			want: []int{16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27}},
		{name: "most GPUs on one NUMA node, the whole pair among them", gpus: layout(16, "pairs"),
			busy: []int{0, 2, 4, 6, 8, 10, 12}, k: 6, want: []int{1, 9, 11, 13, 14, 15}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := pick(tc.gpus, tc.busy, tc.k); !slices.Equal(got, tc.want) {
				t.Errorf("got GPUs %v, want %v", got, tc.want)
			}
		})
	}
}

func TestBestGPUs_RefusesACountItCannotMeet(t *testing.T) {
	gpus := layout(4, "pairs")
	for _, k := range []int{-1, 0, 4} {
		if got := pick(gpus, []int{0}, k); got != nil {
			t.Errorf("k=%d: got %v, want nil", k, got)
		}
	}
}

func TestBestGPUs_FollowsInventoryPositionsNotIndexes(t *testing.T) {
	// The inventory lists GPUs out of order; candidates are positions.
	gpus := layout(4, "pairs")
	gpus[0], gpus[3] = gpus[3], gpus[0]
	// Positions 1 (GPU 1) and 2 (GPU 2) and 3 (GPU 0) are free, ordered by index.
	chosen := BestGPUs(gpus, []int{3, 1, 2}, 2)
	if !slices.Equal(chosen, []int{0, 1}) {
		t.Errorf("chose candidates %v, want [0 1] (GPUs 0 and 1, a pair)", chosen)
	}
}

func TestPlace_GivesARankAnNVLinkPair(t *testing.T) {
	n := gpuNode("n1", 8, "H100", 80)
	for i := range n.GPUs {
		n.GPUs[i].NVLinkPeers = []int{i ^ 1}
	}
	st := fakeState{
		nodes:  []*structs.Node{n},
		allocs: []*structs.Allocation{running("old", "n1", 0, 0, "n1-g0")},
	}
	plan := Place(st, []*structs.Job{job("j", 2)})
	if len(plan.Placements) != 1 {
		t.Fatalf("plan = %+v, want one placement", plan)
	}
	if got := plan.Placements[0].Allocations[0].GPUs; !slices.Equal(got, []string{"n1-g2", "n1-g3"}) {
		t.Errorf("GPUs = %v, want the free NVLink pair [n1-g2 n1-g3]", got)
	}
}

// genTopology draws a node of up to 20 GPUs with random links, NUMA nodes
// and PCIe switches, some GPU indexes repeated.
func genTopology(t *rapid.T) []structs.GPU {
	n := rapid.IntRange(0, 20).Draw(t, "n")
	gpus := make([]structs.GPU, n)
	for i := range gpus {
		g := structs.GPU{
			Index:      rapid.IntRange(0, n).Draw(t, "index"),
			NVSwitch:   rapid.Bool().Draw(t, "nvswitch"),
			NUMANode:   rapid.IntRange(-1, 1).Draw(t, "numa"),
			PCIeSwitch: rapid.SampledFrom([]string{"", "a", "b"}).Draw(t, "pcie"),
		}
		g.NVLinkPeers = rapid.SliceOfN(rapid.IntRange(0, n), 0, 3).Draw(t, "peers")
		gpus[i] = g
	}
	return gpus
}

func TestBestGPUs_Properties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		gpus := genTopology(t)
		var cand []int
		for pos := range gpus {
			if rapid.IntRange(0, 3).Draw(t, "free") > 0 {
				cand = append(cand, pos)
			}
		}
		k := rapid.IntRange(-1, len(cand)+1).Draw(t, "k")
		got := BestGPUs(gpus, cand, k)
		if k < 1 || k > len(cand) {
			if got != nil {
				t.Fatalf("k=%d of %d candidates: got %v, want nil", k, len(cand), got)
			}
			return
		}
		if len(got) != k {
			t.Fatalf("got %d GPUs %v, want exactly %d", len(got), got, k)
		}
		for i, c := range got {
			if c < 0 || c >= len(cand) {
				t.Fatalf("chose %d, not a candidate position (0..%d)", c, len(cand)-1)
			}
			if i > 0 && c <= got[i-1] {
				t.Fatalf("chose %v, not strictly ascending", got)
			}
		}
		if again := BestGPUs(gpus, cand, k); !slices.Equal(got, again) {
			t.Fatalf("same input chose %v then %v", got, again)
		}
		if len(cand) <= 12 {
			var tp topo
			tp.init(gpus, cand)
			var set uint64
			for _, c := range got {
				set |= 1 << c
			}
			best := tp.score(set, got)
			for other := uint64(0); other < 1<<len(cand); other++ {
				if bits.OnesCount64(other) != k {
					continue
				}
				members := ascending(other, nil)
				if s := tp.score(other, members); s > best || (s == best && slices.Compare(members, got) < 0) {
					t.Fatalf("chose %v (score %d), but %v scores %d", got, best, members, s)
				}
			}
		}
	})
}

func TestPlace_TopologyNeverHandsOutABusyGPU(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := &structs.Node{ID: "n1", Status: structs.NodeReady, GPUs: genTopology(t)}
		for i := range n.GPUs {
			n.GPUs[i].UUID = fmt.Sprintf("g%d", i)
			n.GPUs[i].Model = "H100"
			n.GPUs[i].Healthy = rapid.IntRange(0, 4).Draw(t, "healthy") > 0
		}
		var held []string
		for _, g := range n.GPUs {
			if rapid.IntRange(0, 3).Draw(t, "held") == 0 {
				held = append(held, g.UUID)
			}
		}
		st := fakeState{nodes: []*structs.Node{n}, allocs: []*structs.Allocation{running("old", "n1", 0, 0, held...)}}
		k := rapid.IntRange(1, len(n.GPUs)+1).Draw(t, "k")
		plan := Place(st, []*structs.Job{job("j", k)})
		free := 0
		for _, g := range n.GPUs {
			if g.Healthy && !slices.Contains(held, g.UUID) {
				free++
			}
		}
		if len(plan.Placements) == 0 {
			if free >= k {
				t.Fatalf("%d GPUs free, job of %d not placed: %+v", free, k, plan.Blocked)
			}
			return
		}
		got := plan.Placements[0].Allocations[0].GPUs
		if len(got) != k {
			t.Fatalf("got GPUs %v, want exactly %d", got, k)
		}
		for _, u := range got {
			g := n.GPUs[slices.IndexFunc(n.GPUs, func(g structs.GPU) bool { return g.UUID == u })]
			if !g.Healthy || slices.Contains(held, u) {
				t.Fatalf("handed out %s (healthy %t, held %t)", u, g.Healthy, slices.Contains(held, u))
			}
		}
		if again := Place(st, []*structs.Job{job("j", k)}); !slices.Equal(again.Placements[0].Allocations[0].GPUs, got) {
			t.Fatalf("same state placed %v, then %v", got, again.Placements[0].Allocations[0].GPUs)
		}
	})
}

// BenchmarkBestGPUs chooses k of 8 free GPUs, the most a rank looks at on
// the nodes of BenchmarkPlace, and k of 32 (the greedy search for k=16).
func BenchmarkBestGPUs(b *testing.B) {
	for _, n := range []int{8, 32} {
		for _, topology := range []string{"nvswitch", "pairs"} {
			gpus := layout(n, topology)
			cand := firstK(n)
			for _, k := range []int{1, 2, 4, n/2 + n/8*3} {
				b.Run(fmt.Sprintf("%d GPUs/%s/k=%d", n, topology, k), func(b *testing.B) {
					for b.Loop() {
						BestGPUs(gpus, cand, k)
					}
				})
			}
		}
	}
}
