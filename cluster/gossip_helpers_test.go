package cluster

import (
	"context"
	"fmt"
	"os"

	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// testConfig is the one place gossip tests tighten timings: failures are
// detected in well under a second, a dead voter is replaced after 1 s,
// and peers are re-joined every 300 ms.
func testConfig(id string) Config {
	return Config{
		NodeID:     id,
		RaftBind:   "127.0.0.1:0",
		GossipBind: "127.0.0.1:0",
		GossipTiming: GossipTiming{
			ProbeInterval:  200 * time.Millisecond,
			ProbeTimeout:   100 * time.Millisecond,
			SuspicionMult:  2,
			GossipInterval: 50 * time.Millisecond,
		},
		RejoinInterval:    300 * time.Millisecond,
		ReconcileInterval: 200 * time.Millisecond,
		DeadServerGrace:   time.Second,
		Logger:            testLogger(id),
	}
}

// testLogger discards logs unless CLUSTER_TEST_LOG is set, then writes
// debug logs to stderr.
func testLogger(id string) hclog.Logger {
	if os.Getenv("CLUSTER_TEST_LOG") == "" {
		return hclog.NewNullLogger()
	}
	return hclog.New(&hclog.LoggerOptions{Name: id, Level: hclog.Debug, Output: os.Stderr})
}

// startCfg starts a member from cfg (a fresh kvFSM and t.TempDir() unless
// set) and shuts it down when the test ends.
func startCfg(t *testing.T, cfg Config) *testNode {
	t.Helper()
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	fsm, _ := cfg.FSM.(*kvFSM)
	if fsm == nil {
		fsm = newKV()
		cfg.FSM = fsm
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatalf("start %s: %v", cfg.NodeID, err)
	}
	t.Cleanup(func() {
		if err := c.Shutdown(); err != nil {
			t.Errorf("shut down %s: %v", cfg.NodeID, err)
		}
	})
	n := &testNode{id: cfg.NodeID, dir: cfg.DataDir, c: c, fsm: fsm}
	drainLeaderEvents(t, n)
	return n
}

// drainLeaderEvents consumes n's LeaderEvents for the life of the test, as
// the agent's leader loop does.
func drainLeaderEvents(t *testing.T, n *testNode) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-n.c.LeaderEvents():
			case <-done:
				return
			}
		}
	}()
	t.Cleanup(func() {
		close(done)
		wg.Wait()
	})
}

// mustJoin joins n to the gossip address of via.
func mustJoin(t *testing.T, n, via *testNode) {
	t.Helper()
	if _, err := n.c.Join([]string{via.c.GossipAddr()}); err != nil {
		t.Fatalf("%s join %s: %v", n.id, via.id, err)
	}
}

// memberStatus returns what n's gossip says about id.
func memberStatus(n *testNode, id string) (Member, bool) {
	for _, m := range n.c.Members() {
		if m.ID == id {
			return m, true
		}
	}
	return Member{}, false
}

// allAlive reports whether every node sees every other one alive.
func allAlive(nodes ...*testNode) error {
	for _, n := range nodes {
		for _, o := range nodes {
			m, ok := memberStatus(n, o.id)
			if !ok || m.Status != StatusAlive {
				return fmt.Errorf("%s sees %s as %v (known %v)", n.id, o.id, m.Status, ok)
			}
		}
	}
	return nil
}

// waitEvent waits for an event of type typ about member id on n.
func waitEvent(t *testing.T, n *testNode, typ MemberEventType, id string, timeout time.Duration) MemberEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for {
		select {
		case ev := <-n.c.MemberEvents():
			if ev.Type == typ && ev.Member.ID == id {
				return ev
			}
		case <-ctx.Done():
			t.Fatalf("%s: no %v event for %s within %s", n.id, typ, id, timeout)
		}
	}
}

// raftView summarises the raft configuration as n sees it.
func raftView(n *testNode) (voters, nonvoters []string, err error) {
	servers, err := n.c.Servers()
	if err != nil {
		return nil, nil, err
	}
	for _, s := range servers {
		if s.Voter {
			voters = append(voters, s.ID)
		} else {
			nonvoters = append(nonvoters, s.ID)
		}
	}
	slices.Sort(voters)
	slices.Sort(nonvoters)
	return voters, nonvoters, nil
}

// ids returns the IDs of nodes.
func ids(nodes ...*testNode) []string {
	out := make([]string, 0, len(nodes))
	for _, n := range nodes {
		out = append(out, n.id)
	}
	slices.Sort(out)
	return out
}
