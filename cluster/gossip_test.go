package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

func TestGossip_MembersJoinThroughAnyMemberAndSeeMeta(t *testing.T) {
	t.Parallel()
	var metaA atomic.Value
	metaA.Store([]byte("gpus=8"))
	cfgA := testConfig("a")
	cfgA.Bootstrap = true
	cfgA.Meta = func() []byte { return metaA.Load().([]byte) }
	a := startCfg(t, cfgA)
	b := startCfg(t, testConfig("b"))
	c := startCfg(t, testConfig("c"))
	mustJoin(t, b, a)
	mustJoin(t, c, b) // through a member that is not the one a started with

	waitFor(t, 10*time.Second, func() error { return allAlive(a, b, c) })
	for _, n := range []*testNode{b, c} {
		m, _ := memberStatus(n, "a")
		if m.RaftAddr != a.c.Addr() || m.Addr != a.c.GossipAddr() || string(m.Meta) != "gpus=8" {
			t.Fatalf("%s sees a as %+v; want raft %s, gossip %s, meta gpus=8", n.id, m, a.c.Addr(), a.c.GossipAddr())
		}
	}

	metaA.Store([]byte("gpus=7"))
	if err := a.c.UpdateMeta(); err != nil {
		t.Fatalf("update meta: %v", err)
	}
	ev := waitEvent(t, c, EventUpdate, "a", 10*time.Second)
	if string(ev.Member.Meta) != "gpus=7" {
		t.Fatalf("update event meta = %q, want gpus=7", ev.Member.Meta)
	}
	waitFor(t, 5*time.Second, func() error {
		if m, _ := memberStatus(b, "a"); string(m.Meta) != "gpus=7" {
			return fmt.Errorf("b sees a's meta %q", m.Meta)
		}
		return nil
	})
}

// A member that compresses its gossip (skein before it stopped doing so)
// and one that does not see each other and each other's changes, as
// they do while a cluster is upgraded one node at a time.
func TestGossip_CompressedAndPlainMembersGossipTogether(t *testing.T) {
	t.Parallel()
	var metaOld, metaNew atomic.Value
	metaOld.Store([]byte("gpus=8"))
	metaNew.Store([]byte("gpus=4"))
	cfgOld := testConfig("old")
	cfgOld.Bootstrap = true
	cfgOld.compressGossip = true
	cfgOld.Meta = func() []byte { return metaOld.Load().([]byte) }
	cfgNew := testConfig("new")
	cfgNew.Meta = func() []byte { return metaNew.Load().([]byte) }
	old, plain := startCfg(t, cfgOld), startCfg(t, cfgNew)
	mustJoin(t, plain, old)
	waitFor(t, 10*time.Second, func() error { return allAlive(old, plain) })

	for _, c := range []struct {
		from, to *testNode
		meta     *atomic.Value
		want     string
	}{{old, plain, &metaOld, "gpus=7"}, {plain, old, &metaNew, "gpus=3"}} {
		c.meta.Store([]byte(c.want))
		if err := c.from.c.UpdateMeta(); err != nil {
			t.Fatalf("%s: update meta: %v", c.from.id, err)
		}
		ev := waitEvent(t, c.to, EventUpdate, c.from.id, 10*time.Second)
		if string(ev.Member.Meta) != c.want {
			t.Fatalf("%s sees %s's meta %q, want %q", c.to.id, c.from.id, ev.Member.Meta, c.want)
		}
	}
}

