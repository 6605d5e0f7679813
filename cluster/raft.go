package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"
)

// RaftServer is one member of the Raft configuration.
type RaftServer struct {
	ID      string
	Address string
	Voter   bool
}

// openRaft opens the stores and transport, bootstraps if asked and starts
// raft with conf. On error everything it opened is closed again.
func (c *Cluster) openRaft(conf *raft.Config, advertise net.Addr) error {
	dir := filepath.Join(c.cfg.DataDir, "raft")
	// The snapshot store would create snapshots/ with mode 0755; make it
	// (and its parents) 0700 first.
	if err := os.MkdirAll(filepath.Join(dir, "snapshots"), 0o700); err != nil {
		return fmt.Errorf("create raft dir %s: %w", dir, err)
	}
	rlog := c.logger.Named("raft")

	c.storePath = filepath.Join(dir, "raft.db")
	boltOpts := *bbolt.DefaultOptions
	boltOpts.Timeout = storeOpenTimeout
	// The log store frees most of its pages at every log compaction after
	// a snapshot. bbolt would otherwise write its whole freelist on every
	// commit, an allocation and a write that grow with the pages freed, and
	// show in every commit's latency once the state is large; it rebuilds
	// the freelist when it opens the file instead, and keeps it as a map.
	boltOpts.NoFreelistSync = true
	boltOpts.FreelistType = bbolt.FreelistMapType
	store, err := raftboltdb.New(raftboltdb.Options{Path: c.storePath, BoltOptions: &boltOpts})
	if errors.Is(err, bbolt.ErrTimeout) {
		err = ErrStoreLocked
	}
	if err != nil {
		return fmt.Errorf("open raft store %s: %w", c.storePath, err)
	}
	c.store = store

	logs, err := raft.NewLogCache(logCacheSize, store)
	if err != nil {
		_ = store.Close()
		return fmt.Errorf("create raft log cache: %w", err)
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(dir, snapshotsRetain, rlog)
	if err != nil {
		_ = store.Close()
		return fmt.Errorf("open snapshot store %s: %w", dir, err)
	}
	stream, err := newTCPStream(c.cfg.RaftBind, advertise, c.cfg.Network, c.cfg.RaftTLS)
	if err != nil {
		_ = store.Close()
		return fmt.Errorf("listen for raft on %s: %w", c.cfg.RaftBind, err)
	}
	trans := &raftTransport{NetworkTransport: raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:  stream,
		MaxPool: transportPool,
		Timeout: transportTimeout,
		Logger:  rlog,
	})}
	c.transport = trans
	c.stream = stream

	fail := func(err error) error {
		_ = trans.Close()
		_ = store.Close()
		return err
	}
	existing, err := raft.HasExistingState(logs, store, snaps)
	if err != nil {
		return fail(fmt.Errorf("check existing raft state: %w", err))
	}
	c.hasState.Store(existing)
	if c.cfg.Recover {
		if err := recoverAlone(conf, c.cfg.FSM, existing, dir, logs, store, snaps, trans); err != nil {
			return fail(err)
		}
	}
	if c.cfg.Bootstrap {
		if err := bootstrap(conf, existing, logs, store, snaps, trans); err != nil {
			return fail(err)
		}
		c.hasState.Store(true)
	}
	r, err := raft.NewRaft(conf, c.cfg.FSM, logs, store, snaps, trans)
	if err != nil {
		return fail(fmt.Errorf("start raft: %w", err))
	}
	c.raft = r
	c.logger.Info("raft started", "id", c.cfg.NodeID, "addr", trans.LocalAddr(), "dir", dir)
	return nil
}

