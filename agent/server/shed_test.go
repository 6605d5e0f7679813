package server

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/skein-dev/skein/agent/peer"
	"github.com/skein-dev/skein/api"
)

func TestShed_AStarvedLeaderPutsUsersReadsOffAndNothingElse(t *testing.T) {
	leader := startBusyNodeAs(t, raftRole{self: "a", leads: true, leaderID: "a", others: []string{"b"}}, "", 0)
	follower := startBusyNode(t, "b", "a", leader.url, 0)
	follower.starved.Store(true)
	// A starved node that does not lead sheds nothing: its reads take
	// no leader's CPU.
	if code, _, body := post(t, http.MethodGet, follower.url+"/v1/jobs", nil); code != http.StatusOK {
		t.Fatalf("a read of a starved follower: %d %s, want 200", code, body)
	}
	// Nor does a starved leader alone: no other node's lease is at stake,
	// and nobody else could answer.
	alone := startBusyNode(t, "z", "z", "", 0)
	alone.starved.Store(true)
	if code, _, body := post(t, http.MethodGet, alone.url+"/v1/jobs", nil); code != http.StatusOK {
		t.Fatalf("a read of a starved leader alone: %d %s, want 200", code, body)
	}
	leader.starved.Store(true)
	code, h, body := post(t, http.MethodGet, leader.url+"/v1/jobs", nil)
	if code != http.StatusTooManyRequests || h.Get(api.BusyHeader) != "reads" || h.Get("Retry-After") != "1" ||
		!strings.Contains(body, "short of CPU") {
		t.Fatalf("a read of a starved leader: %d %v %s, want 429 marked busy, Retry-After 1, saying why", code, h, body)
	}
	// What must not wait is answered: the status, a write, a lease.
	if code, _, body := post(t, http.MethodGet, leader.url+"/v1/status", nil); code != http.StatusOK {
		t.Errorf("the status of a starved leader: %d %s, want 200", code, body)
	}
	leader.log.release <- struct{}{}
	if code, _, body := post(t, http.MethodPost, leader.url+"/v1/jobs", submitBody("shed-1")); code != http.StatusCreated {
		t.Errorf("a write to a starved leader: %d %s, want 201", code, body)
	}
	if code, _, body := post(t, http.MethodPost, leader.url+"/v1/internal/heartbeat", api.HeartbeatRequest{NodeID: "w1"}); code != http.StatusOK {
		t.Errorf("a heartbeat to a starved leader: %d %s, want 200", code, body)
	}
	// The client waits as told and has its answer once the leader has
	// CPU again.
	c, err := api.NewClient(leader.url, busyToken)
	if err != nil {
		t.Fatal(err)
	}
	var waits atomic.Int32
	c = c.WithBusyRetry(10*time.Second, func(time.Duration) {
		if waits.Add(1) == 1 {
			leader.starved.Store(false)
		}
	})
	if _, err := c.Jobs(t.Context(), true); err != nil || waits.Load() != 1 {
		t.Fatalf("a client's read of a starved leader: %v after %d waits, want an answer after 1", err, waits.Load())
	}
}

// countedMetrics answers each scrape with how many it answered.
type countedMetrics struct{ n atomic.Int32 }

func (m *countedMetrics) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain")
	fmt.Fprintf(w, "scrapes %d\n", m.n.Add(1))
}

func (m *countedMetrics) ObserveRequest(string, string, int, time.Duration) {}

func TestShed_AStarvedLeaderAnswersAScrapeWithTheLastOne(t *testing.T) {
	var starved atomic.Bool
	m := &countedMetrics{}
	role := raftRole{self: "a", leads: true, leaderID: "a", others: []string{"b"}}
	s := &Server{shared: &shared{cfg: Config{Raft: role, Peers: peer.New(peer.Config{NodeID: "a", Raft: role}), Metrics: m, Starved: starved.Load}}}
	scrape := func(encoding string) (string, http.Header) {
		r := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		r.Header.Set("Accept-Encoding", encoding)
		w := httptest.NewRecorder()
		s.serveMetrics(w, r)
		return w.Body.String(), w.Header()
	}
	if body, _ := scrape("gzip"); body != "scrapes 1\n" {
		t.Fatalf("first scrape %q", body)
	}
	starved.Store(true)
	body, h := scrape("gzip")
	if body != "scrapes 1\n" || h.Get(api.StaleHeader) == "" || h.Get("Content-Type") != "text/plain" {
		t.Fatalf("a scrape of a starved leader: %q %v, want the last one with its headers and its age", body, h)
	}
	// Another format is not answered with one it did not ask for.
	if body, _ := scrape(""); body != "scrapes 2\n" {
		t.Fatalf("a scrape in another encoding while starved: %q, want a fresh one", body)
	}
	// Too old a scrape is not kept standing in.
	s.scrapes.at = time.Now().Add(-MaxStaleScrape - time.Second)
	if body, _ := scrape(""); body != "scrapes 3\n" {
		t.Fatalf("a scrape past %s while starved: %q, want a fresh one", MaxStaleScrape, body)
	}
	starved.Store(false)
	if body, h := scrape(""); body != "scrapes 4\n" || h.Get(api.StaleHeader) != "" {
		t.Fatalf("a scrape with CPU to spare: %q %v, want a fresh one", body, h)
	}
}