func TestGossip_FailedAndLeftMembersAreReported(t *testing.T) {
	t.Parallel()
	cfgA := testConfig("a")
	cfgA.Bootstrap = true
	a := startCfg(t, cfgA)
	waitLeader(t, a)
	b := startCfg(t, testConfig("b"))
	c := startCfg(t, testConfig("c"))
	mustJoin(t, b, a)
	mustJoin(t, c, a)
	waitFor(t, 10*time.Second, func() error { return allAlive(a, b, c) })

	if err := c.c.Shutdown(); err != nil {
		t.Fatalf("shut down c: %v", err)
	}
	waitEvent(t, a, EventFailed, "c", 10*time.Second)
	if m, _ := memberStatus(a, "c"); m.Status != StatusFailed {
		t.Fatalf("a sees c as %v after its failure, want failed", m.Status)
	}

	// b waits for the leader to drop it from raft, which needs it to have
	// been added first.
	waitFor(t, 10*time.Second, func() error {
		_, non, err := raftView(a)
		if err != nil || !strings.Contains(strings.Join(non, ","), "b") {
			return fmt.Errorf("b not yet a raft server: %v %v", non, err)
		}
		return nil
	})
	if err := b.c.HandOver(); err != nil {
		t.Fatalf("b hand over: %v", err)
	}
	if err := b.c.AnnounceLeave(10 * time.Second); err != nil {
		t.Fatalf("b leave: %v", err)
	}
	waitEvent(t, a, EventLeft, "b", 10*time.Second)
	if m, _ := memberStatus(a, "b"); m.Status != StatusLeft {
		t.Fatalf("a sees b as %v after its leave, want left", m.Status)
	}
	waitFor(t, 10*time.Second, func() error {
		_, non, err := raftView(a)
		if err != nil || strings.Contains(strings.Join(non, ","), "b") {
			return fmt.Errorf("b is still a raft server after leaving: %v %v", non, err)
		}
		return nil
	})
}

func TestGossip_EncryptionKeysMustMatch(t *testing.T) {
	t.Parallel()
	key1 := bytes.Repeat([]byte{1}, 32)
	key2 := bytes.Repeat([]byte{2}, 32)
	cases := []struct {
		name     string
		key1     []byte
		key2     []byte
		wantJoin bool
	}{
		{name: "same key", key1: key1, key2: key1, wantJoin: true},
		{name: "different keys", key1: key1, key2: key2, wantJoin: false},
		{name: "key and none", key1: key1, key2: nil, wantJoin: false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfgA, cfgB := testConfig("a"), testConfig("b")
			cfgA.EncryptKey, cfgB.EncryptKey = tc.key1, tc.key2
			a, b := startCfg(t, cfgA), startCfg(t, cfgB)
			_, err := b.c.Join([]string{a.c.GossipAddr()})
			if tc.wantJoin {
				if err != nil {
					t.Fatalf("join with matching keys: %v", err)
				}
				waitFor(t, 5*time.Second, func() error { return allAlive(a, b) })
				return
			}
			if !errors.Is(err, ErrJoin) {
				t.Fatalf("join with mismatched keys: err = %v, want ErrJoin", err)
			}
			if _, ok := memberStatus(a, "b"); ok {
				t.Fatal("a lists b although their keys differ")
			}
		})
	}
}

func TestJoin_BadAddressGivesClearError(t *testing.T) {
	t.Parallel()
	a := startCfg(t, testConfig("a"))
	cases := []struct {
		name string
		addr string
	}{
		{name: "nobody listening", addr: "127.0.0.1:1"},
		{name: "unresolvable host", addr: "no-such-host.invalid:7472"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n, err := a.c.Join([]string{tc.addr})
			if n != 0 || !errors.Is(err, ErrJoin) || !strings.Contains(err.Error(), tc.addr) {
				t.Fatalf("Join(%s) = %d, %v; want 0 and an ErrJoin naming the address", tc.addr, n, err)
			}
		})
	}
	if _, err := a.c.Join(nil); !errors.Is(err, ErrJoin) {
		t.Fatalf("Join(nil) error = %v, want ErrJoin", err)
	}
}

