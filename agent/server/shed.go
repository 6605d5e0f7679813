package server

import (
	"bytes"
	"errors"
	"maps"
	"net/http"
	"sync"
	"time"

	"github.com/skein-dev/skein/api"
)

// Shedding (agent/DESIGN.md, "Bounded API": a leader short of CPU).
// While this node leads and its process is short of CPU
// (Config.Starved), what can wait does: users' reads through the API are
// refused 429 with Retry-After, marked busy so that the client waits and
// asks again, and a scrape of /metrics is answered with the last one
// taken while the CPU sufficed. Raft's heartbeats, the nodes' leases and
// reports, and the writes (bounded on their own, busy.go) are never
// shed; nor are the status, which monitoring polls and costs next to
// nothing, and the worker's question whether a server admits a caller,
// which every request through a worker waits on.
const (
	// shedRetryAfter is how long a shed read is told to wait.
	shedRetryAfter = time.Second
	// MaxStaleScrape is how old a scrape may be to stand in for a fresh
	// one while the leader is starved; past it a scrape is taken anyway.
	MaxStaleScrape = 30 * time.Second
)

// errShedRead answers a read a starved leader sheds.
var errShedRead = errors.New("cluster busy: the leader is short of CPU and puts reads off for now; try again in 1s, or ask another server")

// shedExempt are the reads a starved leader still answers.
var shedExempt = map[string]bool{"/v1/status": true, "/v1/acl/whoami": true, "/metrics": true}

// starved reports whether this node leads while its process is short of
// CPU. A node alone has no other node's leases to keep and nobody else
// to answer its users: it puts nothing off.
func (s *Server) starved() bool {
	return s.cfg.Starved != nil && s.cfg.Starved() && s.cfg.Raft.IsLeader() &&
		s.cfg.Peers != nil && !s.cfg.Peers.Alone()
}

// sheddingReads refuses users' reads while starved, before any of their
// work (authentication included) is done.
func (s *Server) sheddingReads(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && !shedExempt[r.URL.Path] && s.starved() {
			answerBusy(w, "reads", int(shedRetryAfter/time.Second), errShedRead)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// scrapeCache keeps the last answer to a scrape: the metrics handler's
// headers and body, for the format and encoding the scraper asked.
type scrapeCache struct {
	mu     sync.Mutex
	accept string // the request's Accept and Accept-Encoding
	status int
	header http.Header
	body   []byte
	at     time.Time
}

// serveMetrics answers a scrape. On the leader it keeps the answer, and
// while starved answers from it (when it is for the same format and at
// most MaxStaleScrape old, its age said in X-Skein-Stale); elsewhere it
// passes the scrape to the metrics.
func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request) {
	if !s.cfg.Raft.IsLeader() {
		s.cfg.Metrics.ServeHTTP(w, r)
		return
	}
	accept := r.Header.Get("Accept") + "|" + r.Header.Get("Accept-Encoding")
	c := &s.scrapes
	if s.starved() {
		c.mu.Lock()
		age := time.Since(c.at)
		if c.body != nil && c.accept == accept && age <= MaxStaleScrape {
			maps.Copy(w.Header(), c.header)
			w.Header().Set(api.StaleHeader, age.Round(time.Millisecond).String())
			w.WriteHeader(c.status)
			_, _ = w.Write(c.body)
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
	}
	rec := &recorder{header: http.Header{}, status: http.StatusOK}
	s.cfg.Metrics.ServeHTTP(rec, r)
	c.mu.Lock()
	c.accept, c.status, c.header, c.body, c.at = accept, rec.status, rec.header, rec.body.Bytes(), time.Now()
	c.mu.Unlock()
	maps.Copy(w.Header(), rec.header)
	w.WriteHeader(rec.status)
	_, _ = w.Write(rec.body.Bytes())
}

// recorder is a ResponseWriter that keeps what is written to it.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header         { return r.header }
func (r *recorder) WriteHeader(code int)        { r.status = code }
func (r *recorder) Write(b []byte) (int, error) { return r.body.Write(b) }
