package cli

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"

	"github.com/skein-dev/skein/api"
)

// recorded is one request the fake agent received.
type recorded struct {
	Method string
	Path   string
	Query  url.Values
	Body   []byte
	Token  string
}

// fakeAgent is an httptest server that answers the /v1 API with handlers
// each test registers, and records every request it gets.
type fakeAgent struct {
	URL  string
	mux  *http.ServeMux
	mu   sync.Mutex
	reqs []recorded
}

func newFakeAgent(t *testing.T) *fakeAgent {
	t.Helper()
	f := &fakeAgent{mux: http.NewServeMux()}
	srv := httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(srv.Close)
	f.URL = srv.URL
	return f
}

// serve records a request and answers it with the registered handlers.
func (f *fakeAgent) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.reqs = append(f.reqs, recorded{
		Method: r.Method,
		Path:   r.URL.Path,
		Query:  r.URL.Query(),
		Body:   body,
		Token:  r.Header.Get(api.TokenHeader),
	})
	f.mu.Unlock()
	r.Body = io.NopCloser(bytes.NewReader(body))
	f.mux.ServeHTTP(w, r)
}

// handle registers h for a ServeMux pattern such as "GET /v1/jobs/{id}".
func (f *fakeAgent) handle(pattern string, h http.HandlerFunc) { f.mux.HandleFunc(pattern, h) }

// reply registers a handler that answers pattern with code and v as JSON.
func (f *fakeAgent) reply(pattern string, code int, v any) {
	f.handle(pattern, func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, code, v) })
}

// fail registers a handler that answers pattern with an API error.
func (f *fakeAgent) fail(pattern string, code int, msg string) {
	f.reply(pattern, code, api.ErrorBody{Error: msg})
}

// requests returns what the agent has received so far.
func (f *fakeAgent) requests() []recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]recorded(nil), f.reqs...)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// result is what one run of the command line produced.
type result struct {
	stdout, stderr string
	code           int
}

// runCLI runs `skein args...` with captured output, against t's real
// agent if it started one.
func runCLI(t *testing.T, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(NewApp(&out, &errb), cliArgs(t, args...))
	return result{stdout: out.String(), stderr: errb.String(), code: code}
}

// mustDecode decodes JSON output into v or fails the test.
func mustDecode(t *testing.T, s string, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("output is not the expected JSON: %v\n%s", err, s)
	}
}
