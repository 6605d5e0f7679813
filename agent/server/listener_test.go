package server

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
)

// limitedServer is a ConnLimiter on loopback whose accepted connections
// are answered "ok" and kept, as an HTTP server would keep them.
type limitedServer struct {
	l        *ConnLimiter
	accepts  net.Listener // l, or a listener sharing its counts
	accepted chan net.Conn
}

// node1 and node2 are the cluster's nodes in these tests; every other
// address is a user.
var (
	node1 = netip.MustParseAddr("127.0.0.50")
	node2 = netip.MustParseAddr("127.0.0.51")
)

func startLimited(t *testing.T, limits ConnLimits, httpRefusal bool) *limitedServer {
	t.Helper()
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lim := LimitConns(raw, ListenerConfig{Limits: limits, HTTPRefusal: httpRefusal,
		IsNode: func(ip netip.Addr) bool { return ip == node1 || ip == node2 }})
	return serveLimited(t, lim, lim)
}

// serveLimited answers the connections accepts accepts, which lim limits.
func serveLimited(t *testing.T, lim *ConnLimiter, accepts net.Listener) *limitedServer {
	t.Helper()
	s := &limitedServer{l: lim, accepts: accepts, accepted: make(chan net.Conn, 100)}
	go func() {
		for {
			c, err := s.accepts.Accept()
			if err != nil {
				return
			}
			if _, err := io.WriteString(c, "ok\n"); err != nil {
				t.Errorf("write to an accepted connection: %v", err)
			}
			s.accepted <- c
		}
	}()
	t.Cleanup(func() {
		s.accepts.Close()
		for {
			select {
			case c := <-s.accepted:
				c.Close()
			default:
				return
			}
		}
	})
	return s
}

// dial connects from the loopback address from and returns the first line
// the server sends: "ok" when it accepted the connection, the refusal
// otherwise ("" when it closed it without a word). An accepted
// connection's server side is returned too, for the test to close.
func (s *limitedServer) dial(t *testing.T, from string) (line string, server net.Conn) {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	c, err := d.Dial("tcp", s.accepts.Addr().String())
	if err != nil {
		t.Fatalf("dial from %s: %v", from, err)
	}
	t.Cleanup(func() { c.Close() })
	r := bufio.NewReader(c)
	b, err := io.ReadAll(io.LimitReader(r, 3))
	if err != nil && !isReset(err) {
		t.Fatalf("read from %s: %v", from, err)
	}
	if string(b) == "ok\n" {
		return "ok", <-s.accepted
	}
	rest, err := io.ReadAll(r)
	if err != nil && !isReset(err) {
		t.Fatalf("read the refusal from %s: %v", from, err)
	}
	return string(b) + string(rest), nil
}

func isReset(err error) bool { return strings.Contains(err.Error(), "connection reset") }

// mustAccept dials from each address and fails unless every connection is
// accepted; it returns their server sides, each serving a request.
func (s *limitedServer) mustAccept(t *testing.T, from ...string) []net.Conn {
	t.Helper()
	conns := s.mustAcceptIdle(t, from...)
	for _, c := range conns {
		c.(*limitedConn).busy.Add(1)
	}
	return conns
}

// mustAcceptIdle is mustAccept of connections that serve no request.
func (s *limitedServer) mustAcceptIdle(t *testing.T, from ...string) []net.Conn {
	t.Helper()
	var conns []net.Conn
	for _, ip := range from {
		line, c := s.dial(t, ip)
		if line != "ok" {
			t.Fatalf("a connection from %s was refused: %q", ip, line)
		}
		conns = append(conns, c)
	}
	return conns
}

// closed reports whether the server closed its side of c.
func closed(c net.Conn) bool {
	_, err := c.Write([]byte("x"))
	return err != nil
}

// mustRefuse dials from ip and fails unless the connection is refused
// with an HTTP 503 that says want.
func (s *limitedServer) mustRefuse(t *testing.T, ip, want string) {
	t.Helper()
	line, _ := s.dial(t, ip)
	if !strings.HasPrefix(line, "HTTP/1.1 503 ") || !strings.Contains(line, want) {
		t.Fatalf("a connection from %s got %q, want a 503 saying %q", ip, line, want)
	}
}

func repeat(ip string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = ip
	}
	return out
}

func TestConnLimiter_PerClientCapRefusesOnlyThatClient(t *testing.T) {
	s := startLimited(t, ConnLimits{Users: 10, PerClient: 3, Nodes: 10, PerNode: 5}, true)
	held := s.mustAccept(t, repeat("127.0.0.2", 3)...)
	s.mustRefuse(t, "127.0.0.2", "too many connections from 127.0.0.2: at most 3 per client address")
	s.mustAccept(t, "127.0.0.3", "127.0.0.3")

	// A connection closed gives its place back.
	held[0].Close()
	s.mustAccept(t, "127.0.0.2")
	s.mustRefuse(t, "127.0.0.2", "at most 3 per client address")
}

func TestConnLimiter_TotalCapRefusesEveryNewUser(t *testing.T) {
	s := startLimited(t, ConnLimits{Users: 4, PerClient: 2, Nodes: 10, PerNode: 5}, true)
	s.mustAccept(t, "127.0.0.2", "127.0.0.2", "127.0.0.3", "127.0.0.3")
	for _, ip := range []string{"127.0.0.4", "127.0.0.5"} {
		s.mustRefuse(t, ip, "the agent holds its most from clients (4), none idle")
	}
}

