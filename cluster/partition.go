package cluster

import (
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"
)

// errPartitioned is what a dial across a cut returns.
var errPartitioned = errors.New("partitioned")

// Partitioner is a fake network switch for tests. Share one between all
// nodes of a test cluster (Config.Network); Block cuts the named addresses
// (a node's raft and gossip addresses) off from every other address, in
// both directions, for raft streams, gossip streams and gossip packets;
// Sever cuts the links between two sets of addresses only; Heal restores
// every link. Addresses on the same side of the cut still
// reach each other. The zero value is ready to use and passes everything.
//
// Each node's transports ask the Partitioner before every dial and packet,
// using the node's own advertised address as the source, so one shared
// Partitioner sees both ends of every link. Connections already open
// across a new cut are closed by Block.
type Partitioner struct {
	mu      sync.Mutex
	blocked map[string]bool
	severed map[[2]string]bool // links cut by Sever, both ways
	conns   map[*cutConn]struct{}
}

// Block cuts addrs off from all addresses not in addrs (adding to any
// earlier Block) and closes open connections across the cut.
func (p *Partitioner) Block(addrs ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.blocked == nil {
		p.blocked = map[string]bool{}
	}
	for _, a := range addrs {
		p.blocked[a] = true
	}
	p.closeCutLocked()
}

// Sever cuts every address of a off from every address of b, in both
// directions, leaving each side's other links as they are: a link that
// fails while the rest of the network works. It adds to earlier cuts and
// closes open connections across the new one.
func (p *Partitioner) Sever(a, b []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.severed == nil {
		p.severed = map[[2]string]bool{}
	}
	for _, x := range a {
		for _, y := range b {
			p.severed[[2]string{x, y}] = true
			p.severed[[2]string{y, x}] = true
		}
	}
	p.closeCutLocked()
}

// closeCutLocked closes the open connections across a cut.
func (p *Partitioner) closeCutLocked() {
	for c := range p.conns {
		if p.cutLocked(c.from, c.to) {
			delete(p.conns, c)
			_ = c.Conn.Close()
		}
	}
}

// Heal removes every cut.
func (p *Partitioner) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.blocked, p.severed = nil, nil
}

// Cut reports whether traffic from one address to another is dropped, for
// transports outside this package (the agents' HTTP clients in tests).
func (p *Partitioner) Cut(from, to string) bool { return p.cut(from, to) }

// Track registers a connection dialed from one address to another outside
// this package (the agents' HTTP clients in tests), so that a later Block
// closes it like the raft and gossip streams it cuts. A cut that appeared
// during the dial closes it at once and returns an error.
func (p *Partitioner) Track(conn net.Conn, from, to string) (net.Conn, error) {
	return p.track(conn, from, to)
}

// cut reports whether traffic from one address to another is dropped.
func (p *Partitioner) cut(from, to string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cutLocked(from, to)
}

func (p *Partitioner) cutLocked(from, to string) bool {
	return p.blocked[from] != p.blocked[to] || p.severed[[2]string{from, to}]
}

// track registers an open connection so Block can close it, or closes it
// at once if a cut appeared while it was being dialed.
func (p *Partitioner) track(conn net.Conn, from, to string) (net.Conn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cutLocked(from, to) {
		_ = conn.Close()
		return nil, errPartitioned
	}
	if p.conns == nil {
		p.conns = map[*cutConn]struct{}{}
	}
	c := &cutConn{Conn: conn, p: p, from: from, to: to}
	p.conns[c] = struct{}{}
	return c, nil
}

func (p *Partitioner) untrack(c *cutConn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.conns, c)
}

// dial opens a TCP connection from one address to another unless they are
// cut apart.
func (p *Partitioner) dial(from, to string, timeout time.Duration) (net.Conn, error) {
	if p.cut(from, to) {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: errPartitioned}
	}
	conn, err := net.DialTimeout("tcp", to, timeout)
	if err != nil {
		return nil, err
	}
	return p.track(conn, from, to)
}

