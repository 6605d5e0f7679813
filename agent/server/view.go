package server

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/cluster"
	"github.com/skein-dev/skein/fsm"
)

// A node's view watch (fsm/DESIGN.md, "Node views"): a node asks a server
// for its view, naming the hash of the one it holds and the leader it
// knows, and the server answers as soon as its view's hash or the leader
// Raft names differs, or with 304 once the wait is over. The next request
// resumes from what it got, so a watch that broke, or moved to another
// server, misses nothing. A node outside Raft learns the leader this way
// (its own Raft names none), in the time the new leader's first entry
// takes to reach the server.
const (
	// MaxViewWait bounds how long one view request waits for a change.
	MaxViewWait = 30 * time.Second
	// viewPace is how long a server lets the state settle after a change
	// before it writes a view, so a burst of entries costs one view.
	viewPace = 50 * time.Millisecond
)

// errNotServer answers view requests sent to a node outside the Raft
// configuration, whose state is not the cluster's.
var errNotServer = errors.New("this node holds no copy of the state: ask a server")

// handleNodeView answers GET /v1/internal/nodes/{id}/view?hash=H&index=I&leader=L&wait=D
// with the node's view when its hash is not H or the leader is not L,
// waiting up to D (at most MaxViewWait) for either to change; 304 when
// neither did. A server whose state is behind the view the node holds
// (index I), or holds nothing yet (one restarted, replaying its log),
// answers no view until it has caught up: a view from it would take the
// node back, or make it forget what it runs, whom it refuses and where
// the services are.
func (s *nodeRoutes) handleNodeView(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !reportsFor(w, r, id) {
		return
	}
	q := r.URL.Query()
	wait := time.Duration(0)
	if v := q.Get("wait"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 || d > MaxViewWait {
			writeError(w, http.StatusBadRequest, fmt.Errorf("wait %q: want a duration from 0s to %s", v, MaxViewWait))
			return
		}
		wait = d
	}
	if !s.holdsState() {
		writeError(w, http.StatusServiceUnavailable, errNotServer)
		return
	}
	have, knownLeader := q.Get("hash"), q.Get("leader")
	held := uint64(0)
	if v := q.Get("index"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			writeError(w, http.StatusBadRequest, fmt.Errorf("index %q: want the index of the view held, a number", v))
			return
		}
		held = n
	}
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	var (
		v     fsm.NodeView
		stamp uint64
	)
	for first := true; ; first = false {
		_, changed := s.fsm.Watch()
		// The stamp is cheap; the view is written only when it moved.
		if now := s.fsm.NodeViewStamp(id); first || now != stamp {
			stamp = now
			var err error
			if v, err = s.fsm.NodeView(id); err != nil {
				writeError(w, http.StatusInternalServerError, err)
				return
			}
		}
		_, leader := s.cfg.Raft.Leader()
		caughtUp := v.Index > 0 && v.Index >= held
		if caughtUp && (v.Hash != have || (leader != "" && leader != knownLeader)) {
			// A watch that began before its node was revoked is not
			// answered after: the view would carry the next gossip key.
			if _, err := s.cfg.NodeAuth.Authenticate(r); err != nil {
				writeError(w, http.StatusUnauthorized, err)
				return
			}
			s.holdWrite(w)
			w.Header().Set("Content-Type", "application/x-ndjson")
			setViewHeaders(w, v.Hash, v.Index, leader)
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write(v.Data)
			return
		}
		select {
		case <-changed:
			time.Sleep(viewPace)
			continue
		case <-deadline.C:
		case <-r.Context().Done():
			return
		case <-s.ctx.Done():
		}
		s.holdWrite(w)
		setViewHeaders(w, v.Hash, v.Index, leader)
		w.WriteHeader(http.StatusNotModified)
		return
	}
}

func setViewHeaders(w http.ResponseWriter, hash string, index uint64, leader string) {
	w.Header().Set(api.ViewHashHeader, hash)
	w.Header().Set(api.ViewIndexHeader, strconv.FormatUint(index, 10))
	if leader != "" {
		w.Header().Set(api.ViewLeaderHeader, leader)
	}
}

// holdsState reports whether this node is a server of the Raft
// configuration, whose state is the cluster's.
func (s *shared) holdsState() bool {
	servers, err := s.cfg.Raft.Servers()
	return cluster.HoldsState(servers, err, s.cfg.NodeID)
}
