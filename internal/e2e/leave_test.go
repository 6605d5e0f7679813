package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

// skein leave on a voter that does not lead, then on the leader: each
// agent process exits 0 within seconds, shows left (never down), and the
// cluster goes on taking work.
func TestProcess_LeaveOfAVoterAndOfTheLeader_ExitsCleanlyAndShowsLeft(t *testing.T) {
	t.Parallel()
	nodes := newNodes(t, "127.0.0.51", "127.0.0.52", "127.0.0.53", "127.0.0.54", "127.0.0.55")
	nodes[0].start(t)
	for _, n := range nodes[1:] {
		n.start(t, nodes[0].gossip())
	}
	waitVoters(t, nodes[0].proc, 3)
	lead := leaderOf(t, nodes)
	var voter *node
	for _, n := range nodes {
		if n != lead && isVoter(t, lead.proc, "node-"+n.ip) {
			voter = n
			break
		}
	}
	for _, leaving := range []*node{voter, lead} {
		var watcher *node
		for _, n := range nodes {
			if n != leaving && n.proc.cmd.ProcessState == nil {
				watcher = n
				break
			}
		}
		start := time.Now()
		if _, err := leaving.proc.skein(t, "leave"); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- leaving.proc.cmd.Wait() }()
		select {
		case err := <-exited:
			if err != nil {
				t.Fatalf("node-%s exited with %v after skein leave", leaving.ip, err)
			}
		case <-time.After(15 * time.Second):
			t.Fatalf("node-%s still runs 15 s after skein leave", leaving.ip)
		}
		t.Logf("node-%s exited %s after skein leave", leaving.ip, time.Since(start).Round(time.Millisecond))
		testutil.WaitFor(t, 20*time.Second, func() error {
			for _, n := range nodesView(t, watcher.proc) {
				if n.Name == "node-"+leaving.ip && n.Status != structs.NodeLeft {
					return fmt.Errorf("%s is %s", n.Name, n.Status)
				}
			}
			return nil
		})
		waitVoters(t, watcher.proc, 3)
		id := submitJob(t, watcher.proc, "--", "true")
		watcher.proc.waitJob(t, id, jobIs(structs.JobSucceeded))
	}
}

// isVoter reports whether node name is a Raft voter, as p sees it.
func isVoter(t *testing.T, p *agentProc, name string) bool {
	t.Helper()
	for _, n := range nodesView(t, p) {
		if n.Name == name {
			return n.Role == structs.RoleVoter || n.Role == structs.RoleLeader
		}
	}
	return false
}
