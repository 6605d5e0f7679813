package sched

import (
	"errors"
	"testing"

	"github.com/skein-dev/skein/structs"
)

func TestCheckFits_NamesTheResourceNoNodeHas(t *testing.T) {
	big := gpuNode("big", 8, "A100", 80, withCPUs(64), withMemGiB(2048))
	small := gpuNode("small", 2, "L4", 24, withCPUs(8), withMemGiB(64), withStatus(structs.NodeDown))
	cpuOnly := gpuNode("cpu", 0, "", 0, withCPUs(128), withMemGiB(256))
	cases := []fitCase{
		{name: "fits an idle node", nodes: []*structs.Node{small, big}, spec: structs.JobSpec{GPUs: 8, CPUs: 64, MemoryMiB: 2 << 20}},
		{name: "down node and unhealthy GPUs still count", nodes: []*structs.Node{
			gpuNode("n", 4, "A100", 80, withStatus(structs.NodeDown), withUnhealthy(0, 1, 2, 3)),
		}, spec: structs.JobSpec{GPUs: 4}},
		{name: "model and labels ignored", nodes: []*structs.Node{small},
			spec: structs.JobSpec{GPUs: 2, GPUModel: "H100", Constraints: map[string]string{"zone": "x"}}},
		{name: "empty spec fits any node", nodes: []*structs.Node{cpuOnly}},
		{name: "too many GPUs", nodes: []*structs.Node{small, big}, spec: structs.JobSpec{GPUs: 12},
			want: "no node has 12 GPUs; largest has 8", wantField: "gpus"},
		{name: "one GPU on CPU-only nodes", nodes: []*structs.Node{cpuOnly}, spec: structs.JobSpec{GPUs: 1},
			want: "no node has 1 GPU; largest has 0", wantField: "gpus"},
		{name: "too many CPUs", nodes: []*structs.Node{small, big}, spec: structs.JobSpec{CPUs: 512},
			want: "no node has 512 CPUs; largest has 64", wantField: "cpus"},
		{name: "too much memory", nodes: []*structs.Node{small, big}, spec: structs.JobSpec{MemoryMiB: 4 << 20},
			want: "no node has 4T memory; largest has 2T", wantField: "memory_mib"},
		{name: "untracked CPUs fit any count", nodes: []*structs.Node{big, gpuNode("n", 0, "", 0, withCPUs(0))},
			spec: structs.JobSpec{CPUs: 4096}},
		{name: "untracked memory fits any size", nodes: []*structs.Node{gpuNode("n", 0, "", 0, withMemGiB(0))},
			spec: structs.JobSpec{MemoryMiB: 64 << 20}},
		{name: "each field fits some node but no node fits all", nodes: []*structs.Node{big, cpuOnly},
			spec: structs.JobSpec{GPUs: 8, CPUs: 128, MemoryMiB: 256 << 10},
			want: "no node has 8 GPUs, 128 CPUs and 256G memory together"},
		{name: "two fields that fit apart", nodes: []*structs.Node{big, cpuOnly},
			spec: structs.JobSpec{GPUs: 1, CPUs: 100},
			want: "no node has 1 GPU and 100 CPUs together"},
	}
	checkFitCases(t, cases)
}

func TestCheckFits_NoNodesIsErrNoNodes(t *testing.T) {
	for _, nodes := range [][]*structs.Node{nil, {nil}} {
		if err := CheckFits(nodes, structs.JobSpec{GPUs: 1}); !errors.Is(err, ErrNoNodes) {
			t.Errorf("CheckFits(%v) = %v, want ErrNoNodes", nodes, err)
		}
	}
}

// fitCase is one CheckFits case: want "" means nil, else the message and
// the field it names.
type fitCase struct {
	name      string
	nodes     []*structs.Node
	spec      structs.JobSpec
	want      string
	wantField string
}

func checkFitCases(t *testing.T, cases []fitCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckFits(tc.nodes, tc.spec)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("err = %v, want nil", err)
				}
				return
			}
			var fe *FitError
			if !errors.As(err, &fe) || !errors.Is(err, ErrNeverFits) {
				t.Fatalf("err = %v (%T), want a *FitError wrapping ErrNeverFits", err, err)
			}
			if fe.Error() != tc.want || fe.Field != tc.wantField {
				t.Fatalf("err = %q field %q, want %q field %q", fe.Error(), fe.Field, tc.want, tc.wantField)
			}
		})
	}
}
