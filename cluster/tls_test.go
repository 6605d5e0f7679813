package cluster

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/skein-dev/skein/internal/testutil"
)

// startTLSNode starts a raft-only member with mutual TLS, and raft's
// timing (zero: the defaults).
func startTLSNode(t *testing.T, id string, tp *TLSPair, network *Partitioner, bootstrap bool, timing ...Timing) *testNode {
	t.Helper()
	cfg := Config{NodeID: id, RaftBind: "127.0.0.1:0", RaftTLS: tp, Network: network,
		Bootstrap: bootstrap, Logger: testLogger(id)}
	if len(timing) > 0 {
		cfg.Timing = timing[0]
	}
	return startCfg(t, cfg)
}

// startTLSCluster starts three TLS members with certificates from ca, a
// leading and b and c added as voters, with raft's timing (none: the
// defaults).
func startTLSCluster(t *testing.T, ca *testutil.CA, network *Partitioner, timing ...Timing) (a, b, c *testNode) {
	t.Helper()
	a = startTLSNode(t, "a", tlsPair(t, ca, "a"), network, true, timing...)
	waitLeader(t, a)
	b = startTLSNode(t, "b", tlsPair(t, ca, "b"), network, false, timing...)
	c = startTLSNode(t, "c", tlsPair(t, ca, "c"), network, false, timing...)
	for _, n := range []*testNode{b, c} {
		if err := a.c.AddVoter(n.id, n.c.Addr()); err != nil {
			t.Fatalf("add voter %s: %v", n.id, err)
		}
	}
	mustApply(t, a, "k=1")
	waitFor(t, 10*time.Second, func() error { return converged("k", "1", a, b, c) })
	return a, b, c
}

// raftState is what a rogue peer must not change: term and configuration.
type raftState struct {
	term    uint64
	servers []RaftServer
}

func stateOf(t *testing.T, n *testNode) raftState {
	t.Helper()
	servers, err := n.c.Servers()
	if err != nil {
		t.Fatalf("%s: %v", n.id, err)
	}
	slices.SortFunc(servers, func(x, y RaftServer) int {
		if x.ID < y.ID {
			return -1
		}
		if x.ID > y.ID {
			return 1
		}
		return 0
	})
	return raftState{term: n.c.raft.CurrentTerm(), servers: servers}
}

// unchanged reports whether every node's term and configuration are as
// recorded.
func unchanged(before map[string]raftState, nodes ...*testNode) error {
	for _, n := range nodes {
		servers, err := n.c.Servers()
		if err != nil {
			return err
		}
		b := before[n.id]
		if term := n.c.raft.CurrentTerm(); term != b.term {
			return fmt.Errorf("%s: term %d, was %d", n.id, term, b.term)
		}
		if len(servers) != len(b.servers) {
			return fmt.Errorf("%s: servers %v, were %v", n.id, servers, b.servers)
		}
		for _, s := range servers {
			if !slices.Contains(b.servers, s) {
				return fmt.Errorf("%s: servers %v, were %v", n.id, servers, b.servers)
			}
		}
	}
	return nil
}

// rogueAppend sends target an AppendEntries of a term far ahead of n's:
// a peer that is listened to deposes the leader and moves the term.
func rogueAppend(trans raft.Transport, n *testNode) error {
	term := n.c.raft.CurrentTerm() + 100
	req := &raft.AppendEntriesRequest{
		RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("rogue"), Addr: []byte(trans.LocalAddr())},
		Term:      term,
	}
	var resp raft.AppendEntriesResponse
	return trans.AppendEntries(raft.ServerID(n.id), raft.ServerAddress(n.c.Addr()), req, &resp)
}

// rogueVote asks n for its vote in a term far ahead of its own.
func rogueVote(trans raft.Transport, n *testNode) error {
	req := &raft.RequestVoteRequest{
		RPCHeader:    raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("rogue"), Addr: []byte(trans.LocalAddr())},
		Term:         n.c.raft.CurrentTerm() + 100,
		LastLogIndex: n.c.raft.LastIndex() + 100,
		LastLogTerm:  n.c.raft.CurrentTerm() + 100,
	}
	var resp raft.RequestVoteResponse
	return trans.RequestVote(raft.ServerID(n.id), raft.ServerAddress(n.c.Addr()), req, &resp)
}

