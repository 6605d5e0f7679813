package cluster

import (
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/skein-dev/skein/internal/testutil"
)

func TestPlanVoters_KeepsAnOddCappedNumberOfVoters(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name        string
		cap         int
		v           voterSet
		wantPromote []string
		wantDemote  []string
		wantPrepare []string
	}{
		{name: "one candidate stays non-voter", cap: 3, v: voterSet{leader: "a", good: []string{"a"}, candidates: []string{"b"}}},
		{name: "two candidates grow to three", cap: 3, v: voterSet{leader: "a", good: []string{"a"}, candidates: []string{"c", "b"}},
			wantPromote: []string{"b", "c"}},
		{name: "cap reached", cap: 3, v: voterSet{leader: "a", good: []string{"a", "b", "c"}, candidates: []string{"d", "e"}}},
		{name: "cap five grows by two", cap: 5, v: voterSet{leader: "a", good: []string{"a", "b", "c"}, candidates: []string{"d", "e"}},
			wantPromote: []string{"d", "e"}},
		{name: "dead voter replaced", cap: 3, v: voterSet{leader: "a", good: []string{"a", "b"}, dead: []string{"c"}, candidates: []string{"d"}},
			wantPromote: []string{"d"}, wantDemote: []string{"c"}},
		{name: "dead voter without replacement keeps its vote", cap: 3, v: voterSet{leader: "a", good: []string{"a", "b"}, dead: []string{"c"}}},
		{name: "even after a leave shrinks to odd", cap: 3, v: voterSet{leader: "b", good: []string{"a", "b"}},
			wantDemote: []string{"a"}},
		{name: "even with a candidate grows to odd", cap: 3, v: voterSet{leader: "a", good: []string{"a", "b"}, candidates: []string{"c"}},
			wantPromote: []string{"c"}},
		{name: "over cap sheds highest ids but never the leader", cap: 3, v: voterSet{leader: "e", good: []string{"a", "b", "c", "d", "e"}},
			wantDemote: []string{"d", "c"}},
		{name: "over cap sheds dead first", cap: 3, v: voterSet{leader: "a", good: []string{"a", "b", "c", "d"}, dead: []string{"e"}},
			wantDemote: []string{"e", "d"}},
		{name: "over cap sheds dead down to the leader alone", cap: 1, v: voterSet{leader: "a", good: []string{"a"}, dead: []string{"b", "c"}},
			wantDemote: []string{"b", "c"}},
		{name: "even count waits for a non-voter not yet stable instead of shrinking", cap: 3,
			v: voterSet{leader: "a", good: []string{"a", "b"}, waiting: 1}},
		{name: "shrinking that leaves no alive quorum is refused", cap: 3, v: voterSet{leader: "a", good: []string{"a"}, dead: []string{"b", "c", "d", "e"}}},
		{name: "unready non-voter is prepared, not promoted, and holds growth back", cap: 3,
			v: voterSet{leader: "a", good: []string{"a"}, candidates: []string{"c"}, unready: []string{"b"}}, wantPrepare: []string{"b"}},
		{name: "ready candidates are promoted before unready ones are prepared", cap: 3,
			v: voterSet{leader: "a", good: []string{"a"}, candidates: []string{"d", "c"}, unready: []string{"b"}}, wantPromote: []string{"c", "d"}},
		{name: "only as many unready as needed are prepared", cap: 3,
			v: voterSet{leader: "a", good: []string{"a", "b"}, unready: []string{"d", "c"}}, wantPrepare: []string{"c"}},
		{name: "dead voter is replaced only by a ready candidate", cap: 3,
			v: voterSet{leader: "a", good: []string{"a", "b"}, dead: []string{"c"}, unready: []string{"d"}}, wantPrepare: []string{"d"}},
		{name: "at the cap nobody is prepared", cap: 3, v: voterSet{leader: "a", good: []string{"a", "b", "c"}, unready: []string{"d"}}},
		{name: "even count with an unready non-voter is not shrunk", cap: 3,
			v: voterSet{leader: "a", good: []string{"a", "b"}, unready: []string{"c"}}, wantPrepare: []string{"c"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, d, prep := planVoters(tc.cap, tc.v)
			if !slices.Equal(p, tc.wantPromote) || !slices.Equal(d, tc.wantDemote) || !slices.Equal(prep, tc.wantPrepare) {
				t.Fatalf("planVoters = promote %v demote %v prepare %v; want %v %v %v",
					p, d, prep, tc.wantPromote, tc.wantDemote, tc.wantPrepare)
			}
		})
	}
}

