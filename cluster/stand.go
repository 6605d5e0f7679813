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
// its Raft port refuses new ones. A voter that sees a connection from the
// leader's host end dials the leader's Raft address, and stands when the
// dial is refused (nothing listens there any more; a timeout or a cut link
// proves nothing). The surviving voters, in the order of their IDs, stand
// one crashStagger apart, so that they do not split the vote: the first
// stands at once, and the next only if no leader came of it (its log may
// have been behind the other's). A voter stands with the message a leader
// sends the target of a handover: the voters grant their vote though they
// have not timed out their leader; they still refuse a candidate whose log
// is behind theirs.

// crashDial bounds the dial that tells a crashed leader from a live one.
const crashDial = time.Second

// crashStagger is how long a surviving voter waits for the one before it
// in the order to be elected: the leader's heartbeat interval, a tenth of
// the heartbeat timeout.
func crashStagger(heartbeatTimeout time.Duration) time.Duration {
	return heartbeatTimeout / 10
}

// closeWatch is a connection raft accepted, which reports (once) to
// ended that its peer closed or reset it.
type closeWatch struct {
	net.Conn
	ended chan<- net.Addr
	once  sync.Once
}

func (c *closeWatch) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if err != nil && (errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)) {
		c.once.Do(func() {
			select {
			case c.ended <- c.RemoteAddr():
			default: // one is being checked already; hints are redundant
			}
		})
	}
	return n, err
}

// watchLeaderCrash runs until Shutdown, checking each connection that
// ended for whether it was the leader's process that went away.
func (c *Cluster) watchLeaderCrash(ended <-chan net.Addr) {
	for {
		select {
		case <-c.stopped:
			return
		case from := <-ended:
			c.standIfLeaderCrashed(from)
		}
	}
}

// standIfLeaderCrashed stands this node for election when it is a
// follower voter, from (the peer of a connection that ended) is on the
// leader's host, and the leader's Raft port refuses connections.
func (c *Cluster) standIfLeaderCrashed(from net.Addr) {
	addr, leader := c.Leader()
	if leader == "" || c.raft.State() != raft.Follower || !sameHost(from, addr) {
		return
	}
	servers, err := c.Servers()
	if err != nil {
		return
	}
	rank, ok := survivorRank(servers, c.cfg.NodeID, leader)
	if !ok || !c.leaderRefuses(addr) {
		return
	}
	c.logger.Warn("the leader's Raft port refuses connections: its process is gone; standing for election",
		"leader", leader, "addr", addr, "order", rank)
	stagger := crashStagger(c.cfg.Timing.HeartbeatTimeout)
	wait := time.Duration(rank) * stagger
	term := c.raft.CurrentTerm()
	// Each round an election of another survivor was seen under way (the
	// term moved) gives it one more stagger; there are no more such
	// elections than survivors before this one.
	for range len(servers) {
		select {
		case <-c.stopped:
			return
		case <-time.After(wait):
		}
		if _, now := c.Leader(); (now != "" && now != leader) || c.raft.State() != raft.Follower {
			return // elected, or standing already
		}
		if t := c.raft.CurrentTerm(); t != term {
			term, wait = t, stagger
			continue
		}
		c.stand()
		return
	}
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

// leaderRefuses reports whether a dial to the Raft address addr was refused:
// the host answered that nothing listens there.
func (c *Cluster) leaderRefuses(addr string) bool {
	conn, err := c.stream.Dial(raft.ServerAddress(addr), crashDial)
	if err != nil {
		return errors.Is(err, syscall.ECONNREFUSED)
	}
	_ = conn.Close()
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

// sameHost reports whether from is on the host of the address addr.
func sameHost(from net.Addr, addr string) bool {
	tcp, ok := from.(*net.TCPAddr)
	if !ok {
		return false
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return false // a name: resolving it here is not worth a hint
	}
	return tcp.IP.Equal(ip)
}
