package leader

import (
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/skein-dev/skein/fsm"
	"github.com/skein-dev/skein/structs"
)

// BenchmarkCheckNodes is one round of the node monitor, which the leader
// runs every heartbeat interval, over 1,000 ready nodes of 8 GPUs, all
// heard from lately: nothing to change, the cost of looking.
func BenchmarkCheckNodes(b *testing.B) {
	f := fsm.New(nil)
	l := New(Config{NodeID: "leader", FSM: f, HeartbeatInterval: 250 * time.Millisecond,
		StopAfter: 2500 * time.Millisecond, DownAfter: 3500 * time.Millisecond, Logger: hclog.NewNullLogger()})
	for i := range 1000 {
		id := fmt.Sprintf("n%04d", i)
		gpus := make([]structs.GPU, 8)
		for g := range gpus {
			gpus[g] = structs.GPU{Index: g, UUID: fmt.Sprintf("GPU-%s-%d", id, g), Model: "H100", MemoryMiB: 81559, Healthy: true}
		}
		data, err := structs.Encode(structs.NodeRegisterType, structs.NodeRegisterRequest{At: time.Now().UTC(), Node: structs.Node{
			ID: id, Name: id, Status: structs.NodeReady, CPUs: 128, MemoryMiB: 1 << 21, GPUs: gpus,
			Labels: map[string]string{"rack": fmt.Sprint(i / 32)}}})
		if err != nil {
			b.Fatal(err)
		}
		if resp := f.Apply(&raft.Log{Index: uint64(i + 1), Data: data}); resp != nil {
			if err, ok := resp.(error); ok {
				b.Fatal(err)
			}
		}
		l.HeardFrom(id, time.Now())
	}
	since := time.Now()
	b.ResetTimer()
	for range b.N {
		l.checkNodes(since)
	}
}
