package cluster

import (
	"context"
	"errors"
	"io"
	"net"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/raft"
	autopilot "github.com/hashicorp/raft-autopilot"
)

// Standing for election before raft's timeout, when the leader is gone
// (DESIGN.md, "Timing"). raft elects a new leader only once a follower
// has not heard from the old one for the heartbeat timeout, or a leader
// has handed over. That timeout is long enough for a leader held off the
// CPU for a while to keep its place (overload is not failure), which is
// too long to wait for a leader that is gone. Two cases say so sooner:
//
//   - A leader whose process crashed on a machine that is still up: the
//     connections it held to its followers close, and its Raft port
//     refuses new ones. A follower voter that sees a connection end dials
//     the leader's Raft address, and stands when the dial is refused
//     (nothing listens there any more; a timeout or a cut link proves
//     nothing). Any connection that ends prompts the check, not only one
//     from the leader's address: a leader's connections need not come
//     from the address it advertises (a host with several, or loopback),
//     and on a follower the connections that end are few: the leader's, a
//     candidate's. One check runs at a time, and none within crashRecheck
//     of one that found the leader alive.
//   - A leader whose machine is gone or cut off, or that stepped down: a
//     follower voter that has not heard from it for silentAfter stands
//     when enough other voters have not either, by their own account, to
//     make a quorum with it (othersLost: a link failed between this node
//     and the leader alone is this node's trouble, and the others would
//     refuse to elect while they hear the leader), and either the leader
//     answers that it no longer leads (its lease ran out while it was
//     held up) or its Raft port takes no connection within silentAfter.
//     A port that takes one is on a machine that is up, whose kernel
//     answers for a process that may only be slow or frozen: raft's own
//     timeout decides for it.
//
// The surviving voters, in the order of their IDs, stand one crashStagger
// apart, so that they do not split the vote: the first stands at once,
// and the next only if no leader came of it (its log may have been behind
// the other's). A voter stands with the message a leader sends the target
// of a handover: the voters grant their vote though they have not timed
// out their leader; they still refuse a candidate whose log is behind
// theirs. A leader cut off that way may go on taking itself for the
// leader until its lease runs out (StaleLeaderBound).

// crashDials is how many dials that connect it takes to call a leader
// whose connection ended alive.
const crashDials = 3

// silentAfter is how long a follower voter goes without hearing from the
// leader before it asks whether the leader's machine is gone, and how
// long it waits for the leader's port to take a connection: three tenths
// of the heartbeat timeout, 300 ms by default.
func (c *Cluster) silentAfter() time.Duration { return c.cfg.Timing.HeartbeatTimeout * 3 / 10 }

// crashStagger is how long a surviving voter waits for the one before it
// in the order to be elected: silentAfter, far more than the one before
// may take to see the loss (a few dials crashRecheck apart, or one look
// of the silent check, a third of silentAfter apart, and its questions)
// and be elected.
func (c *Cluster) crashStagger() time.Duration { return c.silentAfter() }

// crashRecheck is the least time between two checks of the leader after
// a connection ended, and between two dials of one check: a tenth of
// silentAfter.
func (c *Cluster) crashRecheck() time.Duration { return c.silentAfter() / 10 }

// closeWatch is a connection raft accepted, which reports (once) to
// ended that its peer closed or reset it.
type closeWatch struct {
	net.Conn
	ended chan<- struct{}
	once  sync.Once
}

func (c *closeWatch) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if err != nil && (errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)) {
		c.once.Do(func() {
			select {
			case c.ended <- struct{}{}:
			default: // one is being checked already; hints are redundant
			}
		})
	}
	return n, err
}

// watchLeader runs until Shutdown: when a connection ended, it checks
// whether the leader's process went away; every third of silentAfter,
// whether its machine did.
func (c *Cluster) watchLeader(ended <-chan struct{}) {
	tick := time.NewTicker(c.silentAfter() / 3)
	defer tick.Stop()
	// alive is when a crash check last found no crash (or no leader to
	// check); up when the leader's port last took a connection while it
	// was silent, which is not asked again for silentAfter.
	var alive, up time.Time
	lost := func(id, addr string) bool {
		if time.Since(up) < c.silentAfter() {
			return false
		}
		gone, reached := c.leaderLost(id, addr)
		if reached {
			up = time.Now()
		}
		return gone
	}
	for {
		select {
		case <-c.stopped:
			return
		case <-ended:
			if time.Since(alive) < c.crashRecheck() {
				continue
			}
			if !c.standIfLeaderGone(c.leaderCrashed, "the leader's Raft port refuses connections: its process is gone") {
				alive = time.Now()
			}
		case <-tick.C:
			if time.Since(c.raft.LastContact()) < c.silentAfter() {
				continue // heard: nothing to ask Raft's configuration for
			}
			c.standIfLeaderGone(lost, "the leader is silent, to this node and to a quorum with it, and its Raft port takes no connection: its machine is gone or cut off")
		}
	}
}

