package cluster

import (
	"errors"
	"testing"
	"time"
)

// Two of three voters are gone for good: the survivor, started with
// Recover, leads a cluster of itself alone with every entry it held, and
// takes writes; a new node joins it. Started with Recover again once the
// cluster holds more than itself, it refuses; without state, too.
func TestRecover_ASurvivorLeadsAloneWithItsStateAndRefusesASecondTime(t *testing.T) {
	t.Parallel()
	cfgA := testConfig("a")
	cfgA.Bootstrap = true
	cfgA.DataDir = t.TempDir()
	a := startCfg(t, cfgA)
	waitLeader(t, a)
	b, c := startCfg(t, testConfig("b")), startCfg(t, testConfig("c"))
	mustJoin(t, b, a)
	mustJoin(t, c, a)
	waitFor(t, 20*time.Second, func() error { return voterCheck(a, 3, ids(a, b, c), a, b, c) })
	mustApply(t, a, "k=before")
	waitFor(t, 10*time.Second, func() error { return converged("k", "before", a, b, c) })

	for _, n := range []*testNode{b, c, a} {
		if err := n.c.Shutdown(); err != nil {
			t.Fatal(err)
		}
	}
	cfgA.Bootstrap = false
	cfgA.Recover = true
	cfgA.FSM = nil
	r := startCfg(t, cfgA)
	waitLeader(t, r)
	assertServers(t, r, map[string]bool{"a": true})
	if got := r.fsm.get("k"); got != "before" {
		t.Fatalf("after recovery k = %q, want the entry the survivor held", got)
	}
	mustApply(t, r, "k=after")

	d := startCfg(t, testConfig("d"))
	mustJoin(t, d, r)
	waitFor(t, 20*time.Second, func() error { return converged("k", "after", r, d) })
	assertServers(t, r, map[string]bool{"a": true, "d": false})
	if err := r.c.Shutdown(); err != nil {
		t.Fatal(err)
	}
	cfgA.FSM = nil
	if _, err := New(cfgA.withFSM()); !errors.Is(err, ErrRecover) {
		t.Fatalf("a second recovery once the cluster has grown: %v, want ErrRecover", err)
	}

	empty := testConfig("e")
	empty.DataDir, empty.Recover = t.TempDir(), true
	if _, err := New(empty.withFSM()); !errors.Is(err, ErrRecover) {
		t.Fatalf("recovery without Raft state: %v, want ErrRecover", err)
	}
}

// withFSM is cfg with a fresh kvFSM.
func (cfg Config) withFSM() Config {
	cfg.FSM = newKV()
	return cfg
}
