package sched

import (
	"errors"
	"slices"
	"testing"

	"github.com/skein-dev/skein/structs"
)

// snapshot records what a ledger has free, to compare before and after.
func snapshot(l *ledger) []nodeState {
	out := make([]nodeState, len(l.nodes))
	for i, ns := range l.nodes {
		ns.gpus = append([]gpuSlot(nil), ns.gpus...)
		out[i] = ns
	}
	return out
}

func TestLedger_NeverHandsOutAGPUTwice(t *testing.T) {
	cases := []struct {
		name  string
		first []int
		then  []int
	}{
		{name: "same slot in a later take", first: []int{0}, then: []int{1, 0}},
		{name: "same slot twice in one take", then: []int{1, 1}},
		{name: "slot out of range", then: []int{7}},
		{name: "negative slot", then: []int{-1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := newLedger([]*structs.Node{gpuNode("n1", 2, "A100", 80)}, nil)
			tx := l.begin()
			if _, err := tx.take(0, tc.first, 0, 0); err != nil {
				t.Fatalf("first take: %v", err)
			}
			before := snapshot(l)
			if _, err := tx.take(0, tc.then, 0, 0); !errors.Is(err, errNotFree) {
				t.Fatalf("second take err = %v, want errNotFree", err)
			}
			if after := snapshot(l); !equalStates(before, after) {
				t.Fatalf("a failed take changed the ledger: %+v -> %+v", before, after)
			}
		})
	}
}

func TestLedger_TakeRefusesMoreCPUsOrMemoryThanFree(t *testing.T) {
	cases := []struct {
		name string
		cpus int
		mem  int64
	}{
		{name: "cpus", cpus: 65},
		{name: "memory", mem: 513 << 10},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := newLedger([]*structs.Node{gpuNode("n1", 2, "A100", 80)}, nil)
			before := snapshot(l)
			if _, err := l.begin().take(0, []int{0}, tc.cpus, tc.mem); !errors.Is(err, errNotFree) {
				t.Fatalf("err = %v, want errNotFree", err)
			}
			if !equalStates(before, snapshot(l)) {
				t.Fatal("a failed take changed the ledger")
			}
		})
	}
}

func TestLedger_RollbackReturnsEveryGrant(t *testing.T) {
	nodes := []*structs.Node{gpuNode("n1", 4, "A100", 80), gpuNode("n2", 4, "A100", 80)}
	l := newLedger(nodes, []*structs.Allocation{running("old", "n1", 4, 1<<10, "n1-g0")})
	before := snapshot(l)
	tx := l.begin()
	if got, err := tx.take(0, []int{1, 2}, 8, 16<<10); err != nil || len(got) != 2 || got[0] != "n1-g1" {
		t.Fatalf("take on n1 = %v, %v", got, err)
	}
	if _, err := tx.take(1, []int{0, 1, 2}, 8, 16<<10); err != nil {
		t.Fatalf("take on n2: %v", err)
	}
	// A third rank asks for a GPU the first already holds: the gang fails.
	if _, err := tx.take(0, []int{2}, 8, 0); !errors.Is(err, errNotFree) {
		t.Fatalf("overlapping take err = %v, want errNotFree", err)
	}
	tx.rollback()
	if after := snapshot(l); !equalStates(before, after) {
		t.Fatalf("rollback left %+v, want %+v", after, before)
	}
}

func TestLedger_CommitKeepsGrants(t *testing.T) {
	l := newLedger([]*structs.Node{gpuNode("n1", 2, "A100", 80)}, nil)
	tx := l.begin()
	if _, err := tx.take(0, []int{0}, 4, 0); err != nil {
		t.Fatal(err)
	}
	tx.commit()
	tx.rollback() // a no-op after commit
	ns := l.nodes[0]
	if ns.gpus[0].free || ns.freeGPUs != 1 || ns.freeCPUs != 60 {
		t.Fatalf("after commit: slot0 free=%v freeGPUs=%d freeCPUs=%d", ns.gpus[0].free, ns.freeGPUs, ns.freeCPUs)
	}
}

