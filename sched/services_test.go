package sched

import (
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/structs"
)

// replica is replica job n of service svc, asking for gpus.
func replica(svc string, n, gpus int) *structs.Job {
	j := job(structs.ReplicaJobID(svc, n), gpus)
	j.Service = "name-of-" + svc
	return j
}

func TestPlace_ReplicasOfAServiceSpreadOverNodes(t *testing.T) {
	nodes := []*structs.Node{gpuNode("n1", 8, "H100", 80), gpuNode("n2", 8, "H100", 80), gpuNode("n3", 8, "H100", 80)}
	// Binpack alone would stack all three on n1.
	jobs := []*structs.Job{replica("s1", 0, 1), replica("s1", 1, 1), replica("s1", 2, 1), job("batch", 1)}
	for _, p := range []structs.Plan{
		Place(fakeState{nodes: nodes}, jobs),
		Schedule(fakeState{nodes: nodes}, jobs, Options{Now: time.Unix(1e9, 0)}),
	} {
		seen := map[string]bool{}
		for n := range 3 {
			got := placedOn(p, structs.ReplicaJobID("s1", n))
			if len(got) != 1 {
				t.Fatalf("replica %d placed on %v", n, got)
			}
			node, _, _ := strings.Cut(got[0], ":")
			if seen[node] {
				t.Errorf("two replicas on %s: %v", node, p.Placements)
			}
			seen[node] = true
		}
		// A batch job still packs: onto the fullest node.
		if got := placedOn(p, "batch"); len(got) != 1 || !strings.HasPrefix(got[0], "n1:") {
			t.Errorf("the batch job placed on %v, want n1 (binpack, by node ID)", got)
		}
	}
}

func TestPlace_AReplicaGoesWhereItsServiceHasTheFewestLiveReplicas(t *testing.T) {
	nodes := []*structs.Node{gpuNode("n1", 8, "H100", 80), gpuNode("n2", 8, "H100", 80)}
	live := []*structs.Allocation{
		running(structs.ReplicaJobID("s1", 0), "n1", 0, 0, "n1-g0"),
		running(structs.ReplicaJobID("other", 0), "n2", 0, 0, "n2-g0"),
		running(structs.ReplicaJobID("other", 1), "n2", 0, 0, "n2-g1"),
	}
	p := Place(fakeState{nodes: nodes, allocs: live}, []*structs.Job{replica("s1", 1, 1)})
	if got := placedOn(p, structs.ReplicaJobID("s1", 1)); len(got) != 1 || !strings.HasPrefix(got[0], "n2:") {
		t.Fatalf("replica placed on %v, want n2: n1 has one of its service's already; another service's replicas do not count", got)
	}
	// With nowhere else to go, replicas share a node.
	p = Place(fakeState{nodes: nodes[:1], allocs: live[:1]}, []*structs.Job{replica("s1", 1, 1)})
	if got := placedOn(p, structs.ReplicaJobID("s1", 1)); len(got) != 1 {
		t.Fatalf("replica placed on %v, want n1, the only node", got)
	}
}
