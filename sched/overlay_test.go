package sched

import (
	"reflect"
	"strings"
	"testing"

	"github.com/skein-dev/skein/structs"
)

func TestDecide_NothingGoesToASilentNodeAndTheReasonSaysWhy(t *testing.T) {
	big, small := job("big", 8), job("small", 4)
	v := fakeView{fakeState: fakeState{nodes: []*structs.Node{gpuNode("n1", 8, "H100", 80), gpuNode("n2", 4, "H100", 80),
		gpuNode("n3", 8, "H100", 80, withStatus(structs.NodeDown))}},
		queued: []*structs.Job{big, small}}
	before := copyAll(v.nodes, (*structs.Node).Copy)

	d := Decide(v, Inputs{Now: t0, Silent: map[string]bool{"n1": true, "n3": true}})
	if got := placedOn(d.Plan, "small"); len(got) != 1 || !strings.HasPrefix(got[0], "n2:") {
		t.Fatalf("small placed on %v, want n2 (n1 is silent)", got)
	}
	// A silent node that is down already stays "down".
	if got := blockedReason(d.Plan, "big"); !strings.Contains(got, "1 node: node unresponsive") || !strings.Contains(got, "1 node: node down") {
		t.Fatalf("big's reason %q, want it to count n1 as unresponsive and n3 as down", got)
	}
	if !reflect.DeepEqual(v.nodes, before) {
		t.Fatal("the pass changed the view's nodes")
	}
	if d := Decide(v, Inputs{Now: t0}); placedOn(d.Plan, "big") == nil {
		t.Fatal("with no node silent, big is not placed on n1")
	}
}

func TestDecide_NothingGoesToAGPUItsNodeAnnouncedUnhealthy(t *testing.T) {
	two, three := job("two", 2), job("three", 3)
	v := fakeView{fakeState: fakeState{nodes: []*structs.Node{gpuNode("n1", 4, "H100", 80)}},
		queued: []*structs.Job{two, three}}
	before := copyAll(v.nodes, (*structs.Node).Copy)

	d := Decide(v, Inputs{Now: t0, GossipUnhealthy: map[string]uint64{"n1": 0b0101, "gone": 1}})
	if got := placedOn(d.Plan, "two"); !reflect.DeepEqual(got, []string{"n1:[n1-g1 n1-g3]"}) {
		t.Fatalf("two placed on %v, want the GPUs outside the mask", got)
	}
	if got := blockedReason(d.Plan, "three"); !strings.Contains(got, "not enough free GPUs") {
		t.Fatalf("three's reason %q, want it short of GPUs", got)
	}
	if !reflect.DeepEqual(v.nodes, before) {
		t.Fatal("the pass changed the view's nodes")
	}
}

func TestOverlay_ReturnsTheStateItselfWhenNothingChanges(t *testing.T) {
	st := fakeState{nodes: []*structs.Node{gpuNode("n1", 4, "H100", 80, withStatus(structs.NodeDraining), withUnhealthy(0))}}
	// n1 is not ready, GPU 0 is unhealthy already and index 9 does not exist.
	s, silent := overlay(st, map[string]bool{"n1": true}, map[string]uint64{"n1": 1 | 1<<9})
	if _, same := s.(fakeState); !same || silent {
		t.Fatalf("overlay gave %T, silent %v; want the state itself and no silent node", s, silent)
	}
}
