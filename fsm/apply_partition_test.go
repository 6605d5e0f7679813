package fsm

import (
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/structs"
)

func TestFSM_PartitionSettings_LimitAndDefaultTheJobsOfThePartition(t *testing.T) {
	h := newHarness(t)
	h.register(node("n1", 4))
	gpu := structs.Partition{Name: "gpu", MaxTime: structs.Duration(24 * time.Hour), DefaultTime: structs.Duration(time.Hour), MaxNodes: 2}
	h.apply(structs.PartitionSetType, structs.PartitionSetRequest{Partition: gpu})
	h.apply(structs.PartitionSetType, structs.PartitionSetRequest{Partition: structs.Partition{Name: structs.DefaultPartition, MaxTime: structs.Duration(2 * time.Hour)}})

	s := spec(1, 0)
	s.Partition = "gpu"
	if j := h.submit("defaulted", s); j.Spec.TimeLimit != structs.Duration(time.Hour) {
		t.Fatalf("a gpu job without a time limit got %s, want the partition's default 1h", j.Spec.TimeLimit)
	}
	if j := h.submit("plain", spec(1, 0)); j.Spec.TimeLimit != structs.Duration(2*time.Hour) {
		t.Fatalf("a job without a partition got time limit %s, want the default partition's max 2h", j.Spec.TimeLimit)
	}
	long := s
	long.TimeLimit = structs.Duration(48 * time.Hour)
	err := h.applyErr(structs.JobSubmitType, structs.JobSubmitRequest{JobID: "long", Spec: long, SubmittedAt: h.at()})
	if err == nil || !strings.Contains(err.Error(), "time_limit: 48h0m0s is above partition gpu's max_time 24h0m0s") {
		t.Fatalf("a job over the partition's max_time: %v", err)
	}
	wide := s
	wide.Nodes = 3
	if err := h.applyErr(structs.JobSubmitType, structs.JobSubmitRequest{JobID: "wide", Spec: wide, SubmittedAt: h.at()}); err == nil ||
		!strings.Contains(err.Error(), "3 nodes, more than partition gpu's max_nodes 2") {
		t.Fatalf("a job over the partition's max_nodes: %v", err)
	}
	if got := h.f.Partitions(); len(got) != 2 || got[0].Name != "gpu" || got[1].Name != structs.DefaultPartition {
		t.Fatalf("partitions %+v, want gpu then skein", got)
	}
	g := restoreFresh(t, h.f)
	if g.Hash() != h.f.Hash() {
		t.Fatal("restored state differs")
	}
	if p, ok := g.Partition("gpu"); !ok || p != gpu {
		t.Fatalf("restored gpu partition %+v, %v", p, ok)
	}
	h.apply(structs.PartitionSetType, structs.PartitionSetRequest{Partition: structs.Partition{Name: "gpu"}, Delete: true})
	if _, ok := h.f.Partition("gpu"); ok {
		t.Fatal("a dropped partition still has settings")
	}
}

func TestFSM_PartitionSettings_BadOnesAreRefusedAndChangeNothing(t *testing.T) {
	h := newHarness(t)
	before := h.f.Hash()
	for _, tc := range []struct {
		req  structs.PartitionSetRequest
		want string
	}{
		{structs.PartitionSetRequest{Partition: structs.Partition{Name: "bad name"}}, "partition name"},
		{structs.PartitionSetRequest{Partition: structs.Partition{Name: "gpu", MaxNodes: -1}}, "max_nodes: -1 is out of range"},
		{structs.PartitionSetRequest{Partition: structs.Partition{Name: "gpu", MaxTime: structs.Duration(time.Hour), DefaultTime: structs.Duration(2 * time.Hour)}},
			"default_time: 2h0m0s is above the partition's max_time 1h0m0s"},
		{structs.PartitionSetRequest{Partition: structs.Partition{Name: "gpu"}, Delete: true}, "partition gpu: invalid request: it has no settings"},
	} {
		if err := h.applyErr(structs.PartitionSetType, tc.req); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error naming %q", tc.req, err, tc.want)
		}
	}
	if h.f.Hash() != before {
		t.Fatal("a refused partition setting changed state")
	}
}
