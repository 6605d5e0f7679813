package server

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/skein-dev/skein/api"
)

// fakeClock is a clock tests move by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// countingAuth is TokenAuth that counts the requests it looks at, and
// also admits the ACL tokens in acl.
type countingAuth struct {
	TokenAuth
	acl     map[string]bool
	checked atomic.Int64
}

func (a *countingAuth) Authenticate(r *http.Request) (*http.Request, error) {
	a.checked.Add(1)
	if a.acl[requestToken(r)] {
		return r, nil
	}
	return a.TokenAuth.Authenticate(r)
}

// aclToken is a token of an ACL token's shape, numbered.
func aclToken(n int) string { return fmt.Sprintf("SKA1.%016x.%043d", n, n) }

// tracked is how many client addresses and tokens the limiter remembers.
func (f *failLimiter) tracked() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.clients.len() + f.tokens.len()
}

// guarded is an HTTP server on loopback behind guard with a failure
// limiter on a fake clock; requests from node1 come from a node.
type guarded struct {
	url   string
	auth  *countingAuth
	fails *failLimiter
	clock *fakeClock
}

func startGuarded(t *testing.T) *guarded {
	t.Helper()
	g := &guarded{auth: &countingAuth{TokenAuth: "right", acl: map[string]bool{aclToken(1): true, aclToken(2): true}},
		clock: &fakeClock{t: time.Unix(1000, 0)}}
	g.fails = newFailLimiter(func(r *http.Request) bool { return requestIP(r) == node1 }, hclog.NewNullLogger())
	g.fails.now = g.clock.now
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, struct{}{}) })
	srv := httptest.NewServer(guard(g.auth, g.fails, nil, ok))
	t.Cleanup(srv.Close)
	g.url = srv.URL
	return g
}

// get sends a request with token from the loopback address from and
// returns the status code and the Retry-After header.
func (g *guarded) get(t *testing.T, from, token string) (int, string) {
	t.Helper()
	return g.getFor(t, from, "", token)
}