// rogueTransport is a raft transport of this package's stream layer with
// the given TLS, as a node outside the cluster would run it.
func rogueTransport(t *testing.T, tp *TLSPair) *raft.NetworkTransport {
	t.Helper()
	stream, err := newTCPStream("127.0.0.1:0", nil, nil, tp)
	if err != nil {
		t.Fatal(err)
	}
	trans := raft.NewNetworkTransport(stream, 1, 2*time.Second, io.Discard)
	t.Cleanup(func() {
		trans.CloseStreams()
		_ = trans.Close()
	})
	return trans
}

func TestRaftTLS_ThreeNodesElectCommitAndSurviveAPartition(t *testing.T) {
	t.Parallel()
	ca := testutil.NewCA(t, "cluster")
	network := &Partitioner{}
	a, b, c := startTLSCluster(t, ca, network)

	network.Block(a.c.Addr())
	var leader *testNode
	waitFor(t, 15*time.Second, func() error {
		var err error
		leader, err = leaderOf(b, c)
		return err
	})
	waitFor(t, 10*time.Second, func() error {
		_, err := leader.c.Apply([]byte("k=2"), applyTimeout)
		return err
	})
	network.Heal()
	waitFor(t, 15*time.Second, func() error { return converged("k", "2", a, b, c) })
}

func TestRaftTLS_PlaintextPeerGetsNoAnswerAndChangesNothing(t *testing.T) {
	t.Parallel()
	ca := testutil.NewCA(t, "cluster")
	a, b, c := startTLSCluster(t, ca, nil)
	nodes := []*testNode{a, b, c}
	before := map[string]raftState{}
	for _, n := range nodes {
		before[n.id] = stateOf(t, n)
	}

	plain, err := raft.NewTCPTransport("127.0.0.1:0", nil, 1, 2*time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		plain.CloseStreams()
		_ = plain.Close()
	})
	for _, n := range nodes {
		if err := rogueAppend(plain, n); err == nil {
			t.Fatalf("plaintext AppendEntries to %s was answered", n.id)
		}
		if err := rogueVote(plain, n); err == nil {
			t.Fatalf("plaintext RequestVote to %s was answered", n.id)
		}
	}

	// Raw raft bytes (an AppendEntries type byte and a msgpack map) get
	// nothing back: the node hangs up.
	conn, err := net.DialTimeout("tcp", a.c.Addr(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte{0, 0x81, 0xa4, 'T', 'e', 'r', 'm', 0xcd, 0x10, 0x00}); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	var ne net.Error
	if n, err := conn.Read(make([]byte, 64)); n != 0 || err == nil || (errors.As(err, &ne) && ne.Timeout()) {
		t.Fatalf("raw raft bytes: read %d bytes, %v; want the connection closed without an answer", n, err)
	}

	testutil.Holds(t, time.Second, func() error { return unchanged(before, nodes...) })
	mustApply(t, a, "k=still")
	waitFor(t, 10*time.Second, func() error { return converged("k", "still", nodes...) })
}