func TestJoin_AddressWithoutPortGetsDefaultPort(t *testing.T) {
	t.Parallel()
	cases := []struct{ in, want string }{
		{in: "10.0.0.5", want: "10.0.0.5:7472"},
		{in: "10.0.0.5:9000", want: "10.0.0.5:9000"},
		{in: "node-1", want: "node-1:7472"},
		{in: "::1", want: "[::1]:7472"},
		{in: "[::1]", want: "[::1]:7472"},
		{in: "[::1]:9000", want: "[::1]:9000"},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			if got := withDefaultPort(tc.in); got != tc.want {
				t.Fatalf("withDefaultPort(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestGossip_WithoutGossipCallsFailClearly(t *testing.T) {
	t.Parallel()
	n := startNode(t, "n1", t.TempDir(), "", true)
	if _, err := n.c.Join([]string{"127.0.0.1:7472"}); !errors.Is(err, ErrNoGossip) {
		t.Fatalf("Join without gossip: %v, want ErrNoGossip", err)
	}
	if err := n.c.UpdateMeta(); !errors.Is(err, ErrNoGossip) {
		t.Fatalf("UpdateMeta without gossip: %v, want ErrNoGossip", err)
	}
	if n.c.Members() != nil || n.c.MemberEvents() != nil || n.c.GossipAddr() != "" {
		t.Fatal("a node without gossip reports gossip state")
	}
}

func TestGossip_RejoinAfterPartitionHeals(t *testing.T) {
	t.Parallel()
	net := &Partitioner{}
	nodes := make([]*testNode, 3)
	for i, id := range []string{"a", "b", "c"} {
		cfg := testConfig(id)
		cfg.Network = net
		nodes[i] = startCfg(t, cfg)
	}
	a, b, c := nodes[0], nodes[1], nodes[2]
	mustJoin(t, b, a)
	mustJoin(t, c, a)
	waitFor(t, 10*time.Second, func() error { return allAlive(a, b, c) })

	net.Block(c.c.GossipAddr(), c.c.Addr())
	waitFor(t, 10*time.Second, func() error {
		for _, pair := range [][2]*testNode{{a, c}, {b, c}, {c, a}, {c, b}} {
			if m, _ := memberStatus(pair[0], pair[1].id); m.Status != StatusFailed {
				return fmt.Errorf("%s sees %s as %v", pair[0].id, pair[1].id, m.Status)
			}
		}
		return nil
	})
	net.Heal()
	waitFor(t, 15*time.Second, func() error { return allAlive(a, b, c) })
}

// A node cut off from four others and let back re-joins one or two of
// them, not all four: after a join that reached its peer it waits for
// the refutations to bring the others back and skips them.
func TestGossip_RejoinAfterAPartitionTakesOneJoinNotOneEach(t *testing.T) {
	t.Parallel()
	net := &Partitioner{}
	nodes := make([]*testNode, 5)
	for i, id := range []string{"a", "b", "c", "d", "e"} {
		cfg := testConfig(id)
		cfg.Network = net
		nodes[i] = startCfg(t, cfg)
	}
	for _, n := range nodes[1:] {
		mustJoin(t, n, nodes[0])
	}
	waitFor(t, 10*time.Second, func() error { return allAlive(nodes...) })

	e := nodes[4]
	net.Block(e.c.GossipAddr(), e.c.Addr())
	waitFor(t, 10*time.Second, func() error {
		for _, n := range nodes[:4] {
			if m, _ := memberStatus(e, n.id); m.Status != StatusFailed {
				return fmt.Errorf("e sees %s as %v", n.id, m.Status)
			}
		}
		return nil
	})
	before := e.c.gossip.rejoined.Load()
	net.Heal()
	waitFor(t, 15*time.Second, func() error { return allAlive(nodes...) })
	if n := e.c.gossip.rejoined.Load() - before; n > 2 {
		t.Fatalf("e re-joined %d of the 4 members it had lost; want at most 2", n)
	}
	// Lifeguard stretched e's probe timeouts while it was cut off; until
	// its probes are answered again a probe can outlive the test.
	waitFor(t, 15*time.Second, func() error {
		if h := e.c.GossipHealth(); h != 0 {
			return fmt.Errorf("e's gossip health score is %d", h)
		}
		return nil
	})
}

func TestGossip_MetaTooLargeIsSentWithoutAppPart(t *testing.T) {
	t.Parallel()
	big := bytes.Repeat([]byte{'x'}, MaxAppMetaBytes+1)
	cfgA := testConfig("a")
	cfgA.Meta = func() []byte { return big }
	a := startCfg(t, cfgA)
	b := startCfg(t, testConfig("b"))
	mustJoin(t, b, a)
	waitFor(t, 5*time.Second, func() error { return allAlive(a, b) })
	m, _ := memberStatus(b, "a")
	if len(m.Meta) != 0 || m.RaftAddr != a.c.Addr() {
		t.Fatalf("b sees a as %+v; want its raft address and no app meta", m)
	}
}

func TestMeta_RoundTripsAndRejectsGarbage(t *testing.T) {
	t.Parallel()
	h := memberHeader{raftAddr: "10.0.0.1:7471", expect: 3, hasState: true, canVote: true}
	app := bytes.Repeat([]byte{7}, MaxAppMetaBytes)
	addr64 := strings.Repeat("a", maxRaftAddrLen)
	if got := len(encodeMeta(memberHeader{raftAddr: addr64}, app)); got > 512 {
		t.Fatalf("largest meta is %d bytes, over memberlist's 512", got)
	}
	gotH, gotApp, err := decodeMeta(encodeMeta(h, app))
	if err != nil || gotH != h || !bytes.Equal(gotApp, app) {
		t.Fatalf("round trip = %+v, %d bytes, %v", gotH, len(gotApp), err)
	}
	// Flags are bits: one a version does not know is ignored, and one it
	// knows but a peer did not set reads as false.
	for _, tc := range []struct {
		flags   byte
		canVote bool
	}{{flags: 0x80 | metaCanVote, canVote: true}, {flags: metaHasState, canVote: false}} {
		got, _, err := decodeMeta([]byte{metaVersion, tc.flags, 0, 0})
		if err != nil || got.canVote != tc.canVote {
			t.Fatalf("flags %#x: %+v, %v; want canVote %v", tc.flags, got, err, tc.canVote)
		}
	}
	cases := []struct {
		name string
		b    []byte
	}{
		{name: "empty", b: nil},
		{name: "short", b: []byte{1, 0}},
		{name: "unknown version", b: []byte{9, 0, 0, 0}},
		{name: "address past end", b: []byte{1, 0, 0, 10, 'a'}},
		{name: "address too long", b: append([]byte{1, 0, 0, 200}, make([]byte, 200)...)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, err := decodeMeta(tc.b); !errors.Is(err, ErrBadMeta) {
				t.Fatalf("decode %v: err = %v, want ErrBadMeta", tc.b, err)
			}
		})
	}
}

func TestKeys_GenerateParseAndReject(t *testing.T) {
	t.Parallel()
	s, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	key, err := ParseKey(s)
	if err != nil || len(key) != 32 {
		t.Fatalf("ParseKey(GenerateKey()) = %d bytes, %v", len(key), err)
	}
	cases := []struct {
		name, in, want string
	}{
		{name: "empty", in: " ", want: "empty"},
		{name: "not base64", in: "!!!", want: "not base64"},
		{name: "short", in: "AAAA", want: "3 bytes, want 32"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseKey(tc.in)
			if !errors.Is(err, ErrInvalidKey) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("ParseKey(%q) = %v, want ErrInvalidKey mentioning %q", tc.in, err, tc.want)
			}
		})
	}
}

