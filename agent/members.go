package agent

import (
	"fmt"
	"slices"
	"time"

	"github.com/skein-dev/skein/agent/leader"
	"github.com/skein-dev/skein/agent/peer"
	"github.com/skein-dev/skein/agent/secure"
	"github.com/skein-dev/skein/cluster"
	"github.com/skein-dev/skein/fsm"
	"github.com/skein-dev/skein/structs"
)

// joinLoop joins the cluster through the --join addresses, retrying with
// backoff until one of them answers.
func (a *Agent) joinLoop() {
	backoff := 250 * time.Millisecond
	for {
		n, err := a.raft.Join(a.joinAddrs())
		if n > 0 {
			a.logger.Info("joined the cluster", "through", n)
			return
		}
		a.logger.Warn("cannot join yet; retrying", "addrs", a.joinAddrs(), "error", err, "retry_in", backoff)
		select {
		case <-a.ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 10*time.Second)
	}
}

// rejoinLoop finds the peers of a node restarted without --join (the
// node that founded the cluster, say): Raft knows its servers and
// replicates the registered nodes, whose gossip addresses it then joins,
// retrying every second. It ends once gossip has another member.
func (a *Agent) rejoinLoop() {
	for {
		_, changed := a.fsm.Watch()
		if len(a.raft.Members()) > 1 {
			return
		}
		var addrs []string
		for _, n := range a.fsm.Nodes() {
			if n.ID != a.nodeID && n.Addresses.Gossip != "" {
				addrs = append(addrs, n.Addresses.Gossip)
			}
		}
		if len(addrs) > 0 {
			if n, _ := a.raft.Join(addrs); n > 0 {
				a.logger.Info("rejoined the cluster's gossip through the registered nodes", "through", n)
				return
			}
		}
		select {
		case <-a.ctx.Done():
			return
		case <-changed:
		case <-time.After(time.Second):
		}
	}
}

// joinAddrs are the gossip addresses to join: the --join hosts, and in a
// secure cluster the members named by the node that admitted this one.
func (a *Agent) joinAddrs() []string {
	if a.secure == nil {
		return a.cfg.Join
	}
	return append(secure.GossipJoins(a.cfg.Join), a.secure.GossipAddrs()...)
}

// memberLoop drains gossip events; the leader records graceful leaves and
// plans again when a member is back or its metadata returned a GPU to
// service. Liveness itself is judged by heartbeats (agent/node/lease.go,
// agent/leader/monitor.go).
func (a *Agent) memberLoop() {
	masks := map[string]uint64{}
	for {
		select {
		case <-a.ctx.Done():
			return
		case ev := <-a.raft.MemberEvents():
			if ev.Type == cluster.EventUpdate && !maskCleared(masks, ev.Member) {
				continue
			}
			if ev.Type == cluster.EventLeft {
				delete(masks, ev.Member.ID)
			}
			a.leader.MemberEvent(ev)
		}
	}
}

// maskCleared records the unhealthy-GPU mask member m announces and
// reports whether it clears a GPU the last one masked: the only change
// of metadata that may let waiting work be placed. Every other one (the
// free-GPU count moving with each job, a GPU masked ahead of its health
// report) needs no pass of its own; a GPU the node reports healthy again
// commits that anyway, so an event gossip dropped delays nothing for long.
func maskCleared(masks map[string]uint64, m cluster.Member) bool {
	mask := peer.UnhealthyMask(m)
	was := masks[m.ID]
	if mask == 0 {
		delete(masks, m.ID)
	} else {
		masks[m.ID] = mask
	}
	return was&^mask != 0
}

// metaLoop broadcasts this node's gossip metadata after it changed. A
// change of the leader's own node (its unhealthy GPUs) reaches its
// scheduler here too: gossip does not tell a node about itself.
func (a *Agent) metaLoop() {
	for {
		select {
		case <-a.ctx.Done():
			return
		case <-a.announce.Changed():
		}
		a.leader.Kick()
		if err := a.raft.UpdateMeta(); err != nil {
			a.logger.Debug("broadcast gossip metadata", "error", err)
		}
	}
}

// gossip is what the members' gossip says for the leader: who failed (a
// revoked member, which gossip refuses, too), and the unhealthy GPU masks.
func (a *Agent) gossip() leader.Gossip {
	g := leader.Gossip{Failed: map[string]bool{}, Unhealthy: map[string]uint64{}}
	for _, m := range a.raft.Members() {
		if m.Status == cluster.StatusFailed || m.Status == cluster.StatusRevoked {
			g.Failed[m.ID] = true
		}
		if mask := peer.UnhealthyMask(m); mask != 0 {
			g.Unhealthy[m.ID] = mask
		}
	}
	return g
}

// forgetNode removes a node down or left from Raft, where it is a server,
// then from the state. This node must lead.
func (a *Agent) forgetNode(id, reason string) error {
	n, ok := a.fsm.Node(id)
	switch {
	case !ok:
		return fmt.Errorf("node %s: %w", structs.ShortID(id), fsm.ErrNodeNotFound)
	case n.Status != structs.NodeDown && n.Status != structs.NodeLeft:
		return fmt.Errorf("node %s: %w: it is %s; only a node down or left is removed", n.Name, fsm.ErrInvalidRequest, n.Status)
	case len(a.fsm.NodeLiveAllocs(id)) > 0:
		return fmt.Errorf("node %s: %w: its allocations are not declared lost yet: wait until it has been down for the cluster's down-after", n.Name, fsm.ErrInvalidRequest)
	}
	servers, err := a.raft.Servers()
	if err != nil {
		return err
	}
	if slices.ContainsFunc(servers, func(s cluster.RaftServer) bool { return s.ID == id }) {
		if err := a.raft.RemoveServer(id); err != nil {
			return err
		}
	}
	_, err = a.apply(structs.NodeRemoveType, structs.NodeRemoveRequest{NodeID: id, Reason: reason, At: time.Now().UTC()})
	return err
}
