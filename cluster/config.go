package cluster

import (
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"
)

// Config says how to start one cluster member.
type Config struct {
	// NodeID is this node's raft ServerID. It must never change for a data
	// directory.
	NodeID string
	// DataDir holds the raft files under DataDir/raft: raft.db (log and
	// stable store) and snapshots/. Directories are created with mode 0700.
	DataDir string
	// RaftBind is the host:port the raft transport listens on. Port 0 picks
	// a free port (tests); Addr reports the result.
	RaftBind string
	// RaftAdvertise is the host:port other members dial. Empty means the
	// bound address, which then must not be an unspecified IP (0.0.0.0, ::).
	RaftAdvertise string
	// FSM is the replicated state machine. Required.
	FSM raft.FSM
	// Logger receives all logs; raft gets Logger.Named("raft"). Nil discards.
	Logger hclog.Logger
	// Bootstrap asks for a one-voter cluster of this node when the data
	// directory holds no raft state yet. Existing state is never
	// re-bootstrapped.
	Bootstrap bool
	// Recover rebuilds a cluster of this node alone from the Raft state in
	// the data directory, for when most voters are gone for good (a lost
	// quorum): the configuration becomes this node, a voter, and every
	// entry the node holds is kept. See Recover in raft.go.
	Recover bool
	// Timing overrides raft's timeouts; zero fields take LAN defaults.
	Timing Timing
	// SnapshotThreshold is how many log entries since the last snapshot
	// trigger a new one. 0 means 8192.
	SnapshotThreshold uint64
	// TrailingLogs is how many entries a snapshot leaves in the log, so
	// that a follower a little behind catches up from the log rather than
	// from a snapshot. 0 means 10240 (raft's default). Tests lower it so
	// that a server added late must install a snapshot.
	TrailingLogs uint64
	// RaftTLS, when set, runs raft over mutual TLS: accepted connections
	// use its Server configuration and dialled ones its Client
	// configuration (see TLSPair). Nil is plaintext.
	RaftTLS *TLSPair

	// GossipBind is the host:port memberlist listens on (TCP and UDP). Empty
	// turns gossip off: the node then runs raft only, and membership is
	// changed by hand (AddVoter, RemoveServer, ...). Port 0 picks a free
	// port (tests); GossipAddr reports the result.
	GossipBind string
	// GossipAdvertise is the host:port other members reach this node's
	// gossip on. Empty means the bound address; port 0 means the bound port.
	GossipAdvertise string
	// EncryptKey, when set, encrypts and authenticates all gossip with
	// AES-256-GCM. It must be exactly 32 bytes (see GenerateKey, ParseKey).
	// It is the primary key: it encrypts, and every other member needs it
	// among its keys. SetKeyring changes the keys at runtime; a node
	// started without a key cannot turn encryption on later.
	EncryptKey []byte
	// EncryptOthers are further 32-byte keys accepted for decryption from
	// the start (a rotation in progress). Needs EncryptKey.
	EncryptOthers [][]byte
	// Meta returns the application's gossip metadata, at most
	// MaxAppMetaBytes. It is called when memberlist needs this node's meta
	// (at start and after UpdateMeta) and must not block. Nil means none.
	Meta func() []byte
	// BootstrapExpect, when N >= 1, bootstraps raft once N gossip members
	// with the same value see each other and none has raft state; the
	// member with the lowest NodeID does it, with the N lowest IDs as
	// voters. Needs gossip; mutually exclusive with Bootstrap.
	BootstrapExpect int
	// Voters is how many voters the leader keeps (odd, >= 1). 0 means 3.
	Voters int
	// Servers, when not 0, is how many alive servers (voters and
	// non-voting standbys) the leader keeps in raft: it adds members only
	// while fewer are in it, and removes alive non-voters beyond it; every
	// other member is a worker outside raft. 0 keeps no bound: every
	// member is a server. At least Voters.
	Servers int
	// GossipTiming overrides memberlist's failure-detector timings; zero
	// fields take LAN defaults.
	GossipTiming GossipTiming
	// RejoinInterval is how often the node re-joins peers it has seen alive
	// but that are not members now, so a long partition heals. 0 means 30s.
	RejoinInterval time.Duration
	// ReconcileInterval is how often the leader refreshes server health and
	// reconciles raft membership with gossip (autopilot's update and
	// reconcile intervals). A non-voter must be healthy this long before it
	// is promoted. 0 means 2s.
	ReconcileInterval time.Duration
	// Admitted reports whether a node may be a raft server. The leader
	// adds a gossip member to raft (as a non-voter first) and promotes it
	// only while Admitted returns true for it: gossip membership alone
	// never makes a raft member. Nil admits everyone. It is called from
	// the leader's reconcile and autopilot's goroutine and must not block.
	Admitted func(nodeID string) bool
	// Revoked reports whether a node must leave raft. The leader removes
	// such a server from the raft configuration and never adds it again;
	// a revoked leader hands leadership to another voter first. Nil
	// revokes nobody. Like Admitted, it must not block.
	Revoked func(nodeID string) bool
	// CanVote reports whether this node is ready to vote, and so to lead
	// (in skein: it can sign certificates). It is carried as a flag in
	// this node's gossip metadata, read when the metadata is (at start and
	// on UpdateMeta); the leader promotes a non-voter only while its flag
	// is set. Nil means always ready.
	CanVote func() bool
	// PrepareVoter is called on the leader, from autopilot's goroutine,
	// for each non-voter it would promote but whose flag says it cannot
	// vote yet, again on later rounds while that lasts. It must not
	// block: the callee starts its own work, and the node calls
	// UpdateMeta once CanVote turns true. Nil does nothing.
	PrepareVoter func(nodeID string)
	// DeadServerGrace is how long a voter may be failed in gossip before a
	// healthy non-voter takes its vote. 0 means 10s.
	DeadServerGrace time.Duration
	// ReapTimeout is how long a server may be failed in gossip before the
	// leader removes it from raft. 0 means 72h.
	ReapTimeout time.Duration
	// ProbeRTT, when set, is called with the round trip of every direct
	// gossip probe of another member that was answered within
	// ProbeTimeout, with that member's NodeID (memberlist's
	// PingDelegate). Probes that go unanswered, and the indirect and TCP
	// probes memberlist then tries, are not timed. It is called from
	// memberlist's probe loop, once per ProbeInterval at most, and must
	// not block. Nil times nothing.
	ProbeRTT func(member string, rtt time.Duration)
	// Network, when set, routes every raft and gossip connection and packet
	// of this node through a Partitioner, so tests can cut nodes off. Nil in
	// production.
	Network *Partitioner
	// compressGossip makes this member compress what it gossips, as
	// skein did before 2026-12-04: for tests of a cluster that mixes
	// both kinds during an upgrade.
	compressGossip bool
	// gossipTransport, when set, carries this member's gossip instead of
	// UDP and TCP sockets on GossipBind: for benchmarks of more members
	// than one machine's kernel can carry packets for (memTransport).
	// Network does not cut what it carries.
	gossipTransport memberlist.Transport
}