func TestLedger_BuildsFromInventoryAndLiveAllocs(t *testing.T) {
	dupID := gpuNode("n1", 1, "H100", 80) // same ID again: the first listed wins
	nodes := []*structs.Node{
		gpuNode("n2", 3, "A100", 80, withUnhealthy(2)),
		nil,
		gpuNode("n1", 2, "A100", 80, withCPUs(0), withMemGiB(0)),
		dupID,
	}
	allocs := []*structs.Allocation{
		running("a", "n2", 10, 8<<10, "n2-g1"),
		nil,
		running("b", "gone", 10, 8<<10, "n1-g0"),
	}
	l := newLedger(nodes, allocs)
	if len(l.nodes) != 2 || l.nodes[0].node.ID != "n1" || l.nodes[1].node.ID != "n2" {
		t.Fatalf("ledger nodes wrong: %+v", l.nodes)
	}
	n1, n2 := l.nodes[0], l.nodes[1]
	if n1.cpuTracked || n1.memTracked || n1.freeGPUs != 1 || n1.gpus[0].free || l.models[n1.gpus[0].model] != "a100" {
		t.Errorf("n1 = %+v", n1)
	}
	if !n2.cpuTracked || n2.freeCPUs != 54 || n2.freeMem != 504<<10 || n2.freeGPUs != 1 || !n2.gpus[0].free {
		t.Errorf("n2 = %+v", n2)
	}
}

func equalStates(a, b []nodeState) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.freeGPUs != y.freeGPUs || x.freeCPUs != y.freeCPUs || x.freeMem != y.freeMem || len(x.gpus) != len(y.gpus) {
			return false
		}
		for s := range x.gpus {
			if x.gpus[s] != y.gpus[s] {
				return false
			}
		}
	}
	return true
}

func TestLedger_IndexFollowsTakesAndRollbacks(t *testing.T) {
	nodes := []*structs.Node{
		gpuNode("n1", 4, "A100", 80), gpuNode("n2", 4, "A100", 80, withCPUs(0)),
		gpuNode("n3", 2, "A100", 80), gpuNode("n4", 4, "A100", 80, withStatus(structs.NodeDown)),
	}
	l := newLedger(nodes, []*structs.Allocation{running("a", "n3", 8, 0, "n3-g0")})
	check := func(step string) {
		t.Helper()
		want := newLedger(nil, nil)
		want.nodes = l.nodes
		want.buildIndex()
		if !slices.EqualFunc(l.byFree, want.byFree, slices.Equal) {
			t.Fatalf("after %s the index is %v, rebuilt it is %v", step, l.byFree, want.byFree)
		}
		for k, b := range l.byFree {
			for _, i := range b {
				if ns := &l.nodes[i]; !ns.ready || ns.freeGPUs != k {
					t.Fatalf("after %s node %s sits in bucket %d with %d free GPUs", step, ns.node.ID, k, ns.freeGPUs)
				}
			}
		}
	}
	check("building")
	tx := l.begin()
	if _, err := tx.take(0, []int{0, 1}, 16, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.take(1, []int{3}, 0, 0); err != nil {
		t.Fatal(err)
	}
	check("two takes")
	if _, err := tx.take(0, []int{1}, 0, 0); err == nil {
		t.Fatal("took a GPU twice")
	}
	check("a refused take")
	tx.rollback()
	check("a rollback")
	if l.nodes[0].freeGPUs != 4 || len(l.byFree[4]) != 2 {
		t.Fatalf("rollback left n1 with %d free GPUs and bucket 4 = %v", l.nodes[0].freeGPUs, l.byFree[4])
	}
	tx = l.begin()
	if _, err := tx.take(2, []int{1}, 0, 0); err != nil {
		t.Fatal(err)
	}
	tx.commit()
	check("a commit")
}
