package agent

import (
	"fmt"
	"testing"
	"time"

	"github.com/skein-dev/skein/fsm"
	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

// A node killed for good is marked down, its job runs elsewhere, and
// once it has been down for --node-gc the leader forgets it: out of the
// state and out of Raft, with an event.
func TestCluster_NodeDownPastNodeGCIsForgotten(t *testing.T) {
	t.Parallel()
	tc := startClusterWith(t, 3, func(i int, cfg *Config) { cfg.NodeGC = 2 * time.Second })
	job := tc.submit(tc.agents[0], structs.JobSpec{Name: "j", Nodes: 1, GPUs: 1, Restarts: 1, Command: []string{"sleep", "600"}})
	waitJob(t, tc.agents[0], job.ID, jobState(structs.JobRunning))
	victim := 2
	if lead := tc.leader(); lead == victim {
		victim = 1
	}
	id := tc.agents[victim].NodeID()
	tc.kill(victim)
	watcher := tc.agents[tc.leader()]
	testutil.WaitFor(t, 30*time.Second, func() error {
		if n, ok := watcher.fsm.Node(id); ok {
			return fmt.Errorf("the killed node is still listed, %s (%s)", n.Status, n.StatusReason)
		}
		servers, err := watcher.raft.Servers()
		if err != nil {
			return err
		}
		for _, s := range servers {
			if s.ID == id {
				return fmt.Errorf("the killed node is still a Raft server")
			}
		}
		return nil
	})
	var removed bool
	for _, e := range watcher.fsm.Events(fsm.EventQuery{Node: id}).Events {
		removed = removed || e.Kind == structs.EventNodeRemoved
	}
	if !removed {
		t.Error("no node-removed event")
	}
	waitJob(t, watcher, job.ID, jobState(structs.JobRunning))
}
