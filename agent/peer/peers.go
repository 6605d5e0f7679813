package peer

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptrace"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/cluster"
	"github.com/skein-dev/skein/fsm"
)

// ErrNoLeader is returned when no leader appears within LeaderWait.
var ErrNoLeader = errors.New("no leader: the cluster is electing one or has lost quorum; try again")

// LeaderWait is how long a call to the leader waits for one during an
// election before it fails with ErrNoLeader.
const LeaderWait = 5 * time.Second

// leaderPoll is how often a wait for a leader looks again.
const leaderPoll = 20 * time.Millisecond

// Raft is what Peers reads of Raft and gossip.
type Raft interface {
	IsLeader() bool
	Leader() (addr, id string)
	Members() []cluster.Member
	// MembersVersion moves whenever Members may have changed (0: it is
	// not tracked, and Members is read afresh every time).
	MembersVersion() uint64
}

// Config configures Peers.
type Config struct {
	NodeID string
	// HTTPAddr is this node's API base URL; Local is the address its
	// listener is bound to, which test partitions know it by.
	HTTPAddr string
	Local    string
	Raft     Raft
	// FSM holds the registered addresses of the nodes.
	FSM *fsm.FSM
	// Token is sent on calls to other nodes (plaintext clusters).
	Token string
	// TLS, in a secure cluster, presents this node's certificate on calls
	// to other nodes and verifies theirs; nil in a plaintext cluster.
	TLS *tls.Config
	// CheckPeer, in a secure cluster, is asked about the connection every
	// answer from another node came over, and fails the call when it
	// errs: TLS checks that a node is not revoked when a connection
	// opens, and a kept-alive one outlives that check. nil checks nothing.
	CheckPeer func(*tls.ConnectionState) error
	// CallTimeout bounds one call to another node (not a log stream).
	CallTimeout time.Duration
	// DialFrom is the address calls to other nodes leave from, so that
	// they know the calls for a node's (nil: the kernel's choice).
	DialFrom net.IP
	// Network lets tests cut this node off from others; nil in production.
	Network *cluster.Partitioner
	// Done is closed when the agent stops; it ends every wait.
	Done <-chan struct{}
}

// Peers finds the leader and other nodes and makes clients for them.
type Peers struct {
	cfg Config
	// calls carries calls between nodes, bounded by CallTimeout; streams
	// carries unbounded ones (followed logs).
	calls   *http.Client
	streams *http.Client
	// leaderHint is the leader a server named to this node (its view
	// watch), for a node whose own Raft names none: one outside the
	// Raft configuration.
	leaderHint atomic.Value // string
	// decoded is the gossip view as members last decoded it, with the
	// version of the member table it was read at.
	decodedMu      sync.Mutex
	decoded        []api.Member
	decodedVersion uint64
}

// New returns Peers for cfg.
func New(cfg Config) *Peers {
	p := &Peers{cfg: cfg}
	p.calls = p.httpClient(cfg.CallTimeout)
	p.streams = p.httpClient(0)
	return p
}

// httpClient returns an HTTP client for calls between nodes with the given
// overall timeout (0: none). In tests it honours Config.Network.
func (p *Peers) httpClient(timeout time.Duration) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = p.cfg.TLS
	var source net.Addr
	if p.cfg.DialFrom != nil {
		source = &net.TCPAddr{IP: p.cfg.DialFrom}
		// As http.DefaultTransport dials, from that address.
		tr.DialContext = dialerFrom(source, 30*time.Second).DialContext
	}
	if n := p.cfg.Network; n != nil {
		dialer := dialerFrom(source, 5*time.Second)
		from := p.cfg.Local
		tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			if n.Cut(from, addr) {
				// A cut drops packets, as a dead host or a pulled cable
				// does: the dial hangs until it times out.
				timeout := time.NewTimer(dialer.Timeout)
				defer timeout.Stop()
				select {
				case <-ctx.Done():
				case <-timeout.C:
				}
				return nil, fmt.Errorf("dial %s: partitioned", addr)
			}
			conn, err := dialer.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return n.Track(conn, from, addr)
		}
	}
	if p.cfg.CheckPeer == nil {
		return &http.Client{Timeout: timeout, Transport: tr}
	}
	return &http.Client{Timeout: timeout, Transport: checkedTransport{next: tr, check: p.cfg.CheckPeer}}
}

// checkedTransport fails a call whose answer came over a connection that
// check refuses (Config.CheckPeer).
type checkedTransport struct {
	next  http.RoundTripper
	check func(*tls.ConnectionState) error
}