// bootstrap writes a one-voter configuration of this node, unless the
// stores already hold raft state (a restart, or a node that joined a
// cluster earlier): bootstrapping those again would fork the cluster.
func bootstrap(conf *raft.Config, existing bool, logs raft.LogStore, stable raft.StableStore,
	snaps raft.SnapshotStore, trans raft.Transport) error {
	if existing {
		conf.Logger.Info("existing raft state found, not bootstrapping")
		return nil
	}
	servers := raft.Configuration{Servers: []raft.Server{{
		Suffrage: raft.Voter,
		ID:       conf.LocalID,
		Address:  trans.LocalAddr(),
	}}}
	if err := raft.BootstrapCluster(conf, logs, stable, snaps, trans, servers); err != nil {
		return fmt.Errorf("bootstrap raft: %w", err)
	}
	conf.Logger.Info("bootstrapped a one-voter cluster", "id", conf.LocalID)
	return nil
}

// shutdownRaft stops raft, then closes the transport and the store (raft
// must stop first: it uses both until it does).
func (c *Cluster) shutdownRaft() []error {
	var errs []error
	if err := c.raft.Shutdown().Error(); err != nil {
		errs = append(errs, fmt.Errorf("shut down raft: %w", err))
	}
	// Close pooled outbound connections too: the transport keeps them,
	// and each one holds a reader goroutine open on the peer.
	c.transport.CloseStreams()
	if err := c.transport.Close(); err != nil {
		errs = append(errs, fmt.Errorf("close raft transport: %w", err))
	}
	c.transport.shut()
	if err := c.store.Close(); err != nil {
		errs = append(errs, fmt.Errorf("close raft store %s: %w", c.storePath, err))
	}
	return errs
}

// Apply commits cmd through raft and returns what the FSM's Apply returned.
// If the FSM returned an error value, that error is returned as is, so
// errors.Is works on it. On a follower it returns ErrNotLeader.
func (c *Cluster) Apply(cmd []byte, timeout time.Duration) (any, error) {
	var f raft.ApplyFuture
	err := c.wait(func() raft.Future {
		f = c.raft.Apply(cmd, timeout)
		return f
	})
	if err != nil {
		return nil, fmt.Errorf("apply: %w", err)
	}
	resp := f.Response()
	if err, ok := resp.(error); ok {
		return nil, err
	}
	return resp, nil
}

// LeaderEvents delivers true when this node becomes leader and false when
// it stops being leader. The channel (buffer 16) is never closed. Raft
// blocks when it is full, so exactly one consumer must drain it for the
// life of the Cluster.
func (c *Cluster) LeaderEvents() <-chan bool { return c.notifyCh }

// IsLeader reports whether this node is the leader right now.
func (c *Cluster) IsLeader() bool { return c.raft.State() == raft.Leader }

// Leader returns the raft address and ID of the leader this node knows of,
// or empty strings if it knows none.
func (c *Cluster) Leader() (addr, id string) {
	a, i := c.raft.LeaderWithID()
	return string(a), string(i)
}

// Addr returns the raft address other members dial to reach this node.
func (c *Cluster) Addr() string { return string(c.transport.LocalAddr()) }

// WaitForLeader waits until this node knows a leader (itself or another).
// It polls briefly and gives up with ErrNoLeader when ctx ends, or with
// ErrShutdown when Shutdown starts.
func (c *Cluster) WaitForLeader(ctx context.Context) error {
	tick := time.NewTicker(leaderPoll)
	defer tick.Stop()
	for {
		if c.isStopped() {
			return fmt.Errorf("wait for leader: %w", ErrShutdown)
		}
		if addr, _ := c.raft.LeaderWithID(); addr != "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for leader: %w: %w", ErrNoLeader, ctx.Err())
		case <-c.stopped:
		case <-tick.C:
		}
	}
}

// Barrier returns once every entry committed before it has been applied to
// the local FSM. Leader only.
func (c *Cluster) Barrier(timeout time.Duration) error {
	if err := c.wait(func() raft.Future { return c.raft.Barrier(timeout) }); err != nil {
		return fmt.Errorf("barrier: %w", err)
	}
	return nil
}

