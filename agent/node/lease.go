package node

import (
	"cmp"
	"context"
	"time"

	"github.com/skein-dev/skein/agent/peer"
	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/cluster"
)

// The lease between this node and the leader (DESIGN.md, "The lease
// fences the node"). Every
// HeartbeatInterval on a server, every WorkerHeartbeat on a worker, the
// node renews it with a heartbeat and writes it down for its
// supervisors; when it cannot renew it for StopAfter, the
// supervisors stop their jobs by themselves (fencing, which works even if
// the agent is frozen or dead). The leader, which hears the same
// heartbeats, marks a silent node down and declares its allocations lost
// (agent/leader).

// heartbeatLoop renews this node's lease and fences the node when it
// cannot. A renewal goes out one interval after the last one was sent, or
// at once when that one took longer.
func (n *Node) heartbeatLoop() {
	next := time.NewTimer(0)
	defer next.Stop()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-next.C:
		}
		sent := time.Now()
		next.Reset(n.renewEvery())
		err := n.heartbeat()
		if err == nil {
			n.renewLease(sent)
		}
		n.mu.Lock()
		unfenced := false
		if err == nil {
			n.lastAck = sent
			unfenced, n.fenced = n.fenced, false
		}
		silent := time.Since(n.lastAck)
		fence := err != nil && !n.fenced && silent > n.cfg.StopAfter
		if fence {
			n.fenced = true
		}
		n.mu.Unlock()
		if unfenced {
			n.log.Info("in contact with the leader; the node lease is valid")
			n.kickLocal() // start what waited for the lease
		}
		if fence {
			n.log.Warn("lost contact with the leader; local jobs are being stopped by their lease",
				"silent", silent.Round(time.Millisecond), "jobs", len(n.runner.Tracked()), "error", err)
		}
	}
}

// renewEvery is how often this node renews its lease: as a server or as a
// worker, which it may stop or start being at any time.
func (n *Node) renewEvery() time.Duration {
	if n.isServer() {
		return n.cfg.HeartbeatInterval
	}
	return cmp.Or(n.cfg.WorkerHeartbeat, n.cfg.HeartbeatInterval)
}

// renewLease extends the lease the supervisors check to StopAfter past the
// moment the renewed heartbeat was sent.
func (n *Node) renewLease(sent time.Time) {
	servers, err := n.cfg.Raft.Servers()
	if err != nil {
		servers = nil // unknown: let the lease expire, the safe side
	}
	until := leaseUntil(sent, n.cfg.StopAfter, servers, n.cfg.NodeID)
	if err := n.runner.RenewLease(until); err != nil {
		n.log.Error("renew the node lease", "error", err)
		return
	}
	n.mu.Lock()
	n.leaseEnd = until
	n.mu.Unlock()
}

// leaseUntil is when a lease renewed at sent runs out: StopAfter later, or
// never (zero) when this node is the only server of its Raft configuration,
// since nobody else could run its jobs. It asks Raft's configuration, not
// the FSM: Raft knows every server the moment it starts, while a restarted
// node's FSM may not have replayed the log yet, and a node that took
// itself for alone would write a lease that never runs out and keep its
// jobs through a partition that got them replaced elsewhere.
func leaseUntil(sent time.Time, stopAfter time.Duration, servers []cluster.RaftServer, self string) time.Time {
	if soleServer(servers, self) {
		return time.Time{}
	}
	return sent.Add(stopAfter)
}

// Alone reports whether this node is the only server of its Raft
// configuration; one that cannot be read counts as not alone.
func (n *Node) Alone() bool {
	servers, err := n.cfg.Raft.Servers()
	return err == nil && soleServer(servers, n.cfg.NodeID)
}

// soleServer reports whether self is the only server of a Raft
// configuration.
func soleServer(servers []cluster.RaftServer, self string) bool {
	return len(servers) == 1 && servers[0].ID == self
}

// heartbeat renews the lease once: at once on the leader; by asking it
// on another server; on a worker, through a server other than the
// leader, which passes the renewal on (agent/leader/relay.go), and from
// the leader itself when that server answers that it could not, or
// cannot be reached (it may be dead and gossip not say so yet).
//
// A server that cannot be reached and one that is slow are told apart
// (peer.DialBound): one that has not taken the connection within a
// quarter of StopAfter is given up on, one that has is waited for until
// the lease runs out, since its answer renews the lease from when the
// heartbeat was sent, however late it comes. Giving up on a slow server
// only to ask again would put another request behind the ones that make
// it slow.
func (n *Node) heartbeat() error {
	ctx, cancel := context.WithDeadline(n.ctx, n.renewBy())
	defer cancel()
	if !n.isServer() {
		err := n.renewWith(ctx, n.cfg.Peers.LeaseClient)
		if err == nil || ctx.Err() != nil {
			return err
		}
		n.log.Debug("renew the lease through a server", "error", err)
	}
	return n.renewWith(ctx, n.cfg.Peers.LeaderClient)
}

// renewBy is how long one heartbeat may wait for its answer: until the
// lease runs out, and at least half of StopAfter.
func (n *Node) renewBy() time.Time {
	n.mu.Lock()
	last := n.lastAck
	n.mu.Unlock()
	return later(time.Now().Add(n.cfg.StopAfter/2), last.Add(n.cfg.StopAfter))
}

// later is the later of a and b.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// renewWith sends one heartbeat to the server client names (none: this
// node leads, and its lease needs no message), giving up on a server not
// reached within a quarter of StopAfter. The answer names the leader,
// which a worker, whose own Raft names none, takes as its hint: after an
// election it learns the new leader from its next renewal.
func (n *Node) renewWith(ctx context.Context, client func(context.Context) (*api.Client, error)) error {
	c, err := client(ctx)
	if err != nil || c == nil {
		return err
	}
	ctx, done := peer.DialBound(ctx, n.cfg.StopAfter/4)
	defer done()
	r, err := c.Heartbeat(ctx, n.cfg.NodeID)
	if err == nil && r.LeaderID != "" {
		n.cfg.Peers.SetLeaderHint(r.LeaderID)
	}
	return err
}

// isFenced reports whether this node has stopped its jobs for want of a
// leader, or its lease has run out though the heartbeat that will say so
// has not come back yet (it waits until then for a slow server): it
// starts none until contact is back. A job started then would be stopped
// by its supervisor at once, its one attempt spent.
func (n *Node) isFenced() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.fenced || (!n.leaseEnd.IsZero() && !time.Now().Before(n.leaseEnd))
}
