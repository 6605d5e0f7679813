package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

const applyTimeout = 5 * time.Second

func TestCluster_SingleNodeBootstrapsAndApplies(t *testing.T) {
	t.Parallel()
	n := startNode(t, "n1", t.TempDir(), "", true)
	waitLeader(t, n)
	if !nextEvent(t, n, 5*time.Second) {
		t.Fatal("first leadership event is false, want true")
	}
	if !n.c.IsLeader() {
		t.Fatal("bootstrapped single node is not leader")
	}
	if addr, id := n.c.Leader(); addr != n.c.Addr() || id != "n1" {
		t.Fatalf("Leader() = %q, %q; want %q, n1", addr, id, n.c.Addr())
	}

	resp, err := n.c.Apply([]byte("a=1"), applyTimeout)
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	if resp != 1 {
		t.Fatalf("apply response = %v, want 1", resp)
	}
	if got := n.fsm.get("a"); got != "1" {
		t.Fatalf("fsm a = %q, want 1", got)
	}
	if n.c.AppliedIndex() == 0 {
		t.Fatal("applied index is 0 after an apply")
	}

	resp, err = n.c.Apply([]byte("reject:gpu taken"), applyTimeout)
	if !errors.Is(err, errRejected) {
		t.Fatalf("apply of rejected command: err = %v, want errRejected", err)
	}
	if resp != nil {
		t.Fatalf("apply of rejected command: response = %v, want nil", resp)
	}

	servers, err := n.c.Servers()
	if err != nil {
		t.Fatalf("servers: %v", err)
	}
	want := []RaftServer{{ID: "n1", Address: n.c.Addr(), Voter: true}}
	if fmt.Sprint(servers) != fmt.Sprint(want) {
		t.Fatalf("servers = %v, want %v", servers, want)
	}
	if s := n.c.Stats()["state"]; s != "Leader" {
		t.Fatalf("stats state = %q, want Leader", s)
	}
}

func TestCluster_RestartKeepsStateWithoutRebootstrap(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name         string
		snapshot     bool
		wantRestores int // FSM restores from a snapshot when raft starts
	}{
		{name: "log only", snapshot: false, wantRestores: 0},
		{name: "after snapshot", snapshot: true, wantRestores: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			first := startNode(t, "n1", dir, "", true)
			waitLeader(t, first)
			mustApply(t, first, "a=1")
			if tc.snapshot {
				if err := first.c.Snapshot(); err != nil {
					t.Fatalf("snapshot: %v", err)
				}
			}
			mustApply(t, first, "b=2")
			if err := first.c.Shutdown(); err != nil {
				t.Fatalf("shutdown: %v", err)
			}

			// Bootstrap is asked for again; it must be skipped (raft
			// refuses to bootstrap over existing state, so New would fail).
			second := startNode(t, "n1", dir, "", true)
			if got, want := second.fsm.restoreCount(), tc.wantRestores; got != want {
				t.Fatalf("fsm restored %d times at start, want %d", got, want)
			}
			waitLeader(t, second)
			if err := second.c.Barrier(applyTimeout); err != nil {
				t.Fatalf("barrier: %v", err)
			}
			if err := converged("a", "1", second); err != nil {
				t.Fatal(err)
			}
			if err := converged("b", "2", second); err != nil {
				t.Fatal(err)
			}
			if servers, err := second.c.Servers(); err != nil || len(servers) != 1 {
				t.Fatalf("servers after restart = %v, %v; want one server", servers, err)
			}
		})
	}
}

