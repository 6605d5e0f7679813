package agent

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/skein-dev/skein/cluster"
	"github.com/skein-dev/skein/structs"
)

// liveness is the lease between nodes and the leader (DESIGN.md §6). Every
// node renews it with a heartbeat and writes it down for its supervisors;
// when a node cannot renew it for StopAfter, the supervisors stop their jobs
// by themselves (fencing, which works even if the agent is frozen or dead).
// The leader, which hears the same heartbeats, marks a silent node down
// after StopAfter and declares its allocations lost after DownAfter, when
// the node has certainly stopped them.
type liveness struct {
	mu sync.Mutex
	// heard is, on the leader, when each node's heartbeat last arrived.
	heard map[string]time.Time
	// lastAck is when this node's lease was last renewed.
	lastAck time.Time
	fenced  bool
}

// newLiveness starts fenced: until its first heartbeat is answered, a node
// has no valid lease (the one on disk may be a stale one from before a
// restart) and starts no job.
func newLiveness() *liveness {
	return &liveness{heard: map[string]time.Time{}, lastAck: time.Now(), fenced: true}
}

// heardFrom records a heartbeat that reached the leader.
func (l *liveness) heardFrom(nodeID string, at time.Time) {
	l.mu.Lock()
	l.heard[nodeID] = at
	l.mu.Unlock()
}

// silence is how long the leader has not heard from a node. A node the
// leader never heard from counts from since, the start of its leadership.
func (l *liveness) silence(nodeID string, now, since time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	t, ok := l.heard[nodeID]
	if !ok || t.Before(since) {
		t = since
	}
	return now.Sub(t)
}

// heardWithin reports whether the leader heard from a node in the last d.
func (l *liveness) heardWithin(nodeID string, d time.Duration, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	t, ok := l.heard[nodeID]
	return ok && now.Sub(t) <= d
}

// heartbeatLoop renews this node's lease and fences the node when it
// cannot.
func (a *Agent) heartbeatLoop() {
	tick := time.NewTicker(a.cfg.HeartbeatInterval)
	defer tick.Stop()
	for first := true; ; first = false {
		if !first {
			select {
			case <-a.ctx.Done():
				return
			case <-tick.C:
			}
		}
		sent := time.Now()
		err := a.heartbeat()
		if err == nil {
			a.renewLease(sent)
		}
		a.live.mu.Lock()
		unfenced := false
		if err == nil {
			a.live.lastAck = sent
			unfenced, a.live.fenced = a.live.fenced, false
		}
		silent := time.Since(a.live.lastAck)
		fence := err != nil && !a.live.fenced && silent > a.cfg.StopAfter
		if fence {
			a.live.fenced = true
		}
		a.live.mu.Unlock()
		if unfenced {
			a.logger.Info("in contact with the leader; the node lease is valid")
			a.kickLocal() // start what waited for the lease
		}
		if fence {
			a.logger.Warn("lost contact with the leader; local jobs are being stopped by their lease",
				"silent", silent.Round(time.Millisecond), "jobs", len(a.runner.Tracked()), "error", err)
		}
	}
}

// renewLease extends the lease the supervisors check to StopAfter past the
// moment the renewed heartbeat was sent.
func (a *Agent) renewLease(sent time.Time) {
	servers, err := a.raft.Servers()
	if err != nil {
		servers = nil // unknown: let the lease expire, the safe side
	}
	if err := a.runner.RenewLease(leaseUntil(sent, a.cfg.StopAfter, servers, a.nodeID)); err != nil {
		a.logger.Error("renew the node lease", "error", err)
	}
}

// leaseUntil is when a lease renewed at sent runs out: StopAfter later, or
// never (zero) when this node is the only server of its Raft configuration,
// since nobody else could run its jobs. It asks Raft's configuration, not
// the FSM: Raft knows every server the moment it starts, while a restarted
// node's FSM may not have replayed the log yet, and a node that took
// itself for alone would write a lease that never runs out and keep its
// jobs through a partition that got them replaced elsewhere.
func leaseUntil(sent time.Time, stopAfter time.Duration, servers []cluster.Server, self string) time.Time {
	if soleServer(servers, self) {
		return time.Time{}
	}
	return sent.Add(stopAfter)
}

// alone reports whether this node is the only server of its Raft
// configuration; one that cannot be read counts as not alone.
func (a *Agent) alone() bool {
	servers, err := a.raft.Servers()
	return err == nil && soleServer(servers, a.nodeID)
}

// soleServer reports whether self is the only server of a Raft
// configuration.
func soleServer(servers []cluster.Server, self string) bool {
	return len(servers) == 1 && servers[0].ID == self
}

// heartbeat renews the lease once: locally on the leader, else by asking it.
func (a *Agent) heartbeat() error {
	ctx, cancel := context.WithTimeout(a.ctx, a.cfg.StopAfter/2)
	defer cancel()
	if a.raft.IsLeader() {
		a.live.heardFrom(a.nodeID, time.Now())
		return nil
	}
	_, addr, self, err := a.leader(ctx)
	if err != nil {
		return err
	}
	if self {
		return nil
	}
	c, err := a.peerClient(addr)
	if err != nil {
		return err
	}
	_, err = c.Heartbeat(ctx, a.nodeID)
	return err
}

// isFenced reports whether this node has stopped its jobs for want of a
// leader; it starts none until contact is back.
func (a *Agent) isFenced() bool {
	a.live.mu.Lock()
	defer a.live.mu.Unlock()
	return a.live.fenced
}

// monitorNodes runs on the leader: it marks silent nodes down, declares the
// allocations of nodes silent past DownAfter lost, and marks nodes ready
// again when their heartbeats resume.
func (a *Agent) monitorNodes(stop <-chan struct{}, since time.Time) {
	tick := time.NewTicker(a.cfg.HeartbeatInterval)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		a.checkNodes(since)
	}
}

func (a *Agent) checkNodes(since time.Time) {
	nowT := time.Now()
	live := a.fsm.LiveAllocCounts()
	for _, n := range a.fsm.Nodes() {
		if n.ID == a.nodeID {
			continue
		}
		silent := a.live.silence(n.ID, nowT, since)
		var err error
		switch {
		case n.Status == structs.NodeReady && silent > a.cfg.StopAfter:
			err = a.setNodeStatus(n, structs.NodeDown, fmt.Sprintf("no heartbeat for %s", silent.Round(100*time.Millisecond)))
		case n.Status == structs.NodeDown && silent < a.cfg.StopAfter:
			err = a.setNodeStatus(n, structs.NodeReady, "heartbeats resumed")
		case (n.Status == structs.NodeDown || n.Status == structs.NodeLeft) && silent > a.cfg.DownAfter && live[n.ID] > 0:
			a.logger.Warn("node silent past down-after; its allocations are lost", "node", n.Name, "allocations", live[n.ID])
			_, err = a.apply(structs.NodeAllocsLostType, structs.NodeAllocsLostRequest{
				NodeID: n.ID,
				Reason: fmt.Sprintf("lost: node %s stopped answering (no heartbeat for %s)", n.Name, silent.Round(100*time.Millisecond)),
				At:     now(),
			})
		}
		if err != nil {
			a.logger.Warn("node status change failed", "node", n.Name, "error", err)
		}
	}
}

func (a *Agent) setNodeStatus(n *structs.Node, st structs.NodeStatus, reason string) error {
	a.logger.Info("node status", "node", n.Name, "status", st, "reason", reason)
	_, err := a.apply(structs.NodeStatusType, structs.NodeStatusRequest{NodeID: n.ID, Status: st, Reason: reason, At: now()})
	return err
}