// voterCheck reports whether n's raft configuration has the given voters
// count and servers, and every voter is among alive.
func voterCheck(n *testNode, wantVoters int, servers []string, alive ...*testNode) error {
	voters, non, err := raftView(n)
	if err != nil {
		return err
	}
	all := slices.Sorted(slices.Values(append(slices.Clone(voters), non...)))
	if len(voters) != wantVoters || !slices.Equal(all, servers) {
		return fmt.Errorf("voters %v non-voters %v; want %d voters of %v", voters, non, wantVoters, servers)
	}
	for _, v := range voters {
		if !slices.Contains(ids(alive...), v) {
			return fmt.Errorf("voter %s is not alive (voters %v)", v, voters)
		}
	}
	return nil
}

func TestMembership_JoinersBecomeNonvotersThenVotersUpToCapAndDeadVoterIsReplaced(t *testing.T) {
	t.Parallel()
	cfgA := testConfig("a")
	cfgA.Bootstrap = true
	a := startCfg(t, cfgA)
	waitLeader(t, a)
	nodes := []*testNode{a}
	for _, id := range []string{"b", "c", "d", "e"} {
		n := startCfg(t, testConfig(id))
		mustJoin(t, n, nodes[len(nodes)-1]) // b via the leader, the rest via non-leaders
		nodes = append(nodes, n)
	}
	all := ids(nodes...)
	waitFor(t, 20*time.Second, func() error { return voterCheck(a, 3, all, nodes...) })
	mustApply(t, a, "k=1")
	waitFor(t, 10*time.Second, func() error { return converged("k", "1", nodes...) })

	// Kill a voter that is not the leader.
	voters, _, _ := raftView(a)
	var victim *testNode
	for _, n := range nodes[1:] {
		if slices.Contains(voters, n.id) {
			victim = n
			break
		}
	}
	if err := victim.c.Shutdown(); err != nil {
		t.Fatal(err)
	}
	var rest []*testNode
	for _, n := range nodes {
		if n != victim {
			rest = append(rest, n)
		}
	}
	// The dead server stays in raft (reap is 72h) but loses its vote.
	waitFor(t, 20*time.Second, func() error { return voterCheck(a, 3, all, rest...) })
	if !a.c.IsLeader() {
		t.Fatal("leader changed while replacing a dead voter")
	}
	mustApply(t, a, "k=2")
	waitFor(t, 10*time.Second, func() error { return converged("k", "2", rest...) })
}

func TestMembership_LeaderLeaveMovesLeadershipAndRemovesIt(t *testing.T) {
	t.Parallel()
	cfgA := testConfig("a")
	cfgA.Bootstrap = true
	a := startCfg(t, cfgA)
	waitLeader(t, a)
	b, c := startCfg(t, testConfig("b")), startCfg(t, testConfig("c"))
	mustJoin(t, b, a)
	mustJoin(t, c, a)
	waitFor(t, 20*time.Second, func() error { return voterCheck(a, 3, ids(a, b, c), a, b, c) })

	if err := a.c.HandOver(); err != nil {
		t.Fatalf("leader hand over: %v", err)
	}
	if err := a.c.AnnounceLeave(10 * time.Second); err != nil {
		t.Fatalf("leader leave: %v", err)
	}
	if a.c.IsLeader() {
		t.Fatal("a is still leader after leaving")
	}
	var leader *testNode
	waitFor(t, 10*time.Second, func() error {
		var err error
		leader, err = leaderOf(b, c)
		return err
	})
	// Two voters left: the leader keeps an odd count by taking the other's vote.
	waitFor(t, 10*time.Second, func() error { return voterCheck(leader, 1, ids(b, c), leader) })
	mustApply(t, leader, "k=after-leave")
	waitFor(t, 10*time.Second, func() error { return converged("k", "after-leave", b, c) })
}

