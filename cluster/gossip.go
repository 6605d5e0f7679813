package cluster

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/memberlist"
)

const (
	keyLen             = 32 // AES-256
	maxBootstrapExpect = 255

	metaVersion   = 1
	metaHasState  = 1 << 0 // flag: the node holds raft state
	metaLeaving   = 1 << 1 // flag: the node is leaving gracefully
	metaCanVote   = 1 << 2 // flag: the node is ready to vote (Config.CanVote)
	metaHeaderMax = 4 + maxRaftAddrLen
)

// MaxAppMetaBytes is how many bytes of Config.Meta fit in a member's gossip
// metadata: memberlist's 512-byte limit less this package's header.
const MaxAppMetaBytes = memberlist.MetaMaxSize - metaHeaderMax

// GenerateKey returns a new random 32-byte gossip encryption key, base64
// encoded (for `skein keygen`).
func GenerateKey() (string, error) {
	key := make([]byte, keyLen)
	if _, err := rand.Read(key); err != nil {
		return "", fmt.Errorf("generate gossip key: %w", err)
	}
	return base64.StdEncoding.EncodeToString(key), nil
}

// ParseKey decodes a base64 gossip key as GenerateKey makes it.
func ParseKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, fmt.Errorf("%w: empty", ErrInvalidKey)
	}
	key, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("%w: not base64: %w", ErrInvalidKey, err)
	}
	if len(key) != keyLen {
		return nil, fmt.Errorf("%w: %d bytes, want %d", ErrInvalidKey, len(key), keyLen)
	}
	return key, nil
}

// MemberStatus is what gossip says about a member.
type MemberStatus int

// Member statuses. memberlist v0.7.0 does not tell its users which
// members are suspect, so a member is alive until it is declared failed.
const (
	StatusAlive  MemberStatus = 1
	StatusFailed MemberStatus = 3 // stopped answering
	StatusLeft   MemberStatus = 4 // left gracefully
	// StatusRevoked is a member Config.Revoked names: whatever it sends,
	// this node takes none of its alive messages (memberlist's Alive
	// delegate) and never dials it again to rejoin.
	StatusRevoked MemberStatus = 5
)

func (s MemberStatus) String() string {
	switch s {
	case StatusAlive:
		return "alive"
	case StatusFailed:
		return "failed"
	case StatusLeft:
		return "left"
	case StatusRevoked:
		return "revoked"
	}
	return "unknown"
}

// Member is one node as gossip sees it.
type Member struct {
	ID       string
	Addr     string // gossip host:port
	RaftAddr string // empty if its metadata could not be read
	Meta     []byte // the application's part of the metadata
	Status   MemberStatus
}

// MemberEventType says what happened to a member.
type MemberEventType int

// Member event types.
const (
	EventJoin   MemberEventType = 1
	EventUpdate MemberEventType = 2 // its metadata changed
	EventFailed MemberEventType = 3
	EventLeft   MemberEventType = 4
)

func (t MemberEventType) String() string {
	switch t {
	case EventJoin:
		return "join"
	case EventUpdate:
		return "update"
	case EventFailed:
		return "failed"
	case EventLeft:
		return "left"
	}
	return "unknown"
}

// MemberEvent is one change in membership.
type MemberEvent struct {
	Type   MemberEventType
	Member Member
}

// memberHeader is the part of a member's gossip metadata this package owns.
type memberHeader struct {
	raftAddr string
	expect   int
	hasState bool
	leaving  bool
	canVote  bool
}

// encodeMeta lays out version, flags, bootstrap-expect, the raft address
// (length-prefixed) and then the application's bytes.
func encodeMeta(h memberHeader, app []byte) []byte {
	b := make([]byte, 0, 4+len(h.raftAddr)+len(app))
	var flags byte
	if h.hasState {
		flags |= metaHasState
	}
	if h.leaving {
		flags |= metaLeaving
	}
	if h.canVote {
		flags |= metaCanVote
	}
	b = append(b, metaVersion, flags, byte(h.expect), byte(len(h.raftAddr)))
	b = append(b, h.raftAddr...)
	return append(b, app...)
}