func (t checkedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(r)
	if err != nil || resp.TLS == nil {
		return resp, err
	}
	if err := t.check(resp.TLS); err != nil {
		resp.Body.Close()
		return nil, fmt.Errorf("the answer of %s: %w", r.URL.Host, err)
	}
	return resp, nil
}

// ipBindAddressNoPort is Linux's IP_BIND_ADDRESS_NO_PORT (linux/in.h).
const ipBindAddressNoPort = 24

// dialerFrom dials TCP from source (nil: the kernel's choice). A socket
// bound to an address takes its port before it knows where it connects,
// for every destination, so many short calls would run out of ports;
// IP_BIND_ADDRESS_NO_PORT leaves the port to the connect, as without
// one.
func dialerFrom(source net.Addr, timeout time.Duration) *net.Dialer {
	d := &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second, LocalAddr: source}
	if source != nil {
		d.Control = func(_, _ string, c syscall.RawConn) error {
			return c.Control(func(fd uintptr) {
				// Where the option is unknown, binding takes a port.
				_ = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_IP, ipBindAddressNoPort, 1)
			})
		}
	}
	return d
}

// NewRequest is a request to another node's internal API, carrying this
// node's credential in a plaintext cluster (a secure one's is its
// certificate, which the clients present).
func (p *Peers) NewRequest(ctx context.Context, method, url string, body io.Reader) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		return nil, err
	}
	if p.cfg.Token != "" {
		req.Header.Set(api.TokenHeader, p.cfg.Token)
	}
	return req, nil
}

// Calls is the HTTP client for bounded calls between nodes.
func (p *Peers) Calls() *http.Client { return p.calls }

// Streams is the HTTP client for unbounded streams between nodes.
func (p *Peers) Streams() *http.Client { return p.streams }

// Leader waits (up to LeaderWait, or ctx) until a leader is known and
// returns its node ID and API address; self is true when it is this node.
func (p *Peers) Leader(ctx context.Context) (id, httpAddr string, self bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, LeaderWait)
	defer cancel()
	for {
		if p.cfg.Raft.IsLeader() {
			return p.cfg.NodeID, p.cfg.HTTPAddr, true, nil
		}
		if id := p.knownLeader(); id != "" && id != p.cfg.NodeID {
			if addr := p.HTTPAddrOf(id); addr != "" {
				return id, addr, false, nil
			}
		}
		select {
		case <-ctx.Done():
			return "", "", false, ErrNoLeader
		case <-p.cfg.Done:
			return "", "", false, ErrNoLeader
		case <-time.After(leaderPoll):
		}
	}
}

// SetLeaderHint records the leader a server named ("": none known).
func (p *Peers) SetLeaderHint(id string) { p.leaderHint.Store(id) }

// LeaderHint is the leader a server named last ("": none).
func (p *Peers) LeaderHint() string {
	id, _ := p.leaderHint.Load().(string)
	return id
}

// HTTPAddrOf finds a node's API address: from its registration, or, for a
// node not registered yet, from gossip; "" when unknown.
func (p *Peers) HTTPAddrOf(nodeID string) string {
	if n, ok := p.cfg.FSM.Node(nodeID); ok && n.Addresses.HTTP != "" {
		return n.Addresses.HTTP
	}
	for _, m := range p.members() {
		if m.ID == nodeID {
			return m.HTTP
		}
	}
	return ""
}

// LeaderClient returns an API client for the leader, or nil when this node
// leads.
func (p *Peers) LeaderClient(ctx context.Context) (*api.Client, error) {
	_, addr, self, err := p.Leader(ctx)
	if err != nil || self {
		return nil, err
	}
	return p.Client(addr)
}

// LeaseClient returns a client for the server a worker renews its lease
// with, as ServerAddr picks it, so that the leader hears the workers'
// renewals in one round per server (agent/leader/relay.go); failing
// that, the leader (nil when this node leads).
func (p *Peers) LeaseClient(ctx context.Context) (*api.Client, error) {
	if addr, err := p.ServerAddr(); err == nil {
		return p.Client(addr)
	}
	return p.LeaderClient(ctx)
}

// Client returns an API client for the node at addr, with bounded calls.
func (p *Peers) Client(addr string) (*api.Client, error) {
	c, err := api.NewClient(addr, p.cfg.Token)
	if err != nil {
		return nil, err
	}
	return c.WithHTTPClient(p.calls), nil
}

// ErrNoServer is returned when gossip knows no server to ask.
var ErrNoServer = errors.New("no server known: gossip names no member of the Raft configuration")

