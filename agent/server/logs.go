package server

import (
	"context"
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
// (?attempt, the newest by default), or its end (?tail, ?lines), from
// the node that ran it: here, or proxied from it. Which job and
// allocation, and whether the caller may, are endpoint.Allocs's
// (LogsOf, LogAlloc).
func (s *allocRoutes) handleLogs(w http.ResponseWriter, r *http.Request) {
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
	lq, err := parseLogQuery(q)
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	job, err := s.allocs.LogsOf(identityOf(r), r.PathValue("id"), rank)
	if s.catchUpOnMiss(r, r.PathValue("id"), err) {
		job, err = s.allocs.LogsOf(identityOf(r), r.PathValue("id"), rank)
	}
	if err != nil {
		writeError(w, statusOf(err), err)
		return
	}

	alloc, err := s.waitForAlloc(r, job.ID, rank, attempt, lq.follow)
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
	s.serveLog(w, r, s.fsm, alloc, lq)
}

// serveLog streams one of this node's allocations' output, following it
// while st says the allocation is live.
func (s *allocRoutes) serveLog(w http.ResponseWriter, r *http.Request, st *fsm.FSM, alloc *structs.Allocation, lq logQuery) {
	rd, offset := s.openStream(alloc.ID, lq)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set(api.LogAttemptHeader, strconv.Itoa(alloc.Attempt))
	if offset >= 0 {
		w.Header().Set(api.LogOffsetHeader, strconv.FormatInt(offset, 10))
	}
	switch {
	case lq.from > 0 && offset > lq.from:
		// Output the cap dropped since the client's stream broke.
		w.Header().Set(api.LogDroppedHeader, strconv.FormatInt(offset-lq.from, 10))
	case lq.tail == nil && lq.from == 0:
		s.setLogDropped(w, alloc.ID, lq.stream)
	}
	w.WriteHeader(http.StatusOK)
	if err := s.copyLog(w, r, st, alloc.ID, lq, rd); err != nil {
		s.log.Debug("log stream ended", "alloc", structs.ShortID(alloc.ID), "error", err)
	}
}

// openStream opens what an answer streams: all that is kept of the
// stream, from lq.from when that is further, or its end that lq.tail
// asks. It returns the reader, nil when the stream has no output yet (a
// follower opens it once it has), and where in the stream it begins: -1
// for an end without follow, which says nothing of where it is.
func (s *allocRoutes) openStream(allocID string, lq logQuery) (io.ReadCloser, int64) {
	if lq.tail != nil && !lq.follow {
		rd, err := s.cfg.Logs.OpenLogTail(allocID, lq.stream, false, lq.tail.bytes, lq.tail.lines)
		if err != nil {
			return nil, -1
		}
		return rd, -1
	}
	rd, offset, err := s.openKept(allocID, lq.stream)
	if err != nil {
		return nil, 0 // no output yet: it begins at its beginning
	}
	if lq.tail != nil {
		// The end, and where it is: what is kept is read to its end,
		// its last bytes held.
		end := &lastBytes{max: int(lq.tail.bytes)}
		n, err := io.Copy(end, rd)
		if err != nil {
			rd.Close()
			return nil, 0
		}
		t := lastLines(end.bytes(), lq.tail.lines)
		return &prefixed{head: t, ReadCloser: rd}, offset + n - int64(len(t))
	}
	if lq.from > offset {
		n, _ := io.CopyN(io.Discard, rd, lq.from-offset)
		offset += n
	}
	return rd, offset
}

// openKept opens, to follow, all that is kept of an allocation's stream,
// and says where in the stream it begins: after the bytes dropped. The
// count is read before and after the open, so that a rotation between
// the two is not miscounted.
func (s *allocRoutes) openKept(allocID, stream string) (io.ReadCloser, int64, error) {
	for try := 0; ; try++ {
		before, _, err := s.cfg.Logs.LogDropped(allocID, stream)
		if err != nil {
			return nil, 0, err
		}
		rd, err := s.cfg.Logs.OpenLog(allocID, stream, true)
		if err != nil {
			return nil, 0, err
		}
		after, _, err := s.cfg.Logs.LogDropped(allocID, stream)
		if err == nil && (after == before || try == 2) {
			return rd, after, nil
		}
		rd.Close()
		if err != nil {
			return nil, 0, err
		}
	}
}

// prefixed reads head, then its ReadCloser: again and again, as a
// follower reads a log (io.MultiReader would end at the first EOF).
type prefixed struct {
	head []byte
	io.ReadCloser
}

func (p *prefixed) Read(b []byte) (int, error) {
	if len(p.head) > 0 {
		n := copy(b, p.head)
		p.head = p.head[n:]
		return n, nil
	}
	return p.ReadCloser.Read(b)
}

// lastBytes keeps the last max bytes written to it.
type lastBytes struct {
	max int
	b   []byte
}

func (l *lastBytes) Write(p []byte) (int, error) {
	l.b = append(l.b, p...)
	if len(l.b) > 2*l.max+64<<10 {
		l.b = append(l.b[:0], l.b[len(l.b)-l.max:]...)
	}
	return len(p), nil
}

func (l *lastBytes) bytes() []byte { return l.b[len(l.b)-min(len(l.b), l.max):] }

// lastLines is the last n lines of b (all of it when n < 0): a line ends
// with a newline, and so does the last unless it is still being written.
func lastLines(b []byte, n int) []byte {
	if n < 0 {
		return b
	}
	end := len(b)
	if end > 0 && b[end-1] == '\n' {
		end-- // the last line's own newline
	}
	if n == 0 {
		return b[len(b):]
	}
	for i := end - 1; i >= 0; i-- {
		if b[i] == '\n' {
			if n--; n == 0 {
				return b[i+1:]
			}
		}
	}
	return b
}

// proxyLogs streams the output of an allocation that ran on the node at
// addr from that node's internal API (handleAllocLogs), with the query the
// user sent: this node has checked who may read it. A worker holds no
// ACLs to check a user's token with; the node-to-node API takes the
// node's own credential.
//
// The node has logProxyWait to begin its answer (it may first wait for its
// view to hear of the allocation, viewCatchUp), so that a frozen node is
// reported as one, not waited on for as long as the client waits.
func (s *allocRoutes) proxyLogs(w http.ResponseWriter, r *http.Request, addr, allocID string) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	req, err := s.cfg.Peers.NewRequest(ctx, http.MethodGet,
		addr+internalPrefix+"allocs/"+url.PathEscape(allocID)+"/logs?"+r.URL.RawQuery, nil)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	late := time.AfterFunc(logProxyWait, cancel)
	resp, err := s.cfg.Peers.Streams().Do(req)
	if !late.Stop() && err != nil && r.Context().Err() == nil {
		err = fmt.Errorf("no answer in %s", logProxyWait)
	}
	if err != nil {
		writeError(w, http.StatusBadGateway, fmt.Errorf("reach the node at %s: %w", addr, err))
		return
	}
	defer resp.Body.Close()
	s.relay(w, resp)
}

