package testutil

import (
	"fmt"

	"github.com/skein-dev/skein/structs"
)

// SimNode is the i-th simulated node of a benchmark: ID and name id, eight
// simulated 80 GB H100s, the label bench=1, and addresses in 10.0.0.0/8
// that no test dials.
func SimNode(id string, i int) structs.Node {
	gpus := make([]structs.GPU, 8)
	for g := range gpus {
		gpus[g] = structs.GPU{Index: g, UUID: fmt.Sprintf("GPU-%s-%d", id, g), Model: "H100", MemoryMiB: 81559,
			PCIBusID: fmt.Sprintf("0000:%02x:00.0", g), Healthy: true, Simulated: true}
	}
	return structs.Node{
		ID: id, Name: id, Labels: map[string]string{"bench": "1"},
		Addresses: structs.Addresses{HTTP: fmt.Sprintf("http://10.%d.%d.%d:7470", i>>16, i>>8&255, i&255),
			Raft: fmt.Sprintf("10.%d.%d.%d:7471", i>>16, i>>8&255, i&255)},
		CPUs: 128, MemoryMiB: 2 << 20, GPUs: gpus, GPUSource: "simulated", LinkMbps: []int{100000, 200000, 400000}[i%3],
		Status: structs.NodeReady, Version: structs.Version,
	}
}