func TestRaftTLS_NodeFromAnotherCACannotJoinOrVote(t *testing.T) {
	t.Parallel()
	ca, other := testutil.NewCA(t, "cluster"), testutil.NewCA(t, "other")
	a, b, c := startTLSCluster(t, ca, nil)
	nodes := []*testNode{a, b, c}
	before := map[string]raftState{}
	for _, n := range nodes {
		before[n.id] = stateOf(t, n)
	}

	// d holds a certificate of another CA and believes it is a voter of
	// a, b and c's cluster: it campaigns, and its peers are dialled.
	d := startTLSNode(t, "d", tlsPair(t, other, "d"), nil, false)
	conf := raft.Configuration{}
	for _, n := range append(slices.Clone(nodes), d) {
		conf.Servers = append(conf.Servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(n.id), Address: raft.ServerAddress(n.c.Addr())})
	}
	if err := d.c.raft.BootstrapCluster(conf).Error(); err != nil {
		t.Fatal(err)
	}
	// A rogue peer with the other CA's certificate fails in Dial, whether
	// it trusts only its own CA (it refuses the node) or the cluster's too
	// (the node refuses it, after a TLS 1.3 client has finished its half).
	trusting := tlsPair(t, other, "rogue")
	trusting.Client.RootCAs = ca.Pool()
	// Go's client would send no certificate to a server that names other
	// CAs; present it anyway.
	cert := trusting.Client.Certificates[0]
	trusting.Client.Certificates = nil
	trusting.Client.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil }
	for name, tp := range map[string]*TLSPair{"own CA": tlsPair(t, other, "rogue"), "trusting": trusting} {
		rogue := rogueTransport(t, tp)
		for _, n := range nodes {
			err := rogueAppend(rogue, n)
			if err == nil || !strings.Contains(err.Error(), "tls handshake") {
				t.Fatalf("%s: AppendEntries from another CA to %s: %v; want a failed dial", name, n.id, err)
			}
			if err := rogueVote(rogue, n); err == nil {
				t.Fatalf("%s: RequestVote from another CA to %s was answered", name, n.id)
			}
		}
	}
	testutil.Holds(t, 2*time.Second, func() error {
		if err := unchanged(before, nodes...); err != nil {
			return err
		}
		if addr, _ := d.c.Leader(); addr != "" || d.fsm.get("k") != "" {
			return fmt.Errorf("d learnt of leader %q and k=%q", addr, d.fsm.get("k"))
		}
		return nil
	})
	mustApply(t, a, "k=still")
	waitFor(t, 10*time.Second, func() error { return converged("k", "still", nodes...) })

	// The probe is real: the same AppendEntries with a certificate of the
	// cluster's CA moves b's term.
	member := rogueTransport(t, tlsPair(t, ca, "rogue"))
	if err := rogueAppend(member, b); err != nil {
		t.Fatalf("AppendEntries with the cluster's CA: %v", err)
	}
	if term := b.c.raft.CurrentTerm(); term <= before["b"].term {
		t.Fatalf("b's term %d did not move with a trusted peer; the probe proves nothing", term)
	}
}

