package sched

import (
	"testing"
	"time"

	"github.com/skein-dev/skein/structs"
)

func inPartitions(p ...string) func(*structs.Node) { return func(n *structs.Node) { n.Partitions = p } }

func TestPlace_PartitionsNodeListAndExclude(t *testing.T) {
	nodes := func() []*structs.Node {
		return []*structs.Node{gpuNode("n1", 8, "H100", 80, inPartitions("gpu")), gpuNode("n2", 8, "H100", 80, inPartitions("gpu", "long")),
			gpuNode("n3", 8, "H100", 80)}
	}
	part := func(p string) func(*structs.JobSpec) { return func(s *structs.JobSpec) { s.Partition = p } }
	list := func(names ...string) func(*structs.JobSpec) {
		return func(s *structs.JobSpec) { s.NodeList, s.Nodes = names, len(names) }
	}
	exclude := func(names ...string) func(*structs.JobSpec) {
		return func(s *structs.JobSpec) { s.ExcludeNodes = names }
	}
	cases := []struct {
		name string
		jobs []*structs.Job
		want []outcome
	}{
		{"a partition's nodes only", []*structs.Job{job("l", 1, part("long"))}, []outcome{{"l", "n2", ""}}},
		{"the default partition is the nodes that declare none", []*structs.Job{job("d", 1, part(structs.DefaultPartition))}, []outcome{{"d", "n3", ""}}},
		{"a partition whose nodes are full waits, naming the others", []*structs.Job{job("big", 8, part("long")), job("l", 1, part("long"))},
			[]outcome{{"big", "n2", ""}, {"l", "", "2 nodes: not in partition long; 1 node: not enough free GPUs"}}},
		{"a nodelist is exactly those nodes", []*structs.Job{job("w", 1, list("n3", "n1"))}, []outcome{{"w", "n1,n3", ""}}},
		{"an excluded node is never used", []*structs.Job{job("x", 1, exclude("n1", "n2"))}, []outcome{{"x", "n3", ""}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			checkOutcomes(t, Place(fakeState{nodes: nodes()}, tc.jobs), tc.want)
		})
	}
}

func TestCheckFits_AnUnknownPartitionOrNodeIsRefusedNamingWhatExists(t *testing.T) {
	nodes := []*structs.Node{gpuNode("n1", 8, "H100", 80, inPartitions("gpu")), gpuNode("n2", 8, "H100", 80)}
	err := CheckFits(nodes, structs.JobSpec{Nodes: 1, Partition: "debug"})
	if err == nil || err.Error() != "no partition debug; the cluster's: gpu, skein (the default)" {
		t.Fatalf("unknown partition: %v", err)
	}
	if err := CheckFits(nodes, structs.JobSpec{Nodes: 1, Partition: "gpu"}); err != nil {
		t.Fatalf("a partition that exists: %v", err)
	}
	if err := CheckFits(nodes, structs.JobSpec{Nodes: 1, NodeList: []string{"n9"}}); err == nil || err.Error() != "no node n9" {
		t.Fatalf("unknown node in a nodelist: %v", err)
	}
}

func TestDecide_DeadlinesCancelWhatCanNoLongerEndInTime(t *testing.T) {
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	dl := func(d time.Time, limit time.Duration) func(*structs.JobSpec) {
		return func(s *structs.JobSpec) { s.Deadline, s.TimeLimit = d, structs.Duration(limit) }
	}
	v := fakeView{fakeState: fakeState{nodes: []*structs.Node{gpuNode("n1", 1, "H100", 80)}}, queued: queue(
		job("passed", 9, dl(now.Add(-time.Minute), 0)),
		job("too-long", 9, dl(now.Add(time.Hour), 2*time.Hour)),
		job("in-time", 9, dl(now.Add(3*time.Hour), time.Hour)),
	)}
	d := Decide(v, Inputs{Now: now})
	if r := cancelReason(d.Plan, "passed"); r != "deadline 2030-01-01T11:59:00Z passed before the job started" {
		t.Errorf("passed: cancel reason %q", r)
	}
	if r := cancelReason(d.Plan, "too-long"); r != "deadline 2030-01-01T13:00:00Z cannot be met: its time limit 2h0m0s would end after it" {
		t.Errorf("too-long: cancel reason %q", r)
	}
	if r := cancelReason(d.Plan, "in-time"); r != "" {
		t.Errorf("in-time cancelled: %q", r)
	}
	if want := now.Add(2 * time.Hour); !d.Wake.Equal(want) {
		t.Errorf("wake %v, want %v: the last moment in-time may start", d.Wake, want)
	}
}