func TestMembership_PartitionedLeaderIsReplacedAndClusterHeals(t *testing.T) {
	t.Parallel()
	net := &Partitioner{}
	start := func(id string, boot bool) *testNode {
		cfg := testConfig(id)
		cfg.Bootstrap = boot
		cfg.Network = net
		return startCfg(t, cfg)
	}
	a := start("a", true)
	waitLeader(t, a)
	b, c := start("b", false), start("c", false)
	mustJoin(t, b, a)
	mustJoin(t, c, b)
	waitFor(t, 20*time.Second, func() error { return voterCheck(a, 3, ids(a, b, c), a, b, c) })
	mustApply(t, a, "k=1")

	net.Block(a.c.Addr(), a.c.GossipAddr())
	var leader *testNode
	waitFor(t, 15*time.Second, func() error {
		var err error
		leader, err = leaderOf(b, c)
		return err
	})
	mustApply(t, leader, "k=2")

	net.Heal()
	waitFor(t, 20*time.Second, func() error {
		if _, err := leaderOf(a, b, c); err != nil {
			return err
		}
		if err := allAlive(a, b, c); err != nil {
			return err
		}
		return converged("k", "2", a, b, c)
	})
	l, _ := leaderOf(a, b, c)
	waitFor(t, 10*time.Second, func() error { return voterCheck(l, 3, ids(a, b, c), a, b, c) })
}

func TestBootstrapExpect_ThreeNodesFormOneClusterAndRestartWithoutRebootstrap(t *testing.T) {
	t.Parallel()
	type addrs struct{ raft, gossip, dir string }
	saved := map[string]addrs{}
	start := func(id string, a addrs) *testNode {
		cfg := testConfig(id)
		cfg.BootstrapExpect = 3
		if a.dir != "" {
			cfg.RaftBind, cfg.GossipBind, cfg.DataDir = a.raft, a.gossip, a.dir
		}
		return startCfg(t, cfg)
	}
	var nodes []*testNode
	for _, id := range []string{"c", "a", "b"} {
		nodes = append(nodes, start(id, addrs{}))
	}
	mustJoin(t, nodes[1], nodes[0])
	mustJoin(t, nodes[2], nodes[0])
	waitFor(t, 20*time.Second, func() error {
		l, err := leaderOf(nodes...)
		if err != nil {
			return err
		}
		return voterCheck(l, 3, []string{"a", "b", "c"}, nodes...)
	})
	l, _ := leaderOf(nodes...)
	mustApply(t, l, "k=1")
	waitFor(t, 10*time.Second, func() error { return converged("k", "1", nodes...) })
	firstIndex := l.c.AppliedIndex()

	for _, n := range nodes {
		saved[n.id] = addrs{raft: n.c.Addr(), gossip: n.c.GossipAddr(), dir: n.dir}
		if err := n.c.Shutdown(); err != nil {
			t.Fatal(err)
		}
	}
	var again []*testNode
	for _, id := range []string{"a", "b", "c"} {
		again = append(again, start(id, saved[id]))
	}
	mustJoin(t, again[1], again[0])
	mustJoin(t, again[2], again[0])
	waitFor(t, 20*time.Second, func() error {
		l, err := leaderOf(again...)
		if err != nil {
			return err
		}
		if err := voterCheck(l, 3, []string{"a", "b", "c"}, again...); err != nil {
			return err
		}
		return converged("k", "1", again...)
	})
	l, _ = leaderOf(again...)
	if l.c.AppliedIndex() < firstIndex {
		t.Fatalf("applied index %d after restart is below %d before: state was re-bootstrapped", l.c.AppliedIndex(), firstIndex)
	}
}

// serversCheck reports whether n's raft configuration holds exactly the
// servers want, one of them voting.
func serversCheck(n *testNode, want ...string) error {
	voters, non, err := raftView(n)
	if err != nil {
		return err
	}
	all := slices.Sorted(slices.Values(append(slices.Clone(voters), non...)))
	if len(voters) != 1 || !slices.Equal(all, want) {
		return fmt.Errorf("voters %v non-voters %v; want one voter and servers %v", voters, non, want)
	}
	return nil
}

func TestMembership_ServersBoundRaftAndTheRestWorkOutsideIt(t *testing.T) {
	t.Parallel()
	cfg := func(id string) Config {
		c := testConfig(id)
		c.Voters, c.Servers = 1, 2
		return c
	}
	cfgA := cfg("a")
	cfgA.Bootstrap = true
	a := startCfg(t, cfgA)
	waitLeader(t, a)
	nodes := map[string]*testNode{"a": a}
	for _, id := range []string{"b", "c", "d"} {
		n := startCfg(t, cfg(id))
		mustJoin(t, n, a)
		nodes[id] = n
	}
	waitFor(t, 10*time.Second, func() error { return allAlive(nodes["a"], nodes["b"], nodes["c"], nodes["d"]) })
	// One standby, the lowest ID; c and d stay outside raft.
	waitFor(t, 20*time.Second, func() error { return serversCheck(a, "a", "b") })
	testutil.Holds(t, 5*testConfig("a").ReconcileInterval, func() error { return serversCheck(a, "a", "b") })

	// The standby dies: the next worker takes its place beside it (the
	// dead one stays in raft until it is reaped).
	bDir, bRaft, bGossip := nodes["b"].dir, nodes["b"].c.Addr(), nodes["b"].c.GossipAddr()
	if err := nodes["b"].c.Shutdown(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, func() error { return serversCheck(a, "a", "b", "c") })

	// It comes back: three alive servers are one too many, and the
	// highest ID among the standbys goes back outside raft.
	b := cfg("b")
	b.DataDir, b.RaftBind, b.GossipBind = bDir, bRaft, bGossip
	nodes["b"] = startCfg(t, b)
	mustJoin(t, nodes["b"], a)
	waitFor(t, 20*time.Second, func() error { return serversCheck(a, "a", "b") })
	mustApply(t, a, "k=1")
	// The leader's replication to b backed off while b was down (raft
	// caps the wait between tries at 10.24 s), so b may hear of the
	// entry only on the next try.
	waitFor(t, 30*time.Second, func() error { return converged("k", "1", a, nodes["b"]) })
}