func TestRaftTLS_SilentConnectionIsDroppedWithoutHoldingUpOthers(t *testing.T) {
	t.Parallel()
	ca := testutil.NewCA(t, "cluster")
	srv, err := newTCPStream("127.0.0.1:0", nil, nil, tlsPair(t, ca, "srv"))
	if err != nil {
		t.Fatal(err)
	}
	srv.handshake = 300 * time.Millisecond
	done := make(chan struct{})
	go func() { // echo one 4-byte message per connection, as raft serves each in its own goroutine
		defer close(done)
		for {
			conn, err := srv.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				b := make([]byte, 4)
				if _, err := io.ReadFull(conn, b); err == nil {
					_, _ = conn.Write(b)
				}
			}()
		}
	}()
	t.Cleanup(func() {
		_ = srv.Close()
		<-done
	})

	silent, err := net.DialTimeout("tcp", srv.Addr().String(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	start := time.Now()

	// While the silent connection waits, a proper peer is served.
	cli, err := newTCPStream("127.0.0.1:0", nil, nil, tlsPair(t, ca, "cli"))
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	conn, err := cli.Dial(raft.ServerAddress(srv.Addr().String()), 2*time.Second)
	if err != nil {
		t.Fatalf("dial while another connection is silent: %v", err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 4)
	if _, err := io.ReadFull(conn, b); err != nil || string(b) != "ping" {
		t.Fatalf("echo = %q, %v", b, err)
	}

	// The silent one is closed once the handshake bound passes.
	_ = silent.SetReadDeadline(time.Now().Add(5 * time.Second))
	var ne net.Error
	if _, err := silent.Read(make([]byte, 1)); err == nil || (errors.As(err, &ne) && ne.Timeout()) {
		t.Fatalf("silent connection: read %v; want it closed by the server", err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("silent connection closed after %s; the bound is 300ms", took)
	}

	// A dial to a server that does not trust the dialler fails in Dial.
	stranger, err := newTCPStream("127.0.0.1:0", nil, nil, tlsPair(t, testutil.NewCA(t, "other"), "x"))
	if err != nil {
		t.Fatal(err)
	}
	defer stranger.Close()
	stranger.tls.Client.RootCAs = ca.Pool()
	if _, err := stranger.Dial(raft.ServerAddress(srv.Addr().String()), 2*time.Second); err == nil {
		t.Fatal("dial with a certificate of another CA succeeded")
	}
}

// A connection closed before the handshake (another server asking
// whether this port answers, stand.go) reads as a plain end, which raft
// does not log; a failed handshake still says why.
func TestRaftTLS_AConnectionClosedBeforeTheHandshakeIsAPlainEnd(t *testing.T) {
	t.Parallel()
	ca := testutil.NewCA(t, "cluster")
	srv, err := newTCPStream("127.0.0.1:0", nil, nil, tlsPair(t, ca, "srv"))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	for _, tc := range []struct {
		name  string
		send  []byte
		plain bool
	}{
		{"closed at once", nil, true},
		{"not TLS", []byte("GET / HTTP/1.0\r\n\r\n"), false},
	} {
		probe, err := net.DialTimeout("tcp", srv.Addr().String(), time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if tc.send != nil {
			_, _ = probe.Write(tc.send)
		}
		_ = probe.Close()
		conn, err := srv.Accept()
		if err != nil {
			t.Fatal(err)
		}
		_, err = conn.Read(make([]byte, 1))
		_ = conn.Close()
		if plain := err == io.EOF; plain != tc.plain {
			t.Errorf("%s: first read %v; a plain io.EOF: %v, want %v", tc.name, err, plain, tc.plain)
		}
	}
}

func TestNew_RejectsRaftTLSThatIsNotMutual(t *testing.T) {
	t.Parallel()
	ca := testutil.NewCA(t, "cluster")
	cases := []struct {
		name string
		edit func(*TLSPair)
		want string
	}{
		{name: "no client side", edit: func(p *TLSPair) { p.Client = nil }, want: "both a server and a client"},
		{name: "server without certificate", edit: func(p *TLSPair) { p.Server.Certificates = nil }, want: "server configuration has no certificate"},
		{name: "client without certificate", edit: func(p *TLSPair) { p.Client.Certificates = nil }, want: "client configuration has no certificate"},
		{name: "client certificates optional", edit: func(p *TLSPair) { p.Server.ClientAuth = tls.VerifyClientCertIfGiven }, want: "must require client certificates"},
		{name: "any client certificate, unchecked", edit: func(p *TLSPair) { p.Server.ClientAuth = tls.RequireAnyClientCert }, want: "no callback"},
		{name: "client skips verification", edit: func(p *TLSPair) { p.Client.InsecureSkipVerify = true }, want: "skips verification"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tp := tlsPair(t, ca, "a")
			tc.edit(tp)
			c, err := New(Config{NodeID: "a", DataDir: t.TempDir(), RaftBind: "127.0.0.1:0", FSM: newKV(), RaftTLS: tp})
			if err == nil {
				_ = c.Shutdown()
			}
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New = %v, want ErrInvalidConfig mentioning %q", err, tc.want)
			}
		})
	}
	// A callback that checks the peer makes RequireAnyClientCert acceptable.
	tp := tlsPair(t, ca, "a")
	tp.Server.ClientAuth = tls.RequireAnyClientCert
	tp.Server.VerifyPeerCertificate = func([][]byte, [][]*x509.Certificate) error { return nil }
	if err := tp.validate(); err != nil {
		t.Fatalf("RequireAnyClientCert with a callback: %v", err)
	}
}
