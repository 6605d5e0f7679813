package node

import (
	"bytes"
	"context"
	"time"

	"github.com/skein-dev/skein/cluster"
	"github.com/skein-dev/skein/fsm"
)

// The node's loops read its view (fsm/DESIGN.md, "Node views"), an FSM of
// its own that viewLoop keeps current, never the cluster's state
// directly: on a server from the local copy of the state, on a node
// outside the Raft configuration by watching a server's. Either way the
// loops wake when what this node acts on changed, not on every entry.
const (
	// roleCheck is how often the view loop asks Raft whether this node is
	// a server, which says where its view comes from.
	roleCheck = time.Second
	// viewWait is how long one watch of a server waits for a change;
	// below the server's bound (server.MaxViewWait).
	viewWait = 20 * time.Second
	// viewRetry is the pause after a watch that failed, before a server
	// is asked again.
	viewRetry = 250 * time.Millisecond
)

// View is the node's view of the state: what it runs and what it needs
// to run it (a server's or a worker's alike).
func (n *Node) View() *fsm.FSM { return n.view }

// viewLoop keeps the node's view, whose hash is hash, current until the
// node stops.
func (n *Node) viewLoop(hash string) {
	for n.ctx.Err() == nil {
		server := n.isServer()
		if n.server.Swap(server) != server {
			n.refreshMeta() // gossip says whether this node is a server
		}
		if server {
			hash = n.followLocal(hash)
		} else {
			hash = n.watchRemote(hash)
		}
	}
}

// isServer reports whether this node is in the Raft configuration, so
// that its FSM holds the cluster's state.
func (n *Node) isServer() bool {
	servers, err := n.cfg.Raft.Servers()
	return cluster.HoldsState(servers, err, n.cfg.NodeID)
}

// followLocal loads this node's view from the local state on every change
// that moves its hash, until the node stops being a server (checked every
// roleCheck) or stops; it returns the hash of the view held.
func (n *Node) followLocal(hash string) string {
	check := time.NewTicker(roleCheck)
	defer check.Stop()
	var stamp uint64
	for first := true; ; first = false {
		_, changed := n.cfg.FSM.Watch()
		// The stamp is cheap; the view is read only when it moved.
		if now := n.cfg.FSM.NodeViewStamp(n.cfg.NodeID); first || now != stamp {
			stamp = now
			if v, err := n.cfg.FSM.NodeView(n.cfg.NodeID); err == nil {
				hash = n.loadView(v, hash)
			} else {
				n.log.Error("read this node's view", "error", err)
			}
		}
		select {
		case <-n.ctx.Done():
			return hash
		case <-changed:
		case <-check.C:
			if !n.isServer() {
				return hash
			}
		}
	}
}

// watchRemote asks a server for this node's view once, waiting up to
// viewWait for it to change, and loads what it sends; it returns the hash
// of the view held.
func (n *Node) watchRemote(hash string) string {
	c, err := n.cfg.Peers.ServerClient()
	if err == nil {
		ctx, cancel := context.WithTimeout(n.ctx, viewWait+n.cfg.StopAfter)
		v, werr := c.NodeView(ctx, n.cfg.NodeID, hash, n.view.Index(), n.cfg.Peers.LeaderHint(), viewWait)
		cancel()
		if werr == nil {
			n.cfg.Peers.SetLeaderHint(v.Leader)
			if v.Data == nil {
				return hash
			}
			return n.loadView(fsm.NodeView{Index: v.Index, Hash: v.Hash, Data: v.Data}, hash)
		}
		err = werr
	}
	if n.ctx.Err() == nil {
		n.log.Debug("watch this node's view", "error", err)
		select {
		case <-n.ctx.Done():
		case <-time.After(viewRetry):
		}
	}
	return hash
}

// loadView loads v into the node's view unless it has the hash of the one
// held; it returns the hash of the view held after.
func (n *Node) loadView(v fsm.NodeView, held string) string {
	if v.Hash == held {
		return held
	}
	if err := n.view.LoadView(bytes.NewReader(v.Data)); err != nil {
		n.log.Error("load this node's view", "index", v.Index, "error", err)
		return held
	}
	return v.Hash
}