// A standby cut off for a moment is declared failed by gossip, as one
// short of CPU is: it keeps its place for DeadServerGrace, so no worker is
// taken into raft in its stead, and it is a standby again once back.
func TestMembership_AStandbyFailedForLessThanTheGraceKeepsItsPlace(t *testing.T) {
	t.Parallel()
	net := &Partitioner{}
	cfg := func(id string) Config {
		c := testConfig(id)
		c.Voters, c.Servers = 1, 2
		c.DeadServerGrace = time.Minute
		c.Network = net
		return c
	}
	cfgA := cfg("a")
	cfgA.Bootstrap = true
	a := startCfg(t, cfgA)
	waitLeader(t, a)
	nodes := []*testNode{a}
	for _, id := range []string{"b", "c"} {
		n := startCfg(t, cfg(id))
		mustJoin(t, n, a)
		nodes = append(nodes, n)
	}
	b := nodes[1]
	waitFor(t, 20*time.Second, func() error { return serversCheck(a, "a", "b") })

	net.Block(b.c.Addr(), b.c.GossipAddr())
	waitFor(t, 10*time.Second, func() error {
		if m, _ := memberStatus(a, "b"); m.Status != StatusFailed {
			return fmt.Errorf("the leader sees b as %v, want failed", m.Status)
		}
		return nil
	})
	testutil.Holds(t, 5*cfgA.ReconcileInterval, func() error { return serversCheck(a, "a", "b") })

	net.Heal()
	waitFor(t, 20*time.Second, func() error { return allAlive(nodes...) })
	testutil.Holds(t, 5*cfgA.ReconcileInterval, func() error { return serversCheck(a, "a", "b") })
}