// logProxyWait bounds how long the node that holds an allocation's output
// has to begin its answer.
const logProxyWait = viewCatchUp + 5*time.Second

// handleAllocLogs serves GET /v1/internal/allocs/{id}/logs to the node
// that a user asked for the logs (handleLogs): the output of one of this
// node's allocations, as this node's view knows it, with the user API's
// stream, follow, tail and lines.
func (s *allocRoutes) handleAllocLogs(w http.ResponseWriter, r *http.Request) {
	lq, err := parseLogQuery(r.URL.Query())
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	view := s.view()
	alloc, err := s.waitForView(r, view, r.PathValue("id"))
	s.holdWrite(w) // the wait may have outlasted the server's bound
	if err != nil {
		writeError(w, http.StatusNotFound, err)
		return
	}
	s.serveLog(w, r, view, alloc, lq)
}

// viewCatchUp bounds how long a node asked for the output of one of its
// allocations waits for its view to hear of it.
const viewCatchUp = 10 * time.Second

// waitForView returns one of this node's allocations from its view,
// waiting up to viewCatchUp for the view to hear of it: the node that
// asks found it in its own copy of the state, which may be ahead of this
// node's view (just placed, as when a job's logs are followed the moment
// it was submitted).
func (s *allocRoutes) waitForView(r *http.Request, view *fsm.FSM, id string) (*structs.Allocation, error) {
	timeout := time.NewTimer(viewCatchUp)
	defer timeout.Stop()
	for {
		_, changed := view.Watch()
		if alloc, ok := view.Alloc(id); ok {
			if alloc.NodeID != s.cfg.NodeID {
				return nil, fmt.Errorf("allocation %s: not one of this node's: it is node %s's", structs.ShortID(id), structs.ShortID(alloc.NodeID))
			}
			return alloc, nil
		}
		select {
		case <-r.Context().Done():
			return nil, r.Context().Err()
		case <-s.ctx.Done():
			return nil, errors.New("agent shutting down")
		case <-timeout.C:
			return nil, fmt.Errorf("allocation %s: this node has not heard of it in %s: not one of this node's", structs.ShortID(id), viewCatchUp)
		case <-changed:
		}
	}
}

