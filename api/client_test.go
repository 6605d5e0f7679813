package api

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestClient_SeveralAddrsFallThroughToOneThatAnswers: with SKEIN_ADDR
// naming several nodes, a dead one is skipped.
func TestClient_SeveralAddrsFallThroughToOneThatAnswers(t *testing.T) {
	live := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"node":"b","leader":"b"}`))
	}))
	defer live.Close()
	dead := closedAddr(t)
	c, err := NewClient(dead+", "+live.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.Status(context.Background())
	if err != nil || s.Node != "b" {
		t.Fatalf("status through %s then %s: %+v, %v", dead, live.URL, s, err)
	}
}

func TestClient_AllAddrsDeadSaysSo(t *testing.T) {
	c, err := NewClient(closedAddr(t)+","+closedAddr(t), "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Status(context.Background()); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("status with no agent up: %v", err)
	}
}

func TestClient_BadAddrIsRefused(t *testing.T) {
	for _, addr := range []string{"ftp://x:1", "http://", "http://ok:1,::bad"} {
		if _, err := NewClient(addr, ""); err == nil {
			t.Errorf("NewClient(%q) accepted it", addr)
		}
	}
}

// closedAddr is the URL of a port nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := "http://" + l.Addr().String()
	l.Close()
	return addr
}

// busyServer answers POST /v1/jobs 429 as a busy leader does, with
// Retry-After retryAfter, the first busy times (every time when busy < 0),
// then 201; it records each request's body.
type busyServer struct {
	mu     sync.Mutex
	bodies []string
}

func startBusyServer(t *testing.T, busy int, retryAfter string, mark bool) (*busyServer, string) {
	t.Helper()
	bs := &busyServer{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		bs.mu.Lock()
		bs.bodies = append(bs.bodies, string(b))
		n := len(bs.bodies)
		bs.mu.Unlock()
		if busy < 0 || n <= busy {
			w.Header().Set("Retry-After", retryAfter)
			if mark {
				w.Header().Set(BusyHeader, "writes")
			}
			w.WriteHeader(http.StatusTooManyRequests)
			w.Write([]byte(`{"error":"cluster busy: the leader has 2 writes in flight, its limit; nothing was done: try again in 1s"}`))
			return
		}
		w.WriteHeader(http.StatusCreated)
		w.Write([]byte(`{"id":"j1"}`))
	}))
	t.Cleanup(srv.Close)
	return bs, srv.URL
}

func (bs *busyServer) requests() []string {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	return append([]string(nil), bs.bodies...)
}

// A busy answer is sent again, the same request, after the server's
// Retry-After and at most half as much again, and the caller is told of
// each wait before it starts.
func TestClient_ABusyAnswerIsSentAgainAfterItsRetryAfter(t *testing.T) {
	bs, url := startBusyServer(t, 2, "1", true)
	c, err := NewClient(url, "")
	if err != nil {
		t.Fatal(err)
	}
	var waits []time.Duration
	c = c.WithBusyRetry(DefaultBusyWait, func(d time.Duration) { waits = append(waits, d) })
	start := time.Now()
	job, err := c.SubmitJob(context.Background(), SubmitRequest{RequestID: "r1"})
	if err != nil || job.ID != "j1" {
		t.Fatalf("submit to a busy server: %+v, %v", job, err)
	}
	reqs := bs.requests()
	if len(reqs) != 3 || reqs[0] != reqs[1] || reqs[1] != reqs[2] || !strings.Contains(reqs[0], `"request_id":"r1"`) {
		t.Fatalf("requests %q; want the same submission three times", reqs)
	}
	var total time.Duration
	for _, w := range waits {
		if w < time.Second || w > 1500*time.Millisecond {
			t.Fatalf("waits %v; want each from the server's 1s to 1.5s", waits)
		}
		total += w
	}
	if len(waits) != 2 || time.Since(start) < total {
		t.Fatalf("waits %v over %s; want two, waited out", waits, time.Since(start))
	}
}

// The waits of one call are bounded: past the bound the busy answer is
// the error, a 429 that says how long the client tried.
func TestClient_BusyRetriesStopAtTheirBound(t *testing.T) {
	bs, url := startBusyServer(t, -1, "1", true)
	c, err := NewClient(url, "")
	if err != nil {
		t.Fatal(err)
	}
	// One wait (1s to 1.5s) fits in 1.5s, a second never does.
	_, err = c.WithBusyRetry(1500*time.Millisecond, nil).SubmitJob(context.Background(), SubmitRequest{RequestID: "r1"})
	var apiErr *Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusTooManyRequests || apiErr.RetryAfter != time.Second ||
		!strings.Contains(err.Error(), "cluster busy") || !strings.Contains(err.Error(), "still busy after 1") {
		t.Fatalf("submit to a server busy for good: %v; want the 429, saying how long it was retried", err)
	}
	if n := len(bs.requests()); n != 2 {
		t.Fatalf("%d requests; want 2", n)
	}
	// With no wait allowed, the first busy answer is the error.
	_, err = c.WithBusyRetry(0, nil).SubmitJob(context.Background(), SubmitRequest{RequestID: "r1"})
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusTooManyRequests || strings.Contains(err.Error(), "still busy") {
		t.Fatalf("submit that may not wait: %v", err)
	}
	if n := len(bs.requests()); n != 3 {
		t.Fatalf("%d requests; want 3", n)
	}
}

// A 429 without the busy mark (a client refused for its failed
// authentications) is not the cluster's back-pressure: it is returned at
// once. A cancelled context ends a wait.
func TestClient_OnlyBusyAnswersAreRetried(t *testing.T) {
	bs, url := startBusyServer(t, -1, "3", false)
	c, err := NewClient(url, "")
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.SubmitJob(context.Background(), SubmitRequest{})
	var apiErr *Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusTooManyRequests || apiErr.RetryAfter != 0 || len(bs.requests()) != 1 {
		t.Fatalf("unmarked 429: %v after %d requests; want it at once", err, len(bs.requests()))
	}

	_, url = startBusyServer(t, -1, "60", true)
	if c, err = NewClient(url, ""); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c = c.WithBusyRetry(time.Hour, func(time.Duration) { cancel() })
	if _, err = c.SubmitJob(ctx, SubmitRequest{}); !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "cluster busy") {
		t.Fatalf("submit cancelled while waiting: %v", err)
	}
}

func TestRetryAfter_ReadsSecondsAndDates(t *testing.T) {
	for _, tc := range []struct {
		v        string
		min, max time.Duration
	}{
		{"2", 2 * time.Second, 2 * time.Second},
		{"0", minBusyWait, minBusyWait},
		{"", time.Second, time.Second},
		{"soon", time.Second, time.Second},
		{time.Now().Add(5 * time.Second).UTC().Format(http.TimeFormat), 3 * time.Second, 5 * time.Second},
	} {
		if got := retryAfter(tc.v); got < tc.min || got > tc.max {
			t.Errorf("Retry-After %q: %s; want %s to %s", tc.v, got, tc.min, tc.max)
		}
	}
}
