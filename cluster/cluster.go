package cluster

import (
	"errors"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	autopilot "github.com/hashicorp/raft-autopilot"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
)

// Cluster is one member of a skein cluster: a raft node and its stores,
// and, when gossip is on, its memberlist and the leader's membership
// management. All methods are safe for concurrent use.
type Cluster struct {
	cfg    Config
	logger hclog.Logger

	raft       *raft.Raft
	transport  *raftTransport
	stream     *tcpStream
	store      *raftboltdb.BoltStore
	storePath  string
	raftNotify chan bool // raft -> leaderLoop
	notifyCh   chan bool // leaderLoop -> LeaderEvents

	gossip        *gossip              // nil when gossip is off
	autopilot     *autopilot.Autopilot // nil when gossip is off
	hasState      atomic.Bool          // raft holds (or has been given) a configuration
	leaving       atomic.Bool          // Leave has started
	reconcileKick chan struct{}
	refused       onceLog // the reconcile's refusals, each logged once
	bootstrapKick chan struct{}

	// stopped is closed when Shutdown starts. Waits on raft futures also
	// select on it: raft does not answer futures still queued when it
	// stops (hashicorp/raft#498), and callers must not hang on those.
	stopped      chan struct{}
	wg           sync.WaitGroup // the package's own goroutines
	shutdownOnce sync.Once
	shutdownErr  error
}

// New opens the raft stores under cfg.DataDir, starts the transport and the
// raft node, and bootstraps a one-voter cluster when cfg.Bootstrap is set
// and the data directory holds no raft state. With cfg.GossipBind set it
// also starts gossip (and, with BootstrapExpect, waits in the background
// for the expected peers). It returns without waiting for an election or
// for peers; see WaitForLeader and Join.
func New(cfg Config) (*Cluster, error) {
	cfg = cfg.withDefaults()
	advertise, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	raftNotify := make(chan bool, notifyBuffer)
	conf, err := cfg.raftConfig(raftNotify)
	if err != nil {
		return nil, err
	}
	c := &Cluster{
		cfg:           cfg,
		logger:        cfg.Logger,
		raftNotify:    raftNotify,
		notifyCh:      make(chan bool, notifyBuffer),
		reconcileKick: make(chan struct{}, 1),
		bootstrapKick: make(chan struct{}, 1),
		stopped:       make(chan struct{}),
	}
	if err := c.openRaft(conf, advertise); err != nil {
		return nil, err
	}
	if cfg.GossipBind != "" {
		c.autopilot = c.newAutopilot()
		if err := c.startGossip(); err != nil {
			close(c.stopped)
			_ = errors.Join(c.shutdownRaft()...)
			return nil, err
		}
	}
	c.goLoop(c.leaderLoop)
	c.goLoop(func() { c.watchLeader(c.stream.ended) })
	return c, nil
}

// Shutdown stops gossip (without a leave broadcast; see AnnounceLeave),
// the raft node, and closes the transport and store. It does not transfer
// leadership; a leader leaving gracefully calls HandOver first. Calls waiting
// on raft return ErrShutdown. Calling it again returns the first result.
func (c *Cluster) Shutdown() error {
	c.shutdownOnce.Do(func() {
		close(c.stopped)
		var errs []error
		if c.gossip != nil {
			if err := c.shutdownGossip(); err != nil {
				errs = append(errs, err)
			}
		}
		c.wg.Wait()
		errs = append(errs, c.shutdownRaft()...)
		c.shutdownErr = errors.Join(errs...)
	})
	return c.shutdownErr
}

// goLoop runs f in a goroutine that Shutdown waits for.
func (c *Cluster) goLoop(f func()) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		f()
	}()
}

// isStopped reports whether Shutdown has started.
func (c *Cluster) isStopped() bool {
	select {
	case <-c.stopped:
		return true
	default:
		return false
	}
}