// cutConn is a connection the Partitioner may close.
type cutConn struct {
	net.Conn
	p        *Partitioner
	from, to string
}

func (c *cutConn) Close() error {
	c.p.untrack(c)
	return c.Conn.Close()
}

// tcpStream is raft's stream layer: a TCP listener and dialer, routed
// through a Partitioner when one is set, and wrapped in mutual TLS when a
// TLSPair is set.
type tcpStream struct {
	net.Listener
	advertise net.Addr
	network   *Partitioner
	tls       *TLSPair      // nil: plaintext
	handshake time.Duration // bound on an accepted connection's TLS handshake
	// ended hears of accepted connections their peer closed (stand.go).
	ended chan struct{}
}

func newTCPStream(bind string, advertise net.Addr, network *Partitioner, tp *TLSPair) (*tcpStream, error) {
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, err
	}
	if advertise == nil {
		advertise = ln.Addr()
	}
	return &tcpStream{Listener: ln, advertise: advertise, network: network, tls: tp, handshake: tlsHandshakeTimeout,
		ended: make(chan struct{}, 1)}, nil
}

// Addr is the address other members dial.
func (s *tcpStream) Addr() net.Addr { return s.advertise }

// Accept implements net.Listener. With TLS the handshake waits for the
// connection's first read or write (see serverConn), so one slow or
// silent peer never holds up the next Accept. The connection reports to
// ended when its peer closes it.
func (s *tcpStream) Accept() (net.Conn, error) {
	conn, err := s.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if s.tls != nil {
		conn = &serverConn{Conn: tls.Server(conn, s.tls.Server), timeout: s.handshake}
	}
	return &closeWatch{Conn: conn, ended: s.ended}, nil
}

// Dial implements raft.StreamLayer. With TLS the handshake completes
// within timeout before Dial returns.
func (s *tcpStream) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	deadline := time.Now().Add(timeout)
	var conn net.Conn
	var err error
	if s.network == nil {
		conn, err = net.DialTimeout("tcp", string(address), timeout)
	} else {
		conn, err = s.network.dial(s.advertise.String(), string(address), timeout)
	}
	if err != nil || s.tls == nil {
		return conn, err
	}
	return dialTLS(conn, s.tls.Client, string(address), deadline)
}

// reach reports whether a TCP connection to address opens within
// timeout, without TLS: nil when the host is up and something listens
// there, however busy or frozen the process behind it (the kernel takes
// the connection). Across a Partitioner's cut it fails as a dial does.
func (s *tcpStream) reach(address string, timeout time.Duration) error {
	var conn net.Conn
	var err error
	if s.network == nil {
		conn, err = net.DialTimeout("tcp", address, timeout)
	} else {
		conn, err = s.network.dial(s.advertise.String(), address, timeout)
	}
	if err != nil {
		return err
	}
	return conn.Close()
}

// cutTransport wraps memberlist's transport so a Partitioner can drop its
// packets and refuse its streams. Inbound traffic needs no check: the
// sender's own cutTransport already dropped it.
type cutTransport struct {
	*memberlist.NetTransport
	network *Partitioner
	self    string // this node's advertised gossip address
}

func (t *cutTransport) WriteTo(b []byte, addr string) (time.Time, error) {
	if t.network.cut(t.self, addr) {
		return time.Now(), nil // dropped on the wire
	}
	return t.NetTransport.WriteTo(b, addr)
}

func (t *cutTransport) WriteToAddress(b []byte, a memberlist.Address) (time.Time, error) {
	return t.WriteTo(b, a.Addr)
}

func (t *cutTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	return t.network.dial(t.self, addr, timeout)
}

func (t *cutTransport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	return t.DialTimeout(a.Addr, timeout)
}

var _ memberlist.NodeAwareTransport = (*cutTransport)(nil)
