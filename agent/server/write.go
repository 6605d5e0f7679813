package server

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/skein-dev/skein/agent/server/endpoint"
	"github.com/skein-dev/skein/structs"
)

// requestWriter is one request's endpoint.Writer, the one path of every
// write: on the leader it applies the endpoint's entry through Raft
// (Config.Apply); on any other node it passes the request on to the
// leader (forward) and relays its answer, unless this node came to lead
// meanwhile.
type requestWriter struct {
	s    *shared
	w    http.ResponseWriter
	r    *http.Request
	body []byte // the request's body as read, passed on as it came
}

// writer is r's Writer; body is what the handler read of r's body.
func (s *shared) writer(w http.ResponseWriter, r *http.Request, body []byte) requestWriter {
	return requestWriter{s: s, w: w, r: r, body: body}
}

func (rw requestWriter) Leads() bool { return rw.s.cfg.Raft.IsLeader() }

func (rw requestWriter) Write(typ structs.MessageType, forward any, entry func() (any, error)) (any, error) {
	return rw.Lead(forward, func() (any, error) {
		e, err := entry()
		if err != nil {
			return nil, err
		}
		return rw.s.cfg.Apply(typ, e)
	})
}

func (rw requestWriter) Lead(forward any, do func() (any, error)) (any, error) {
	if !rw.Leads() {
		body := rw.body
		if forward != nil {
			var err error
			if body, err = json.Marshal(forward); err != nil {
				return nil, err
			}
		}
		if rw.s.forward(rw.w, rw.r, body) {
			return nil, endpoint.ErrForwarded
		}
	}
	return do()
}

// bodyRule says whether a write's body may be empty.
type bodyRule int

const (
	// bodyRequired: an empty body is refused.
	bodyRequired bodyRule = iota
	// bodyOptional: an empty body leaves the request at its zero value.
	bodyOptional
)

// write serves a write through an endpoint: it reads the body into req
// (nil: none is read) as rule says, and answers what do, given the
// request's Writer, returns: 200 with it, or the error with the status
// statusOf maps it to, or nothing more once the leader's answer was
// relayed.
func (s *shared) write(w http.ResponseWriter, r *http.Request, req any, rule bodyRule, do func(endpoint.Writer) (any, error)) {
	var body []byte
	if req != nil {
		var err error
		if body, err = readBody(w, r); err == nil && (len(body) > 0 || rule == bodyRequired) {
			err = decodeStrict(body, req)
		}
		if err != nil {
			writeError(w, statusOf(err), err)
			return
		}
	}
	resp, err := do(s.writer(w, r, body))
	answer(w, http.StatusOK, resp, err)
}

// answer writes what an endpoint answered: v with code, or err with the
// status statusOf maps it to; nothing once the leader's answer was
// relayed (endpoint.ErrForwarded).
func answer(w http.ResponseWriter, code int, v any, err error) {
	switch {
	case errors.Is(err, endpoint.ErrForwarded):
	case err != nil:
		writeError(w, statusOf(err), err)
	default:
		writeJSON(w, code, v)
	}
}
