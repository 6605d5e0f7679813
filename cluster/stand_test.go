package cluster

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/skein-dev/skein/internal/testutil"
)

// stretchTimeouts gives the nodes' raft a heartbeat and election timeout
// of ten minutes: no election can come of a silent leader in a test, only
// of the crash check.
func stretchTimeouts(t *testing.T, nodes ...*testNode) {
	t.Helper()
	for _, n := range nodes {
		rc := n.c.raft.ReloadableConfig()
		rc.HeartbeatTimeout, rc.ElectionTimeout = 10*time.Minute, 10*time.Minute
		if err := n.c.raft.ReloadConfig(rc); err != nil {
			t.Fatalf("%s: %v", n.id, err)
		}
	}
}

func TestCluster_ACrashedLeaderIsReplacedWithoutWaitingOutTheTimeout(t *testing.T) {
	t.Parallel()
	// A configured timeout of 2 s spaces the survivors 600 ms apart, far more
	// than their checks' ends can differ: a split vote would wait out the
	// stretched election timeout.
	a, b, c := startTLSCluster(t, testutil.NewCA(t, "skein-test"), &Partitioner{},
		Timing{HeartbeatTimeout: 2 * time.Second, ElectionTimeout: 2 * time.Second})
	stretchTimeouts(t, a, b, c)
	term := b.c.raft.CurrentTerm()

	// Its process gone: the connections it held close, its port refuses.
	if err := a.c.Shutdown(); err != nil {
		t.Fatal(err)
	}
	replacedInOneElection(t, term, "2", b, c)
}

// replacedInOneElection waits for a leader among the survivors of a lost
// leader, writes k=value through it, and fails the test when more than
// one election followed term: the second survivor split the vote.
func replacedInOneElection(t *testing.T, term uint64, value string, survivors ...*testNode) {
	t.Helper()
	var next *testNode
	waitFor(t, time.Minute, func() (err error) {
		next, err = leaderOf(survivors...)
		return err
	})
	mustApply(t, next, "k="+value)
	waitFor(t, 10*time.Second, func() error { return converged("k", value, survivors...) })
	if got := next.c.raft.CurrentTerm(); got != term+1 {
		t.Errorf("term %d after the leader was lost, want %d (one election)", got, term+1)
	}
}

func TestCluster_ALeaderCutOffOrAliveIsNotTakenForCrashed(t *testing.T) {
	t.Parallel()
	network := &Partitioner{}
	a, b, c := startTLSCluster(t, testutil.NewCA(t, "skein-test"), network)
	stretchTimeouts(t, a, b, c)
	term := b.c.raft.CurrentTerm()
	// Alive: its port answers.
	if b.c.standIfLeaderGone(b.c.leaderCrashed, "test") {
		t.Error("b took a leader whose port answers for gone")
	}
	// Cut off: the dial fails, but not with a refusal.
	network.Block(a.c.Addr())
	for _, n := range []*testNode{b, c} {
		if n.c.standIfLeaderGone(n.c.leaderCrashed, "test") {
			t.Errorf("%s took a leader cut off for gone", n.id)
		}
	}

	for _, n := range []*testNode{b, c} {
		if st, got := n.c.raft.State(), n.c.raft.CurrentTerm(); st != raft.Follower || got != term {
			t.Errorf("%s: %s in term %d, want a follower in term %d", n.id, st, got, term)
		}
		if _, id := n.c.Leader(); id != a.id {
			t.Errorf("%s: leader %q, want %q", n.id, id, a.id)
		}
	}
}

// startGossipTrio starts three voters a (the leader), b and c that
// gossip, on one Partitioner, with heartbeat and election timeouts of
// 2 s: silentAfter is then 600 ms, and the survivors stand 600 ms apart.
func startGossipTrio(t *testing.T, network *Partitioner) (a, b, c *testNode) {
	t.Helper()
	start := func(id string, boot bool) *testNode {
		cfg := testConfig(id)
		cfg.Bootstrap = boot
		cfg.Network = network
		cfg.Timing = Timing{HeartbeatTimeout: 2 * time.Second, ElectionTimeout: 2 * time.Second}
		return startCfg(t, cfg)
	}
	a = start("a", true)
	waitLeader(t, a)
	b, c = start("b", false), start("c", false)
	mustJoin(t, b, a)
	mustJoin(t, c, b)
	// Every node, not only the leader, holds the three voters: a
	// promotion the leader appended but had not sent would leave the
	// nodes ranking the survivors differently, both standing at once, and
	// the split vote waiting out the stretched election timeout.
	waitFor(t, 20*time.Second, func() error {
		for _, n := range []*testNode{a, b, c} {
			if err := voterCheck(n, 3, ids(a, b, c), a, b, c); err != nil {
				return fmt.Errorf("%s: %w", n.id, err)
			}
		}
		return allAlive(a, b, c)
	})
	return a, b, c
}