// The leader of a cluster whose servers are bounded (three voters and a
// standby) dies after every server compacted its log: the survivors
// elect a leader, which takes a worker into raft in the dead server's
// place and, the entries it lacks being gone, brings it up to date from
// a snapshot; the dead voter's vote goes to a standby, so three voters
// stay; and no more than four servers are alive at any moment checked.
func TestMembership_ALostLeadersPlaceGoesToAWorkerBroughtUpToDateFromASnapshot(t *testing.T) {
	t.Parallel()
	const trailing = 4
	cfg := func(id string) Config {
		c := testConfig(id)
		c.Voters, c.Servers = 3, 4
		c.TrailingLogs = trailing
		return c
	}
	cfgA := cfg("a")
	cfgA.Bootstrap = true
	a := startCfg(t, cfgA)
	waitLeader(t, a)
	all := []*testNode{a}
	for _, id := range []string{"b", "c", "d", "e", "f"} {
		n := startCfg(t, cfg(id))
		mustJoin(t, n, a)
		all = append(all, n)
	}
	waitFor(t, 10*time.Second, func() error { return allAlive(all...) })
	// The lowest IDs are servers, three of them voting; e and f stay
	// outside raft.
	waitFor(t, 20*time.Second, func() error { return voterCheck(a, 3, []string{"a", "b", "c", "d"}, all...) })
	var servers, workers []*testNode
	for _, n := range all {
		if n.id < "e" {
			servers = append(servers, n)
		} else {
			workers = append(workers, n)
		}
	}

	// Entries, then a snapshot on every server, which keeps only the
	// last few entries in its log: a server added from now on cannot be
	// sent the log from its start.
	const entries = 40
	for i := range entries {
		mustApply(t, a, fmt.Sprintf("k%d=%d", i, i))
	}
	waitFor(t, 10*time.Second, func() error {
		return converged(fmt.Sprintf("k%d", entries-1), strconv.Itoa(entries-1), servers...)
	})
	snapshots := map[string]bool{} // the servers' snapshot indexes
	for _, n := range servers {
		// Raft snapshots only once the FSM has applied an entry past the
		// latest configuration change: one more entry on every try.
		tries := 0
		waitFor(t, 10*time.Second, func() error {
			tries++
			mustApply(t, a, fmt.Sprintf("tick=%d", tries))
			if err := n.c.Snapshot(); err != nil {
				return fmt.Errorf("%s: %w", n.id, err)
			}
			return nil
		})
		idx := n.c.Stats()["last_snapshot_index"]
		if i, _ := strconv.Atoi(idx); i <= trailing {
			t.Fatalf("%s snapshotted at index %s: its log still starts at the beginning", n.id, idx)
		}
		snapshots[idx] = true
	}
	for _, n := range workers {
		if got := n.c.Stats()["last_snapshot_index"]; got != "0" || n.fsm.restoreCount() != 0 {
			t.Fatalf("worker %s has a snapshot at %s and restored %d before holding any state", n.id, got, n.fsm.restoreCount())
		}
	}

	if err := a.c.Shutdown(); err != nil {
		t.Fatal(err)
	}
	rest := all[1:]
	// bounded reports an error as soon as more servers than the bound
	// are alive: by the leader's configuration, and by the survivors'
	// own (a server removed from raft may not know it yet).
	bounded := func() {
		t.Helper()
		if n := aliveServers(rest...); n > 4 {
			t.Errorf("%d alive nodes hold themselves servers, more than the 4 kept", n)
		}
		if l, err := leaderOf(rest...); err == nil {
			voters, non, err := raftView(l)
			if err == nil && len(slices.DeleteFunc(append(voters, non...), func(id string) bool { return id == "a" })) > 4 {
				t.Errorf("%s's raft holds voters %v and non-voters %v: more than 4 alive servers", l.id, voters, non)
			}
		}
	}
	var promoted *testNode
	waitFor(t, 30*time.Second, func() error {
		bounded()
		l, err := leaderOf(rest...)
		if err != nil {
			return err
		}
		voters, non, err := raftView(l)
		if err != nil {
			return err
		}
		if slices.Contains(voters, "a") || len(voters) != 3 {
			return fmt.Errorf("voters %v: want three, the dead leader not among them", voters)
		}
		promoted = nil
		for _, w := range workers {
			if slices.Contains(non, w.id) {
				promoted = w
			}
		}
		if promoted == nil || aliveServers(rest...) != 4 {
			return fmt.Errorf("voters %v non-voters %v: no worker took the dead server's place", voters, non)
		}
		return nil
	})
	// It installed a snapshot one of the servers made, and holds every
	// entry, those the snapshot covered included.
	waitFor(t, 10*time.Second, func() error {
		bounded()
		if n := promoted.fsm.restoreCount(); n != 1 {
			return fmt.Errorf("%s restored %d snapshots, want 1", promoted.id, n)
		}
		if idx := promoted.c.Stats()["last_snapshot_index"]; !snapshots[idx] {
			return fmt.Errorf("%s's last snapshot is at %s, not one of the servers' %v", promoted.id, idx, snapshots)
		}
		for i := range entries {
			if err := converged(fmt.Sprintf("k%d", i), strconv.Itoa(i), promoted); err != nil {
				return err
			}
		}
		return nil
	})
	// New entries reach it too, and the layout holds: three voters, four
	// alive servers.
	l, err := leaderOf(rest...)
	if err != nil {
		t.Fatal(err)
	}
	mustApply(t, l, "after=1")
	waitFor(t, 10*time.Second, func() error { return converged("after", "1", promoted) })
	testutil.Holds(t, 3*testConfig("a").ReconcileInterval, func() error {
		bounded()
		voters, _, err := raftView(l)
		if err != nil || len(voters) != 3 || slices.Contains(voters, "a") || aliveServers(rest...) != 4 {
			return fmt.Errorf("voters %v (%v) and %d alive servers; want three voters without the dead leader, and four servers", voters, err, aliveServers(rest...))
		}
		return nil
	})
}

// aliveServers counts the nodes whose own raft configuration holds them.
func aliveServers(nodes ...*testNode) int {
	n := 0
	for _, node := range nodes {
		servers, err := node.c.Servers()
		if HoldsState(servers, err, node.id) {
			n++
		}
	}
	return n
}