// decodeMeta is the inverse of encodeMeta. It never panics on what a peer
// sends.
func decodeMeta(b []byte) (memberHeader, []byte, error) {
	if len(b) < 4 {
		return memberHeader{}, nil, fmt.Errorf("%w: %d bytes", ErrBadMeta, len(b))
	}
	if b[0] != metaVersion {
		return memberHeader{}, nil, fmt.Errorf("%w: version %d", ErrBadMeta, b[0])
	}
	n := int(b[3])
	if n > maxRaftAddrLen || len(b) < 4+n {
		return memberHeader{}, nil, fmt.Errorf("%w: raft address of %d bytes", ErrBadMeta, n)
	}
	// Unknown flag bits are ignored, so a flag can be added without a new
	// version; a member that predates a flag reads as not having it.
	h := memberHeader{hasState: b[1]&metaHasState != 0, leaving: b[1]&metaLeaving != 0, canVote: b[1]&metaCanVote != 0,
		expect: int(b[2]), raftAddr: string(b[4 : 4+n])}
	return h, slices.Clone(b[4+n:]), nil
}

// rawEvent is what a memberlist callback hands the event loop.
type rawEvent struct {
	typ  MemberEventType
	id   string
	addr string
	meta []byte
}

// memberState is the event loop's record of one member.
type memberState struct {
	Member
	header memberHeader
	since  time.Time // when Status last changed
}

// gossip is the memberlist half of a Cluster.
type gossip struct {
	ml     *memberlist.Memberlist
	logger hclog.Logger

	// mu guards ml.Leave and ml.Shutdown: memberlist panics on a Leave
	// after Shutdown.
	mu sync.Mutex
	// updateMu serialises ml.UpdateNode: memberlist reads this node's
	// entry outside its lock while another broadcast writes it.
	updateMu sync.Mutex
	// keyMu serialises keyring changes; ring is nil without encryption.
	keyMu sync.Mutex
	ring  *memberlist.Keyring

	// Callbacks append to pending and signal rawReady; the queue is
	// unbounded so a callback neither blocks nor drops an event.
	queueMu  sync.Mutex
	pending  []rawEvent
	rawReady chan struct{}
	addr     string           // advertised gossip host:port
	eventsCh chan MemberEvent // event loop -> MemberEvents
	statsReq chan []byte      // stats requests -> responder

	tableMu sync.Mutex
	table   map[string]*memberState
	// version moves with every change of the table, under tableMu.
	version atomic.Uint64
	known   map[string]time.Time // gossip addresses seen alive (seeds: zero time)
	// rejoined counts the re-joins that reached their peer (rejoinLoop).
	rejoined atomic.Int64

	// stats round state (membership.go)
	statsMu    sync.Mutex
	statsRound uint64
	statsCh    chan statsReply
}

