package server

import (
	"cmp"
	"container/list"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
)

// The API's connections are bounded (agent/DESIGN.md, "Bounded API").
// Connections from the cluster's own nodes (heartbeats, reports, forwarded
// writes, proxied logs) draw on a reserve of their own, so users holding
// every connection they may never refuse a node; connections from anyone
// else draw on the users' share, in total and per client address. The
// ingress has a ConnLimiter of its own, so a flood of one door leaves the
// other's connections alone.
//
// A connection at a limit first takes the place of an idle one: one that
// serves no request now (it has not sent its whole headers yet, or waits
// between two requests: closing it loses nothing a client cannot send
// again), of the client address holding the most connections, or, at the
// per-client cap, of its own client. Only when no such connection is left
// is it refused, closed as soon as it is accepted. So no number of idle
// connections from other addresses keeps a client out: they are the
// first to go.

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
	// from users and nodes alike; Evicted the idle ones closed to make
	// room for new ones.
	Accepted, Refused, Evicted uint64
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

	mu sync.Mutex
	// users and nodes hold the open connections by client address (a
	// user's) or node address, each in the order they were accepted.
	users      conns
	nodes      conns
	accepted   uint64
	refused    uint64
	evicted    uint64
	unlogged   uint64 // refusals and evictions since the last log line
	lastLogged time.Time
}

// conns is one share's open connections, by address.
type conns struct {
	n  int
	by map[netip.Addr]*list.List // of *limitedConn, oldest first
}

func (cs *conns) count(key netip.Addr) int {
	if l := cs.by[key]; l != nil {
		return l.Len()
	}
	return 0
}

// LimitConns returns l limited by cfg.
func LimitConns(l net.Listener, cfg ListenerConfig) *ConnLimiter {
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	return &ConnLimiter{Listener: l, cfg: cfg, users: conns{by: map[netip.Addr]*list.List{}},
		nodes: conns{by: map[netip.Addr]*list.List{}}}
}

// Accept returns the next connection within the limits; those over them
// are refused and closed here.
func (l *ConnLimiter) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip := connIP(c)
		node := ip.IsValid() && l.cfg.IsNode != nil && l.cfg.IsNode(ip)
		lc, evict, refusal := l.admit(c, ip, node)
		if evict != nil {
			_ = evict.Conn.Close()
		}
		if refusal == "" {
			return lc, nil
		}
		refuse(c, refusal, l.cfg.HTTPRefusal)
	}
}

// admit counts a new connection c from ip, and returns it, with the idle
// connection whose place it takes (nil: none), or why it is refused.
func (l *ConnLimiter) admit(c net.Conn, ip netip.Addr, node bool) (lc, evict *limitedConn, refusal string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	lim := l.cfg.Limits
	share, key := &l.users, clientKey(ip)
	switch {
	case node && l.nodes.count(ip) >= lim.PerNode:
		refusal = fmt.Sprintf("too many connections from node address %s: at most %d per node", ip, lim.PerNode)
	case node && l.nodes.n >= lim.Nodes:
		refusal = fmt.Sprintf("too many connections from the cluster's nodes: at most %d", lim.Nodes)
	case node:
		share, key = &l.nodes, ip
	case l.users.count(key) >= lim.PerClient:
		if evict = l.idleOf(key); evict == nil {
			refusal = fmt.Sprintf("too many connections from %s: at most %d per client address", ip, lim.PerClient)
		}
	case l.users.n >= lim.Users:
		if evict = l.idleOfHeaviest(); evict == nil {
			refusal = fmt.Sprintf("too many connections: the agent holds its most from clients (%d), none idle; try again later", lim.Users)
		}
	}
	if evict != nil {
		l.dropLocked(evict)
		l.evicted++
		l.unlogged++
	}
	if refusal != "" {
		l.refused++
		l.unlogged++
	}
	if (evict != nil || refusal != "") && time.Since(l.lastLogged) >= refusalLogEvery {
		last := refusal
		if last == "" {
			last = "closed an idle connection of " + evict.key.String() + " for one of " + key.String()
		}
		l.cfg.Logger.Warn("connections over a limit: idle ones closed for new ones, or new ones refused", "since_last",
			l.unlogged, "refused", l.refused, "evicted", l.evicted, "last", last, "users", l.users.n, "nodes", l.nodes.n)
		l.unlogged, l.lastLogged = 0, time.Now()
	}
	if refusal != "" {
		return nil, evict, refusal
	}
	l.accepted++
	lc = &limitedConn{Conn: c, lim: l, share: share, key: key}
	share.n++
	byKey := share.by[key]
	if byKey == nil {
		byKey = list.New()
		share.by[key] = byKey
	}
	lc.elem = byKey.PushBack(lc)
	return lc, evict, ""
}

