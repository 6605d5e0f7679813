package api

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// frozenAddr is the URL of an agent frozen as SIGSTOP freezes one: its
// kernel completes connections (the listener's backlog) and nothing ever
// reads them or answers.
func frozenAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return "http://" + l.Addr().String()
}

// countingAgent answers every request after delay(method, path), and
// counts the requests of each "METHOD path".
type countingAgent struct {
	mu    sync.Mutex
	seen  map[string]int
	delay func(method, path string) time.Duration
	URL   string
}

func startCountingAgent(t *testing.T, delay func(method, path string) time.Duration) *countingAgent {
	t.Helper()
	a := &countingAgent{seen: map[string]int{}, delay: delay}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		a.seen[r.Method+" "+r.URL.Path]++
		a.mu.Unlock()
		if a.delay != nil {
			select {
			case <-time.After(a.delay(r.Method, r.URL.Path)):
			case <-r.Context().Done():
				return
			}
		}
		w.Write([]byte(`{"node":"` + r.Host + `","id":"j1"}`))
	}))
	t.Cleanup(srv.Close)
	a.URL = srv.URL
	return a
}

func (a *countingAgent) count(req string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.seen[req]
}

// testClient is a client of addrs with the CLI's patience, bounded by a
// context of 20 s: a call that hangs fails the test instead of hanging it.
func testClient(t *testing.T, addrs ...string) (*Client, context.Context) {
	t.Helper()
	c, err := NewClient(strings.Join(addrs, ","), "")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return c.WithTimeouts(DefaultHedgeAfter, DefaultAnswerWait), ctx
}

// A frozen first agent (the SIGSTOPped node) is passed for the
// next: the read is answered, where it used to hang until the node woke.
func TestClient_AFrozenFirstAgentIsPassedForTheNext(t *testing.T) {
	live := startCountingAgent(t, nil)
	c, ctx := testClient(t, frozenAddr(t), live.URL)
	s, err := c.Status(ctx)
	if err != nil {
		t.Fatalf("status through a frozen agent, then a live one: %v", err)
	}
	if !strings.Contains(live.URL, s.Node) {
		t.Fatalf("answered by %q, want %s", s.Node, live.URL)
	}
	// The next call goes to the agent that answered first.
	if _, err := c.Status(ctx); err != nil {
		t.Fatal(err)
	}
	if n := live.count("GET /v1/status"); n != 2 {
		t.Fatalf("the live agent saw %d status calls, want 2", n)
	}
}

// An agent that answers slowly still answers: the read goes to the next
// one too, and the first answer is taken; the next call starts with the
// agent that answered.
func TestClient_ASlowAgentIsHedgedAndTheFastOneAskedNext(t *testing.T) {
	slow := startCountingAgent(t, func(string, string) time.Duration { return 3 * time.Second })
	fast := startCountingAgent(t, nil)
	c, ctx := testClient(t, slow.URL, fast.URL)
	for range 3 {
		if _, err := c.Status(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if s, f := slow.count("GET /v1/status"), fast.count("GET /v1/status"); s != 1 || f != 3 {
		t.Fatalf("the slow agent saw %d calls, the fast one %d: want 1 and 3", s, f)
	}
}

// With every agent frozen, a call fails once its answer wait is over,
// saying what the agents did, instead of hanging.
func TestClient_AllAgentsFrozenFailsSayingSo(t *testing.T) {
	c, ctx := testClient(t, frozenAddr(t), frozenAddr(t))
	c = c.WithTimeouts(50*time.Millisecond, 300*time.Millisecond)
	_, err := c.Status(ctx)
	if err == nil || !errors.Is(err, errNoAnswer) || !strings.Contains(err.Error(), "took the connection but gave no answer") {
		t.Fatalf("status with every agent frozen: %v", err)
	}
	if ctx.Err() != nil {
		t.Fatal("the call waited out the test's context, not its own answer wait")
	}
	// One agent alone, the same.
	one, ctx := testClient(t, frozenAddr(t))
	if _, err := one.WithTimeouts(0, 300*time.Millisecond).Status(ctx); !errors.Is(err, errNoAnswer) {
		t.Fatalf("status of one frozen agent: %v", err)
	}
}

// A write that must be done once goes to the first agent that answers a
// ping, and to no other, however long it then takes.
func TestClient_AWriteIsSentToOneAgentOnly(t *testing.T) {
	slowWrites := func(method, path string) time.Duration {
		if method == http.MethodDelete {
			return 1500 * time.Millisecond
		}
		return 0
	}
	first := startCountingAgent(t, slowWrites)
	second := startCountingAgent(t, nil)
	c, ctx := testClient(t, first.URL, second.URL)
	if _, err := c.CancelJob(ctx, "j1"); err != nil {
		t.Fatal(err)
	}
	if f, s := first.count("DELETE /v1/jobs/j1"), second.count("DELETE /v1/jobs/j1"); f != 1 || s != 0 {
		t.Fatalf("the cancel reached the first agent %d times, the second %d: want once, and never", f, s)
	}
	// Through a frozen first agent, the write goes to the live one.
	live := startCountingAgent(t, nil)
	c, ctx = testClient(t, frozenAddr(t), live.URL)
	if _, err := c.CancelJob(ctx, "j1"); err != nil {
		t.Fatal(err)
	}
	if n := live.count("DELETE /v1/jobs/j1"); n != 1 {
		t.Fatalf("the live agent saw the cancel %d times, want 1", n)
	}
}

// A submission with its request ID may go to several agents (the cluster
// keeps one job per request ID); without one it goes to one alone.
func TestClient_ASubmissionWithItsRequestIDIsHedged(t *testing.T) {
	slow := startCountingAgent(t, func(string, string) time.Duration { return 3 * time.Second })
	fast := startCountingAgent(t, nil)
	c, ctx := testClient(t, slow.URL, fast.URL)
	if _, err := c.SubmitJob(ctx, SubmitRequest{RequestID: "r1"}); err != nil {
		t.Fatal(err)
	}
	if n := fast.count("POST /v1/jobs"); n != 1 {
		t.Fatalf("the fast agent saw the submission %d times, want 1", n)
	}
	slow2 := startCountingAgent(t, func(method, _ string) time.Duration {
		if method == http.MethodPost {
			return time.Second
		}
		return 0
	})
	fast2 := startCountingAgent(t, nil)
	c, ctx = testClient(t, slow2.URL, fast2.URL)
	if _, err := c.SubmitJob(ctx, SubmitRequest{}); err != nil {
		t.Fatal(err)
	}
	if s, f := slow2.count("POST /v1/jobs"), fast2.count("POST /v1/jobs"); s != 1 || f != 0 {
		t.Fatalf("a submission without a request ID reached the agents %d and %d times, want 1 and 0", s, f)
	}
}

// A request about the agent it is sent to (leave) never goes to another.
func TestClient_LeaveGoesToTheFirstAgentAlone(t *testing.T) {
	other := startCountingAgent(t, nil)
	c, ctx := testClient(t, closedAddr(t), other.URL)
	if _, err := c.Leave(ctx); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("leave through a dead first agent: %v", err)
	}
	if n := other.count("POST /v1/leave"); n != 0 {
		t.Fatalf("another agent was asked to leave %d times", n)
	}
}
