package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/skein-dev/skein/internal/testutil"
)

// keysEqual reports whether n's installed gossip keys are want, in order.
func keysEqual(n *testNode, want ...[]byte) error {
	got := n.c.GossipKeys()
	if len(got) != len(want) {
		return fmt.Errorf("%s holds %d keys, want %d", n.id, len(got), len(want))
	}
	for i := range got {
		if !bytes.Equal(got[i], want[i]) {
			return fmt.Errorf("%s: key %d differs", n.id, i)
		}
	}
	return nil
}

// setKeyring calls SetKeyring on every node.
func setKeyring(t *testing.T, primary []byte, others [][]byte, nodes ...*testNode) {
	t.Helper()
	for _, n := range nodes {
		if err := n.c.SetKeyring(primary, others); err != nil {
			t.Fatalf("%s: set keyring: %v", n.id, err)
		}
	}
}

// watchFailures records every failed or left event the watchers see about
// members in ids, until the test ends.
func watchFailures(t *testing.T, ids []string, watchers ...*testNode) func() []string {
	var mu sync.Mutex
	var seen []string
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, w := range watchers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				case ev := <-w.c.MemberEvents():
					if (ev.Type == EventFailed || ev.Type == EventLeft) && containsID(ids, ev.Member.ID) {
						mu.Lock()
						seen = append(seen, fmt.Sprintf("%s saw %s %v", w.id, ev.Member.ID, ev.Type))
						mu.Unlock()
					}
				}
			}
		}()
	}
	t.Cleanup(func() {
		close(stop)
		wg.Wait()
	})
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), seen...)
	}
}

func containsID(ids []string, id string) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// metaUpdater changes src's metadata to seq=1, 2, ... and waits until
// every observer sees each value before the next. It stops at the first
// value not seen within timeout.
type metaUpdater struct {
	done atomic.Int64 // values seen by every observer
	err  atomic.Value // error
	stop chan struct{}
	wg   sync.WaitGroup
}

func startMetaUpdater(t *testing.T, meta *atomic.Value, src *testNode, observers ...*testNode) *metaUpdater {
	u := &metaUpdater{stop: make(chan struct{})}
	u.wg.Add(1)
	go func() {
		defer u.wg.Done()
		for i := 1; ; i++ {
			want := "seq=" + strconv.Itoa(i)
			meta.Store([]byte(want))
			if err := src.c.UpdateMeta(); err != nil {
				u.err.Store(fmt.Errorf("update %d: %w", i, err))
				return
			}
			deadline := time.Now().Add(5 * time.Second)
			for _, o := range observers {
				for {
					if m, _ := memberStatus(o, src.id); string(m.Meta) == want {
						break
					}
					if time.Now().After(deadline) {
						u.err.Store(fmt.Errorf("%s did not see %s within 5s", o.id, want))
						return
					}
					select {
					case <-u.stop:
						return
					case <-time.After(5 * time.Millisecond):
					}
				}
			}
			u.done.Store(int64(i))
			select {
			case <-u.stop:
				return
			default:
			}
		}
	}()
	t.Cleanup(u.halt)
	return u
}

func (u *metaUpdater) halt() {
	select {
	case <-u.stop:
	default:
		close(u.stop)
	}
	u.wg.Wait()
}

func (u *metaUpdater) check() error {
	if err, _ := u.err.Load().(error); err != nil {
		return err
	}
	return nil
}

// advance waits until the updater has completed n more updates.
func (u *metaUpdater) advance(t *testing.T, n int64) {
	t.Helper()
	target := u.done.Load() + n
	waitFor(t, 20*time.Second, func() error {
		if err := u.check(); err != nil {
			t.Fatal(err)
		}
		if got := u.done.Load(); got < target {
			return fmt.Errorf("%d updates seen, want %d", got, target)
		}
		return nil
	})
}

