package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/skein-dev/skein/agent/peer"
	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/cluster"
	"github.com/skein-dev/skein/fsm"
)

// forwardRetry is the pause before a forwarded write tries the next leader.
const forwardRetry = 50 * time.Millisecond

// leaderOnMiss passes a client's read of a job this node does not know
// on to the leader, when this node does not lead, and reports whether it
// answered: the job may be one the leader has committed and this node
// not applied yet (a client that submits through a follower and asks at
// once, a server that has only just joined). err is the read's error.
func (s *shared) leaderOnMiss(w http.ResponseWriter, r *http.Request, err error) bool {
	if !s.mayBeBehind(r, err) {
		return false
	}
	return s.forward(w, r, nil)
}

// mayBeBehind reports whether a lookup that failed with err may have
// failed because this node has not applied the job yet: the job is
// unknown here, this node does not lead, and the request was not passed
// on to it already (the leader's answer is final).
func (s *shared) mayBeBehind(r *http.Request, err error) bool {
	return errors.Is(err, fsm.ErrJobNotFound) && r.Header.Get(api.ForwardedHeader) == "" && !s.cfg.Raft.IsLeader()
}

// catchUpWait bounds how long a node waits to apply a job the leader
// knows and it does not yet (catchUpOnMiss).
const catchUpWait = 2 * time.Second

// maxJobDetail bounds the leader's answer about a job that catchUpOnMiss
// reads: a gang's detail lists an allocation per node.
const maxJobDetail = 64 << 20

// catchUpOnMiss, on a node that does not lead, asks the leader, with the
// client's credentials, about job id, which this node's state does not
// know (err is the lookup's error), and when the leader knows it waits up
// to catchUpWait for this node to apply it. It reports whether the node
// now knows the job, and the lookup is worth trying again. It serves the
// requests that must be answered where the job's state is, here (logs,
// exec, signals), for a job that was just submitted through another node.
func (s *shared) catchUpOnMiss(r *http.Request, id string, err error) bool {
	if !s.mayBeBehind(r, err) {
		return false
	}
	ctx, cancel := context.WithTimeout(r.Context(), catchUpWait)
	defer cancel()
	_, addr, self, err := s.cfg.Peers.Leader(ctx)
	if err != nil || self {
		return false
	}
	req, err := s.onwardRequest(ctx, r, http.MethodGet, addr+"/v1/jobs/"+url.PathEscape(id), nil)
	if err != nil {
		return false
	}
	var d struct {
		Job struct {
			ID string `json:"id"`
		} `json:"job"`
	}
	if s.callNode(req, maxJobDetail, &d) != nil {
		return false
	}
	for {
		_, changed := s.fsm.Watch()
		if _, ok := s.fsm.Job(d.Job.ID); ok {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-changed:
		}
	}
}

// forward passes a client's write to the leader, once: a request that was
// already forwarded is never passed on again. body is the request body
// already read, which must make the write idempotent (submissions carry a
// request ID), because a leader that died mid-request is retried: the write
// waits up to peer.LeaderWait for a leader that answers. It returns false,
// having written nothing, when this node became the leader meanwhile: the
// caller then serves the write itself.
func (s *shared) forward(w http.ResponseWriter, r *http.Request, body []byte) bool {
	if r.Header.Get(api.ForwardedHeader) != "" {
		writeError(w, http.StatusServiceUnavailable, fmt.Errorf("%w: leadership moved while the request was forwarded; try again", cluster.ErrNotLeader))
		return true
	}
	ctx, cancel := context.WithTimeout(r.Context(), peer.LeaderWait)
	defer cancel()
	var lastErr error
	for {
		id, addr, self, err := s.cfg.Peers.Leader(ctx)
		switch {
		case err != nil && lastErr != nil:
			writeError(w, http.StatusServiceUnavailable, fmt.Errorf("%w (last attempt: %v)", err, lastErr))
			return true
		case err != nil:
			writeError(w, http.StatusServiceUnavailable, err)
			return true
		case self:
			return false
		}
		attempt, abandon := context.WithCancel(ctx)
		stopWatch := s.cfg.Peers.CancelOnLeaderChange(attempt, abandon, id)
		req, err := s.onwardRequest(attempt, r, r.Method, addr+r.URL.RequestURI(), body)
		if err != nil {
			stopWatch()
			abandon()
			writeError(w, http.StatusInternalServerError, err)
			return true
		}
		resp, err := s.cfg.Peers.Calls().Do(req)
		if err == nil && resp.StatusCode != http.StatusServiceUnavailable {
			// Answered: a leadership change from now on must not cut the
			// answer short.
			stopWatch()
			defer abandon()
			defer resp.Body.Close()
			s.relay(w, resp)
			return true
		}
		stopWatch()
		if err == nil {
			// The node stopped leading before or while it wrote: try
			// the leader Raft names next.
			err = api.ReadError(resp)
		}
		abandon()
		// The leader this node knew is unreachable, most likely dead, or
		// no longer leads: wait for Raft to name another.
		lastErr = fmt.Errorf("forward to the leader at %s: %w", addr, err)
		select {
		case <-ctx.Done():
			writeError(w, http.StatusServiceUnavailable, fmt.Errorf("%w (last attempt: %v)", peer.ErrNoLeader, lastErr))
			return true
		case <-time.After(forwardRetry):
		}
	}
}