// GossipTiming holds memberlist's failure-detector timings. See
// memberlist.Config for their meaning.
type GossipTiming struct {
	ProbeInterval  time.Duration
	ProbeTimeout   time.Duration
	SuspicionMult  int
	GossipInterval time.Duration
	// PushPullInterval is how often a member swaps its whole state with
	// another. Broadcasts are retransmitted only a few times, so a join
	// that races another join can go unannounced; the full-state sync is
	// what repairs it. memberlist stretches it beyond 32 members.
	PushPullInterval time.Duration
}

// Timing holds raft's timeouts. See hashicorp/raft.Config for their meaning.
type Timing struct {
	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	CommitTimeout      time.Duration
}

// Defaults for a LAN, chosen so that overload is not failure. The
// timeout is raft's own (1 s): how long followers go without the
// leader's heartbeats before raft calls an election, and, five sixths of
// it, the lease a leader goes without its followers' answers before it
// steps down. A machine saturated by jobs or by many agents holds
// processes off the CPU for a few hundred ms now and then, and with the
// 300 ms timeout skein had before, such stalls elected leaders over and
// over (docs/benchmarks-history.md, "Scale — the 60-agent burst of real
// processes": 4 to 10 elections a burst, none at 1 s). A leader that is gone is not left to the timeout
// (stand.go): a crashed process is replaced in about 60 ms, a machine gone
// or cut off in about 0.5 s (B2), a leader that stepped down as soon as it
// says so. Only a leader whose machine answers but
// whose process has gone silent, frozen or starved, waits it out: raft
// randomises it between one and two timeouts, and the election takes a
// little more. The leader heartbeats every tenth of the timeout, and
// pre-vote (on by default in raft v1.8, and supported by the TCP
// transport) stops a follower that was merely slow or cut off from
// winning an election while the others still hear the leader.
const (
	DefaultHeartbeatTimeout   = time.Second
	DefaultElectionTimeout    = time.Second
	DefaultLeaderLeaseTimeout = 5 * time.Second / 6
	DefaultCommitTimeout      = 20 * time.Millisecond
	DefaultSnapshotThreshold  = 8192
	DefaultTrailingLogs       = 10240
)

