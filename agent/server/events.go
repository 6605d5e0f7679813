package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/fsm"
	"github.com/skein-dev/skein/structs"
)

// handleEvents answers GET /v1/events from this node's state, leader or
// not: the events after ?after (a cursor, INDEX or INDEX.SEQ), of ?job (an
// ID or unique prefix) or ?node (an ID or name) when given, at most
// ?limit. With follow=true it streams them as newline-delimited JSON, one
// event a line, flushed as they come, until the client goes away; each
// read takes at most a page from the state, so a follower costs bounded
// memory however far behind it is, and it sends an empty line every
// api.EventKeepAlive while there is nothing to say. Events that the state
// no longer keeps are not skipped quietly: the page's "dropped" says up to
// where, and a follower gets an events-dropped event in their place.
//
// The query, and a page, are endpoint.Cluster's (EventQuery, Events);
// following is the transport's. Every caller that may read the cluster
// sees every event: a reader already sees every job and node, and no
// event tells an env value.
func (s *clusterRoutes) handleEvents(w http.ResponseWriter, r *http.Request) {
	v := r.URL.Query()
	q, err := s.clusterView.EventQuery(v.Get("after"), v.Get("limit"), v.Get("job"), v.Get("node"))
	if err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	if v.Get("follow") != "true" {
		writeJSON(w, http.StatusOK, s.clusterView.Events(q))
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	enc := json.NewEncoder(w)
	keepAlive := time.NewTicker(api.EventKeepAlive)
	defer keepAlive.Stop()
	for {
		p := s.fsm.Events(q)
		s.holdWrite(w)
		if !p.Dropped.IsZero() {
			gap := structs.Event{Index: p.Dropped.Index, Seq: p.Dropped.Seq, Kind: structs.EventsDropped,
				Reason: fmt.Sprintf("events after %s up to %s were dropped: the state keeps the newest %d", q.After, p.Dropped, fsm.MaxEvents)}
			if enc.Encode(gap) != nil {
				return
			}
		}
		for i := range p.Events {
			if enc.Encode(&p.Events[i]) != nil {
				return
			}
		}
		if rc.Flush() != nil {
			return
		}
		full := len(p.Events) == q.Limit
		q.After = p.Next
		if !full && !s.waitEvents(w, r, p.Changed, keepAlive.C) {
			return
		}
	}
}

// waitEvents waits for changed to close, writing an empty line at each
// keep-alive tick, and reports false when the stream is to end: the
// client went away, the server is shutting down, or a write failed.
func (s *clusterRoutes) waitEvents(w http.ResponseWriter, r *http.Request, changed <-chan struct{}, keepAlive <-chan time.Time) bool {
	rc := http.NewResponseController(w)
	for {
		select {
		case <-r.Context().Done():
			return false
		case <-s.ctx.Done():
			return false
		case <-changed:
			return true
		case <-keepAlive:
			s.holdWrite(w)
			if _, err := w.Write([]byte("\n")); err != nil || rc.Flush() != nil {
				return false
			}
		}
	}
}
