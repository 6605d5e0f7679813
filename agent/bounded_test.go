package agent

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/skein-dev/skein/agent/server"
	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

// clientFrom is an API client for a that connects from the loopback
// address from, a client that is not one of the cluster's nodes.
func clientFrom(t testing.TB, a *Agent, from, token string) *api.Client {
	t.Helper()
	c, err := api.NewClient(a.HTTPAddr(), token)
	if err != nil {
		t.Fatal(err)
	}
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	c = c.WithHTTPClient(&http.Client{Transport: &http.Transport{DialContext: d.DialContext}})
	if a.secure != nil {
		conf, err := api.ClusterTLS([]byte(strings.Join(a.secure.CA().CACerts, "")))
		if err != nil {
			t.Fatal(err)
		}
		c = c.WithTLS(conf)
	}
	return c
}

func statusCode(err error) int {
	var e *api.Error
	if errors.As(err, &e) {
		return e.StatusCode
	}
	return 0
}

func TestAgent_FailedAuthenticationsAreLimitedPerClientAddress(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, t.TempDir())
	cfg.Token = clusterToken
	a, admin, _ := startAgentAdmin(t, cfg)
	ctx := context.Background()
	for i := range 10 {
		if _, err := clientFrom(t, a, "127.0.0.2", fmt.Sprint("a-guess-", i)).Status(ctx); statusCode(err) != http.StatusUnauthorized {
			t.Fatalf("guess %d: %v, want 401", i+1, err)
		}
	}
	_, err := clientFrom(t, a, "127.0.0.2", "another-guess").Status(ctx)
	if statusCode(err) != http.StatusTooManyRequests || !strings.Contains(err.Error(), "too many failed authentications from 127.0.0.2") {
		t.Fatalf("the guess after the burst: %v, want 429 naming the client", err)
	}
	// The cluster's API token, which may be short enough to guess,
	// waits too; an ACL token, which cannot be guessed, does not.
	if _, err := clientFrom(t, a, "127.0.0.2", clusterToken).Status(ctx); statusCode(err) != http.StatusTooManyRequests {
		t.Fatalf("the cluster's API token from the limited address: %v, want 429", err)
	}
	if _, err := clientFrom(t, a, "127.0.0.2", admin).Status(ctx); err != nil {
		t.Fatalf("an ACL token from the limited address: %v", err)
	}
	if _, err := clientFrom(t, a, "127.0.0.3", admin).Status(ctx); err != nil {
		t.Fatalf("the right token from another address: %v", err)
	}
}