// startGossip creates memberlist and the goroutines around it.
func (c *Cluster) startGossip() error {
	cfg := c.cfg
	g := &gossip{
		logger:   c.logger.Named("gossip"),
		rawReady: make(chan struct{}, 1),
		eventsCh: make(chan MemberEvent, memberEvents),
		statsReq: make(chan []byte, statsBuffer),
		table:    map[string]*memberState{},
		known:    map[string]time.Time{},
	}
	c.gossip = g

	host, port, _ := splitHostPort(cfg.GossipBind)
	stdlog := g.logger.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true})
	mc := memberlist.DefaultLANConfig()
	var nt *memberlist.NetTransport
	if cfg.gossipTransport != nil {
		ip, p, err := cfg.gossipTransport.FinalAdvertiseAddr("", 0)
		if err != nil {
			return fmt.Errorf("gossip transport: %w", err)
		}
		host = ip.String()
		mc.BindPort = p
		mc.Transport = cfg.gossipTransport
	} else {
		var err error
		nt, err = memberlist.NewNetTransport(&memberlist.NetTransportConfig{
			BindAddrs: []string{host},
			BindPort:  port,
			Logger:    stdlog,
		})
		if err != nil {
			return fmt.Errorf("listen for gossip on %s: %w", cfg.GossipBind, err)
		}
		mc.BindPort = nt.GetAutoBindPort()
		mc.Transport = nt
	}
	mc.Name = cfg.NodeID
	mc.BindAddr = host
	mc.AdvertisePort = mc.BindPort
	if cfg.GossipAdvertise != "" {
		advHost, advPort, _ := splitHostPort(cfg.GossipAdvertise)
		mc.AdvertiseAddr = advHost
		if advPort != 0 {
			mc.AdvertisePort = advPort
		}
	}
	mc.ProbeInterval = cfg.GossipTiming.ProbeInterval
	mc.ProbeTimeout = cfg.GossipTiming.ProbeTimeout
	mc.SuspicionMult = cfg.GossipTiming.SuspicionMult
	mc.SuspicionMaxTimeoutMult = suspicionMaxMult
	mc.GossipInterval = cfg.GossipTiming.GossipInterval
	mc.PushPullInterval = cfg.GossipTiming.PushPullInterval
	// memberlist compresses every packet it sends, a probe too, with a
	// new LZW writer each time, and its receiver reads it with a new
	// reader (64 KB allocated and cleared to send, 20 KB to read): in
	// a cluster of 60 on two cores whose probes were timing out, the two
	// were 14 % of a worker's CPU and the garbage collection they feed
	// another 28 %, for bytes a LAN does not miss. Members still read
	// compressed packets, so nodes from before this gossip with those
	// after it.
	mc.EnableCompression = cfg.compressGossip
	// Node IDs are unique; a member that restarts at a new address (new
	// port, DHCP) may take its ID back once it has been seen dead.
	mc.DeadNodeReclaimTime = deadReclaim
	mc.Logger = stdlog
	mc.Delegate = &gossipDelegate{c: c}
	mc.Events = &gossipDelegate{c: c}
	mc.Alive = &gossipDelegate{c: c}
	if cfg.ProbeRTT != nil {
		mc.Ping = probeTimer(cfg.ProbeRTT)
	}
	if cfg.Network != nil && nt != nil {
		mc.Transport = &cutTransport{NetTransport: nt, network: cfg.Network,
			self: net.JoinHostPort(advertiseHost(mc, nt), strconv.Itoa(mc.AdvertisePort))}
	}
	if cfg.EncryptKey != nil {
		ring, err := memberlist.NewKeyring(cfg.EncryptOthers, cfg.EncryptKey)
		if err != nil {
			_ = mc.Transport.Shutdown()
			return fmt.Errorf("%w: encrypt key: %w", ErrInvalidConfig, err)
		}
		mc.Keyring = ring
	}
	ml, err := memberlist.Create(mc)
	if err != nil {
		_ = mc.Transport.Shutdown()
		return fmt.Errorf("start gossip on %s: %w", cfg.GossipBind, err)
	}
	g.ml = ml
	g.ring = mc.Keyring
	// Read once: memberlist mutates its Node values without a lock users
	// can take, so this package never reads them after start.
	g.addr = ml.LocalNode().Address()
	g.logger.Info("gossip started", "addr", c.GossipAddr(), "encrypted", cfg.EncryptKey != nil)

	c.goLoop(c.eventLoop)
	c.goLoop(c.rejoinLoop)
	c.goLoop(c.statsResponder)
	c.goLoop(c.bootstrapLoop)
	return nil
}

// advertiseHost is the host memberlist advertises: the configured one, or
// the one the transport picks for the bind address.
func advertiseHost(mc *memberlist.Config, nt *memberlist.NetTransport) string {
	if mc.AdvertiseAddr != "" {
		return mc.AdvertiseAddr
	}
	ip, _, err := nt.FinalAdvertiseAddr("", mc.BindPort)
	if err != nil {
		return mc.BindAddr
	}
	return ip.String()
}

// GossipAddr returns the gossip host:port other members reach this node
// on, or "" when gossip is off.
func (c *Cluster) GossipAddr() string {
	if c.gossip == nil {
		return ""
	}
	return c.gossip.addr
}

// MemberEvents delivers membership changes seen by gossip, including this
// node's own join. The channel (buffer 256) is never closed; when the
// reader falls behind the oldest events are dropped, so a reader that
// needs the full picture should re-read Members after a burst. It is nil
// when gossip is off.
func (c *Cluster) MemberEvents() <-chan MemberEvent {
	if c.gossip == nil {
		return nil
	}
	return c.gossip.eventsCh
}

