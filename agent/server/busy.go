package server

import (
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/skein-dev/skein/api"
)

// The leader carries out at most Config.MaxWrites of the submitters'
// writes (jobs and services) at once (agent/DESIGN.md, "Bounded
// API"): a burst beyond it is answered 429 with Retry-After at once,
// before any of it is read or applied, instead of piling up Raft applies
// that take the CPU its heartbeats need. Administrators' writes (ACLs,
// limits, trust, GPU cordons) are never bounded, so that an operator can
// act on a flood while it lasts, nor are the nodes' own reports on the
// internal API.
const (
	// DefaultMaxWrites is the bound when Config.MaxWrites is 0: four of
	// Raft's batches (256 entries, the cluster's AppendEntries limit), so
	// that one batch fills while another commits; at a healthy leader's
	// rate (about 900 submissions a second on 2 cores, docs/benchmarks-history.md)
	// that many drain in about busyRetryAfter. A bound of one batch
	// halved a burst's throughput: the log idled while refused clients
	// waited.
	DefaultMaxWrites = 1024
	// MaxMaxWrites bounds --max-writes: past Raft's own queue of
	// applies, more in flight only hold more memory.
	MaxMaxWrites = 65536
	// busyRetryAfter is how long a refused write is told to wait.
	busyRetryAfter = time.Second
)

// writeGate counts the bounded writes in flight on this node.
type writeGate struct {
	slots chan struct{}
	log   hclog.Logger

	mu sync.Mutex
	// refused counts the writes refused since the last log line.
	refused    int
	lastLogged time.Time
}

func newWriteGate(limit int, log hclog.Logger) *writeGate {
	if limit <= 0 {
		limit = DefaultMaxWrites
	}
	return &writeGate{slots: make(chan struct{}, limit), log: log}
}

// bounded serves the write h while this node leads and has fewer than
// its bound in flight, and refuses it over the bound. A node that does
// not lead passes the write to the leader (forward), whose bound is the
// one that counts: its 429 reaches the client through the forward.
func (s *Server) bounded(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.cfg.Raft.IsLeader() {
			h(w, r)
			return
		}
		select {
		case s.writes.slots <- struct{}{}:
		default:
			s.writes.refuse(w)
			return
		}
		defer func() { <-s.writes.slots }()
		h(w, r)
	}
}

// refuse answers a write over the bound.
func (g *writeGate) refuse(w http.ResponseWriter) {
	limit := cap(g.slots)
	g.mu.Lock()
	g.refused++
	if time.Since(g.lastLogged) >= refusalLogEvery {
		g.log.Warn("cluster busy: refusing writes over the bound", "refused", g.refused, "max_writes", limit)
		g.refused, g.lastLogged = 0, time.Now()
	}
	g.mu.Unlock()
	secs := int((busyRetryAfter + time.Second - 1) / time.Second)
	answerBusy(w, "writes", secs, fmt.Errorf(
		"cluster busy: the leader has %d writes in flight, its limit; nothing was done: try again in %ds", limit, secs))
}

// answerBusy answers 429 with Retry-After (secs) and the busy mark, what
// (api.BusyHeader): the leader's back-pressure, which clients wait out.
func answerBusy(w http.ResponseWriter, what string, secs int, err error) {
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	w.Header().Set(api.BusyHeader, what)
	writeError(w, http.StatusTooManyRequests, err)
}
