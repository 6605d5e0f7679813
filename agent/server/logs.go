package server

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/fsm"
	"github.com/skein-dev/skein/structs"
)

// logPoll is how often a followed log is checked for new output when the
// state has not changed.
const logPoll = 200 * time.Millisecond

// handleLogs streams one stream of one rank of one of a job's attempts
// (?attempt, the newest by default), or its end (?tail, ?lines).
func (s *Server) handleLogs(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	rank := 0
	if s := q.Get("rank"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 || n >= structs.MaxNodes {
			writeError(w, http.StatusBadRequest, fmt.Errorf("rank %q: want a number in 0..%d", s, structs.MaxNodes-1))
			return
		}
		rank = n
	}
	attempt := 0 // the newest
	if s := q.Get("attempt"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			writeError(w, http.StatusBadRequest, fmt.Errorf("attempt %q: want a number from 1 (the first attempt) on", s))
			return
		}
		attempt = n
	}
	stream, tail, err := parseLogQuery(q)
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	follow := q.Get("follow") == "true"
	job, err := s.fsm.FindJob(r.PathValue("id"))
	if err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	if !mayActOn(w, r, job, "read the logs") {
		return
	}
	if rank >= job.Spec.Nodes {
		writeError(w, http.StatusBadRequest, fmt.Errorf("rank %d: job %s has ranks 0..%d", rank, structs.ShortID(job.ID), job.Spec.Nodes-1))
		return
	}

	alloc, err := s.waitForAlloc(r, job.ID, rank, attempt, follow)
	s.holdWrite(w) // the wait may have outlasted the server's bound
	if err != nil {
		writeError(w, http.StatusNotFound, err)
		return
	}
	if alloc.NodeID != s.cfg.NodeID {
		addr := s.cfg.Peers.HTTPAddrOf(alloc.NodeID)
		if addr == "" {
			writeError(w, http.StatusBadGateway, fmt.Errorf("rank %d of job %s ran on node %s, whose address is unknown", rank, structs.ShortID(job.ID), structs.ShortID(alloc.NodeID)))
			return
		}
		s.proxyLogs(w, r, addr, alloc.ID)
		return
	}
	s.serveLog(w, r, s.fsm, alloc, stream, follow, tail)
}

// serveLog streams one of this node's allocations' output, following it
// while st says the allocation is live.
func (s *Server) serveLog(w http.ResponseWriter, r *http.Request, st *fsm.FSM, alloc *structs.Allocation, stream string, follow bool, tail *logTail) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set(api.LogAttemptHeader, strconv.Itoa(alloc.Attempt))
	if tail == nil {
		s.setLogDropped(w, alloc.ID, stream)
	}
	w.WriteHeader(http.StatusOK)
	if err := s.copyLog(w, r, st, alloc.ID, stream, follow, tail); err != nil {
		s.log.Debug("log stream ended", "alloc", structs.ShortID(alloc.ID), "error", err)
	}
}

// proxyLogs streams the output of an allocation that ran on the node at
// addr from that node's internal API (handleAllocLogs), with the query the
// user sent: this node has checked who may read it. A worker holds no
// ACLs to check a user's token with; the node-to-node API takes the
// node's own credential.
func (s *Server) proxyLogs(w http.ResponseWriter, r *http.Request, addr, allocID string) {
	req, err := s.cfg.Peers.NewRequest(r.Context(), http.MethodGet,
		addr+internalPrefix+"allocs/"+url.PathEscape(allocID)+"/logs?"+r.URL.RawQuery, nil)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	s.relayFrom(w, req, addr)
}

// handleAllocLogs serves GET /v1/internal/allocs/{id}/logs to the node
// that a user asked for the logs (handleLogs): the output of one of this
// node's allocations, as this node's view knows it, with the user API's
// stream, follow, tail and lines.
func (s *Server) handleAllocLogs(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	stream, tail, err := parseLogQuery(q)
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	view := s.view()
	alloc, ok := view.Alloc(r.PathValue("id"))
	if !ok || alloc.NodeID != s.cfg.NodeID {
		writeError(w, http.StatusNotFound, fmt.Errorf("allocation %s: not one of this node's", structs.ShortID(r.PathValue("id"))))
		return
	}
	s.serveLog(w, r, view, alloc, stream, q.Get("follow") == "true", tail)
}

// view is this node's view of the state (Config.View), or the state
// where none was given.
func (s *Server) view() *fsm.FSM {
	if s.cfg.View != nil {
		return s.cfg.View
	}
	return s.fsm
}