// Members returns every member gossip knows, this node included, sorted by
// ID. Failed and left members stay listed until they are reaped.
func (c *Cluster) Members() []Member {
	if c.gossip == nil {
		return nil
	}
	g := c.gossip
	g.tableMu.Lock()
	out := make([]Member, 0, len(g.table))
	for _, m := range g.table {
		mm := m.Member
		mm.Meta = slices.Clone(m.Meta)
		out = append(out, mm)
	}
	g.tableMu.Unlock()
	slices.SortFunc(out, func(a, b Member) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// MembersVersion moves whenever what Members returns may have changed,
// so a reader that derives something from the members can keep it until
// then; 0 when gossip is off.
func (c *Cluster) MembersVersion() uint64 {
	if c.gossip == nil {
		return 0
	}
	return c.gossip.version.Load()
}

// GossipHealth is memberlist's awareness of its own health: 0 while this
// node's probes of others are answered in time, up to 8 as they are not
// (it then probes more slowly and waits longer before suspecting
// others), a sign that this node or its network is slow. 0 when gossip
// is off.
func (c *Cluster) GossipHealth() int {
	if c.gossip == nil {
		return 0
	}
	return c.gossip.ml.GetHealthScore()
}

// Join contacts the given gossip addresses (host or host:port; a bare host
// gets DefaultGossipPort) and merges their view of the cluster. It returns
// how many it reached, and an error only if it reached none. The addresses
// are remembered and re-joined while they are not members.
func (c *Cluster) Join(addrs []string) (int, error) {
	if c.gossip == nil {
		return 0, fmt.Errorf("join: %w", ErrNoGossip)
	}
	if c.isStopped() {
		return 0, fmt.Errorf("join: %w", ErrShutdown)
	}
	if len(addrs) == 0 {
		return 0, fmt.Errorf("%w: no addresses", ErrJoin)
	}
	norm := make([]string, 0, len(addrs))
	for _, a := range addrs {
		norm = append(norm, withDefaultPort(a))
	}
	g := c.gossip
	g.tableMu.Lock()
	for _, a := range norm {
		if _, ok := g.known[a]; !ok {
			g.known[a] = time.Time{}
		}
	}
	g.tableMu.Unlock()
	n, err := g.ml.Join(norm)
	if n == 0 {
		if err == nil {
			err = fmt.Errorf("no member answered")
		}
		return 0, fmt.Errorf("%w: %s: %w", ErrJoin, strings.Join(norm, ", "), err)
	}
	return n, nil
}

// withDefaultPort appends DefaultGossipPort to an address without a port.
func withDefaultPort(addr string) string {
	addr = strings.TrimSpace(addr)
	if _, _, err := net.SplitHostPort(addr); err == nil {
		return addr
	}
	return net.JoinHostPort(strings.Trim(addr, "[]"), strconv.Itoa(DefaultGossipPort))
}

// UpdateMeta re-reads Config.Meta and broadcasts this node's metadata. It
// waits (up to 5 s) until the broadcast has gone out.
func (c *Cluster) UpdateMeta() error {
	if c.gossip == nil {
		return fmt.Errorf("update meta: %w", ErrNoGossip)
	}
	if c.isStopped() {
		return fmt.Errorf("update meta: %w", ErrShutdown)
	}
	if err := c.gossip.updateNode(gossipTimeout); err != nil {
		return fmt.Errorf("update meta: %w", err)
	}
	return nil
}

// updateNode broadcasts this node's metadata, one broadcast at a time,
// and waits up to timeout for it to go out.
func (g *gossip) updateNode(timeout time.Duration) error {
	g.updateMu.Lock()
	defer g.updateMu.Unlock()
	return g.ml.UpdateNode(timeout)
}

// localMeta is this node's metadata as memberlist sends it.
func (c *Cluster) localMeta(limit int) []byte {
	h := memberHeader{raftAddr: c.Addr(), expect: c.cfg.BootstrapExpect, hasState: c.hasState.Load(),
		leaving: c.leaving.Load(), canVote: c.cfg.CanVote == nil || c.cfg.CanVote()}
	var app []byte
	if c.cfg.Meta != nil {
		app = c.cfg.Meta()
	}
	if len(app) > MaxAppMetaBytes || 4+len(h.raftAddr)+len(app) > limit {
		c.gossip.logger.Warn("application metadata too large, sending none", "bytes", len(app), "max", MaxAppMetaBytes)
		app = nil
	}
	return encodeMeta(h, app)
}

// gossipDelegate receives memberlist's callbacks. None of them blocks:
// they copy what they need and hand it on through buffered channels.
type gossipDelegate struct{ c *Cluster }

func (d *gossipDelegate) NodeMeta(limit int) []byte { return d.c.localMeta(limit) }

func (d *gossipDelegate) NotifyMsg(b []byte) { d.c.handleMsg(b) }

func (d *gossipDelegate) GetBroadcasts(_, _ int) [][]byte { return nil }

func (d *gossipDelegate) LocalState(bool) []byte { return nil }

func (d *gossipDelegate) MergeRemoteState([]byte, bool) {}

func (d *gossipDelegate) NotifyJoin(n *memberlist.Node) { d.push(EventJoin, n) }

// NotifyAlive refuses every alive message of a revoked member, its own
// and those others pass on (a push/pull's merge asks per member too): it
// is never added to the member list, and one already there is not kept
// alive by what it sends, so it is declared failed once its probes go
// unanswered (it no longer has the keyring). This node itself is never
// refused here: its own alive message starts its gossip.
func (d *gossipDelegate) NotifyAlive(n *memberlist.Node) error {
	if n.Name != d.c.cfg.NodeID && d.c.revoked(n.Name) {
		return errRevokedMember
	}
	return nil
}

func (d *gossipDelegate) NotifyUpdate(n *memberlist.Node) { d.push(EventUpdate, n) }

// NotifyLeave cannot tell a leave from a failure (memberlist does not
// update Node.State); applyEvent does, from the leaving flag in the meta.
func (d *gossipDelegate) NotifyLeave(n *memberlist.Node) { d.push(EventFailed, n) }

func (d *gossipDelegate) push(typ MemberEventType, n *memberlist.Node) {
	g := d.c.gossip
	ev := rawEvent{typ: typ, id: n.Name, addr: n.Address(), meta: slices.Clone(n.Meta)}
	g.queueMu.Lock()
	g.pending = append(g.pending, ev)
	g.queueMu.Unlock()
	kick(g.rawReady)
}

// probeTimer hands memberlist's probe round trips to Config.ProbeRTT.
// It adds nothing to the acks this node sends.
type probeTimer func(member string, rtt time.Duration)

func (probeTimer) AckPayload() []byte { return nil }

// NotifyPingComplete reads only the member's name, which memberlist never
// changes.
func (f probeTimer) NotifyPingComplete(other *memberlist.Node, rtt time.Duration, _ []byte) {
	f(other.Name, rtt)
}

// eventLoop is the one consumer of memberlist's callbacks. It keeps the
// member table, feeds MemberEvents and wakes the leader's reconcile and
// the bootstrap check.
func (c *Cluster) eventLoop() {
	g := c.gossip
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-c.stopped:
			return
		case <-g.rawReady:
			g.queueMu.Lock()
			batch := g.pending
			g.pending = nil
			g.queueMu.Unlock()
			for _, ev := range batch {
				c.applyEvent(ev)
			}
		case <-tick.C:
			c.pruneMembers()
		}
	}
}

