package cluster

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/skein-dev/skein/internal/testutil"

	"github.com/hashicorp/go-hclog"
)

// idSet is a set of node IDs shared by the test and the callbacks of
// every node (as the agent's replicated state would be).
type idSet struct {
	mu  sync.Mutex
	ids map[string]bool
}

func newIDSet(ids ...string) *idSet {
	s := &idSet{ids: map[string]bool{}}
	for _, id := range ids {
		s.ids[id] = true
	}
	return s
}

func (s *idSet) add(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ids[id] = true
}

func (s *idSet) has(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ids[id]
}

// logBuffer collects a logger's output for tests that count log lines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// count returns how many lines contain every one of parts.
func (b *logBuffer) count(parts ...string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, line := range strings.Split(b.buf.String(), "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			n++
		}
	}
	return n
}

// inRaft reports whether id is in n's raft configuration.
func inRaft(n *testNode, id string) (bool, error) {
	voters, non, err := raftView(n)
	if err != nil {
		return false, err
	}
	return slices.Contains(voters, id) || slices.Contains(non, id), nil
}

func TestMembership_MemberNotAdmittedIsNeverAddedUntilAdmitted(t *testing.T) {
	t.Parallel()
	admitted := newIDSet("a", "b")
	logs := &logBuffer{}
	start := func(id string, boot bool) *testNode {
		cfg := testConfig(id)
		cfg.Bootstrap = boot
		cfg.Admitted = admitted.has
		if boot {
			cfg.Logger = hclog.New(&hclog.LoggerOptions{Name: id, Level: hclog.Info, Output: logs})
		}
		return startCfg(t, cfg)
	}
	a := start("a", true)
	waitLeader(t, a)
	b, c := start("b", false), start("c", false)
	mustJoin(t, b, a)
	mustJoin(t, c, a)
	waitFor(t, 10*time.Second, func() error {
		if err := allAlive(a, b, c); err != nil {
			return err
		}
		if ok, err := inRaft(a, "b"); !ok {
			return fmt.Errorf("b is not in raft yet (%v)", err)
		}
		return nil
	})

	// Ten reconcile intervals: c, alive in gossip, stays out of raft, and
	// the refusal is logged once.
	testutil.Holds(t, 10*testConfig("a").ReconcileInterval, func() error {
		if ok, err := inRaft(a, "c"); ok || err != nil {
			return fmt.Errorf("c is in raft (%v) although not admitted", err)
		}
		return nil
	})
	if n := logs.count("not adding member to raft", "id=c", "not admitted"); n != 1 {
		t.Fatalf("refusal of c logged %d times, want once", n)
	}

	admitted.add("c")
	waitFor(t, 10*time.Second, func() error {
		if ok, err := inRaft(a, "c"); !ok {
			return fmt.Errorf("c is not in raft after its admission (%v)", err)
		}
		return nil
	})
	// Admitted, b and c are promoted as before.
	waitFor(t, 20*time.Second, func() error { return voterCheck(a, 3, ids(a, b, c), a, b, c) })
}

