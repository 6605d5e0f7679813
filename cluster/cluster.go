package cluster

import (
	"errors"
	"sync"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
)

// Cluster is one member of a skein cluster: a raft node and its stores.
// All methods are safe for concurrent use.
type Cluster struct {
	cfg    Config
	logger hclog.Logger

	raft      *raft.Raft
	transport *raft.NetworkTransport
	store     *raftboltdb.BoltStore
	storePath string
	notifyCh  chan bool

	// stopped is closed when Shutdown starts. Waits on raft futures also
	// select on it: raft does not answer futures still queued when it
	// stops (hashicorp/raft#498), and callers must not hang on those.
	stopped      chan struct{}
	shutdownOnce sync.Once
	shutdownErr  error
}

// New opens the raft stores under cfg.DataDir, starts the transport and the
// raft node, and bootstraps a one-voter cluster when cfg.Bootstrap is set
// and the data directory holds no raft state. It returns without waiting
// for an election; see WaitForLeader.
func New(cfg Config) (*Cluster, error) {
	cfg = cfg.withDefaults()
	advertise, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	notifyCh := make(chan bool, notifyBuffer)
	conf, err := cfg.raftConfig(notifyCh)
	if err != nil {
		return nil, err
	}
	c := &Cluster{
		cfg:      cfg,
		logger:   cfg.Logger,
		notifyCh: notifyCh,
		stopped:  make(chan struct{}),
	}
	if err := c.openRaft(conf, advertise); err != nil {
		return nil, err
	}
	return c, nil
}

// Shutdown stops the raft node and closes its transport and store. It does
// not transfer leadership first; a leader leaving gracefully should call
// LeadershipTransfer before. Calls waiting on raft return ErrShutdown.
// Calling it again returns the first result.
func (c *Cluster) Shutdown() error {
	c.shutdownOnce.Do(func() {
		close(c.stopped)
		c.shutdownErr = errors.Join(c.shutdownRaft()...)
	})
	return c.shutdownErr
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