func TestGossip_KeyRotationInThreeStepsLosesNoMemberAndNoUpdate(t *testing.T) {
	t.Parallel()
	k1, k2 := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32)
	var meta atomic.Value
	meta.Store([]byte("seq=0"))
	var nodes []*testNode
	for _, id := range []string{"a", "b", "c"} {
		cfg := testConfig(id)
		cfg.EncryptKey = k1
		if id == "a" {
			cfg.Meta = func() []byte { return meta.Load().([]byte) }
		}
		nodes = append(nodes, startCfg(t, cfg))
	}
	a, b, c := nodes[0], nodes[1], nodes[2]
	mustJoin(t, b, a)
	mustJoin(t, c, b)
	waitFor(t, 10*time.Second, func() error { return allAlive(nodes...) })
	failures := watchFailures(t, ids(nodes...), nodes...)
	u := startMetaUpdater(t, &meta, a, b, c)
	u.advance(t, 3)

	steps := []struct {
		name    string
		primary []byte
		others  [][]byte
	}{
		{name: "install the new key", primary: k1, others: [][]byte{k2}},
		{name: "switch the primary", primary: k2, others: [][]byte{k1}},
		{name: "remove the old key", primary: k2},
	}
	// Each step runs on every member before the next. The first member
	// to take a step then stays a step ahead of the others for longer
	// than it takes to declare a silent member failed, while updates keep
	// flowing: it must still understand them and be understood.
	for _, st := range steps {
		for i, n := range nodes {
			setKeyring(t, st.primary, st.others, n)
			if err := keysEqual(n, append([][]byte{st.primary}, st.others...)...); err != nil {
				t.Fatalf("after %q: %v", st.name, err)
			}
			if i == 0 {
				testutil.Holds(t, 2*time.Second, func() error {
					if f := failures(); len(f) > 0 {
						return fmt.Errorf("%q on %s only: %v", st.name, n.id, f)
					}
					return u.check()
				})
			}
			u.advance(t, 2)
		}
	}
	testutil.Holds(t, 2*time.Second, func() error {
		if f := failures(); len(f) > 0 {
			return fmt.Errorf("after the rotation: %v", f)
		}
		return u.check()
	})
	u.halt()
	if err := u.check(); err != nil {
		t.Fatal(err)
	}
	if err := allAlive(nodes...); err != nil {
		t.Fatal(err)
	}
	if f := failures(); len(f) > 0 {
		t.Fatalf("members declared failed during the rotation: %v", f)
	}
}

func TestGossip_MemberWithOnlyTheOldKeyIsCutOffByTheRotation(t *testing.T) {
	t.Parallel()
	k1, k2 := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32)
	var nodes []*testNode
	for _, id := range []string{"a", "b", "d"} {
		cfg := testConfig(id)
		cfg.EncryptKey = k1
		nodes = append(nodes, startCfg(t, cfg))
	}
	a, b, d := nodes[0], nodes[1], nodes[2]
	mustJoin(t, b, a)
	mustJoin(t, d, a)
	waitFor(t, 10*time.Second, func() error { return allAlive(nodes...) })

	// a and b rotate; d is left with k1 alone.
	setKeyring(t, k1, [][]byte{k2}, a, b)
	setKeyring(t, k2, [][]byte{k1}, a, b)
	setKeyring(t, k2, nil, a, b)
	waitFor(t, 15*time.Second, func() error {
		for _, n := range []*testNode{a, b} {
			if m, _ := memberStatus(n, "d"); m.Status != StatusFailed {
				return fmt.Errorf("%s sees d as %v", n.id, m.Status)
			}
		}
		return allAlive(a, b)
	})
	if _, err := d.c.Join([]string{a.c.GossipAddr()}); !errors.Is(err, ErrJoin) {
		t.Fatalf("d rejoins with the removed key: %v, want ErrJoin", err)
	}
	// A member holding the new key joins.
	cfg := testConfig("e")
	cfg.EncryptKey = k2
	e := startCfg(t, cfg)
	mustJoin(t, e, a)
	waitFor(t, 10*time.Second, func() error { return allAlive(a, b, e) })
}

func TestGossip_KeyringAtStartAndItsErrors(t *testing.T) {
	t.Parallel()
	k1, k2 := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32)
	// Mid-rotation at start: each side's primary is among the other's keys.
	cfgA, cfgB := testConfig("a"), testConfig("b")
	cfgA.EncryptKey, cfgA.EncryptOthers = k1, [][]byte{k2}
	cfgB.EncryptKey, cfgB.EncryptOthers = k2, [][]byte{k1}
	a, b := startCfg(t, cfgA), startCfg(t, cfgB)
	mustJoin(t, b, a)
	waitFor(t, 10*time.Second, func() error { return allAlive(a, b) })
	if err := keysEqual(a, k1, k2); err != nil {
		t.Fatal(err)
	}

	if err := a.c.SetKeyring(k2, [][]byte{make([]byte, 16)}); !errors.Is(err, ErrInvalidKey) {
		t.Fatalf("short key: %v, want ErrInvalidKey", err)
	}
	if err := keysEqual(a, k1, k2); err != nil {
		t.Fatalf("a rejected keyring changed the keys: %v", err)
	}
	plain := startCfg(t, testConfig("p"))
	if err := plain.c.SetKeyring(k1, nil); !errors.Is(err, ErrNotEncrypted) {
		t.Fatalf("keyring on unencrypted gossip: %v, want ErrNotEncrypted", err)
	}
	if plain.c.GossipKeys() != nil {
		t.Fatal("unencrypted gossip reports keys")
	}
	raftOnly := startNode(t, "r", t.TempDir(), "", true)
	if err := raftOnly.c.SetKeyring(k1, nil); !errors.Is(err, ErrNoGossip) {
		t.Fatalf("keyring without gossip: %v, want ErrNoGossip", err)
	}
}