func TestMembership_RevokedServersLeaveRaftAndStayOutEvenTheLeader(t *testing.T) {
	t.Parallel()
	revoked := newIDSet()
	start := func(id string, boot bool) *testNode {
		cfg := testConfig(id)
		cfg.Bootstrap = boot
		cfg.Revoked = revoked.has
		return startCfg(t, cfg)
	}
	a := start("a", true)
	waitLeader(t, a)
	nodes := []*testNode{a}
	for _, id := range []string{"b", "c", "d"} {
		n := start(id, false)
		mustJoin(t, n, a)
		nodes = append(nodes, n)
	}
	waitFor(t, 20*time.Second, func() error { return voterCheck(a, 3, ids(nodes...), nodes...) })

	// A voter that is not the leader is removed, and stays out: gossip
	// refuses it too, though it goes on gossiping; d takes its vote.
	voters, _, _ := raftView(a)
	var victim *testNode
	for _, n := range nodes[1:] {
		if slices.Contains(voters, n.id) {
			victim = n
			break
		}
	}
	revoked.add(victim.id)
	var rest []*testNode
	for _, n := range nodes {
		if n != victim {
			rest = append(rest, n)
		}
	}
	waitFor(t, 20*time.Second, func() error { return voterCheck(a, 3, ids(rest...), rest...) })
	waitFor(t, 10*time.Second, func() error {
		if m, _ := memberStatus(a, victim.id); m.Status != StatusRevoked {
			return fmt.Errorf("revoked %s is %v in gossip, want revoked", victim.id, m.Status)
		}
		return nil
	})
	testutil.Holds(t, 10*testConfig("a").ReconcileInterval, func() error {
		if ok, err := inRaft(a, victim.id); ok || err != nil {
			return fmt.Errorf("revoked %s is back in raft (%v)", victim.id, err)
		}
		if m, _ := memberStatus(a, victim.id); m.Status != StatusRevoked {
			return fmt.Errorf("revoked %s is %v in gossip, want revoked", victim.id, m.Status)
		}
		return nil
	})

	// The leader revoked: it hands leadership over and the next leader
	// removes it.
	revoked.add("a")
	others := slices.DeleteFunc(slices.Clone(rest), func(n *testNode) bool { return n == a })
	waitFor(t, 20*time.Second, func() error {
		l, err := leaderOf(others...)
		if err != nil {
			return err
		}
		if ok, err := inRaft(l, "a"); ok || err != nil {
			return fmt.Errorf("a is still in raft (%v)", err)
		}
		return nil
	})
	l, _ := leaderOf(others...)
	testutil.Holds(t, 10*testConfig("a").ReconcileInterval, func() error {
		if ok, err := inRaft(l, "a"); ok || err != nil {
			return fmt.Errorf("revoked a is back in raft (%v)", err)
		}
		return nil
	})
	mustApply(t, l, "k=after-revocations")
	waitFor(t, 10*time.Second, func() error { return converged("k", "after-revocations", others...) })
}

func TestMembership_NonvoterThatCannotVoteIsPreparedThenPromoted(t *testing.T) {
	t.Parallel()
	var ready atomic.Bool // c's readiness
	var (
		mu       sync.Mutex
		prepared = map[string]int{}
		auto     atomic.Bool // PrepareVoter makes c ready, as the agent would
		once     sync.Once
		wg       sync.WaitGroup
	)
	var c *testNode
	prepare := func(id string) {
		mu.Lock()
		prepared[id]++
		mu.Unlock()
		if id != "c" || !auto.Load() {
			return
		}
		once.Do(func() {
			wg.Add(1)
			go func() { // PrepareVoter must not block: the work runs apart
				defer wg.Done()
				ready.Store(true)
				if err := c.c.UpdateMeta(); err != nil {
					t.Errorf("c: update meta: %v", err)
				}
			}()
		})
	}
	calls := func(id string) int {
		mu.Lock()
		defer mu.Unlock()
		return prepared[id]
	}
	start := func(id string, boot bool) *testNode {
		cfg := testConfig(id)
		cfg.Bootstrap = boot
		cfg.PrepareVoter = prepare
		if id == "c" {
			cfg.CanVote = ready.Load
		}
		return startCfg(t, cfg)
	}
	a := start("a", true)
	waitLeader(t, a)
	b := start("b", false)
	c = start("c", false)
	t.Cleanup(wg.Wait) // before the nodes shut down
	mustJoin(t, b, a)
	mustJoin(t, c, a)
	all := ids(a, b, c)

	// b alone cannot make three voters, and c cannot vote: a stays the
	// only voter, and c (not b) is asked to get ready.
	waitFor(t, 10*time.Second, func() error {
		if err := voterCheck(a, 1, all, a); err != nil {
			return err
		}
		if calls("c") == 0 {
			return fmt.Errorf("PrepareVoter not called for c")
		}
		return nil
	})
	testutil.Holds(t, 10*testConfig("a").ReconcileInterval, func() error { return voterCheck(a, 1, all, a) })
	if calls("b") != 0 || calls("a") != 0 {
		t.Fatalf("PrepareVoter called for a ready node: a %d, b %d times", calls("a"), calls("b"))
	}

	// Once c says it can vote (its callee flips the flag and updates its
	// meta), a later round promotes b and c.
	auto.Store(true)
	waitFor(t, 20*time.Second, func() error { return voterCheck(a, 3, all, a, b, c) })
}