func TestCluster_ALeaderCutOffIsReplacedWithoutWaitingOutTheTimeout(t *testing.T) {
	t.Parallel()
	network := &Partitioner{}
	a, b, c := startGossipTrio(t, network)
	mustApply(t, a, "k=1")
	stretchTimeouts(t, a, b, c)
	term := b.c.raft.CurrentTerm()

	// Its machine gone, or cut off: silent to every other voter, its port
	// unreachable.
	network.Block(a.c.Addr(), a.c.GossipAddr())
	replacedInOneElection(t, term, "2", b, c)
}

// A leader that stepped down while its port still answers (a lease that
// ran out while it was held up; here, it gave up its own vote) says so
// when asked, and the voters left elect without waiting out the timeout.
func TestCluster_ALeaderThatSteppedDownIsReplacedWithoutWaitingOutTheTimeout(t *testing.T) {
	t.Parallel()
	a, b, c := startGossipTrio(t, &Partitioner{})
	stretchTimeouts(t, a, b, c)
	term := b.c.raft.CurrentTerm()
	if err := a.c.raft.DemoteVoter(raft.ServerID(a.id), 0, 10*time.Second).Error(); err != nil {
		t.Fatalf("demote the leader: %v", err)
	}
	replacedInOneElection(t, term, "4", b, c)
}

// A link that fails between the leader and one voter only is that
// voter's trouble: gossip still hears the leader through the others, and
// the voter does not depose it (raft's pre-vote, once its timeout comes,
// would not either).
func TestCluster_ALeaderCutOffFromOneVoterOnlyKeepsItsPlace(t *testing.T) {
	t.Parallel()
	network := &Partitioner{}
	a, b, c := startGossipTrio(t, network)
	stretchTimeouts(t, a, b, c)
	term := b.c.raft.CurrentTerm()

	network.Sever([]string{a.c.Addr(), a.c.GossipAddr()}, []string{b.c.Addr(), b.c.GossipAddr()})
	// Long enough for b to find the leader silent a few times over.
	testutil.Holds(t, 10*b.c.silentAfter(), func() error {
		for _, n := range []*testNode{a, b, c} {
			if got := n.c.raft.CurrentTerm(); got != term {
				return fmt.Errorf("%s is in term %d, want %d: an election ran", n.id, got, term)
			}
		}
		if !a.c.IsLeader() {
			return errors.New("a no longer leads")
		}
		return nil
	})
	mustApply(t, a, "k=3")
	waitFor(t, 10*time.Second, func() error { return converged("k", "3", a, c) })
}

func TestSurvivorRank_OrdersTheVotersLeftByID(t *testing.T) {
	t.Parallel()
	servers := []RaftServer{
		{ID: "c", Voter: true}, {ID: "a", Voter: true}, {ID: "s", Voter: false}, {ID: "b", Voter: true},
	}
	for _, tc := range []struct {
		self, leader string
		rank         int
		ok           bool
	}{
		{self: "b", leader: "a", rank: 0, ok: true},
		{self: "c", leader: "a", rank: 1, ok: true},
		{self: "c", leader: "b", rank: 1, ok: true},
		{self: "a", leader: "c", rank: 0, ok: true},
		{self: "s", leader: "a", ok: false}, // a standby has no vote
		{self: "a", leader: "a", ok: false}, // the leader itself
	} {
		rank, ok := survivorRank(servers, tc.self, tc.leader)
		if ok != tc.ok || (ok && rank != tc.rank) {
			t.Errorf("survivorRank(%s, leader %s) = %d, %v; want %d, %v", tc.self, tc.leader, rank, ok, tc.rank, tc.ok)
		}
	}
}