func TestCluster_ThreeNodesReplicateAndFailOver(t *testing.T) {
	t.Parallel()
	n1 := startNode(t, "n1", t.TempDir(), "", true)
	n2 := startNode(t, "n2", t.TempDir(), "", false)
	n3 := startNode(t, "n3", t.TempDir(), "", false)
	waitLeader(t, n1)
	if !nextEvent(t, n1, 5*time.Second) {
		t.Fatal("n1: first leadership event is false, want true")
	}
	for _, n := range []*testNode{n2, n3} {
		if err := n1.c.AddVoter(n.id, n.c.Addr()); err != nil {
			t.Fatalf("add voter %s: %v", n.id, err)
		}
	}
	nodes := []*testNode{n1, n2, n3}

	mustApply(t, n1, "k=v1")
	waitFor(t, 10*time.Second, func() error { return converged("k", "v1", nodes...) })

	_, err := n2.c.Apply([]byte("k=follower"), applyTimeout)
	if !errors.Is(err, ErrNotLeader) || !errors.Is(err, raft.ErrNotLeader) {
		t.Fatalf("apply on follower: err = %v, want ErrNotLeader matching raft.ErrNotLeader", err)
	}
	if addr, id := n2.c.Leader(); addr != n1.c.Addr() || id != "n1" {
		t.Fatalf("follower sees leader %q %q, want %q n1", addr, id, n1.c.Addr())
	}

	// A non-voter replicates everything but has no vote; removing it works.
	n4 := startNode(t, "n4", t.TempDir(), "", false)
	if err := n1.c.AddNonvoter(n4.id, n4.c.Addr()); err != nil {
		t.Fatalf("add nonvoter: %v", err)
	}
	waitFor(t, 10*time.Second, func() error { return converged("k", "v1", n4) })
	assertServers(t, n1, map[string]bool{"n1": true, "n2": true, "n3": true, "n4": false})
	if err := n1.c.RemoveServer("n4"); err != nil {
		t.Fatalf("remove server: %v", err)
	}
	assertServers(t, n1, map[string]bool{"n1": true, "n2": true, "n3": true})

	// Leadership transfer moves leadership off n1.
	if err := n1.c.LeadershipTransfer(); err != nil {
		t.Fatalf("leadership transfer: %v", err)
	}
	if nextEvent(t, n1, 5*time.Second) {
		t.Fatal("n1: event after transfer is true, want false")
	}
	var leader *testNode
	waitFor(t, 10*time.Second, func() error {
		leader, err = leaderOf(nodes...)
		if err == nil && leader == n1 {
			return errors.New("n1 is still leader")
		}
		return err
	})
	mustApply(t, leader, "k=v2")
	waitFor(t, 10*time.Second, func() error { return converged("k", "v2", nodes...) })

	// Kill the leader: the other two elect a new one and keep committing.
	if err := leader.c.Shutdown(); err != nil {
		t.Fatalf("shut down leader: %v", err)
	}
	var rest []*testNode
	for _, n := range nodes {
		if n != leader {
			rest = append(rest, n)
		}
	}
	var next *testNode
	waitFor(t, 10*time.Second, func() error {
		next, err = leaderOf(rest...)
		return err
	})
	// The first apply may race a just-finished election; retry briefly.
	waitFor(t, 10*time.Second, func() error {
		_, err := next.c.Apply([]byte("k=v3"), applyTimeout)
		return err
	})
	waitFor(t, 10*time.Second, func() error { return converged("k", "v3", rest...) })

	// The old leader restarts on its data dir and address with Bootstrap
	// set: it rejoins the three-node cluster instead of founding its own.
	back := startNode(t, leader.id, leader.dir, leader.c.Addr(), true)
	waitFor(t, 10*time.Second, func() error { return converged("k", "v3", back) })
	if back.c.IsLeader() {
		t.Fatal("restarted node leads alone; it re-bootstrapped")
	}
	assertServers(t, back, map[string]bool{"n1": true, "n2": true, "n3": true})
}

func TestCluster_ShutdownIsIdempotentAndEndsCalls(t *testing.T) {
	t.Parallel()
	n := startNode(t, "n1", t.TempDir(), "", true)
	waitLeader(t, n)
	for i := range 2 {
		if err := n.c.Shutdown(); err != nil {
			t.Fatalf("shutdown %d: %v", i+1, err)
		}
	}
	cases := []struct {
		name string
		op   func() error
	}{
		{name: "apply", op: func() error { _, err := n.c.Apply([]byte("a=1"), applyTimeout); return err }},
		{name: "barrier", op: func() error { return n.c.Barrier(applyTimeout) }},
		{name: "snapshot", op: n.c.Snapshot},
		{name: "servers", op: func() error { _, err := n.c.Servers(); return err }},
		{name: "add voter", op: func() error { return n.c.AddVoter("n2", "127.0.0.1:1") }},
		{name: "remove server", op: func() error { return n.c.RemoveServer("n2") }},
		{name: "leadership transfer", op: n.c.LeadershipTransfer},
		{name: "wait for leader", op: func() error { return n.c.WaitForLeader(context.Background()) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.op()
			if !errors.Is(err, ErrShutdown) || !errors.Is(err, raft.ErrRaftShutdown) {
				t.Fatalf("err = %v, want ErrShutdown matching raft.ErrRaftShutdown", err)
			}
		})
	}
	if n.c.IsLeader() {
		t.Fatal("shut-down node reports itself leader")
	}
}

func TestCluster_WaitForLeaderGivesUpWithoutQuorum(t *testing.T) {
	t.Parallel()
	// Not bootstrapped and never joined: no leader can exist.
	n := startNode(t, "n1", t.TempDir(), "", false)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err := n.c.WaitForLeader(ctx)
	if !errors.Is(err, ErrNoLeader) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want ErrNoLeader and context.DeadlineExceeded", err)
	}
}