func TestNew_RejectsBadGossipConfig(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		edit func(*Config)
		want string
	}{
		{name: "key length", edit: func(c *Config) { c.EncryptKey = make([]byte, 16) }, want: "16 bytes"},
		{name: "further keys without a key", edit: func(c *Config) { c.EncryptOthers = [][]byte{make([]byte, 32)} }, want: "need a primary"},
		{name: "further key length", edit: func(c *Config) {
			c.EncryptKey, c.EncryptOthers = make([]byte, 32), [][]byte{make([]byte, 24)}
		}, want: "key 1 is 24 bytes"},
		{name: "even voters", edit: func(c *Config) { c.Voters = 4 }, want: "voters 4"},
		{name: "fewer servers than voters", edit: func(c *Config) { c.Voters, c.Servers = 3, 2 }, want: "servers 2 must be 0 (no bound) or at least the voters (3)"},
		{name: "negative servers", edit: func(c *Config) { c.Servers = -1 }, want: "servers -1"},
		{name: "expect and bootstrap", edit: func(c *Config) { c.BootstrapExpect = 3; c.Bootstrap = true }, want: "mutually exclusive"},
		{name: "expect without gossip", edit: func(c *Config) { c.BootstrapExpect = 3; c.GossipBind = "" }, want: "needs gossip"},
		{name: "bad gossip bind", edit: func(c *Config) { c.GossipBind = "nope" }, want: "gossip bind"},
		{name: "probe timeout", edit: func(c *Config) { c.GossipTiming.ProbeTimeout = time.Second }, want: "probe timeout"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig("a")
			cfg.DataDir = t.TempDir()
			cfg.FSM = newKV()
			tc.edit(&cfg)
			c, err := New(cfg)
			if err == nil {
				_ = c.Shutdown()
			}
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New = %v, want ErrInvalidConfig mentioning %q", err, tc.want)
			}
		})
	}
}