// applyEvent records one event and passes it on.
func (c *Cluster) applyEvent(ev rawEvent) {
	g := c.gossip
	h, app, err := decodeMeta(ev.meta)
	if err != nil {
		g.logger.Warn("unreadable member metadata", "member", ev.id, "error", err)
	}
	if ev.typ == EventFailed && h.leaving {
		ev.typ = EventLeft
	}
	status := StatusAlive
	switch {
	case ev.id != c.cfg.NodeID && c.revoked(ev.id):
		status = StatusRevoked
	case ev.typ == EventFailed:
		status = StatusFailed
	case ev.typ == EventLeft:
		status = StatusLeft
	}
	now := time.Now()
	g.tableMu.Lock()
	m, ok := g.table[ev.id]
	if !ok {
		m = &memberState{since: now}
		g.table[ev.id] = m
	}
	// Only a new member, a change of status or of the part of the
	// metadata Raft membership reads wakes the reconcile: an update of
	// the application's part alone (a free-GPU count moving with each
	// job) changes nothing it decides.
	membership := !ok || m.Status != status || m.header != h || m.Addr != ev.addr
	if m.Status != status {
		m.since = now
	}
	m.Member = Member{ID: ev.id, Addr: ev.addr, RaftAddr: h.raftAddr, Meta: app, Status: status}
	m.header = h
	g.version.Add(1)
	switch status {
	case StatusAlive:
		if ev.id != c.cfg.NodeID {
			g.known[ev.addr] = now
		}
	case StatusLeft, StatusRevoked:
		delete(g.known, ev.addr)
	}
	out := MemberEvent{Type: ev.typ, Member: m.Member}
	out.Member.Meta = slices.Clone(app)
	g.tableMu.Unlock()

	g.logger.Debug("member event", "type", ev.typ, "member", ev.id, "addr", ev.addr)
	c.emit(out)
	if membership {
		kick(c.reconcileKick)
		kick(c.bootstrapKick)
	}
}