// Gossip defaults, aimed at declaring a silent node failed within about
// 2-3 s on a LAN (memberlist's LAN profile takes 5-10 s). A dead node is
// probed within one ProbeInterval by some member; the probe fails after
// ProbeTimeout; the node is then suspect for between SuspicionMult *
// max(1, log10(members)) * ProbeInterval (1.2 s below 10 members, 2.4 s
// at 100) and suspicionMaxMult times that, shrinking as other members
// confirm the suspicion. ProbeTimeout of 200 ms is far above a LAN round
// trip yet tolerates a loaded 2-core machine; memberlist's awareness
// (Lifeguard) stretches it further on a member that is itself slow.
// GossipInterval of 100 ms spreads a meta change (free GPUs) to every one
// of 100 members in 0.30 s (p50, 0.49 s at worst; at 150, 0.36 and
// 0.59 s: docs/benchmarks-history.md, "Scale — B5: a free-GPU change
// across 1,000 nodes"), growing with the log of the member count.
const (
	DefaultProbeInterval     = 400 * time.Millisecond
	DefaultProbeTimeout      = 200 * time.Millisecond
	DefaultSuspicionMult     = 3
	DefaultGossipInterval    = 100 * time.Millisecond
	DefaultPushPullInterval  = 5 * time.Second
	DefaultGossipPort        = 7472
	DefaultVoters            = 3
	DefaultRejoinInterval    = 30 * time.Second
	DefaultReconcileInterval = 2 * time.Second
	DefaultDeadServerGrace   = 10 * time.Second
	DefaultReapTimeout       = 72 * time.Hour
)

// Fixed raft tunables.
const (
	logCacheSize     = 512 // recent entries kept in memory for replication
	snapshotsRetain  = 2
	maxAppendEntries = 256 // entries per AppendEntries RPC
	transportPool    = 3   // pooled connections per peer
	transportTimeout = 10 * time.Second
	notifyBuffer     = 16
	membershipWait   = 10 * time.Second // enqueue timeout for membership changes
	storeOpenTimeout = time.Second      // how long to wait for the bbolt file lock
	leaderPoll       = 20 * time.Millisecond

	suspicionMaxMult = 2                      // cap on suspicion time, as a multiple of the minimum
	deadReclaim      = time.Second            // a dead member's ID may come back at a new address after this
	statsBuffer      = 64                     // stats requests waiting for the responder
	memberEvents     = 256                    // event loop -> MemberEvents, oldest dropped when full
	gossipTimeout    = 5 * time.Second        // broadcast waits (UpdateMeta)
	maxRaftAddrLen   = 64                     // longest raft advertise address the meta header carries
	rejoinSettle     = time.Second            // after a re-join that reached its peer, before the next
	bootstrapPoll    = 500 * time.Millisecond // bootstrap-expect re-checks at least this often
)

// withDefaults returns cfg with zero values replaced by defaults.
func (cfg Config) withDefaults() Config {
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	t := &cfg.Timing
	if t.HeartbeatTimeout == 0 {
		t.HeartbeatTimeout = DefaultHeartbeatTimeout
	}
	if t.ElectionTimeout == 0 {
		t.ElectionTimeout = DefaultElectionTimeout
	}
	if t.LeaderLeaseTimeout == 0 {
		t.LeaderLeaseTimeout = DefaultLeaderLeaseTimeout
	}
	if t.CommitTimeout == 0 {
		t.CommitTimeout = DefaultCommitTimeout
	}
	if cfg.SnapshotThreshold == 0 {
		cfg.SnapshotThreshold = DefaultSnapshotThreshold
	}
	if cfg.TrailingLogs == 0 {
		cfg.TrailingLogs = DefaultTrailingLogs
	}
	g := &cfg.GossipTiming
	if g.ProbeInterval == 0 {
		g.ProbeInterval = DefaultProbeInterval
	}
	if g.ProbeTimeout == 0 {
		g.ProbeTimeout = DefaultProbeTimeout
	}
	if g.SuspicionMult == 0 {
		g.SuspicionMult = DefaultSuspicionMult
	}
	if g.GossipInterval == 0 {
		g.GossipInterval = DefaultGossipInterval
	}
	if g.PushPullInterval == 0 {
		g.PushPullInterval = DefaultPushPullInterval
	}
	if cfg.Voters == 0 {
		cfg.Voters = DefaultVoters
	}
	if cfg.RejoinInterval == 0 {
		cfg.RejoinInterval = DefaultRejoinInterval
	}
	if cfg.ReconcileInterval == 0 {
		cfg.ReconcileInterval = DefaultReconcileInterval
	}
	if cfg.DeadServerGrace == 0 {
		cfg.DeadServerGrace = DefaultDeadServerGrace
	}
	if cfg.ReapTimeout == 0 {
		cfg.ReapTimeout = DefaultReapTimeout
	}
	return cfg
}