// view is this node's view of the state (Config.View), or the state
// where none was given.
func (s *allocRoutes) view() *fsm.FSM {
	if s.cfg.View != nil {
		return s.cfg.View
	}
	return s.fsm
}

// logQuery is what a request for a stream asks for.
type logQuery struct {
	stream string
	follow bool
	tail   *logTail // nil: not an end of the stream
	from   int64    // ?offset: where to begin; 0: at what is kept
}

// parseLogQuery reads ?stream (stdout, the default, or stderr), ?follow,
// the end of it asked for (parseLogTail) or where to begin (?offset).
func parseLogQuery(q url.Values) (logQuery, error) {
	lq := logQuery{stream: q.Get("stream"), follow: q.Get("follow") == "true"}
	switch lq.stream {
	case "":
		lq.stream = api.StreamStdout
	case api.StreamStdout, api.StreamStderr:
	default:
		return lq, fmt.Errorf("stream %q: want stdout or stderr", lq.stream)
	}
	var err error
	if lq.tail, err = parseLogTail(q); err != nil {
		return lq, err
	}
	if v := q.Get("offset"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		switch {
		case err != nil || n < 0:
			return lq, fmt.Errorf("offset %q: want a number of bytes from 0 on", v)
		case lq.tail != nil:
			return lq, errors.New("offset goes with neither tail nor lines")
		}
		lq.from = n
	}
	return lq, nil
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
// newest) (endpoint.Allocs.LogAlloc); when following a job that is still
// going it waits for one to be placed.
func (s *allocRoutes) waitForAlloc(r *http.Request, jobID string, rank, attempt int, follow bool) (*structs.Allocation, error) {
	for {
		_, changed := s.fsm.Watch()
		if alloc, err := s.allocs.LogAlloc(jobID, rank, attempt, follow); alloc != nil || err != nil {
			return alloc, err
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
func (s *allocRoutes) setLogDropped(w http.ResponseWriter, allocID, stream string) {
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

// copyLog writes the stream from f (nil: it had no output when asked) to
// w; when following it keeps writing new output, across rotations, until
// the allocation is over and everything was sent.
func (s *allocRoutes) copyLog(w http.ResponseWriter, r *http.Request, st *fsm.FSM, allocID string, lq logQuery, f io.ReadCloser) error {
	flusher, _ := w.(http.Flusher)
	defer func() {
		if f != nil {
			f.Close()
		}
	}()
	follow := lq.follow
	for {
		_, changed := st.Watch()
		alloc, ok := st.Alloc(allocID)
		done := !ok || !alloc.Live()
		if f == nil {
			if !follow {
				return nil // no output was ever written
			}
			// A stream with no output yet begins at its beginning (the
			// answer said offset 0): a follower reads all that comes.
			rd, _, err := s.openKept(allocID, lq.stream)
			if err != nil && done {
				return nil
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