func TestAgent_RefusedJoinTokensAreLimitedPerClientAddress(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, t.TempDir())
	cfg.Token, cfg.Security = clusterToken, SecurityTLS
	a, adminToken, admin := startAgentAdmin(t, cfg)
	ctx := context.Background()
	real, err := admin.CreateJoinToken(ctx, api.JoinTokenCreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	other, err := admin.CreateJoinToken(ctx, api.JoinTokenCreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	// The real token's ID with another token's secret.
	parts, otherParts := strings.Split(real.Token, "."), strings.Split(other.Token, ".")
	parts[2] = otherParts[2]
	guess := api.AdmitRequest{Token: strings.Join(parts, "."), NodeID: structs.NewID(), Name: "intruder"}

	guesser := clientFrom(t, a, "127.0.0.2", "")
	for i := range 10 {
		if _, err := guesser.Admit(ctx, guess); statusCode(err) != http.StatusForbidden {
			t.Fatalf("guess %d: %v, want 403", i+1, err)
		}
	}
	if _, err := guesser.Admit(ctx, guess); statusCode(err) != http.StatusTooManyRequests {
		t.Fatalf("the guess after the burst: %v, want 429", err)
	}
	// The same address is refused on the user API too, but for an ACL
	// token, which cannot be guessed; others are not.
	if _, err := clientFrom(t, a, "127.0.0.2", "a-guess").Status(ctx); statusCode(err) != http.StatusTooManyRequests {
		t.Fatalf("the user API from the limited address: %v, want 429", err)
	}
	if _, err := clientFrom(t, a, "127.0.0.2", adminToken).Status(ctx); err != nil {
		t.Fatalf("the user API from the limited address with an ACL token: %v", err)
	}
	if _, err := clientFrom(t, a, "127.0.0.3", "").Admit(ctx, guess); statusCode(err) != http.StatusForbidden {
		t.Fatalf("a guess from another address: %v, want 403", err)
	}
}

// TestCluster_UsersHoldingEveryConnection_NodesStillGetIn fills the
// leader's user connections from two client addresses, and checks that a
// new user takes the place of an idle one and that nodes get in on their
// own reserve: a node that joins then
// registers and heartbeats through new connections to the leader, and a
// write submitted through it is forwarded to the leader.
func TestCluster_UsersHoldingEveryConnection_NodesStillGetIn(t *testing.T) {
	t.Parallel()
	ips := []string{"127.0.0.61", "127.0.0.62", "127.0.0.63", "127.0.0.64"}
	capped := func(i int, cfg *Config) {
		cfg.BindAddr = ips[i]
		cfg.MaxConns, cfg.MaxConnsPerClient = 20, 10
	}
	tc := startClusterWith(t, 3, capped)
	lead := tc.agents[tc.leader()]
	abuse := testutil.StartAbuse(testutil.AbuseConfig{
		Addr:      lead.listener.Addr().String(),
		From:      []string{"127.0.0.70", "127.0.0.71"},
		KeepAlive: 30,
		Redial:    200 * time.Millisecond,
	})
	t.Cleanup(abuse.Stop)
	testutil.WaitFor(t, 10*time.Second, func() error {
		if s := lead.ConnStats(); s.Users != 20 || s.Refused+s.Evicted == 0 {
			return fmt.Errorf("the leader holds %d user connections and refused or closed %d over the limit, want 20 and some", s.Users, s.Refused+s.Evicted)
		}
		return nil
	})
	// A user from another address takes the place of an idle one.
	if _, err := clientFrom(t, lead, "127.0.0.72", tc.admin).Status(context.Background()); err != nil {
		t.Fatalf("a user while others hold every connection, idle: %v", err)
	}

	cfg := clusterConfig(t, "node3", tc.net)
	capped(3, &cfg)
	cfg.Join = []string{tc.agents[2].raft.GossipAddr()}
	joined, err := New(cfg)
	if err != nil {
		t.Fatalf("start node3: %v", err)
	}
	t.Cleanup(joined.Shutdown)
	tc.agents = append(tc.agents, joined)
	tc.waitReady(4)
	job := tc.submit(joined, structs.JobSpec{Command: []string{"true"}})
	waitJob(t, lead, job.ID, jobState(structs.JobSucceeded))
	// Over several lease periods no node goes silent.
	testutil.Holds(t, 3*cfg.StopAfter, func() error {
		for _, n := range lead.fsm.Nodes() {
			if n.Status != structs.NodeReady {
				return fmt.Errorf("node %s is %s while users hold every connection", n.Name, n.Status)
			}
		}
		return nil
	})
	// The node that joined heartbeats through the reserve. (The others'
	// first connections may have been made before the leader knew their
	// addresses: those count as users' for as long as they stay open.)
	if s := lead.ConnStats(); s.Users != 20 || s.Nodes < 1 {
		t.Fatalf("the leader holds %d user and %d node connections, want 20 and some", s.Users, s.Nodes)
	}
}

// TestAgent_ClientsThatSendTheirHeadersSlowlyOrNeverAreCutOff: a
// connection that sends half its headers and then nothing (slowloris), one
// that sends nothing at all, and one that never finishes its TLS
// handshake are each closed by the agent after the read-header timeout
// (5 s), without a request having been served.
func TestAgent_ClientsThatSendTheirHeadersSlowlyOrNeverAreCutOff(t *testing.T) {
	t.Parallel()
	plain, _ := startAgent(t, testConfig(t, t.TempDir()))
	cfg := testConfig(t, t.TempDir())
	cfg.Security = SecurityTLS
	secure, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(secure.Shutdown)
	cases := []struct {
		name, send string
		a          *Agent
	}{
		{"half the headers", "GET /v1/status HTTP/1.1\r\nHost: skein\r\n", plain},
		{"nothing", "", plain},
		{"no TLS handshake", "", secure},
	}
	for _, tcase := range cases {
		t.Run(tcase.name, func(t *testing.T) {
			t.Parallel()
			addr := strings.TrimPrefix(strings.TrimPrefix(tcase.a.HTTPAddr(), "http://"), "https://")
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := io.WriteString(conn, tcase.send); err != nil {
				t.Fatal(err)
			}
			// Far past the timeout, so that only the agent's close ends
			// the read on a busy machine; short of the 30 s read timeout,
			// which would close it too.
			if err := conn.SetReadDeadline(time.Now().Add(20 * time.Second)); err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(conn)
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatalf("the connection was still open after 20 s")
			}
			if strings.Contains(string(got), "200 OK") {
				t.Fatalf("a request without its headers was answered: %q", got)
			}
		})
	}
}

