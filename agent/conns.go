package agent

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/skein-dev/skein/agent/server"
	"github.com/skein-dev/skein/structs"
)

// The API's connections are sized from the process's file-descriptor
// limit (RLIMIT_NOFILE; Go raises the soft limit to the hard one at
// start). A fifth is kept for the agent's own use (Raft and gossip
// connections, bbolt, lease and state files, supervisors' pipes, calls to
// other nodes), a fifth for connections from the cluster's nodes, and the
// rest is the most users may hold, so that user connections can never
// take the descriptors the node lease, Raft and gossip need.
const (
	// minOwnFDs and minNodeConns are the least kept for the agent's own
	// use and for the nodes' connections.
	minOwnFDs    = 256
	minNodeConns = 64
	// minUserConns is the least a file-descriptor limit must leave for
	// users; a lower limit is a configuration error.
	minUserConns = 16
	// maxDefaultPerClient and maxDefaultPerNode cap the default share of
	// one client and of one node (an eighth of the users' share and of
	// the reserve): a CLI holds a connection or two, a node one for its
	// heartbeats and one per user's write it forwards at the time.
	maxDefaultPerClient = 256
	maxDefaultPerNode   = 512
)

// fdLimit is the process's file-descriptor limit.
func fdLimit() (int, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, fmt.Errorf("read the file-descriptor limit: %w", err)
	}
	return int(min(lim.Cur, 1<<30)), nil
}

// connLimits sizes the API's connection limits for a file-descriptor
// limit of nofile, with maxConns and perClient as configured (0: sized
// from nofile), or says which setting is out of range.
func connLimits(nofile, maxConns, perClient int) (server.ConnLimits, error) {
	own := max(nofile/5, minOwnFDs)
	nodes := max(nofile/5, minNodeConns)
	users := nofile - own - nodes
	if users < minUserConns {
		return server.ConnLimits{}, fmt.Errorf("%w: %d leaves no room for API connections; raise it (ulimit -n, or LimitNOFILE= in a systemd unit) to 1024 or more",
			ErrFDLimit, nofile)
	}
	switch {
	case maxConns < 0:
		return server.ConnLimits{}, fmt.Errorf("--max-conns %d: must be positive (0: sized from the file-descriptor limit)", maxConns)
	case maxConns > users:
		return server.ConnLimits{}, fmt.Errorf("--max-conns %d: over the %d the file-descriptor limit (%d) leaves after the cluster's nodes and the agent's own use; raise the limit (ulimit -n) or lower --max-conns",
			maxConns, users, nofile)
	case maxConns > 0:
		users = maxConns
	}
	switch {
	case perClient < 0:
		return server.ConnLimits{}, fmt.Errorf("--max-conns-per-client %d: must be positive (0: sized from --max-conns)", perClient)
	case perClient > users:
		return server.ConnLimits{}, fmt.Errorf("--max-conns-per-client %d: more than --max-conns (%d)", perClient, users)
	case perClient == 0:
		perClient = min(max(users/8, 1), maxDefaultPerClient)
	}
	return server.ConnLimits{Users: users, PerClient: perClient,
		Nodes: nodes, PerNode: min(max(nodes/8, 1), maxDefaultPerNode)}, nil
}

// nodeAddrsTTL is how long the set of the cluster's node addresses is
// used before it is built again: a node that just joined may count as a
// user for that long.
const nodeAddrsTTL = time.Second

// nodeAddrs answers whether an address is one of the cluster's nodes, from
// this node's own addresses, the registered nodes' (those that have not
// left and are not revoked) and gossip's members.
type nodeAddrs struct {
	a     *Agent
	mu    sync.Mutex // held while building
	set   atomic.Pointer[map[netip.Addr]struct{}]
	built atomic.Int64 // when set was built, in Unix nanoseconds
}

// has reports whether ip is one of the cluster's nodes.
func (n *nodeAddrs) has(ip netip.Addr) bool {
	if time.Since(time.Unix(0, n.built.Load())) > nodeAddrsTTL {
		n.build()
	}
	_, ok := (*n.set.Load())[ip.Unmap()]
	return ok
}

func (n *nodeAddrs) build() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if time.Since(time.Unix(0, n.built.Load())) <= nodeAddrsTTL {
		return // built while this one waited
	}
	set := map[netip.Addr]struct{}{}
	add := func(hostport string) {
		host := hostport
		if u, err := url.Parse(hostport); err == nil && u.Host != "" {
			host = u.Hostname()
		} else if h, _, err := net.SplitHostPort(hostport); err == nil {
			host = h
		}
		if ip, err := netip.ParseAddr(host); err == nil && !ip.IsUnspecified() {
			set[ip.Unmap()] = struct{}{}
		}
	}
	a := n.a
	add(a.cfg.BindAddr)
	add(a.cfg.AdvertiseAddr)
	for _, nd := range a.fsm.Nodes() {
		if nd.Status == structs.NodeLeft || (a.secure != nil && a.secure.Revoked(nd.ID)) {
			continue
		}
		add(nd.Addresses.HTTP)
		add(nd.Addresses.Raft)
		add(nd.Addresses.Gossip)
	}
	for _, m := range a.raft.Members() {
		add(m.Addr)
		add(m.RaftAddr)
	}
	n.set.Store(&set)
	n.built.Store(time.Now().UnixNano())
}
