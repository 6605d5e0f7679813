package cluster

import (
	"sync"

	"github.com/hashicorp/raft"
)

// Reasons a node is kept out of raft or from a vote, as logged.
const (
	refusedNotAdmitted = "not admitted"
	refusedRevoked     = "revoked"
	refusedCannotVote  = "not ready to vote"
)

// admitted reports whether the leader may add id to raft or promote it:
// Config.Admitted says yes and Config.Revoked does not.
func (c *Cluster) admitted(id string) bool {
	return !c.revoked(id) && (c.cfg.Admitted == nil || c.cfg.Admitted(id))
}

// revoked reports whether id must leave raft (Config.Revoked).
func (c *Cluster) revoked(id string) bool {
	return c.cfg.Revoked != nil && c.cfg.Revoked(id)
}

// refusal is why id may not join raft, or "" if it may.
func (c *Cluster) refusal(id string) string {
	switch {
	case c.revoked(id):
		return refusedRevoked
	case !c.admitted(id):
		return refusedNotAdmitted
	}
	return ""
}

// canVote reports whether a member's gossip metadata says it is ready to
// vote.
func (c *Cluster) canVote(id string) bool {
	m, ok := c.member(id)
	return ok && m.header.canVote
}

// onceLog remembers what it was told about each member in the last round,
// so a refusal that lasts for many reconcile rounds is logged once: note
// reports whether a (member, reason) pair is new since the last round,
// and endRound forgets pairs not noted again, so a refusal that ended and
// comes back is logged again.
type onceLog struct {
	mu   sync.Mutex
	last map[string]string
	cur  map[string]string
}

func (l *onceLog) note(id, reason string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cur == nil {
		l.cur = map[string]string{}
	}
	l.cur[id] = reason
	return l.last[id] != reason
}

func (l *onceLog) endRound() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.last, l.cur = l.cur, nil
}

// removeRevoked takes revoked servers out of the raft configuration. A
// revoked leader cannot remove itself without leaving the cluster
// leaderless for an election, so it hands leadership to another voter
// and the next leader removes it; a revoked sole voter stays (and says
// so). It reports whether this node handed leadership over.
func (c *Cluster) removeRevoked(conf raft.Configuration) bool {
	self := raft.ServerID(c.cfg.NodeID)
	otherVoters := 0
	for _, s := range conf.Servers {
		if s.Suffrage == raft.Voter && s.ID != self {
			otherVoters++
		}
	}
	for _, s := range conf.Servers {
		id := string(s.ID)
		if !c.revoked(id) {
			continue
		}
		first := c.refused.note(id, refusedRevoked)
		if s.ID != self {
			if first {
				c.logger.Warn("removing revoked server from raft", "id", id)
			}
			if err := c.RemoveServer(id); err != nil {
				c.logger.Warn("remove revoked server from raft", "id", id, "error", err)
			}
			continue
		}
		if otherVoters == 0 {
			if first {
				c.logger.Error("this node is revoked but is the only voter; it keeps leading", "id", id)
			}
			continue
		}
		if first {
			c.logger.Warn("this node is revoked; handing leadership over", "id", id)
		}
		if err := c.LeadershipTransfer(); err != nil {
			c.logger.Debug("hand leadership over", "error", err)
			continue
		}
		return true
	}
	return false
}