// dialFrom opens a raw connection to a's API from the loopback address
// from (a client, not one of the cluster's nodes), with a receive buffer
// of rcvbuf bytes (0: the kernel's).
func dialFrom(t *testing.T, a *Agent, from string, rcvbuf int) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	if rcvbuf > 0 {
		d.Control = func(_, _ string, raw syscall.RawConn) error {
			var err error
			if cerr := raw.Control(func(fd uintptr) {
				err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, rcvbuf)
			}); cerr != nil {
				return cerr
			}
			return err
		}
	}
	conn, err := d.Dial("tcp", a.listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// TestAgent_AnIdleKeepAliveConnectionIsClosedAfterTheIdleTimeout: a
// client that sent one request on a keep-alive connection, read the
// answer and then sends nothing has the connection closed by the agent
// after the idle timeout (1 s here); without it the read timeout (30 s)
// would hold it.
func TestAgent_AnIdleKeepAliveConnectionIsClosedAfterTheIdleTimeout(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, t.TempDir())
	cfg.APITimeouts = server.Timeouts{Idle: time.Second}
	a, admin, _ := startAgentAdmin(t, cfg)
	conn := dialFrom(t, a, "127.0.0.4", 0)
	if _, err := fmt.Fprintf(conn, "GET /v1/status HTTP/1.1\r\nHost: skein\r\n%s: %s\r\n\r\n", api.TokenHeader, admin); err != nil {
		t.Fatal(err)
	}
	if err := conn.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || resp.Close {
		t.Fatalf("the first request: %d, close %v, %v; want 200 on a connection kept alive", resp.StatusCode, resp.Close, err)
	}
	// Far past the idle timeout, so that only the agent's close ends the
	// read on a busy machine; short of the read timeout.
	if err := conn.SetReadDeadline(time.Now().Add(15 * time.Second)); err != nil {
		t.Fatal(err)
	}
	n, err := br.Read(make([]byte, 1))
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("the idle connection was still open after 15 s")
	}
	if n != 0 || !errors.Is(err, io.EOF) {
		t.Fatalf("reading the idle connection: %d bytes, %v; want it closed (EOF)", n, err)
	}
}

// TestAgent_AClientThatNeverReadsALargeAnswerIsCutOffAfterTheWriteTimeout:
// a client that asks for a log larger than the sockets' buffers and reads
// none of it holds the agent's write; after the write timeout (1 s here)
// the agent gives the connection up, and what reached the client ends
// short of the answer.
func TestAgent_AClientThatNeverReadsALargeAnswerIsCutOffAfterTheWriteTimeout(t *testing.T) {
	t.Parallel()
	const size = 24 << 20 // far past the agent's send buffer (4 MiB at most) and the client's
	cfg := testConfig(t, t.TempDir())
	cfg.LogMaxMiB = 64 // keeps the whole log
	cfg.APITimeouts = server.Timeouts{Write: time.Second}
	a, admin, c := startAgentAdmin(t, cfg)
	job := submit(t, c, 0, "head", "-c", strconv.Itoa(size), "/dev/zero")
	waitJobState(t, c, job.ID, structs.JobSucceeded)

	conn := dialFrom(t, a, "127.0.0.5", 16<<10)
	if _, err := fmt.Fprintf(conn, "GET /v1/jobs/%s/logs?stream=stdout HTTP/1.1\r\nHost: skein\r\n%s: %s\r\n\r\n", job.ID, api.TokenHeader, admin); err != nil {
		t.Fatal(err)
	}
	// The agent holds the connection (its write waits on the full
	// buffers), then gives it up.
	for _, want := range []int{1, 0} {
		testutil.WaitFor(t, 20*time.Second, func() error {
			if s := a.ConnStats(); s.Users != want {
				return fmt.Errorf("the agent holds %d client connections, want %d", s.Users, want)
			}
			return nil
		})
	}
	// Now read: what the buffers held, then the end of a cut connection.
	if err := conn.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("the connection was open after the agent dropped it from its count")
	}
	if resp.StatusCode != http.StatusOK || err == nil || n >= size {
		t.Fatalf("the log through a client that did not read: %d, %d of %d bytes, %v; want 200 and the answer cut short", resp.StatusCode, n, size, err)
	}
}