// getFor is get as a worker at from passes on a request of user (""
// for none: the request is from's own).
func (g *guarded) getFor(t *testing.T, from, user, token string) (int, string) {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	c := &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
	defer c.CloseIdleConnections()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, g.url+"/v1/status", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(api.TokenHeader, token)
	if user != "" {
		req.Header.Set(ProxiedHeader, "worker")
		req.Header.Set("X-Forwarded-For", user)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("request from %s: %v", from, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Header.Get("Retry-After")
}

// failBurst spends a client's failed authentications, a guess of its
// own each time.
func (g *guarded) failBurst(t *testing.T, from string) {
	t.Helper()
	for i := range authFailBurst {
		if code, _ := g.get(t, from, fmt.Sprintf("wrong-%s-%d", from, i)); code != http.StatusUnauthorized {
			t.Fatalf("failure %d from %s answered %d, want 401", i+1, from, code)
		}
	}
}

func TestFailLimiter_AfterABurstOfFailuresTheClientIsRefusedWithoutItsTokenBeingChecked(t *testing.T) {
	g := startGuarded(t)
	g.failBurst(t, "127.0.0.2")
	checked := g.auth.checked.Load()
	for _, token := range []string{"wrong", "right"} {
		code, retry := g.get(t, "127.0.0.2", token)
		if code != http.StatusTooManyRequests || retry != fmt.Sprint(int(authFailEvery/time.Second)) {
			t.Fatalf("with token %q after the burst: %d, Retry-After %q; want 429 and %d", token, code, retry, int(authFailEvery/time.Second))
		}
	}
	if n := g.auth.checked.Load() - checked; n != 0 {
		t.Fatalf("%d tokens of a refused client were checked, want none", n)
	}
	// Other clients are served as before, right tokens and wrong.
	if code, _ := g.get(t, "127.0.0.3", "right"); code != http.StatusOK {
		t.Fatalf("another client with the right token: %d, want 200", code)
	}
	if code, _ := g.get(t, "127.0.0.3", "wrong"); code != http.StatusUnauthorized {
		t.Fatalf("another client with a wrong token: %d, want 401", code)
	}
}

func TestFailLimiter_ARefusedClientMayTryAgainOncePerInterval(t *testing.T) {
	g := startGuarded(t)
	g.failBurst(t, "127.0.0.2")
	g.clock.add(authFailEvery - time.Millisecond)
	if code, retry := g.get(t, "127.0.0.2", "right"); code != http.StatusTooManyRequests || retry != "1" {
		t.Fatalf("just before the interval: %d, Retry-After %q; want 429 and 1", code, retry)
	}
	g.clock.add(time.Millisecond)
	if code, _ := g.get(t, "127.0.0.2", "wrong"); code != http.StatusUnauthorized {
		t.Fatalf("one interval on, a failure: %d, want 401", code)
	}
	if code, _ := g.get(t, "127.0.0.2", "right"); code != http.StatusTooManyRequests {
		t.Fatalf("right after that failure: %d, want 429", code)
	}
	// Once every failure is paid for, the client has its whole burst again.
	g.clock.add(authFailBurst * authFailEvery)
	g.failBurst(t, "127.0.0.2")
	if code, _ := g.get(t, "127.0.0.2", "right"); code != http.StatusTooManyRequests {
		t.Fatalf("after a second burst: %d, want 429", code)
	}
}

func TestFailLimiter_NodesAreNeverRefused(t *testing.T) {
	g := startGuarded(t)
	for range 3 * authFailBurst {
		if code, _ := g.get(t, node1.String(), "wrong"); code != http.StatusUnauthorized {
			t.Fatalf("a node's failure answered %d, want 401", code)
		}
	}
	if code, _ := g.get(t, node1.String(), "right"); code != http.StatusOK {
		t.Fatalf("a node after many failures: %d, want 200", code)
	}
	if n := g.fails.tracked(); n != 0 {
		t.Fatalf("the limiter tracks %d clients after failures from a node only, want 0", n)
	}
}

func TestFailLimiter_AWorkersUsersAreChargedEachForItsOwnFailures(t *testing.T) {
	g := startGuarded(t)
	// A user guessing tokens through a worker (a node) is refused...
	for i := range authFailBurst {
		if code, _ := g.getFor(t, node1.String(), "10.9.0.7", "wrong"); code != http.StatusUnauthorized {
			t.Fatalf("failure %d through the worker answered %d, want 401", i+1, code)
		}
	}
	if code, _ := g.getFor(t, node1.String(), "10.9.0.7", "right"); code != http.StatusTooManyRequests {
		t.Fatalf("the guessing user after its burst: %d, want 429", code)
	}
	// ...while the worker's other users and its own calls are served.
	if code, _ := g.getFor(t, node1.String(), "10.9.0.8", "right"); code != http.StatusOK {
		t.Fatalf("another user through the worker: %d, want 200", code)
	}
	if code, _ := g.get(t, node1.String(), "right"); code != http.StatusOK {
		t.Fatalf("the worker's own request: %d, want 200", code)
	}
	// A client that is no node gains nothing by claiming to pass a
	// request on: its failures are its own.
	g.failBurst(t, "127.0.0.5")
	if code, _ := g.getFor(t, "127.0.0.5", "10.9.0.9", "guess"); code != http.StatusTooManyRequests {
		t.Fatalf("a refused client naming another user: %d, want 429", code)
	}
}

func TestFailLimiter_RemembersAtMostItsCapOfClients(t *testing.T) {
	b := newFailures[netip.Addr](100)
	now := time.Unix(1000, 0)
	first := netip.MustParseAddr("10.0.0.1")
	for range authFailBurst {
		b.fail(first, now, authFailBurst, authFailEvery)
	}
	if b.wait(first, now, authFailBurst, authFailEvery) <= 0 {
		t.Fatal("a client that spent its burst may try again at once")
	}
	for i := range 1000 {
		b.fail(netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}), now, authFailBurst, authFailEvery)
		if n := b.len(); n > 100 {
			t.Fatalf("%d clients tracked, over the cap of 100", n)
		}
	}
	if b.wait(first, now, authFailBurst, authFailEvery) > 0 {
		t.Fatal("the client that failed least recently is still remembered past the cap")
	}
	// Clients whose failures are all paid for are forgotten.
	now = now.Add(2 * authFailEvery)
	b.fail(first, now, authFailBurst, authFailEvery)
	if n := b.len(); n != 1 {
		t.Fatalf("%d clients tracked once the others were paid for, want 1", n)
	}
}