// StaleLeaderBound is how long a leader cut off from the voters may go on
// taking itself for the leader after a quorum of them last answered it:
// its lease (raft steps it down at the first check past it), and the
// heartbeat interval besides for that check and a reply in flight. The
// voters that elect another stop answering it when they vote, so by this
// long after a new leader took office the old one has stepped down,
// though its process may be held off the CPU past it, as raft's own lease
// assumes it is not.
func (c *Cluster) StaleLeaderBound() time.Duration {
	return c.cfg.Timing.LeaderLeaseTimeout + c.cfg.Timing.HeartbeatTimeout/10
}

// AppliedIndex returns the index of the last entry applied to the local FSM.
func (c *Cluster) AppliedIndex() uint64 { return c.raft.AppliedIndex() }

// Snapshot asks raft to snapshot the FSM now and compact the log.
func (c *Cluster) Snapshot() error {
	if err := c.wait(func() raft.Future { return c.raft.Snapshot() }); err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	return nil
}

// Servers returns the latest raft configuration, committed or not.
func (c *Cluster) Servers() ([]RaftServer, error) {
	var f raft.ConfigurationFuture
	err := c.wait(func() raft.Future {
		f = c.raft.GetConfiguration()
		return f
	})
	if err != nil {
		return nil, fmt.Errorf("get raft configuration: %w", err)
	}
	conf := f.Configuration()
	out := make([]RaftServer, 0, len(conf.Servers))
	for _, s := range conf.Servers {
		out = append(out, RaftServer{ID: string(s.ID), Address: string(s.Address), Voter: s.Suffrage == raft.Voter})
	}
	return out, nil
}

// HoldsState reports whether id is a server of the configuration that
// servers (Servers' answer) and err describe: one whose FSM holds the
// cluster's state. An unread configuration counts as not.
func HoldsState(servers []RaftServer, err error, id string) bool {
	return err == nil && slices.ContainsFunc(servers, func(s RaftServer) bool { return s.ID == id })
}

// AddNonvoter adds a member that replicates the full log but does not vote,
// or updates its address. Leader only.
func (c *Cluster) AddNonvoter(id, addr string) error {
	if err := checkServer(id, addr); err != nil {
		return fmt.Errorf("add nonvoter: %w", err)
	}
	err := c.wait(func() raft.Future {
		return c.raft.AddNonvoter(raft.ServerID(id), raft.ServerAddress(addr), 0, membershipWait)
	})
	if err != nil {
		return fmt.Errorf("add nonvoter %s at %s: %w", id, addr, err)
	}
	return nil
}

// AddVoter adds a voting member, or promotes a non-voter. Leader only.
func (c *Cluster) AddVoter(id, addr string) error {
	if err := checkServer(id, addr); err != nil {
		return fmt.Errorf("add voter: %w", err)
	}
	err := c.wait(func() raft.Future {
		return c.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(addr), 0, membershipWait)
	})
	if err != nil {
		return fmt.Errorf("add voter %s at %s: %w", id, addr, err)
	}
	return nil
}

// RemoveServer removes a member from the raft configuration. Leader only.
// The removed node's raft keeps running without a vote until its own
// Shutdown (ShutdownOnRemove is off), so it never hangs its callers.
func (c *Cluster) RemoveServer(id string) error {
	if id == "" {
		return fmt.Errorf("remove server: %w: empty id", ErrInvalidServer)
	}
	err := c.wait(func() raft.Future {
		return c.raft.RemoveServer(raft.ServerID(id), 0, membershipWait)
	})
	if err != nil {
		return fmt.Errorf("remove server %s: %w", id, err)
	}
	return nil
}

// LeadershipTransfer hands leadership to the most up-to-date voter and
// returns once it has (or the attempt failed). Leader only.
func (c *Cluster) LeadershipTransfer() error {
	if err := c.wait(func() raft.Future { return c.raft.LeadershipTransfer() }); err != nil {
		return fmt.Errorf("leadership transfer: %w", err)
	}
	return nil
}

// Stats returns raft's counters (state, term, indexes, configuration).
func (c *Cluster) Stats() map[string]string { return c.raft.Stats() }