// parseLogQuery reads ?stream (stdout, the default, or stderr) and the
// end of it asked for (parseLogTail).
func parseLogQuery(q url.Values) (stream string, tail *logTail, err error) {
	switch stream = q.Get("stream"); stream {
	case "":
		stream = api.StreamStdout
	case api.StreamStdout, api.StreamStderr:
	default:
		return "", nil, fmt.Errorf("stream %q: want stdout or stderr", stream)
	}
	tail, err = parseLogTail(q)
	return stream, tail, err
}

// logTail is the end of a stream that a request asks for.
type logTail struct {
	bytes int64
	lines int // -1: as many as the bytes hold
}

// parseLogTail reads ?tail (bytes) and ?lines; nil when neither is given.
func parseLogTail(q url.Values) (*logTail, error) {
	t := &logTail{bytes: api.MaxLogTail, lines: -1}
	given := false
	if s := q.Get("tail"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 || n > api.MaxLogTail {
			return nil, fmt.Errorf("tail %q: want a number of bytes in 0..%d", s, api.MaxLogTail)
		}
		t.bytes, given = n, true
	}
	if s := q.Get("lines"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 || n > api.MaxLogLines {
			return nil, fmt.Errorf("lines %q: want a number of lines in 0..%d", s, api.MaxLogLines)
		}
		t.lines, given = n, true
	}
	if !given {
		return nil, nil
	}
	return t, nil
}

// waitForAlloc finds the allocation of a rank in an attempt (0: the
// newest); when following a job that is still going it waits for one to
// be placed.
func (s *Server) waitForAlloc(r *http.Request, jobID string, rank, attempt int, follow bool) (*structs.Allocation, error) {
	for {
		_, changed := s.fsm.Watch()
		var found *structs.Allocation
		for _, alloc := range s.fsm.Allocs(jobID) {
			if alloc.Rank != rank {
				continue
			}
			if attempt == 0 && (found == nil || alloc.Attempt > found.Attempt) || alloc.Attempt == attempt {
				found = alloc
			}
		}
		if found != nil {
			return found, nil
		}
		job, ok := s.fsm.Job(jobID)
		if !follow || !ok || job.State.Terminal() {
			if attempt == 0 || !ok || job.Attempts == 0 {
				return nil, fmt.Errorf("job %s has not started, so it has no logs yet", structs.ShortID(jobID))
			}
			return nil, fmt.Errorf("job %s has no attempt %d: its attempts are 1..%d", structs.ShortID(jobID), attempt, job.Attempts)
		}
		select {
		case <-r.Context().Done():
			return nil, r.Context().Err()
		case <-s.ctx.Done():
			return nil, errors.New("agent shutting down")
		case <-changed:
		}
	}
}

// setLogDropped tells the client, in headers, how much of the stream the
// log cap dropped before the answer began (what follows is what is kept:
// the rotated file, then the current one).
func (s *Server) setLogDropped(w http.ResponseWriter, allocID, stream string) {
	dropped, logMax, err := s.cfg.Logs.LogDropped(allocID, stream)
	if err != nil {
		s.log.Warn("cannot tell how much output was dropped", "alloc", structs.ShortID(allocID), "stream", stream, "error", err)
		return
	}
	if dropped > 0 {
		w.Header().Set(api.LogDroppedHeader, strconv.FormatInt(dropped, 10))
		w.Header().Set(api.LogMaxHeader, strconv.FormatInt(logMax, 10))
	}
}

// copyLog writes what is kept of the stream to w, or its end when tail is
// set; when following it keeps writing new output, across rotations, until
// the allocation is over and everything was sent.
func (s *Server) copyLog(w http.ResponseWriter, r *http.Request, st *fsm.FSM, allocID, stream string, follow bool, tail *logTail) error {
	flusher, _ := w.(http.Flusher)
	var f io.ReadCloser
	defer func() {
		if f != nil {
			f.Close()
		}
	}()
	for {
		_, changed := st.Watch()
		alloc, ok := st.Alloc(allocID)
		done := !ok || !alloc.Live()
		if f == nil {
			var rd io.ReadCloser
			var err error
			if tail != nil {
				rd, err = s.cfg.Logs.OpenLogTail(allocID, stream, follow, tail.bytes, tail.lines)
			} else {
				rd, err = s.cfg.Logs.OpenLog(allocID, stream, follow)
			}
			// A stream with no output yet has no end to start from: a
			// follower reads all of what comes.
			tail = nil
			if err != nil && (done || !follow) {
				return nil // no output was ever written
			}
			f = rd
		}
		if f != nil {
			s.holdWrite(w) // a followed log may go on for as long as its job
			if _, err := io.Copy(w, f); err != nil {
				return err
			}
			if flusher != nil {
				flusher.Flush()
			}
		}
		if done || !follow {
			return nil
		}
		select {
		case <-r.Context().Done():
			return r.Context().Err()
		case <-s.ctx.Done():
			return nil
		case <-changed:
		case <-time.After(logPoll):
		}
	}
}