// probeLog records the probe round trips a node reports (Config.ProbeRTT).
type probeLog struct {
	mu   sync.Mutex
	rtts map[string][]time.Duration
}

func (p *probeLog) record(member string, rtt time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rtts == nil {
		p.rtts = map[string][]time.Duration{}
	}
	p.rtts[member] = append(p.rtts[member], rtt)
}

// take returns what was recorded and forgets it.
func (p *probeLog) take() map[string][]time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.rtts
	p.rtts = nil
	return out
}

func TestGossip_ProbeRTTIsReportedForEachAnsweredProbe(t *testing.T) {
	t.Parallel()
	net := &Partitioner{}
	probes := &probeLog{}
	nodes := make([]*testNode, 3)
	for i, id := range []string{"a", "b", "c"} {
		cfg := testConfig(id)
		cfg.Network = net
		if id == "a" {
			cfg.ProbeRTT = probes.record
		}
		nodes[i] = startCfg(t, cfg)
	}
	a, b, c := nodes[0], nodes[1], nodes[2]
	mustJoin(t, b, a)
	mustJoin(t, c, a)
	waitFor(t, 10*time.Second, func() error { return allAlive(a, b, c) })

	// a probes both others, never itself, and every answer took some time.
	seen := map[string][]time.Duration{}
	waitFor(t, 10*time.Second, func() error {
		for id, rtts := range probes.take() {
			seen[id] = append(seen[id], rtts...)
		}
		if len(seen["b"]) == 0 || len(seen["c"]) == 0 {
			return fmt.Errorf("a timed %d probes of b and %d of c", len(seen["b"]), len(seen["c"]))
		}
		return nil
	})
	for id, rtts := range seen {
		if id != "b" && id != "c" {
			t.Errorf("a timed a probe of %q", id)
		}
		for _, rtt := range rtts {
			if rtt <= 0 {
				t.Errorf("a probe of %s took %v", id, rtt)
			}
		}
	}

	// Cut off, c answers no probe: a times those of b only.
	net.Block(c.c.GossipAddr(), c.c.Addr())
	waitFor(t, 10*time.Second, func() error {
		if m, _ := memberStatus(a, "c"); m.Status != StatusFailed {
			return fmt.Errorf("a sees c as %v", m.Status)
		}
		return nil
	})
	probes.take()
	seen = map[string][]time.Duration{}
	waitFor(t, 10*time.Second, func() error {
		for id, rtts := range probes.take() {
			seen[id] = append(seen[id], rtts...)
		}
		if len(seen["b"]) < 3 {
			return fmt.Errorf("a timed %d probes of b since c failed", len(seen["b"]))
		}
		return nil
	})
	if n := len(seen["c"]); n != 0 {
		t.Errorf("a timed %d probes of c, which is cut off", n)
	}

	// Healed, c is probed and answers again.
	net.Heal()
	waitFor(t, 15*time.Second, func() error {
		if rtts := probes.take()["c"]; len(rtts) == 0 {
			return fmt.Errorf("no probe of c timed since the cut healed")
		}
		return nil
	})
}