func TestCluster_MembershipRejectsEmptyNames(t *testing.T) {
	t.Parallel()
	n := startNode(t, "n1", t.TempDir(), "", false)
	cases := []struct {
		name string
		op   func() error
	}{
		{name: "add voter without id", op: func() error { return n.c.AddVoter("", "127.0.0.1:1") }},
		{name: "add voter without address", op: func() error { return n.c.AddVoter("n2", "") }},
		{name: "add nonvoter without id", op: func() error { return n.c.AddNonvoter("", "127.0.0.1:1") }},
		{name: "add nonvoter without address", op: func() error { return n.c.AddNonvoter("n2", "") }},
		{name: "remove without id", op: func() error { return n.c.RemoveServer("") }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.op(); !errors.Is(err, ErrInvalidServer) {
				t.Fatalf("err = %v, want ErrInvalidServer", err)
			}
		})
	}
	if err := n.c.AddVoter("n2", "127.0.0.1:1"); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("add voter on a non-leader: err = %v, want ErrNotLeader", err)
	}
}

func TestNew_RejectsBadConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := Config{NodeID: "n1", DataDir: dir, RaftBind: "127.0.0.1:0", FSM: newKV()}
	cases := []struct {
		name   string
		change func(*Config)
	}{
		{name: "no node id", change: func(c *Config) { c.NodeID = "" }},
		{name: "no data dir", change: func(c *Config) { c.DataDir = "" }},
		{name: "no fsm", change: func(c *Config) { c.FSM = nil }},
		{name: "bind without port", change: func(c *Config) { c.RaftBind = "127.0.0.1" }},
		{name: "unspecified bind, no advertise", change: func(c *Config) { c.RaftBind = "0.0.0.0:0" }},
		{name: "empty host bind, no advertise", change: func(c *Config) { c.RaftBind = ":0" }},
		{name: "unspecified advertise", change: func(c *Config) { c.RaftAdvertise = "0.0.0.0:7471" }},
		{name: "advertise port 0", change: func(c *Config) { c.RaftAdvertise = "127.0.0.1:0" }},
		{name: "advertise without port", change: func(c *Config) { c.RaftAdvertise = "127.0.0.1" }},
		{name: "lease longer than heartbeat", change: func(c *Config) {
			c.Timing = Timing{HeartbeatTimeout: 100 * time.Millisecond, LeaderLeaseTimeout: time.Second}
		}},
		{name: "election shorter than heartbeat", change: func(c *Config) {
			c.Timing = Timing{HeartbeatTimeout: time.Second, ElectionTimeout: 100 * time.Millisecond}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := good
			tc.change(&cfg)
			c, err := New(cfg)
			if err == nil {
				_ = c.Shutdown()
			}
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("err = %v, want ErrInvalidConfig", err)
			}
		})
	}
}

func TestNew_AdvertiseAddressIsUsed(t *testing.T) {
	t.Parallel()
	fsm := newKV()
	c, err := New(Config{NodeID: "n1", DataDir: t.TempDir(), RaftBind: "0.0.0.0:0",
		RaftAdvertise: "127.0.0.1:7471", FSM: fsm})
	if err != nil {
		t.Fatalf("new: %v", err)
	}
	t.Cleanup(func() { _ = c.Shutdown() })
	if got := c.Addr(); got != "127.0.0.1:7471" {
		t.Fatalf("addr = %q, want the advertise address", got)
	}
}

func TestNew_DataDirInUseFailsFast(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	startNode(t, "n1", dir, "", false)
	start := time.Now()
	_, err := New(Config{NodeID: "n1", DataDir: dir, RaftBind: "127.0.0.1:0", FSM: newKV()})
	if !errors.Is(err, ErrStoreLocked) {
		t.Fatalf("err = %v, want ErrStoreLocked", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("second open took %s", took)
	}
	want := "open raft store " + filepath.Join(dir, "raft", "raft.db") + ": "
	if msg := err.Error(); !strings.HasPrefix(msg, want) {
		t.Fatalf("err = %q, want it to start with %q", msg, want)
	}
}

func TestNew_CreatesPrivateRaftDirs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	startNode(t, "n1", dir, "", false)
	for _, p := range []string{"raft", filepath.Join("raft", "snapshots")} {
		fi, err := os.Stat(filepath.Join(dir, p))
		if err != nil {
			t.Fatal(err)
		}
		if perm := fi.Mode().Perm(); perm != 0o700 {
			t.Errorf("%s mode = %o, want 700", p, perm)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "raft", "raft.db")); err != nil {
		t.Fatal(err)
	}
}

func mustApply(t *testing.T, n *testNode, cmd string) {
	t.Helper()
	if _, err := n.c.Apply([]byte(cmd), applyTimeout); err != nil {
		t.Fatalf("%s: apply %q: %v", n.id, cmd, err)
	}
}

// assertServers waits until n's raft configuration is exactly want (ID ->
// voter).
func assertServers(t *testing.T, n *testNode, want map[string]bool) {
	t.Helper()
	waitFor(t, 10*time.Second, func() error {
		servers, err := n.c.Servers()
		if err != nil {
			return err
		}
		got := map[string]bool{}
		for _, s := range servers {
			got[s.ID] = s.Voter
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			return fmt.Errorf("%s: servers %v, want %v", n.id, got, want)
		}
		return nil
	})
}