// ServerClient returns a client for a server of the Raft configuration,
// its calls bounded by their context only (for watches), as ServerAddr
// picks it.
func (p *Peers) ServerClient() (*api.Client, error) {
	addr, err := p.ServerAddr()
	if err != nil {
		return nil, err
	}
	c, err := api.NewClient(addr, p.cfg.Token)
	if err != nil {
		return nil, err
	}
	return c.WithHTTPClient(p.streams), nil
}

// ServerAddr is the API address of a server of the Raft configuration:
// a live member that gossip says is a server, picked at random so that
// nodes spread their watches, leases and requests over the servers, and
// other than the leader while there is another, so that the leader's CPU
// goes to what only it can do; failing that, the leader Raft names.
func (p *Peers) ServerAddr() (string, error) {
	return p.ServerAddrExcept(nil)
}

// ServerAddrExcept is ServerAddr but for the addresses in tried (those a
// call could not reach): a server gossip has not yet declared dead is
// passed over for another.
func (p *Peers) ServerAddrExcept(tried map[string]bool) (string, error) {
	var addrs []string
	for _, m := range p.members() {
		if m.Server && !m.IsThisNode && m.Status == cluster.StatusAlive.String() && m.HTTP != "" && !tried[m.HTTP] {
			addrs = append(addrs, m.HTTP)
		}
	}
	if id := p.knownLeader(); len(addrs) > 1 && id != "" {
		if lead := p.HTTPAddrOf(id); lead != "" {
			if others := slices.DeleteFunc(slices.Clone(addrs), func(a string) bool { return a == lead }); len(others) > 0 {
				addrs = others
			}
		}
	}
	if len(addrs) == 0 {
		if _, id := p.cfg.Raft.Leader(); id != "" && id != p.cfg.NodeID {
			if addr := p.HTTPAddrOf(id); addr != "" && !tried[addr] {
				addrs = append(addrs, addr)
			}
		}
	}
	if len(addrs) == 0 {
		return "", ErrNoServer
	}
	return addrs[rand.IntN(len(addrs))], nil
}

// knownLeader is the leader this node knows of: the one its Raft names,
// else the one a server named last ("": none).
func (p *Peers) knownLeader() string {
	if _, id := p.cfg.Raft.Leader(); id != "" {
		return id
	}
	return p.LeaderHint()
}

// Alone reports whether gossip knows no other live member.
func (p *Peers) Alone() bool {
	for _, m := range p.cfg.Raft.Members() {
		if m.ID != p.cfg.NodeID && m.Status == cluster.StatusAlive {
			return false
		}
	}
	return true
}

// Members is the gossip view with each member's metadata decoded.
func (p *Peers) Members() []api.Member {
	return slices.Clone(p.members())
}

// members is Members shared, never to be written: decoded again only
// when the member table moved, since a worker looks for a server in it
// for every renewal of its lease and every call it passes on (decoding
// 1,000 members' metadata takes milliseconds).
func (p *Peers) members() []api.Member {
	version := p.cfg.Raft.MembersVersion()
	p.decodedMu.Lock()
	defer p.decodedMu.Unlock()
	if version == 0 || version != p.decodedVersion {
		// Read after the version: a change in between is read now and
		// read again next time.
		p.decoded, p.decodedVersion = decodeMembers(p.cfg.Raft.Members(), p.cfg.NodeID), version
	}
	return p.decoded
}

// CancelOnLeaderChange calls cancel as soon as Raft names a leader other
// than leaderID, or this node, so that a call to a leader that died or was
// cut off is abandoned the moment another is elected instead of after its
// dial times out. It watches until ctx ends or the returned stop is
// called; stop must be called once the call is answered or has failed.
func (p *Peers) CancelOnLeaderChange(ctx context.Context, cancel context.CancelFunc, leaderID string) (stop func()) {
	done := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		tick := time.NewTicker(leaderPoll)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if _, id := p.cfg.Raft.Leader(); (id != "" && id != leaderID) || p.cfg.Raft.IsLeader() {
				cancel()
				return
			}
		}
	}()
	return func() {
		close(done)
		<-watched
	}
}

// DialBound returns a context for one call through these clients that
// ends after dial unless the call has its connection by then, and
// otherwise lives as long as ctx: a server that cannot be reached is
// given up on quickly, one that is reached but slow to answer is waited
// for. The returned func must be called once the call is done.
func DialBound(ctx context.Context, dial time.Duration) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	var connected atomic.Bool
	t := time.AfterFunc(dial, func() {
		if !connected.Load() {
			cancel()
		}
	})
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn: func(httptrace.GotConnInfo) { connected.Store(true) },
	})
	return ctx, func() {
		t.Stop()
		cancel()
	}
}
