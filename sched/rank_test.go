package sched

import (
	"slices"
	"testing"

	"github.com/skein-dev/skein/structs"
)

func withLink(mbps int) func(*structs.Node) { return func(n *structs.Node) { n.LinkMbps = mbps } }

func TestPlace_GangRankZeroGoesToTheFastestLink(t *testing.T) {
	cases := []struct {
		name  string
		nodes []*structs.Node
		want  []string
	}{
		{
			name: "fastest link takes rank 0, the others keep their score order",
			nodes: []*structs.Node{
				gpuNode("n1", 8, "A100", 80, withLink(400000)),
				gpuNode("n2", 4, "A100", 80, withLink(100000)),
				gpuNode("n3", 6, "A100", 80, withLink(100000)),
			},
			want: []string{"n1:[n1-g0 n1-g1 n1-g2 n1-g3]", "n2:[n2-g0 n2-g1 n2-g2 n2-g3]", "n3:[n3-g0 n3-g1 n3-g2 n3-g3]"},
		},
		{
			name: "equal links keep the best-scored node as rank 0",
			nodes: []*structs.Node{
				gpuNode("n1", 8, "A100", 80, withLink(200000)),
				gpuNode("n2", 4, "A100", 80, withLink(200000)),
				gpuNode("n3", 6, "A100", 80, withLink(200000)),
			},
			want: []string{"n2:[n2-g0 n2-g1 n2-g2 n2-g3]", "n3:[n3-g0 n3-g1 n3-g2 n3-g3]", "n1:[n1-g0 n1-g1 n1-g2 n1-g3]"},
		},
		{
			name: "an unknown speed never wins over a known one",
			nodes: []*structs.Node{
				gpuNode("n1", 8, "A100", 80, withLink(25000)),
				gpuNode("n2", 4, "A100", 80),
				gpuNode("n3", 6, "A100", 80),
			},
			want: []string{"n1:[n1-g0 n1-g1 n1-g2 n1-g3]", "n2:[n2-g0 n2-g1 n2-g2 n2-g3]", "n3:[n3-g0 n3-g1 n3-g2 n3-g3]"},
		},
		{
			name: "a faster node that does not fit is not chosen",
			nodes: []*structs.Node{
				gpuNode("n1", 2, "A100", 80, withLink(400000)),
				gpuNode("n2", 4, "A100", 80, withLink(100000)),
				gpuNode("n3", 6, "A100", 80),
				gpuNode("n4", 8, "A100", 80),
			},
			want: []string{"n2:[n2-g0 n2-g1 n2-g2 n2-g3]", "n3:[n3-g0 n3-g1 n3-g2 n3-g3]", "n4:[n4-g0 n4-g1 n4-g2 n4-g3]"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			j := job("j", 4, gang(3))
			plan := Place(fakeState{nodes: tc.nodes}, []*structs.Job{j})
			if got := placedOn(plan, j.ID); !slices.Equal(got, tc.want) {
				t.Fatalf("placed %v, want %v (blocked: %q)", got, tc.want, blockedReason(plan, j.ID))
			}
			for rank, a := range plan.Placements[0].Allocations {
				if a.Rank != rank {
					t.Fatalf("allocation %d has rank %d", rank, a.Rank)
				}
			}
		})
	}
}