// validate checks what raft.ValidateConfig does not: required fields and
// addresses. It returns the advertise address to hand the transport (nil
// means the bound address).
func (cfg Config) validate() (net.Addr, error) {
	switch {
	case cfg.NodeID == "":
		return nil, fmt.Errorf("%w: node id is empty", ErrInvalidConfig)
	case cfg.DataDir == "":
		return nil, fmt.Errorf("%w: data dir is empty", ErrInvalidConfig)
	case cfg.FSM == nil:
		return nil, fmt.Errorf("%w: fsm is nil", ErrInvalidConfig)
	}
	if err := cfg.validateGossip(); err != nil {
		return nil, err
	}
	if cfg.RaftTLS != nil {
		if err := cfg.RaftTLS.validate(); err != nil {
			return nil, err
		}
	}
	host, _, err := net.SplitHostPort(cfg.RaftBind)
	if err != nil {
		return nil, fmt.Errorf("%w: raft bind %q: %w", ErrInvalidConfig, cfg.RaftBind, err)
	}
	if len(cfg.RaftAdvertise) > maxRaftAddrLen || (cfg.RaftAdvertise == "" && len(cfg.RaftBind) > maxRaftAddrLen) {
		return nil, fmt.Errorf("%w: raft address is longer than %d bytes", ErrInvalidConfig, maxRaftAddrLen)
	}
	if cfg.RaftAdvertise == "" {
		if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
			return nil, fmt.Errorf("%w: raft bind %q is not dialable; set a raft advertise address",
				ErrInvalidConfig, cfg.RaftBind)
		}
		return nil, nil
	}
	advHost, advPort, err := net.SplitHostPort(cfg.RaftAdvertise)
	if err != nil {
		return nil, fmt.Errorf("%w: raft advertise %q: %w", ErrInvalidConfig, cfg.RaftAdvertise, err)
	}
	if port, err := strconv.Atoi(advPort); err != nil || port <= 0 || port > 65535 {
		return nil, fmt.Errorf("%w: raft advertise %q: port must be 1-65535", ErrInvalidConfig, cfg.RaftAdvertise)
	}
	if ip := net.ParseIP(advHost); advHost == "" || (ip != nil && ip.IsUnspecified()) {
		return nil, fmt.Errorf("%w: raft advertise %q must name a dialable host", ErrInvalidConfig, cfg.RaftAdvertise)
	}
	adv, err := net.ResolveTCPAddr("tcp", cfg.RaftAdvertise)
	if err != nil {
		return nil, fmt.Errorf("%w: raft advertise %q: %w", ErrInvalidConfig, cfg.RaftAdvertise, err)
	}
	return adv, nil
}

// raftConfig builds raft's configuration from a defaulted Config.
func (cfg Config) raftConfig(notify chan<- bool) (*raft.Config, error) {
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.NodeID)
	rc.Logger = cfg.Logger.Named("raft")
	rc.HeartbeatTimeout = cfg.Timing.HeartbeatTimeout
	rc.ElectionTimeout = cfg.Timing.ElectionTimeout
	rc.LeaderLeaseTimeout = cfg.Timing.LeaderLeaseTimeout
	rc.CommitTimeout = cfg.Timing.CommitTimeout
	rc.SnapshotThreshold = cfg.SnapshotThreshold
	rc.TrailingLogs = cfg.TrailingLogs
	rc.MaxAppendEntries = maxAppendEntries
	rc.BatchApplyCh = true
	rc.NotifyCh = notify
	// A removed node keeps running (without a vote) until the agent shuts
	// it down: raft stopping itself would leave this package's callers
	// waiting on futures nobody answers.
	rc.ShutdownOnRemove = false
	// PreVoteDisabled stays false: pre-vote is on (raft v1.8 default).
	if err := raft.ValidateConfig(rc); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return rc, nil
}