// proxy passes a request that only another node can answer (its logs, a
// fault injected into its simulated GPUs) to that node, with body, and
// streams the answer back.
func (s *shared) proxy(w http.ResponseWriter, r *http.Request, addr string, body []byte) {
	if r.Header.Get(api.ForwardedHeader) != "" {
		writeError(w, http.StatusMisdirectedRequest, errors.New("the request was forwarded to a node that does not hold the data"))
		return
	}
	req, err := s.onwardRequest(r.Context(), r, r.Method, addr+r.URL.RequestURI(), body)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	s.relayFrom(w, req, addr)
}

// relayFrom sends req to the node at addr and relays its answer.
func (s *shared) relayFrom(w http.ResponseWriter, req *http.Request, addr string) {
	resp, err := s.cfg.Peers.Streams().Do(req)
	if err != nil {
		writeError(w, http.StatusBadGateway, fmt.Errorf("reach the node at %s: %w", addr, err))
		return
	}
	defer resp.Body.Close()
	s.relay(w, resp)
}

// onwardRequest is client request r passed on by this node to another,
// at url with method and body: with the client's credentials (and the
// body's content type), marked forwarded so that it is never passed on
// again.
func (s *shared) onwardRequest(ctx context.Context, r *http.Request, method, url string, body []byte) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	copyHeaders(req.Header, r.Header, api.TokenHeader, "Authorization")
	if body != nil {
		copyHeaders(req.Header, r.Header, "Content-Type")
	}
	req.Header.Set(api.ForwardedHeader, s.cfg.NodeName)
	return req, nil
}

// callNode sends req to another node and decodes its JSON answer, at
// most limit bytes, into out; an answer other than 200 is its error.
func (s *shared) callNode(req *http.Request, limit int64, out any) error {
	resp, err := s.cfg.Peers.Calls().Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return api.ReadError(resp)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, limit)).Decode(out); err != nil {
		return fmt.Errorf("decode the answer: %w", err)
	}
	return nil
}

func copyHeaders(dst, src http.Header, names ...string) {
	for _, n := range names {
		if v := src.Get(n); v != "" {
			dst.Set(n, v)
		}
	}
}

// relay copies a response to w, flushing as data arrives so streams stay
// live, however long they last. A leader's 429 keeps its Retry-After and
// BusyHeader, so that the client waits as the leader asked. An answer
// that breaks off (its node died or was cut off) is broken off here too,
// never ended as if it were whole: a client that follows a stream then
// resumes it, where a clean end would have it believe it had everything.
func (s *shared) relay(w http.ResponseWriter, resp *http.Response) {
	copyHeaders(w.Header(), resp.Header, "Content-Type", "Retry-After", api.BusyHeader,
		api.LogDroppedHeader, api.LogMaxHeader, api.LogAttemptHeader, api.LogOffsetHeader)
	w.WriteHeader(resp.StatusCode)
	flusher, _ := w.(http.Flusher)
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			s.holdWrite(w)
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			if flusher != nil {
				flusher.Flush()
			}
		}
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			s.log.Debug("relayed answer broke off", "from", resp.Request.URL.Host, "error", err)
			panic(http.ErrAbortHandler) // net/http cuts the connection, quietly
		}
	}
}
