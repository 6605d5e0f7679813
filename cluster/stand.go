package cluster

import (
	"errors"
	"io"
	"net"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/raft"
)

// Standing for election at once when the leader's process is gone
// (DESIGN.md, "Timing"). raft elects a new leader only once a follower has
// not heard from the old one for the heartbeat timeout, or a leader has
// handed over. A leader whose process crashed on a machine that is still
// up says so at once: the connections it held to its followers close, and
// its Raft port refuses new ones.
//
// A follower voter that sees a connection end dials the leader's Raft
// address, and stands when the dial is refused (nothing listens there any
// more; a timeout or a cut link proves nothing). Any connection that ends
// prompts the check, not only one from the leader's address: a leader's
// connections need not come from the address it advertises (a host with
// several, or loopback), and on a follower the connections that end are
// few: the leader's, a candidate's. One check runs at a time, and none
// within a heartbeat interval of one that found the leader alive.
//
// The surviving voters, in the order of their IDs, stand one crashStagger
// apart, so that they do not split the vote: the first stands at once,
// and the next only if no leader came of it (its log may have been behind
// the other's). A voter stands with the message a leader sends the target
// of a handover: the voters grant their vote though they have not timed
// out their leader; they still refuse a candidate whose log is behind
// theirs.

// crashDial bounds the dial that tells a crashed leader from a live one,
// and crashDials is how many dials that connect it takes to call the
// leader alive.
const (
	crashDial  = time.Second
	crashDials = 3
)

// crashStagger is how long a surviving voter waits for the one before it
// in the order to be elected: half the heartbeat timeout, far more than
// the one before may take to see the crash (a few dials crashRecheck
// apart) and be elected, and still well before raft's own timeout.
func (c *Cluster) crashStagger() time.Duration { return c.cfg.Timing.HeartbeatTimeout / 2 }

// crashRecheck is the least time between two checks of the leader, and
// between two dials of one check: the leader's heartbeat interval, a
// tenth of the heartbeat timeout.
func (c *Cluster) crashRecheck() time.Duration { return c.cfg.Timing.HeartbeatTimeout / 10 }

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

// watchLeaderCrash runs until Shutdown, checking, when a connection
// ended, whether it was the leader's process that went away.
func (c *Cluster) watchLeaderCrash(ended <-chan struct{}) {
	var alive time.Time // when a check last found no crash (or no leader to check)
	for {
		select {
		case <-c.stopped:
			return
		case <-ended:
		}
		if time.Since(alive) < c.crashRecheck() {
			continue
		}
		if !c.standIfLeaderCrashed() {
			alive = time.Now()
		}
	}
}

// standIfLeaderCrashed stands this node for election when it is a
// follower voter and the leader's Raft port refuses connections. It
// reports whether it found the leader gone.
func (c *Cluster) standIfLeaderCrashed() (gone bool) {
	addr, leader := c.Leader()
	if leader == "" || c.raft.State() != raft.Follower {
		return false
	}
	// The term before the dials: another survivor may stand meanwhile.
	term := c.raft.CurrentTerm()
	servers, err := c.Servers()
	if err != nil {
		return false
	}
	rank, ok := survivorRank(servers, c.cfg.NodeID, leader)
	if !ok || !c.leaderRefuses(addr) {
		return false
	}
	c.logger.Warn("the leader's Raft port refuses connections: its process is gone; standing for election",
		"leader", leader, "addr", addr, "order", rank)
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
		c.stand()
		return true
	}
	return true
}

// survivorRank is self's place among the voters of servers other than
// leader, in the order of their IDs; ok is false when self is not one.
func survivorRank(servers []Server, self, leader string) (rank int, ok bool) {
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

// leaderRefuses reports whether a dial to the Raft address addr was
// refused: the host answered that nothing listens there. A dial that
// connects is tried again, up to crashDials times a crashRecheck apart: a
// process being killed closes its connections before its listener, and
// the first dial may reach the listener still open.
func (c *Cluster) leaderRefuses(addr string) bool {
	for i := range crashDials {
		if i > 0 {
			select {
			case <-c.stopped:
				return false
			case <-time.After(c.crashRecheck()):
			}
		}
		conn, err := c.stream.Dial(raft.ServerAddress(addr), crashDial)
		if err != nil {
			return errors.Is(err, syscall.ECONNREFUSED)
		}
		_ = conn.Close()
	}
	return false
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
