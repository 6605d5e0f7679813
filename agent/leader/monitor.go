package leader

import (
	"fmt"
	"time"

	"github.com/skein-dev/skein/structs"
)

// HeardFrom records a node's heartbeat reaching this node. Only the
// leader's record counts; a node that stops leading forgets nothing it
// needs, because a new leader counts silence from its own start.
//
// A node heard from again after being silent in the scheduler's eyes
// (silentNodes) makes the leader plan again: its return changes no state,
// so nothing else would wake the scheduler for work that waits for it.
func (l *Leader) HeardFrom(nodeID string, at time.Time) {
	l.mu.Lock()
	last, ok := l.heard[nodeID]
	l.heard[nodeID] = at
	l.mu.Unlock()
	if !ok || at.Sub(last) > l.quiet() {
		l.Kick()
	}
}

// quiet is how long the leader may not hear from a node before it takes
// it for silent (silentNodes): silentAfter of a server's heartbeat
// intervals, or two of a worker's when that is longer, so that a worker
// is not taken for silent between two of its renewals.
func (l *Leader) quiet() time.Duration {
	return max(silentAfter*l.cfg.HeartbeatInterval, 2*l.cfg.WorkerHeartbeatInterval)
}

// silence is how long the leader has not heard from a node. A node the
// leader never heard from counts from since, the start of its leadership.
func (l *Leader) silence(nodeID string, now, since time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	t, ok := l.heard[nodeID]
	if !ok || t.Before(since) {
		t = since
	}
	return now.Sub(t)
}

// heardWithin reports whether the leader heard from a node in the last d.
func (l *Leader) heardWithin(nodeID string, d time.Duration, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	t, ok := l.heard[nodeID]
	return ok && now.Sub(t) <= d
}

// monitorNodes marks silent nodes down, declares the allocations of nodes
// silent past DownAfter lost, and marks nodes ready again when their
// heartbeats resume, until stop closes.
func (l *Leader) monitorNodes(stop <-chan struct{}, since time.Time) {
	tick := time.NewTicker(l.cfg.HeartbeatInterval)
	defer tick.Stop()
	last := time.Now()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		now := time.Now()
		since, last = l.afterStall(since, last, now), now
		l.checkNodes(since)
	}
}

// stallAfter, in heartbeat intervals, is how late the node monitor's
// check may come before the leader counts itself held up.
const stallAfter = 2

// afterStall is when the node monitor counts silence from, now that it
// checks at now and last checked at last: since, or now when the check
// comes more than stallAfter intervals late. A leader held up that long
// (short of CPU, or its process paused) was as late to take the nodes'
// heartbeats as to look at them, and the silence it would see is its
// own: counted afresh, as by a new leader, it marks no node down for it
// and declares no allocation lost. A node that did die meanwhile is
// found StopAfter later; nothing runs twice, since only the leader's
// declarations wait.
func (l *Leader) afterStall(since, last, now time.Time) time.Time {
	if held := now.Sub(last); held > stallAfter*l.cfg.HeartbeatInterval {
		l.log.Warn("the node monitor was held up; the nodes' silence is counted afresh", "held", held.Round(time.Millisecond))
		return later(since, now)
	}
	return since
}

// later is the later of a and b.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func (l *Leader) checkNodes(since time.Time) {
	nowT := time.Now()
	for _, n := range l.fsm.NodesLiveness() {
		if n.ID == l.cfg.NodeID {
			continue
		}
		silent := l.silence(n.ID, nowT, since)
		var err error
		switch {
		case n.Status == structs.NodeReady && silent > l.cfg.StopAfter:
			err = l.setNodeStatus(n.ID, n.Name, structs.NodeDown, fmt.Sprintf("no heartbeat for %s", silent.Round(100*time.Millisecond)))
		case n.Status == structs.NodeDown && silent < l.cfg.StopAfter && l.heardWithin(n.ID, l.cfg.StopAfter, nowT):
			// Only a heartbeat this leader got brings a node back: a
			// new leader's grace (silence counted from since) is for
			// the nodes that were ready, not for one already down.
			err = l.setNodeStatus(n.ID, n.Name, structs.NodeReady, "heartbeats resumed")
		case (n.Status == structs.NodeDown || n.Status == structs.NodeLeft) && n.LiveAllocs == 0 && l.cfg.NodeGC > 0 &&
			l.cfg.Forget != nil && !n.StatusAt.IsZero() && nowT.Sub(n.StatusAt) > l.cfg.NodeGC && silent > l.cfg.NodeGC:
			l.log.Info("forgetting a node down or left past --node-gc", "node", n.Name, "status", n.Status, "since", n.StatusAt)
			err = l.cfg.Forget(n.ID, fmt.Sprintf("%s for more than --node-gc %s", n.Status, l.cfg.NodeGC))
		case (n.Status == structs.NodeDown || n.Status == structs.NodeLeft) && silent > l.cfg.DownAfter && n.LiveAllocs > 0:
			l.log.Warn("node silent past down-after; its allocations are lost", "node", n.Name, "allocations", n.LiveAllocs)
			_, err = l.cfg.Apply(structs.NodeAllocsLostType, structs.NodeAllocsLostRequest{
				NodeID: n.ID,
				Reason: fmt.Sprintf("lost: node %s stopped answering (no heartbeat for %s)", n.Name, silent.Round(100*time.Millisecond)),
				At:     now(),
			})
		}
		if err != nil {
			l.log.Warn("node status change failed", "node", n.Name, "error", err)
		}
	}
}

func (l *Leader) setNodeStatus(id, name string, st structs.NodeStatus, reason string) error {
	l.log.Info("node status", "node", name, "status", st, "reason", reason)
	_, err := l.cfg.Apply(structs.NodeStatusType, structs.NodeStatusRequest{NodeID: id, Status: st, Reason: reason, At: now()})
	return err
}