// emit delivers an event to MemberEvents, dropping the oldest one when the
// reader is behind. The event loop is the only sender.
func (c *Cluster) emit(ev MemberEvent) {
	ch := c.gossip.eventsCh
	for {
		select {
		case ch <- ev:
			return
		default:
		}
		select {
		case <-ch:
		default:
		}
	}
}

// kick wakes a loop without blocking.
func kick(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// pruneMembers marks the members revoked since as such (and forgets their
// addresses: they are never rejoined), forgets members failed, left or
// revoked for twice ReapTimeout (by then the leader has removed them from
// raft) and peer addresses not seen alive for ReapTimeout.
func (c *Cluster) pruneMembers() {
	g := c.gossip
	now := time.Now()
	g.tableMu.Lock()
	defer g.tableMu.Unlock()
	for id, m := range g.table {
		if m.Status != StatusRevoked && id != c.cfg.NodeID && c.revoked(id) {
			m.Status, m.since = StatusRevoked, now
			delete(g.known, m.Addr)
			g.version.Add(1)
			g.logger.Warn("refusing a revoked member in gossip from now on", "member", id)
			c.emit(MemberEvent{Type: EventFailed, Member: m.Member})
			kick(c.reconcileKick)
			continue
		}
		if m.Status != StatusAlive && now.Sub(m.since) > 2*c.cfg.ReapTimeout {
			delete(g.table, id)
			g.version.Add(1)
		}
	}
	for addr, seen := range g.known {
		if !seen.IsZero() && now.Sub(seen) > c.cfg.ReapTimeout {
			delete(g.known, addr)
		}
	}
}

// aliveAddr returns the gossip address of an alive member.
func (c *Cluster) aliveAddr(id string) (string, bool) {
	m, ok := c.member(id)
	if !ok || m.Status != StatusAlive {
		return "", false
	}
	return m.Addr, true
}

// sendTo sends a best-effort (UDP) user message to an alive member.
func (c *Cluster) sendTo(id string, msg []byte) error {
	addr, ok := c.aliveAddr(id)
	if !ok {
		return fmt.Errorf("member %s is not alive", id)
	}
	return c.gossip.ml.SendToAddress(memberlist.Address{Addr: addr, Name: id}, msg)
}

// member returns the table's record of one member.
func (c *Cluster) member(id string) (memberState, bool) {
	g := c.gossip
	g.tableMu.Lock()
	defer g.tableMu.Unlock()
	m, ok := g.table[id]
	if !ok {
		return memberState{}, false
	}
	return *m, true
}

// rejoinLoop re-joins peers seen alive earlier that are not members now.
// memberlist stops probing a failed member after a while, so without this
// two halves of a long partition would never find each other again.
//
// A round joins the missing one at a time, in random order. After a join
// that reached its peer it waits rejoinSettle, and skips the addresses
// that came back meanwhile: the join's full-state exchange
// tells each side which of its members the other holds dead, they refute
// it, and the refutations spread by gossip, so across a healed partition
// a join or two bring back the rest. Joining them all at once, as one
// memberlist.Join of every address does, exchanges the whole state with
// each in turn: after a storm of false failures on a starved machine
// every member did that with every member it had lost, O(members)
// exchanges of O(members) state each, the load that kept the storm going
// (docs/benchmarks-history.md, "2026-12-05: gossip carried in memory, 300
// and 1,000 members").
func (c *Cluster) rejoinLoop() {
	g := c.gossip
	tick := time.NewTicker(c.cfg.RejoinInterval)
	defer tick.Stop()
	for {
		select {
		case <-c.stopped:
			return
		case <-tick.C:
		}
		missing := g.missing()
		mrand.Shuffle(len(missing), func(i, j int) { missing[i], missing[j] = missing[j], missing[i] })
		tried, reached := 0, 0
		for _, addr := range missing {
			if c.leaving.Load() || c.isStopped() {
				break
			}
			if g.aliveAt(addr) {
				continue
			}
			tried++
			n, err := g.ml.Join([]string{addr})
			if err != nil {
				g.logger.Debug("re-join", "addr", addr, "error", err)
			}
			if n == 0 {
				continue
			}
			reached += n
			g.rejoined.Add(int64(n))
			select {
			case <-c.stopped:
				return
			case <-time.After(rejoinSettle):
			}
		}
		if tried > 0 {
			g.logger.Debug("re-join round", "missing", len(missing), "tried", tried, "reached", reached)
		}
	}
}

// missing lists the addresses of peers seen alive earlier at which no
// member is alive now.
func (g *gossip) missing() []string {
	g.tableMu.Lock()
	defer g.tableMu.Unlock()
	live := map[string]bool{}
	for _, m := range g.table {
		if m.Status == StatusAlive {
			live[m.Addr] = true
		}
	}
	var out []string
	for addr := range g.known {
		if !live[addr] {
			out = append(out, addr)
		}
	}
	return out
}

// aliveAt reports whether a member at addr is alive.
func (g *gossip) aliveAt(addr string) bool {
	g.tableMu.Lock()
	defer g.tableMu.Unlock()
	for _, m := range g.table {
		if m.Addr == addr && m.Status == StatusAlive {
			return true
		}
	}
	return false
}

// shutdownGossip stops memberlist without a leave broadcast.
func (c *Cluster) shutdownGossip() error {
	g := c.gossip
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.ml.Shutdown(); err != nil {
		return fmt.Errorf("shut down gossip: %w", err)
	}
	return nil
}

// putUint64 and getUint64 frame the stats messages.
func putUint64(b []byte, v uint64) []byte { return binary.BigEndian.AppendUint64(b, v) }

func getUint64(b []byte) uint64 { return binary.BigEndian.Uint64(b) }

// SetKeyring installs the gossip keys: primary encrypts, and primary and
// others are accepted for decryption; every other key is removed. It adds
// the new keys first, then switches the primary, then removes the old
// ones, so no message this node could read before becomes unreadable
// until the caller asks for it. Across the cluster a rotation takes three
// rounds, each on every member before the next: install the new key as a
// secondary, make it primary, remove the old one. It fails with
// ErrNotEncrypted when gossip was started without a key.
func (c *Cluster) SetKeyring(primary []byte, others [][]byte) error {
	if c.gossip == nil {
		return fmt.Errorf("set keyring: %w", ErrNoGossip)
	}
	g := c.gossip
	if g.ring == nil {
		return fmt.Errorf("set keyring: %w", ErrNotEncrypted)
	}
	want := append([][]byte{primary}, others...)
	for i, k := range want {
		if len(k) != keyLen {
			return fmt.Errorf("set keyring: %w: key %d is %d bytes, want %d", ErrInvalidKey, i+1, len(k), keyLen)
		}
	}
	g.keyMu.Lock()
	defer g.keyMu.Unlock()
	for _, k := range want {
		if err := g.ring.AddKey(slices.Clone(k)); err != nil {
			return fmt.Errorf("set keyring: add key: %w", err)
		}
	}
	if err := g.ring.UseKey(primary); err != nil {
		return fmt.Errorf("set keyring: use primary: %w", err)
	}
	// memberlist removes a key by shifting the ones after it within the
	// slice it hands to readers; removing from the end shifts nothing in
	// the usual rotation, where the old key is the last one.
	installed := g.ring.GetKeys()
	var drop [][]byte
	for i := len(installed) - 1; i >= 0; i-- {
		if !slices.ContainsFunc(want, func(k []byte) bool { return bytes.Equal(k, installed[i]) }) {
			drop = append(drop, installed[i])
		}
	}
	for _, k := range drop {
		if err := g.ring.RemoveKey(k); err != nil {
			return fmt.Errorf("set keyring: remove key: %w", err)
		}
	}
	g.logger.Info("gossip keyring changed", "keys", len(g.ring.GetKeys()), "removed", len(drop))
	return nil
}

// GossipKeys returns copies of the installed gossip keys, the primary
// first, or nil when gossip is off or not encrypted.
func (c *Cluster) GossipKeys() [][]byte {
	if c.gossip == nil || c.gossip.ring == nil {
		return nil
	}
	keys := c.gossip.ring.GetKeys()
	out := make([][]byte, 0, len(keys))
	for _, k := range keys {
		out = append(out, slices.Clone(k))
	}
	return out
}