// idleOf is the oldest idle connection of a client address; nil if none.
func (l *ConnLimiter) idleOf(key netip.Addr) *limitedConn {
	byKey := l.users.by[key]
	if byKey == nil {
		return nil
	}
	for e := byKey.Front(); e != nil; e = e.Next() {
		if c := e.Value.(*limitedConn); c.busy.Load() == 0 {
			return c
		}
	}
	return nil
}

// idleOfHeaviest is the oldest idle connection of the client address that
// holds the most connections with one idle; nil if none is idle.
func (l *ConnLimiter) idleOfHeaviest() *limitedConn {
	keys := make([]netip.Addr, 0, len(l.users.by))
	for k := range l.users.by {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b netip.Addr) int { return cmp.Compare(l.users.count(b), l.users.count(a)) })
	for _, k := range keys {
		if c := l.idleOf(k); c != nil {
			return c
		}
	}
	return nil
}

// dropLocked gives a connection's place back, once; l.mu is held.
func (l *ConnLimiter) dropLocked(c *limitedConn) {
	if c.dropped {
		return
	}
	c.dropped = true
	c.share.n--
	byKey := c.share.by[c.key]
	byKey.Remove(c.elem)
	if byKey.Len() == 0 {
		delete(c.share.by, c.key)
	}
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
	return ConnStats{Accepted: l.accepted, Refused: l.refused, Evicted: l.evicted, Users: l.users.n, Nodes: l.nodes.n}
}

// limitedConn gives its place back once closed. It is idle while no
// request is being served on it (busy, which Serving counts).
type limitedConn struct {
	net.Conn
	lim   *ConnLimiter
	share *conns
	key   netip.Addr
	elem  *list.Element
	busy  atomic.Int32
	// dropped is whether its place was given back, tag who holds it (a
	// node's ID: TagConn); lim.mu guards both.
	dropped bool
	tag     string
}

// TagConn names who holds the connection a request came on (a node's ID,
// once the request showed that node's certificate), so that its
// connections can be closed when it is cut off (CloseTagged).
func TagConn(ctx context.Context, tag string) {
	if c, ok := ctx.Value(connKey{}).(*limitedConn); ok {
		c.lim.mu.Lock()
		c.tag = tag
		c.lim.mu.Unlock()
	}
}

// tagged returns the open connections tagged tag; l.mu is held.
func (l *ConnLimiter) taggedLocked(tag string) []*limitedConn {
	var out []*limitedConn
	for _, share := range []*conns{&l.users, &l.nodes} {
		for _, byKey := range share.by {
			for e := byKey.Front(); e != nil; e = e.Next() {
				if c := e.Value.(*limitedConn); c.tag == tag {
					out = append(out, c)
				}
			}
		}
	}
	return out
}

// Tagged counts the open connections tagged tag.
func (l *ConnLimiter) Tagged(tag string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.taggedLocked(tag))
}

// CloseTagged closes every open connection tagged tag (a node revoked:
// the connections it opened before, kept alive, serve it nothing more),
// and returns how many it closed.
func (l *ConnLimiter) CloseTagged(tag string) int {
	l.mu.Lock()
	cs := l.taggedLocked(tag)
	l.mu.Unlock()
	for _, c := range cs {
		_ = c.Close()
	}
	return len(cs)
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.lim.mu.Lock()
	c.lim.dropLocked(c)
	c.lim.mu.Unlock()
	return err
}

// connKey is the context key of a request's connection.
type connKey struct{}

// ConnContext records a connection in the context of its requests; set it
// as http.Server.ConnContext of a server on a ConnLimiter (TLS or not), so
// that Serving can tell which connections serve a request.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	if tc, ok := c.(interface{ NetConn() net.Conn }); ok {
		c = tc.NetConn()
	}
	if lc, ok := c.(*limitedConn); ok {
		return context.WithValue(ctx, connKey{}, lc)
	}
	return ctx
}

// Serving marks a request's connection busy while next serves it (its
// headers are in; an upgraded connection's handler lasts as long as it):
// a connection not serving one may give its place to a new connection
// over a limit.
func Serving(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c, ok := r.Context().Value(connKey{}).(*limitedConn); ok {
			c.busy.Add(1)
			defer c.busy.Add(-1)
		}
		next.ServeHTTP(w, r)
	})
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
