package ui

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/skein-dev/skein/api"
)

// callAPI serves one request of the user API in process, as the caller of
// r (its identity and token go with it), and returns the status and the
// body, which may hold at most limit bytes (0: any number; a node that
// does not know a log tail answers all of the log).
func (u *UI) callAPI(ctx context.Context, r *http.Request, method, path string, body []byte, limit int) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	for _, h := range []string{api.TokenHeader, "Authorization"} {
		if v := r.Header.Get(h); v != "" {
			req.Header.Set(h, v)
		}
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.RemoteAddr, req.Host = r.RemoteAddr, r.Host
	rec := &recorder{header: http.Header{}, status: http.StatusOK, limit: limit}
	u.srv.API.ServeHTTP(rec, req)
	if rec.over {
		return 0, nil, fmt.Errorf("%s: %w (%d bytes)", path, errTooLong, limit)
	}
	return rec.status, rec.buf.Bytes(), nil
}

// apiError is the error an API answer carries.
func apiError(status int, body []byte) error {
	var e api.ErrorBody
	if json.Unmarshal(body, &e) == nil && e.Error != "" {
		return errors.New(e.Error)
	}
	return fmt.Errorf("the API answered %d %s", status, strings.TrimSpace(string(body)))
}

// recorder keeps an in-process answer: its status and its body, of at
// most limit bytes (0: any number); over is set when more were written.
type recorder struct {
	header http.Header
	status int
	wrote  bool
	buf    bytes.Buffer
	limit  int
	over   bool
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(status int) {
	if !r.wrote {
		r.status, r.wrote = status, true
	}
}

func (r *recorder) Write(p []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	if r.limit > 0 && r.buf.Len()+len(p) > r.limit {
		r.over = true
		return 0, errTooLong
	}
	return r.buf.Write(p)
}

// tail is the last n bytes of b, from a line's start where one begins
// within them, and whether bytes before them were dropped. The byte
// before them tells whether they begin with a line.
func tail(b []byte, n int) ([]byte, bool) {
	if len(b) <= n {
		return b, false
	}
	b = b[len(b)-n-1:]
	if i := bytes.IndexByte(b, '\n'); i >= 0 && i < len(b)-1 {
		return b[i+1:], true
	}
	return b[1:], true
}

// actionError is a refused action: the API's status and words.
type actionError struct {
	status int
	err    error
}

func (e *actionError) Error() string { return e.err.Error() }

// statusOf is the status to show an error with.
func statusOf(err error) int {
	if ae, ok := err.(*actionError); ok {
		return ae.status
	}
	return http.StatusInternalServerError
}

// act carries out a write through the API as the caller of r; an answer
// other than 2xx is returned as an error.
func (u *UI) act(r *http.Request, method, path string, body []byte) error {
	status, resp, err := u.callAPI(r.Context(), r, method, path, body, 0)
	if err != nil {
		return err
	}
	if status/100 != 2 {
		return &actionError{status: status, err: apiError(status, resp)}
	}
	return nil
}
