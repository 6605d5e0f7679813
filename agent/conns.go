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

// The API's and the ingress's connections are sized from the process's
// file-descriptor limit (RLIMIT_NOFILE; Go raises the soft limit to the
// hard one at start). A fifth is kept for the agent's own use (Raft and
// gossip connections, bbolt, lease and state files, supervisors' pipes,
// calls to other nodes), a fifth for connections from the cluster's nodes
// (half to the API: heartbeats, reports, forwarded writes; half to the
// ingress: jobs calling services), and the rest for clients: a third to
// the API, two thirds to the ingress, each door a budget of its own, so
// that a flood of one never starves the other, and user connections can
// never take the descriptors the node lease, Raft and gossip need.
const (
	// minOwnFDs and minNodeConns are the least kept for the agent's own
	// use and for the nodes' connections.
	minOwnFDs    = 256
	minNodeConns = 64
	// minUserConns is the least a file-descriptor limit must leave for
	// users of each door; a lower limit is a configuration error.
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

// connBudgets are the connection limits of the API and of the ingress.
type connBudgets struct {
	API, Ingress server.ConnLimits
}

// connLimits sizes the connection limits for a file-descriptor limit of
// nofile, with maxConns (the API's clients), ingressConns (the ingress's)
// and perClient (one client address, at each door) as configured (0:
// sized from nofile), or says which setting is out of range.
func connLimits(nofile, maxConns, ingressConns, perClient int) (connBudgets, error) {
	own := max(nofile/5, minOwnFDs)
	nodes := max(nofile/5, minNodeConns)
	users := nofile - own - nodes
	if users < 2*minUserConns {
		return connBudgets{}, fmt.Errorf("%w: %d leaves no room for API and ingress connections; raise it (ulimit -n, or LimitNOFILE= in a systemd unit) to 1024 or more",
			ErrFDLimit, nofile)
	}
	api, ingress := users/3, users-users/3
	for _, f := range []struct {
		flag string
		n    int
	}{{"--max-conns", maxConns}, {"--ingress-max-conns", ingressConns}} {
		if f.n < 0 {
			return connBudgets{}, fmt.Errorf("%s %d: must be positive (0: sized from the file-descriptor limit)", f.flag, f.n)
		}
	}
	switch {
	case maxConns > 0 && ingressConns > 0:
		api, ingress = maxConns, ingressConns
	case maxConns > 0:
		api, ingress = maxConns, min(ingress, users-maxConns)
	case ingressConns > 0:
		api, ingress = min(api, users-ingressConns), ingressConns
	}
	if api+ingress > users || api < 1 || ingress < 1 {
		return connBudgets{}, fmt.Errorf("--max-conns %d and --ingress-max-conns %d: together over the %d the file-descriptor limit (%d) leaves after the cluster's nodes and the agent's own use; raise the limit (ulimit -n) or lower them",
			maxConns, ingressConns, users, nofile)
	}
	if perClient < 0 {
		return connBudgets{}, fmt.Errorf("--max-conns-per-client %d: must be positive (0: sized from --max-conns)", perClient)
	}
	door := func(users int, flag string) (server.ConnLimits, error) {
		per := perClient
		switch {
		case per > users:
			return server.ConnLimits{}, fmt.Errorf("--max-conns-per-client %d: more than %s (%d)", per, flag, users)
		case per == 0:
			per = min(max(users/8, 1), maxDefaultPerClient)
		}
		reserve := nodes / 2
		return server.ConnLimits{Users: users, PerClient: per, Nodes: reserve, PerNode: min(max(reserve/8, 1), maxDefaultPerNode)}, nil
	}
	a, err := door(api, "--max-conns")
	if err != nil {
		return connBudgets{}, err
	}
	i, err := door(ingress, "--ingress-max-conns")
	if err != nil {
		return connBudgets{}, err
	}
	return connBudgets{API: a, Ingress: i}, nil
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