// wait starts a raft operation, unless Shutdown has started, and waits for
// its future. It returns ErrShutdown as soon as Shutdown starts, because
// raft leaves futures that were still queued unanswered; the goroutine
// waiting on such a future then stays until the process exits.
func (c *Cluster) wait(start func() raft.Future) error {
	if c.isStopped() {
		return ErrShutdown
	}
	return waitOn(start(), c.stopped)
}

func checkServer(id, addr string) error {
	switch {
	case id == "":
		return fmt.Errorf("%w: empty id", ErrInvalidServer)
	case addr == "":
		return fmt.Errorf("%w: empty address for %s", ErrInvalidServer, id)
	}
	return nil
}

// raftTransport is the network transport as raft gets it: without
// pipelined replication, and with a heartbeat handler that can be shut.
//
// hashicorp/raft's pipeline can deadlock when a follower rejects an
// append while another is in flight: the leader then never sends that
// follower another entry (its heartbeats still flow, so no election heals
// it), and Shutdown hangs waiting for the pipeline. We saw the hang in
// tests. Refusing pipelines makes raft replicate one batch at a time
// (up to MaxAppendEntries entries each), which costs a little commit
// throughput and takes the deadlock away.
//
// The transport calls raft's heartbeat handler on its own connection
// goroutine, which neither raft's Shutdown nor the transport's Close
// waits for: a heartbeat that arrived just before a shutdown could still
// be writing the term to the store after the store closed (raft panics
// on that: "failed to save current term: database not open"). shut
// waits for such a heartbeat and lets no other through.
type raftTransport struct {
	*raft.NetworkTransport
	mu     sync.RWMutex
	closed bool
}

// AppendEntriesPipeline tells raft to replicate without a pipeline.
func (*raftTransport) AppendEntriesPipeline(raft.ServerID, raft.ServerAddress) (raft.AppendPipeline, error) {
	return nil, raft.ErrPipelineReplicationNotSupported
}

// SetHeartbeatHandler installs raft's fast path for heartbeats behind
// the gate shut closes. A heartbeat turned away gets no answer: the
// transport is closed by then, and its connection ends.
func (t *raftTransport) SetHeartbeatHandler(cb func(raft.RPC)) {
	if cb == nil {
		t.NetworkTransport.SetHeartbeatHandler(nil)
		return
	}
	t.NetworkTransport.SetHeartbeatHandler(func(rpc raft.RPC) {
		t.mu.RLock()
		defer t.mu.RUnlock()
		if !t.closed {
			cb(rpc)
		}
	})
}

// shut waits for a heartbeat being handled and turns away the rest.
// Call it after raft has shut down, before the store closes.
func (t *raftTransport) shut() {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
}

// The wrapper keeps what raft looks for on its transport: pre-vote, and
// closing on shutdown.
var (
	_ raft.WithPreVote = (*raftTransport)(nil)
	_ raft.WithClose   = (*raftTransport)(nil)
)

// restoreGap is how far past the log's last index a restored backup's
// index is put: raft burns an index for it, and the FSM's index, which
// nodes compare to tell newer state, must not fall behind an entry
// appended while the restore was on its way.
const restoreGap = 1 << 20

// Restore replaces the state of the whole cluster with a backup, through
// raft's user restore: this node (the leader) installs it, and every
// follower gets it as a snapshot. reindex is handed the index the backup
// will have and returns the backup's bytes with that index in them. The
// Raft configuration stays as it is. Leader only. Raft cannot undo a
// restore that fails halfway and stops this node's Raft: check the
// backup fully first.
func (c *Cluster) Restore(reindex func(index uint64) ([]byte, error), timeout time.Duration) (uint64, error) {
	if !c.IsLeader() {
		return 0, ErrNotLeader
	}
	meta := c.raft.LastIndex() + restoreGap
	data, err := reindex(meta + 1)
	if err != nil {
		return 0, err
	}
	err = c.raft.Restore(&raft.SnapshotMeta{Version: raft.SnapshotVersionMax, Index: meta, Size: int64(len(data))}, bytes.NewReader(data), timeout)
	if err != nil {
		return 0, fmt.Errorf("restore: %w", err)
	}
	return meta + 1, nil
}