func TestFailLimiter_RemembersAtMostItsCapOfGoodTokens(t *testing.T) {
	s := newLRU[int](3)
	for i := range 5 {
		s.add(i)
	}
	s.add(3) // used again: the most recent, so 2 goes next
	s.add(5)
	for i, want := range []bool{false, false, false, true, true, true} {
		if s.has(i) != want {
			t.Errorf("token %d remembered %v, want %v", i, s.has(i), want)
		}
	}
}

// A NAT, a login node, a notebook server: many users behind one address.
// One of them failing does not lock the others out.
func TestFailLimiter_OthersBadTokensFromAnAddressRefuseNoValidToken(t *testing.T) {
	g := startGuarded(t)
	// The colleague's token worked before (from anywhere): known good.
	if code, _ := g.get(t, "127.0.0.3", "right"); code != http.StatusOK {
		t.Fatalf("the colleague's token: %d, want 200", code)
	}
	for i := range authFailBurst + 1 {
		if code, _ := g.get(t, "127.0.0.2", fmt.Sprintf("guess-%d", i)); code != http.StatusUnauthorized && code != http.StatusTooManyRequests {
			t.Fatalf("bad token %d: %d, want 401 or 429", i, code)
		}
	}
	if code, _ := g.get(t, "127.0.0.2", "guess-x"); code != http.StatusTooManyRequests {
		t.Fatalf("the address that failed: %d, want 429", code)
	}
	if code, _ := g.get(t, "127.0.0.2", "right"); code != http.StatusOK {
		t.Fatalf("a known good token from the address others failed from: %d, want 200", code)
	}
	// An ACL token never seen here yet: its secret cannot be guessed, so
	// it is checked whatever the address did.
	if code, _ := g.get(t, "127.0.0.2", aclToken(2)); code != http.StatusOK {
		t.Fatalf("a valid ACL token, new to this node, from the address others failed from: %d, want 200", code)
	}
	if code, _ := g.get(t, "127.0.0.2", aclToken(9)); code != http.StatusTooManyRequests {
		t.Fatalf("a wrong ACL token from the address others failed from: %d, want 429", code)
	}
}

func TestFailLimiter_ABadTokenIsChargedToItself_FromEveryAddress(t *testing.T) {
	g := startGuarded(t)
	// One bad token, from a new address each time (a botnet, or a script
	// with a revoked token on many machines).
	for i := range authFailBurst {
		if code, _ := g.get(t, fmt.Sprintf("127.0.1.%d", i+1), "stolen-and-revoked"); code != http.StatusUnauthorized {
			t.Fatalf("failure %d: %d, want 401", i+1, code)
		}
	}
	checked := g.auth.checked.Load()
	if code, _ := g.get(t, "127.0.1.200", "stolen-and-revoked"); code != http.StatusTooManyRequests {
		t.Fatalf("the token that failed %d times, from a new address: %d, want 429", authFailBurst, code)
	}
	if n := g.auth.checked.Load() - checked; n != 0 {
		t.Fatal("a refused token was checked")
	}
	// Those addresses are not refused for it: each failed once.
	if code, _ := g.get(t, "127.0.1.1", "right"); code != http.StatusOK {
		t.Fatalf("an address that failed once, with a good token: %d, want 200", code)
	}
}

func TestFailLimiter_AOnceGoodTokenThatFailsChargesItselfNotItsAddress(t *testing.T) {
	g := startGuarded(t)
	g.auth.acl[aclToken(3)] = true
	if code, _ := g.get(t, "127.0.0.2", aclToken(3)); code != http.StatusOK {
		t.Fatalf("the token before its revocation: %d, want 200", code)
	}
	delete(g.auth.acl, aclToken(3)) // revoked; a script goes on using it
	for i := range 3 * authFailBurst {
		if code, _ := g.get(t, "127.0.0.2", aclToken(3)); code != http.StatusUnauthorized && code != http.StatusTooManyRequests {
			t.Fatalf("the revoked token, request %d: %d, want 401 or 429", i, code)
		}
	}
	if code, _ := g.get(t, "127.0.0.2", aclToken(3)); code != http.StatusTooManyRequests {
		t.Fatalf("the revoked token after its failures: %d, want 429", code)
	}
	if code, _ := g.get(t, "127.0.0.2", "guess"); code != http.StatusUnauthorized {
		t.Fatalf("another token from its address: %d, want 401 (the address was not charged)", code)
	}
}