func TestConnLimiter_AtTheTotalCapANewClientTakesTheIdlePlaceOfTheHeaviestClient(t *testing.T) {
	s := startLimited(t, ConnLimits{Users: 6, PerClient: 4, Nodes: 10, PerNode: 5}, true)
	heavy := s.mustAcceptIdle(t, repeat("127.0.0.2", 4)...)
	light := s.mustAcceptIdle(t, "127.0.0.3")
	busy := s.mustAccept(t, "127.0.0.4")
	// Full: each newcomer closes the heaviest client's oldest idle one.
	s.mustAccept(t, "127.0.0.5", "127.0.0.6")
	if !closed(heavy[0]) || !closed(heavy[1]) || closed(heavy[2]) || closed(light[0]) || closed(busy[0]) {
		t.Fatal("the newcomers did not take the places of the heaviest client's two oldest idle connections")
	}
	// The heaviest's connections that serve requests are never taken.
	heavy[2].(*limitedConn).busy.Add(1)
	heavy[3].(*limitedConn).busy.Add(1)
	s.mustAccept(t, "127.0.0.7")
	if !closed(light[0]) {
		t.Fatal("the last idle connection, of a lighter client, was kept for a newcomer")
	}
	s.mustRefuse(t, "127.0.0.8", "none idle")
	if got := s.l.Stats(); got.Users != 6 || got.Evicted != 3 || got.Refused != 1 {
		t.Fatalf("stats %+v: want 6 users held, 3 evicted, 1 refused", got)
	}
}

func TestConnLimiter_AtItsOwnCapAClientTakesTheIdlePlaceOfItsOldest(t *testing.T) {
	s := startLimited(t, ConnLimits{Users: 10, PerClient: 2, Nodes: 10, PerNode: 5}, true)
	mine := s.mustAcceptIdle(t, "127.0.0.2", "127.0.0.2")
	other := s.mustAcceptIdle(t, "127.0.0.3")
	s.mustAccept(t, "127.0.0.2")
	if !closed(mine[0]) || closed(mine[1]) || closed(other[0]) {
		t.Fatal("the client's new connection did not take the place of its own oldest idle one")
	}
}

func TestConnLimiter_NodesKeepTheirReserveWhileUsersAreAtTheirCap(t *testing.T) {
	s := startLimited(t, ConnLimits{Users: 4, PerClient: 2, Nodes: 5, PerNode: 3}, true)
	s.mustAccept(t, "127.0.0.2", "127.0.0.2", "127.0.0.3", "127.0.0.3")
	s.mustRefuse(t, "127.0.0.4", "holds its most from clients")

	s.mustAccept(t, repeat(node1.String(), 3)...)
	// One node cannot take the whole reserve...
	s.mustRefuse(t, node1.String(), "too many connections from node address 127.0.0.50: at most 3 per node")
	// ...the others have the rest of it.
	s.mustAccept(t, node2.String(), node2.String())
	s.mustRefuse(t, node2.String(), "too many connections from the cluster's nodes: at most 5")
	// Users still have none.
	s.mustRefuse(t, "127.0.0.4", "holds its most from clients")
}

func TestConnLimiter_CountsAcceptedRefusedAndOpen(t *testing.T) {
	s := startLimited(t, ConnLimits{Users: 2, PerClient: 2, Nodes: 2, PerNode: 2}, true)
	users := s.mustAccept(t, "127.0.0.2", "127.0.0.3")
	s.mustRefuse(t, "127.0.0.4", "holds its most")
	s.mustAccept(t, node1.String())
	s.mustRefuse(t, "127.0.0.2", "holds its most")
	want := ConnStats{Accepted: 3, Refused: 2, Users: 2, Nodes: 1}
	if got := s.l.Stats(); got != want {
		t.Fatalf("stats %+v, want %+v", got, want)
	}
	for _, c := range users {
		c.Close()
		c.Close() // closing twice gives the place back once
	}
	want.Users = 0
	if got := s.l.Stats(); got != want {
		t.Fatalf("stats after the users closed %+v, want %+v", got, want)
	}
}

func TestConnLimiter_OverTLSARefusedConnectionIsClosedWithoutAWord(t *testing.T) {
	s := startLimited(t, ConnLimits{Users: 1, PerClient: 1, Nodes: 1, PerNode: 1}, false)
	s.mustAccept(t, "127.0.0.2")
	if line, _ := s.dial(t, "127.0.0.3"); line != "" {
		t.Fatalf("a refused connection got %q, want it closed with nothing written", line)
	}
}

func TestConnLimiter_RefusalIsAnHTTPAnswerWithAJSONError(t *testing.T) {
	s := startLimited(t, ConnLimits{Users: 1, PerClient: 1, Nodes: 1, PerNode: 1}, true)
	s.mustAccept(t, "127.0.0.2")
	line, _ := s.dial(t, "127.0.0.2")
	head, body, ok := strings.Cut(line, "\r\n\r\n")
	if !ok || !strings.Contains(head, "Connection: close") || !strings.Contains(head, fmt.Sprintf("Content-Length: %d", len(body))) {
		t.Fatalf("refusal %q: want a complete HTTP answer that closes the connection", line)
	}
	if want := `{"error":"too many connections from 127.0.0.2: at most 1 per client address"}` + "\n"; body != want {
		t.Fatalf("refusal body %q, want %q", body, want)
	}
}

func TestClientKey_IPv6ClientsAreCountedByTheir64(t *testing.T) {
	a, b := netip.MustParseAddr("2001:db8:1:2::10"), netip.MustParseAddr("2001:db8:1:2:ffff::1")
	other := netip.MustParseAddr("2001:db8:1:3::10")
	if clientKey(a) != clientKey(b) || clientKey(a) == clientKey(other) {
		t.Fatalf("keys %s %s %s: want the first two equal and the third apart", clientKey(a), clientKey(b), clientKey(other))
	}
	if v4 := netip.MustParseAddr("10.0.0.7"); clientKey(v4) != v4 {
		t.Fatalf("an IPv4 client is counted as %s", clientKey(v4))
	}
}
