package server

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// The API's connections are bounded (agent/DESIGN.md, "Bounded API").
// Connections from the cluster's own nodes (heartbeats, reports, forwarded
// writes, proxied logs) draw on a reserve of their own, so users holding
// every connection they may never refuse a node; connections from anyone
// else draw on the users' share, in total and per client address. A
// connection over a limit is closed as soon as it is accepted.

// Bounds of refusing a connection.
const (
	// refusalWrite bounds writing the 503 to a refused connection. The
	// send buffer of a connection just accepted is empty, so the write
	// never waits; the bound only keeps the accept loop from ever doing so.
	refusalWrite = 10 * time.Millisecond
	// refusalLogEvery is how often refusals are logged at most: a flood of
	// connections must not become a flood of log lines.
	refusalLogEvery = 10 * time.Second
)

// ConnLimits bounds the connections the API holds at once.
type ConnLimits struct {
	// Users bounds the connections from addresses that are not the
	// cluster's nodes; PerClient those from one client address (an IPv4
	// address, or an IPv6 /64, which one client usually holds whole).
	Users, PerClient int
	// Nodes is the reserve for connections from the cluster's nodes;
	// PerNode bounds those from one node address, so that a node (or a
	// job on it, which shares its address) cannot take the reserve from
	// the others.
	Nodes, PerNode int
}

// ConnStats counts a listener's connections.
type ConnStats struct {
	// Accepted and Refused count connections since the listener started,
	// from users and nodes alike.
	Accepted, Refused uint64
	// Users and Nodes are the connections open now.
	Users, Nodes int
}

// ListenerConfig configures LimitConns.
type ListenerConfig struct {
	Limits ConnLimits
	// IsNode reports whether an address is one of the cluster's nodes.
	IsNode func(netip.Addr) bool
	// HTTPRefusal writes a short HTTP 503 naming the limit to a refused
	// connection before closing it. Set it for a plaintext API only: a
	// TLS client would read it as a server that does not speak TLS.
	HTTPRefusal bool
	Logger      hclog.Logger
}

// ConnLimiter is a listener that holds at most its limits' connections.
// Wrap the TCP listener in it before TLS, so that a refused connection
// costs no handshake.
type ConnLimiter struct {
	net.Listener
	cfg ListenerConfig

	mu         sync.Mutex
	users      int
	nodes      int
	perClient  map[netip.Addr]int // users' open connections by client address
	perNode    map[netip.Addr]int // nodes' open connections by address
	accepted   uint64
	refused    uint64
	unlogged   uint64 // refusals since the last log line
	lastLogged time.Time
}

// LimitConns returns l limited by cfg.
func LimitConns(l net.Listener, cfg ListenerConfig) *ConnLimiter {
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	return &ConnLimiter{Listener: l, cfg: cfg, perClient: map[netip.Addr]int{}, perNode: map[netip.Addr]int{}}
}

// Accept returns the next connection within the limits; those over them
// are refused and closed here.
func (l *ConnLimiter) Accept() (net.Conn, error) { return l.accept(l.Listener, l.cfg.HTTPRefusal) }

// Share returns other limited by the same counts as l: the connections of
// both together stay within l's limits, which size the agent's
// descriptors (the ingress shares the API's). httpRefusal is other's own
// (ListenerConfig.HTTPRefusal).
func (l *ConnLimiter) Share(other net.Listener, httpRefusal bool) net.Listener {
	return &sharedListener{Listener: other, lim: l, httpRefusal: httpRefusal}
}

type sharedListener struct {
	net.Listener
	lim         *ConnLimiter
	httpRefusal bool
}

func (s *sharedListener) Accept() (net.Conn, error) { return s.lim.accept(s.Listener, s.httpRefusal) }

// accept returns the next connection of from within the limits.
func (l *ConnLimiter) accept(from net.Listener, httpRefusal bool) (net.Conn, error) {
	for {
		c, err := from.Accept()
		if err != nil {
			return nil, err
		}
		ip := connIP(c)
		node := ip.IsValid() && l.cfg.IsNode != nil && l.cfg.IsNode(ip)
		release, refusal := l.admit(ip, node)
		if refusal == "" {
			return &limitedConn{Conn: c, release: release}, nil
		}
		refuse(c, refusal, httpRefusal)
	}
}

// admit counts a new connection from ip and returns what gives it back,
// or why it is refused.
func (l *ConnLimiter) admit(ip netip.Addr, node bool) (release func(), refusal string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	lim := l.cfg.Limits
	total, per, key := &l.users, l.perClient, clientKey(ip)
	switch {
	case node && l.perNode[ip] >= lim.PerNode:
		refusal = fmt.Sprintf("too many connections from node address %s: at most %d per node", ip, lim.PerNode)
	case node && l.nodes >= lim.Nodes:
		refusal = fmt.Sprintf("too many connections from the cluster's nodes: at most %d", lim.Nodes)
	case node:
		total, per, key = &l.nodes, l.perNode, ip
	case l.perClient[key] >= lim.PerClient:
		refusal = fmt.Sprintf("too many connections from %s: at most %d per client address", ip, lim.PerClient)
	case l.users >= lim.Users:
		refusal = fmt.Sprintf("too many connections: the agent holds its most from clients (%d); try again later", lim.Users)
	}
	if refusal != "" {
		l.refused++
		l.unlogged++
		if time.Since(l.lastLogged) >= refusalLogEvery {
			l.cfg.Logger.Warn("refusing API connections over a limit", "refused", l.unlogged, "last", refusal,
				"users", l.users, "nodes", l.nodes)
			l.unlogged, l.lastLogged = 0, time.Now()
		}
		return nil, refusal
	}
	l.accepted++
	*total++
	per[key]++
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		*total--
		if per[key]--; per[key] <= 0 {
			delete(per, key)
		}
	}, ""
}

// refuse closes a connection over a limit, after telling a plaintext
// HTTP client why.
func refuse(c net.Conn, why string, httpRefusal bool) {
	if httpRefusal {
		body := `{"error":` + strconv.Quote(why) + "}\n"
		_ = c.SetWriteDeadline(time.Now().Add(refusalWrite))
		_, _ = c.Write([]byte("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nConnection: close\r\n" +
			"Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body))
	}
	_ = c.Close()
}

// Stats returns the listener's counts.
func (l *ConnLimiter) Stats() ConnStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return ConnStats{Accepted: l.accepted, Refused: l.refused, Users: l.users, Nodes: l.nodes}
}

// limitedConn gives its place back once closed.
type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// connIP is the address a connection comes from; the zero Addr when it
// is not an IP address.
func connIP(c net.Conn) netip.Addr {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return a.AddrPort().Addr().Unmap()
	}
	return netip.Addr{}
}

// clientKey is what a client's connections and failed authentications are
// counted under: its IPv4 address, or its IPv6 /64.
func clientKey(ip netip.Addr) netip.Addr {
	if ip.Is6() {
		if p, err := ip.Prefix(64); err == nil {
			return p.Addr()
		}
	}
	return ip
}