// standIfLeaderGone stands this node for election when it is a follower
// voter and gone says the leader (its ID and Raft address) is gone. It
// reports whether it found the leader gone.
func (c *Cluster) standIfLeaderGone(gone func(id, addr string) bool, why string) bool {
	addr, leader := c.Leader()
	if leader == "" || c.raft.State() != raft.Follower {
		return false
	}
	// The term before the checks: another survivor may stand meanwhile.
	term := c.raft.CurrentTerm()
	servers, err := c.Servers()
	if err != nil {
		return false
	}
	rank, ok := survivorRank(servers, c.cfg.NodeID, leader)
	if !ok || !gone(leader, addr) {
		return false
	}
	found := time.Now()
	c.logger.Warn(why+"; standing for election", "leader", leader, "addr", addr, "order", rank)
	stagger := c.crashStagger()
	wait := time.Duration(rank) * stagger
	// Each round an election of another survivor was seen under way (the
	// term moved) gives it one more stagger; there are no more such
	// elections than survivors before this one.
	for range len(servers) {
		select {
		case <-c.stopped:
			return true
		case <-time.After(wait):
		}
		if _, now := c.Leader(); (now != "" && now != leader) || c.raft.State() != raft.Follower {
			return true // elected, or standing already
		}
		if t := c.raft.CurrentTerm(); t != term {
			term, wait = t, stagger
			continue
		}
		if c.raft.LastContact().After(found) {
			return true // the leader was heard again meanwhile
		}
		c.stand()
		return true
	}
	return true
}

// survivorRank is self's place among the voters of servers other than
// leader, in the order of their IDs; ok is false when self is not one.
func survivorRank(servers []RaftServer, self, leader string) (rank int, ok bool) {
	var ids []string
	for _, s := range servers {
		if s.Voter && s.ID != leader {
			ids = append(ids, s.ID)
		}
	}
	slices.Sort(ids)
	rank = slices.Index(ids, self)
	return rank, rank >= 0
}

// leaderCrashed reports whether a dial to the leader's Raft address was
// refused: the host answered that nothing listens there. A dial that
// connects is tried again, up to crashDials times a crashRecheck apart: a
// process being killed closes its connections before its listener, and
// the first dial may reach the listener still open.
func (c *Cluster) leaderCrashed(_, addr string) bool {
	for i := range crashDials {
		if i > 0 {
			select {
			case <-c.stopped:
				return false
			case <-time.After(c.crashRecheck()):
			}
		}
		if err := c.stream.reach(addr, time.Second); err != nil {
			return errors.Is(err, syscall.ECONNREFUSED)
		}
	}
	return false
}

// leaderLost reports whether the leader is lost: silent for silentAfter,
// to this node and to enough others to make a quorum (othersLost), and
// either it answers that it no longer leads (steppedDown) or its Raft
// port takes no connection within silentAfter; up is true when the port
// took one.
func (c *Cluster) leaderLost(id, addr string) (lost, up bool) {
	if time.Since(c.raft.LastContact()) < c.silentAfter() || !c.othersLost(id) {
		return false, false
	}
	if c.steppedDown(id) {
		return true, false
	}
	if c.stream.reach(addr, c.silentAfter()) == nil {
		return false, true
	}
	return true, false
}

// othersLost reports whether enough voters other than this one and the
// leader have not heard from a leader either, by their own account (the
// stats exchange autopilot uses, answered within silentAfter), to make a
// quorum of the voters with this one: a link failed between this node and
// the leader alone is this node's trouble, and the others would refuse to
// elect while they hear the leader. Another voter counts when it has not
// heard for half of silentAfter: it heard the leader's last heartbeat at
// most a heartbeat interval after this node did, and asking it again on
// the next look would put this node a look behind the others in standing.
// False without gossip, which carries the exchange.
func (c *Cluster) othersLost(leader string) bool {
	servers, err := c.Servers()
	if c.gossip == nil || err != nil {
		return false
	}
	voters := 0
	ask := map[raft.ServerID]*autopilot.Server{}
	for _, s := range servers {
		if !s.Voter {
			continue
		}
		voters++
		if s.ID != leader && s.ID != c.cfg.NodeID {
			ask[raft.ServerID(s.ID)] = &autopilot.Server{ID: raft.ServerID(s.ID)}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.silentAfter())
	defer cancel()
	lost := 1 // this node
	for _, st := range c.fetchStats(ctx, ask) {
		if st.LastContact < 0 || st.LastContact >= c.silentAfter()/2 {
			lost++
		}
	}
	return lost > voters/2
}

// steppedDown reports whether the leader answers, within a third of
// silentAfter, that it no longer leads: one whose lease ran out while it
// was held up steps down, and its followers would wait out raft's timeout
// for it, its port answering all along. A leader that does not answer is
// left to the port check.
func (c *Cluster) steppedDown(leader string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), c.silentAfter()/3)
	defer cancel()
	id := raft.ServerID(leader)
	st, ok := c.fetchStats(ctx, map[raft.ServerID]*autopilot.Server{id: {ID: id}})[id]
	return ok && st.LastContact != 0
}

// stand asks this node's raft to stand for election now, with the
// message a leader sends the target of a leadership transfer: the voters
// grant it their vote though they have not timed out their leader yet.
func (c *Cluster) stand() {
	self := raft.ServerAddress(c.Addr())
	req := &raft.TimeoutNowRequest{RPCHeader: raft.RPCHeader{
		ProtocolVersion: raft.ProtocolVersionMax,
		ID:              []byte(c.cfg.NodeID),
		Addr:            []byte(self),
	}}
	if err := c.transport.TimeoutNow(raft.ServerID(c.cfg.NodeID), self, req, &raft.TimeoutNowResponse{}); err != nil {
		c.logger.Warn("stand for election", "error", err)
	}
}