// validateGossip checks the gossip and membership fields.
func (cfg Config) validateGossip() error {
	switch {
	case cfg.EncryptKey != nil && len(cfg.EncryptKey) != keyLen:
		return fmt.Errorf("%w: encrypt key is %d bytes, want %d", ErrInvalidConfig, len(cfg.EncryptKey), keyLen)
	case len(cfg.EncryptOthers) > 0 && cfg.EncryptKey == nil:
		return fmt.Errorf("%w: further gossip keys need a primary encrypt key", ErrInvalidConfig)
	case cfg.BootstrapExpect < 0 || cfg.BootstrapExpect > maxBootstrapExpect:
		return fmt.Errorf("%w: bootstrap expect %d is outside 0-%d", ErrInvalidConfig, cfg.BootstrapExpect, maxBootstrapExpect)
	case cfg.Recover && (cfg.Bootstrap || cfg.BootstrapExpect > 0):
		return fmt.Errorf("%w: recover rebuilds an existing cluster; it takes no bootstrap", ErrInvalidConfig)
	case cfg.BootstrapExpect > 0 && cfg.Bootstrap:
		return fmt.Errorf("%w: bootstrap and bootstrap expect are mutually exclusive", ErrInvalidConfig)
	case cfg.BootstrapExpect > 0 && cfg.GossipBind == "":
		return fmt.Errorf("%w: bootstrap expect needs gossip (a gossip bind address)", ErrInvalidConfig)
	case cfg.Voters < 1 || cfg.Voters%2 == 0:
		return fmt.Errorf("%w: voters %d must be odd and at least 1", ErrInvalidConfig, cfg.Voters)
	case cfg.Servers != 0 && cfg.Servers < cfg.Voters:
		return fmt.Errorf("%w: servers %d must be 0 (no bound) or at least the voters (%d)", ErrInvalidConfig, cfg.Servers, cfg.Voters)
	case cfg.GossipTiming.ProbeInterval < 0 || cfg.GossipTiming.ProbeTimeout < 0 ||
		cfg.GossipTiming.SuspicionMult < 0 || cfg.GossipTiming.GossipInterval < 0 ||
		cfg.GossipTiming.PushPullInterval < 0:
		return fmt.Errorf("%w: gossip timings must not be negative", ErrInvalidConfig)
	case cfg.GossipTiming.ProbeTimeout >= cfg.GossipTiming.ProbeInterval:
		return fmt.Errorf("%w: gossip probe timeout %s must be shorter than the probe interval %s",
			ErrInvalidConfig, cfg.GossipTiming.ProbeTimeout, cfg.GossipTiming.ProbeInterval)
	case cfg.RejoinInterval < 0 || cfg.ReconcileInterval < 0 || cfg.DeadServerGrace < 0 || cfg.ReapTimeout < 0:
		return fmt.Errorf("%w: membership intervals must not be negative", ErrInvalidConfig)
	}
	for i, k := range cfg.EncryptOthers {
		if len(k) != keyLen {
			return fmt.Errorf("%w: further gossip key %d is %d bytes, want %d", ErrInvalidConfig, i+1, len(k), keyLen)
		}
	}
	if cfg.GossipBind == "" {
		return nil
	}
	if _, _, err := splitHostPort(cfg.GossipBind); err != nil {
		return fmt.Errorf("%w: gossip bind %q: %w", ErrInvalidConfig, cfg.GossipBind, err)
	}
	if cfg.GossipAdvertise != "" {
		host, _, err := splitHostPort(cfg.GossipAdvertise)
		if err != nil {
			return fmt.Errorf("%w: gossip advertise %q: %w", ErrInvalidConfig, cfg.GossipAdvertise, err)
		}
		if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
			return fmt.Errorf("%w: gossip advertise %q must name a dialable IP", ErrInvalidConfig, cfg.GossipAdvertise)
		}
	}
	return nil
}

// splitHostPort splits a host:port whose port is 0-65535.
func splitHostPort(addr string) (string, int, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("port %q must be 0-65535", p)
	}
	return host, port, nil
}
