package cluster

import (
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/hashicorp/go-hclog"
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
	// Timing overrides raft's timeouts; zero fields take LAN defaults.
	Timing Timing
	// SnapshotThreshold is how many log entries since the last snapshot
	// trigger a new one. 0 means 8192.
	SnapshotThreshold uint64
}

// Timing holds raft's timeouts. See hashicorp/raft.Config for their meaning.
type Timing struct {
	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	CommitTimeout      time.Duration
}

// Defaults for a LAN. raft's own defaults (1s heartbeat and election, 500ms
// lease, 50ms commit) are made for WANs and cost ~1.5s per failover; halving
// them gives quick failover (DESIGN.md §11, B2) while a follower still
// tolerates ~500ms of silence, so a loaded 2-core machine with GC pauses and
// fsyncs does not hold spurious elections. Pre-vote (on by default in raft
// v1.8, and supported by the TCP transport) keeps a node that was briefly cut
// off from disrupting a healthy leader when it returns. Benchmarks will tune
// these.
const (
	DefaultHeartbeatTimeout   = 500 * time.Millisecond
	DefaultElectionTimeout    = 500 * time.Millisecond
	DefaultLeaderLeaseTimeout = 250 * time.Millisecond
	DefaultCommitTimeout      = 20 * time.Millisecond
	DefaultSnapshotThreshold  = 8192
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
	host, _, err := net.SplitHostPort(cfg.RaftBind)
	if err != nil {
		return nil, fmt.Errorf("%w: raft bind %q: %w", ErrInvalidConfig, cfg.RaftBind, err)
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