// TestGossip_OnlyMembershipChangesWakeTheReconcile: an update of the
// application's metadata alone (a free-GPU count moving with each job)
// does not wake the leader's reconcile of Raft membership, which reads
// every member; a new member, a new status and a new Raft part do. Every
// change moves the members' version.
func TestGossip_OnlyMembershipChangesWakeTheReconcile(t *testing.T) {
	t.Parallel()
	c := &Cluster{
		logger:        hclog.NewNullLogger(),
		reconcileKick: make(chan struct{}, 1),
		bootstrapKick: make(chan struct{}, 1),
		gossip:        &gossip{logger: hclog.NewNullLogger(), eventsCh: make(chan MemberEvent, 16), table: map[string]*memberState{}, known: map[string]time.Time{}},
	}
	server := memberHeader{raftAddr: "127.0.0.1:7471", hasState: true}
	steps := []struct {
		name string
		ev   rawEvent
		want bool
	}{
		{"joins", rawEvent{EventJoin, "n1", "127.0.0.1:7472", encodeMeta(server, []byte(`{"f":8}`))}, true},
		{"its free GPUs move", rawEvent{EventUpdate, "n1", "127.0.0.1:7472", encodeMeta(server, []byte(`{"f":7}`))}, false},
		{"again", rawEvent{EventUpdate, "n1", "127.0.0.1:7472", encodeMeta(server, []byte(`{"f":6}`))}, false},
		{"it leaves Raft", rawEvent{EventUpdate, "n1", "127.0.0.1:7472", encodeMeta(memberHeader{raftAddr: "127.0.0.1:7471"}, []byte(`{"f":6}`))}, true},
		{"fails", rawEvent{EventFailed, "n1", "127.0.0.1:7472", encodeMeta(memberHeader{raftAddr: "127.0.0.1:7471"}, []byte(`{"f":6}`))}, true},
	}
	for _, s := range steps {
		version := c.MembersVersion()
		c.applyEvent(s.ev)
		if c.MembersVersion() == version {
			t.Errorf("%s: the members' version stayed %d", s.name, version)
		}
		woke := false
		select {
		case <-c.reconcileKick:
			woke = true
		default:
		}
		if woke != s.want {
			t.Errorf("%s: the reconcile woke %v, want %v", s.name, woke, s.want)
		}
		if got := len(c.gossip.eventsCh); got != 1 {
			t.Errorf("%s: %d member events, want 1 (every change is passed on)", s.name, got)
		}
		<-c.gossip.eventsCh
	}
}

// Two goroutines of one node broadcast its metadata at once (the agent's
// meta loop, and the bootstrap marking that Raft holds state): memberlist
// writes its own node's entry on each broadcast, so the calls take turns,
// and the race detector (make race) sees no two at once. Each broadcast
// reaches the peer.
func TestGossip_ConcurrentMetaUpdatesTakeTurns(t *testing.T) {
	t.Parallel()
	var metaA atomic.Value
	metaA.Store([]byte("n=0"))
	cfgA := testConfig("a")
	cfgA.Meta = func() []byte { return metaA.Load().([]byte) }
	a := startCfg(t, cfgA)
	b := startCfg(t, testConfig("b"))
	mustJoin(t, b, a)
	waitFor(t, 10*time.Second, func() error { return allAlive(a, b) })

	const updaters = 4
	errs := make(chan error, updaters)
	for range updaters {
		go func() {
			var err error
			for i := range 12 {
				metaA.Store([]byte(fmt.Sprintf("n=%d", i)))
				if err = a.c.UpdateMeta(); err != nil {
					break
				}
			}
			errs <- err
		}()
	}
	for range updaters {
		if err := <-errs; err != nil {
			t.Fatalf("update meta: %v", err)
		}
	}
	metaA.Store([]byte("n=last"))
	if err := a.c.UpdateMeta(); err != nil {
		t.Fatalf("update meta: %v", err)
	}
	waitFor(t, 10*time.Second, func() error {
		if m, _ := memberStatus(b, "a"); string(m.Meta) != "n=last" {
			return fmt.Errorf("b sees a's meta %q", m.Meta)
		}
		return nil
	})
}
