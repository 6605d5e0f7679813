package ingress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

// fakeState is the replicated state as the proxy reads it; every change
// moves its index.
type fakeState struct {
	mu       sync.Mutex
	index    uint64
	services map[string]*structs.Service
	replicas map[string][]*structs.Job        // by service
	allocs   map[string][]*structs.Allocation // by job
	nodes    map[string]*structs.Node
}

func newFakeState() *fakeState {
	return &fakeState{services: map[string]*structs.Service{}, replicas: map[string][]*structs.Job{},
		allocs: map[string][]*structs.Allocation{}, nodes: map[string]*structs.Node{}}
}

func (s *fakeState) Service(name string) (*structs.Service, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	svc, ok := s.services[name]
	if !ok {
		return nil, false
	}
	c := *svc
	return &c, true
}

func (s *fakeState) ServiceReplicas(name string) []*structs.Job {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*structs.Job
	for _, j := range s.replicas[name] {
		c := *j
		out = append(out, &c)
	}
	return out
}

func (s *fakeState) Allocs(jobID string) []*structs.Allocation {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*structs.Allocation
	for _, a := range s.allocs[jobID] {
		c := *a
		out = append(out, &c)
	}
	return out
}

func (s *fakeState) Node(id string) (*structs.Node, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, ok := s.nodes[id]
	if !ok {
		return nil, false
	}
	c := *n
	return &c, true
}

func (s *fakeState) Index() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.index
}

// change applies f to the state and moves its index.
func (s *fakeState) change(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f()
	s.index++
}

// addService adds a service of no replica yet.
func (s *fakeState) addService(svc structs.Service) {
	s.change(func() { s.services[svc.Name] = &svc })
}

// addReplica adds a running replica of the service on a node of its own,
// listening on addr (host:port); it returns the replica's allocation.
func (s *fakeState) addReplica(t testing.TB, service, addr string, health *structs.AllocHealth) *structs.Allocation {
	t.Helper()
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	port, _ := strconv.Atoi(portText)
	var a *structs.Allocation
	s.change(func() {
		n := len(s.replicas[service])
		job := &structs.Job{ID: structs.ReplicaJobID("svc-"+service, n), Service: service, State: structs.JobRunning, Attempts: 1}
		node := &structs.Node{ID: "node-" + job.ID, Status: structs.NodeReady,
			Addresses: structs.Addresses{Raft: net.JoinHostPort(host, "7471")}}
		a = &structs.Allocation{ID: "alloc-" + job.ID, JobID: job.ID, NodeID: node.ID, Attempt: 1, State: structs.AllocRunning,
			MasterPort: port, StartedAt: time.Now(), Health: health}
		s.replicas[service] = append(s.replicas[service], job)
		s.allocs[job.ID] = []*structs.Allocation{a}
		s.nodes[node.ID] = node
	})
	return a
}

// setAlloc changes a replica's allocation.
func (s *fakeState) setAlloc(a *structs.Allocation, f func(*structs.Allocation)) {
	s.change(func() { f(a) })
}

// aclShape recognises tokens of an ACL token's shape, as the agent's
// Credential does.
func aclShape(tok string) bool { return strings.HasPrefix(tok, "SKA1.") }

// testProxy serves a proxy of the state, with auth when given.
func testProxy(t *testing.T, st State, auth Authenticator) (*Proxy, *httptest.Server) {
	p := New(Config{State: st, Auth: auth, Credential: aclShape, DialTimeout: 10 * time.Second})
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	return p, srv
}

// client is an HTTP client that goes nowhere but where it is told.
var client = &http.Client{Transport: &http.Transport{Proxy: nil}, Timeout: time.Minute}

// get sends a request through the ingress and returns its status and body.
func get(t *testing.T, srv *httptest.Server, path string, header http.Header) (int, string) {
	t.Helper()
	return do(t, srv, http.MethodGet, path, header, nil)
}

func do(t *testing.T, srv *httptest.Server, method, path string, header http.Header, body io.Reader) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	if h := header.Get("Host"); h != "" {
		req.Host = h
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// echo is a replica that answers with what it got.
func echo(t *testing.T, name string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %s %s", name, r.Method, r.URL.RequestURI())
		if r.URL.RawPath != "" {
			fmt.Fprintf(w, " raw=%s", r.URL.RawPath)
		}
		for _, h := range []string{"X-Forwarded-Prefix", "X-Forwarded-Host", "X-Forwarded-For", "Authorization", api.TokenHeader} {
			if v := r.Header.Get(h); v != "" {
				fmt.Fprintf(w, " %s=%s", h, v)
			}
		}
		if len(b) > 0 {
			fmt.Fprintf(w, " body=%s", b)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func addrOf(t testing.TB, srv *httptest.Server) string {
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

// deadAddr is an address that refuses connections.
func deadAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func wantAnswer(t *testing.T, code int, body string, wantCode int, wantBody string) {
	t.Helper()
	if code != wantCode || body != wantBody {
		t.Errorf("got %d %q, want %d %q", code, body, wantCode, wantBody)
	}
}

func TestProxy_PathPrefixIsStrippedAndTheQueryKept(t *testing.T) {
	st := newFakeState()
	st.addService(structs.Service{Name: "llama", Replicas: 1})
	st.addReplica(t, "llama", addrOf(t, echo(t, "r0")), nil)
	_, srv := testProxy(t, st, nil)
	ingressHost := addrOf(t, srv)
	fwd := " X-Forwarded-Prefix=/llama X-Forwarded-Host=" + ingressHost + " X-Forwarded-For=127.0.0.1"
	for _, tc := range []struct{ name, path, want string }{
		{"a path under the service", "/llama/v1/completions?stream=true&n=2", "r0 GET /v1/completions?stream=true&n=2" + fwd},
		{"the service alone", "/llama", "r0 GET /" + fwd},
		{"the service's root", "/llama/", "r0 GET /" + fwd},
		{"an escaped slash stays escaped", "/llama/a%2Fb", "r0 GET /a%2Fb raw=/a%2Fb" + fwd},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := get(t, srv, tc.path, nil)
			wantAnswer(t, code, body, http.StatusOK, tc.want)
		})
	}
}

func TestProxy_HostRuleRoutesByTheFirstLabelOfAServicesName(t *testing.T) {
	st := newFakeState()
	st.addService(structs.Service{Name: "llama", Replicas: 1})
	st.addReplica(t, "llama", addrOf(t, echo(t, "llama-r0")), nil)
	st.addService(structs.Service{Name: "mistral", Replicas: 1})
	st.addReplica(t, "mistral", addrOf(t, echo(t, "mistral-r0")), nil)
	_, srv := testProxy(t, st, nil)

	code, body := get(t, srv, "/v1/models?x=1", http.Header{"Host": {"llama.svc.example.com:7480"}})
	wantAnswer(t, code, body, http.StatusOK, "llama-r0 GET /v1/models?x=1 X-Forwarded-Host=llama.svc.example.com:7480 X-Forwarded-For=127.0.0.1")
	// A host whose first label is no service's: the path says.
	code, body = get(t, srv, "/mistral/v1/models", http.Header{"Host": {"gpu-node-3.example.com"}})
	wantAnswer(t, code, body, http.StatusOK,
		"mistral-r0 GET /v1/models X-Forwarded-Prefix=/mistral X-Forwarded-Host=gpu-node-3.example.com X-Forwarded-For=127.0.0.1")
}

func TestProxy_ClientsForwardedHeadersAreReplacedNotTrusted(t *testing.T) {
	st := newFakeState()
	st.addService(structs.Service{Name: "llama", Replicas: 1})
	st.addReplica(t, "llama", addrOf(t, echo(t, "r0")), nil)
	_, srv := testProxy(t, st, nil)
	code, body := get(t, srv, "/llama/x", http.Header{"X-Forwarded-For": {"6.6.6.6"}, "X-Forwarded-Prefix": {"/evil"}})
	if code != http.StatusOK || strings.Contains(body, "6.6.6.6") || strings.Contains(body, "/evil") {
		t.Errorf("got %d %q: the client's forwarded headers reached the replica", code, body)
	}
}

// holder is a replica that holds every request until released, and
// counts those it holds.
type holder struct {
	srv     *httptest.Server
	held    atomic.Int32
	release chan struct{}
}

func newHolder(t *testing.T, name string) *holder {
	h := &holder{release: make(chan struct{})}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.held.Add(1)
		<-h.release
		fmt.Fprint(w, name)
	}))
	t.Cleanup(h.srv.Close)
	t.Cleanup(h.releaseAll)
	return h
}

func (h *holder) releaseAll() {
	select {
	case <-h.release:
	default:
		close(h.release)
	}
}

// background sends a GET and returns its answer's body on a channel.
func background(t *testing.T, srv *httptest.Server, path string) <-chan string {
	return backgroundDo(srv, http.MethodGet, path, "")
}

// backgroundDo sends a request and returns its answer's body (or why
// there is none) on a channel.
func backgroundDo(srv *httptest.Server, method, path, body string) <-chan string {
	out := make(chan string, 1)
	go func() {
		req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		if err != nil {
			out <- err.Error()
			return
		}
		resp, err := client.Do(req)
		if err != nil {
			out <- err.Error()
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		out <- string(b)
	}()
	return out
}

func TestProxy_PicksTheEndpointWithTheFewestRequestsInFlight(t *testing.T) {
	st := newFakeState()
	st.addService(structs.Service{Name: "llama", Replicas: 2})
	a, b := newHolder(t, "a"), newHolder(t, "b")
	allocA := st.addReplica(t, "llama", addrOf(t, a.srv), nil)
	allocB := st.addReplica(t, "llama", addrOf(t, b.srv), nil)
	p, srv := testProxy(t, st, nil)

	first := background(t, srv, "/llama/")
	testutil.WaitFor(t, 15*time.Second, func() error {
		if a.held.Load()+b.held.Load() != 1 {
			return errors.New("the first request has not reached a replica")
		}
		return nil
	})
	busy, idle := a, b
	if b.held.Load() == 1 {
		busy, idle = b, a
	}
	// However many times: the idle replica gets the next request.
	second := background(t, srv, "/llama/")
	testutil.WaitFor(t, 15*time.Second, func() error {
		if idle.held.Load() != 1 || busy.held.Load() != 1 {
			return fmt.Errorf("held: busy %d, idle %d; want the second request at the idle replica", busy.held.Load(), idle.held.Load())
		}
		return nil
	})
	if got := p.InFlight("llama"); got[allocA.ID] != 1 || got[allocB.ID] != 1 {
		t.Errorf("in flight %v, want one request at each", got)
	}
	a.releaseAll()
	b.releaseAll()
	if got := <-first + <-second; got != "ab" && got != "ba" {
		t.Errorf("answers %q, want one from each replica", got)
	}
	testutil.WaitFor(t, 15*time.Second, func() error {
		if got := p.InFlight("llama"); got[allocA.ID] != 0 || got[allocB.ID] != 0 {
			return fmt.Errorf("in flight %v after the answers, want none", got)
		}
		return nil
	})
	if got := p.InFlight("nope"); got != nil {
		t.Errorf("in flight of no service: %v, want nil", got)
	}
}

func TestProxy_StreamsTheAnswerAsTheReplicaWritesIt(t *testing.T) {
	st := newFakeState()
	st.addService(structs.Service{Name: "llama", Replicas: 1})
	release := make(chan struct{})
	replica := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "data: first\n")
		w.(http.Flusher).Flush()
		<-release
		fmt.Fprint(w, "data: second\n")
	}))
	t.Cleanup(replica.Close)
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	st.addReplica(t, "llama", addrOf(t, replica), nil)
	_, srv := testProxy(t, st, nil)

	resp, err := client.Get(srv.URL + "/llama/v1/completions")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := make(chan string)
	go func() {
		r := bufio.NewReader(resp.Body)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				close(lines)
				return
			}
			lines <- line
		}
	}()
	select {
	case line := <-lines:
		if line != "data: first\n" {
			t.Fatalf("first line %q", line)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the first chunk did not reach the client while the replica was still writing")
	}
	close(release)
	if line := <-lines; line != "data: second\n" {
		t.Errorf("second line %q", line)
	}
}

func TestProxy_ADeadEndpointIsRetriedOnAnotherWithTheBody(t *testing.T) {
	st := newFakeState()
	st.addService(structs.Service{Name: "llama", Replicas: 2})
	// The live replica holds requests for /hold and answers the others
	// with what it got.
	var held atomic.Int32
	release := make(chan struct{})
	replica := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.URL.Path == "/hold" {
			held.Add(1)
			<-release
		}
		fmt.Fprintf(w, "%s %s", r.URL.Path, b)
	}))
	t.Cleanup(replica.Close)
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	alive := st.addReplica(t, "llama", addrOf(t, replica), nil)
	dead := st.addReplica(t, "llama", deadAddr(t), nil)
	p, srv := testProxy(t, st, nil)

	// The first request goes to either replica, and is held by the live
	// one. The second then goes to the dead one, which has fewer in
	// flight, unless the first tried it already: either way the dead one
	// is tried once, and each request is answered by the live one with
	// its body.
	first := backgroundDo(srv, http.MethodPost, "/llama/hold", "prompt 1")
	testutil.WaitFor(t, 15*time.Second, func() error {
		if held.Load() != 1 {
			return errors.New("the first request has not reached the live replica")
		}
		return nil
	})
	code, body := do(t, srv, http.MethodPost, "/llama/v1/completions", nil, strings.NewReader("prompt 2"))
	wantAnswer(t, code, body, http.StatusOK, "/v1/completions prompt 2")
	close(release)
	if body := <-first; body != "/hold prompt 1" {
		t.Errorf("first answer %q, want the live replica's with its body", body)
	}
	v, _ := p.view("llama")
	for _, e := range v.ends {
		if e.allocID == dead.ID && e.dial.failedAt.Load() == 0 {
			t.Error("the dead replica was never tried")
		}
	}
	testutil.WaitFor(t, 15*time.Second, func() error {
		if got := p.InFlight("llama"); got[dead.ID] != 0 || got[alive.ID] != 0 {
			return fmt.Errorf("in flight %v, want none", got)
		}
		return nil
	})
}

func TestProxy_AnswersWhyItCannotServe(t *testing.T) {
	st := newFakeState()
	check := &structs.HealthCheck{Kind: structs.HealthHTTP, Path: "/health", Grace: structs.Duration(time.Hour)}
	st.addService(structs.Service{Name: "llama", Replicas: 2, Spec: structs.ServiceSpec{Health: check}})
	r0 := st.addReplica(t, "llama", addrOf(t, echo(t, "r0")), nil)
	r1 := st.addReplica(t, "llama", addrOf(t, echo(t, "r1")), nil)
	st.addService(structs.Service{Name: "idle", Replicas: 0})
	st.addService(structs.Service{Name: "gone", Replicas: 1, Deleted: true})
	st.addService(structs.Service{Name: "dead", Replicas: 2})
	st.addReplica(t, "dead", deadAddr(t), nil)
	st.addReplica(t, "dead", deadAddr(t), nil)
	_, srv := testProxy(t, st, nil)

	code, body := get(t, srv, "/nope/v1", nil)
	wantAnswer(t, code, body, http.StatusNotFound, "service \"nope\" not found\n")
	code, body = get(t, srv, "/", nil)
	wantAnswer(t, code, body, http.StatusNotFound, "no service in the request: ask for /NAME/... or Host: NAME.<domain>\n")
	code, body = get(t, srv, "/llama/v1", nil)
	wantAnswer(t, code, body, http.StatusServiceUnavailable, "service llama has no healthy replica: 2 starting\n")
	code, body = get(t, srv, "/idle/", nil)
	wantAnswer(t, code, body, http.StatusServiceUnavailable, "service idle has no healthy replica: it is scaled to 0\n")
	code, body = get(t, srv, "/gone/", nil)
	wantAnswer(t, code, body, http.StatusServiceUnavailable, "service gone is being deleted\n")
	code, body = get(t, srv, "/dead/", nil)
	if code != http.StatusBadGateway || !strings.HasPrefix(body, "service dead: no replica answered (tried 2 of 2): ") ||
		!strings.Contains(body, "connection refused") {
		t.Errorf("got %d %q, want 502 saying no replica answered, and why", code, body)
	}

	// Past its grace, a failing replica is unhealthy; one asked to stop
	// is stopping; one on a node that is down is not reached.
	st.setAlloc(r0, func(a *structs.Allocation) {
		a.StartedAt = time.Now().Add(-2 * time.Hour)
		a.Health = &structs.AllocHealth{Reason: "GET /health: 503 (3 failures in a row)"}
	})
	st.setAlloc(r1, func(a *structs.Allocation) { a.DesiredState = structs.DesiredStop })
	code, body = get(t, srv, "/llama/v1", nil)
	wantAnswer(t, code, body, http.StatusServiceUnavailable,
		"service llama has no healthy replica: 1 unhealthy (GET /health: 503 (3 failures in a row)), 1 stopping\n")

	// Healthy, it serves; its node down, it does not.
	st.setAlloc(r0, func(a *structs.Allocation) {
		a.Health = &structs.AllocHealth{Healthy: true, Reason: "GET /health: 200"}
	})
	code, body = get(t, srv, "/llama/v1", nil)
	if code != http.StatusOK || !strings.HasPrefix(body, "r0 GET /v1") {
		t.Errorf("a healthy replica: got %d %q, want r0's answer", code, body)
	}
	st.change(func() { st.nodes[r0.NodeID].Status = structs.NodeDown })
	code, body = get(t, srv, "/llama/v1", nil)
	wantAnswer(t, code, body, http.StatusServiceUnavailable, "service llama has no healthy replica: 1 stopping, 1 on a node that is down\n")
}

// tokenAuth admits the token "good", as the API's authenticators take it.
type tokenAuth struct{}

func (tokenAuth) Authenticate(r *http.Request) (*http.Request, error) {
	tok := r.Header.Get(api.TokenHeader)
	if tok == "" {
		tok = strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	}
	if tok != "good" {
		return nil, errors.New("missing or wrong token")
	}
	return r, nil
}

func TestProxy_PrivateServicesNeedATokenThatTheReplicaNeverSees(t *testing.T) {
	st := newFakeState()
	st.addService(structs.Service{Name: "private", Replicas: 1})
	st.addReplica(t, "private", addrOf(t, echo(t, "private")), nil)
	st.addService(structs.Service{Name: "open", Replicas: 1, Spec: structs.ServiceSpec{Public: true}})
	st.addReplica(t, "open", addrOf(t, echo(t, "open")), nil)
	_, srv := testProxy(t, st, tokenAuth{})
	fwd := " X-Forwarded-Prefix=/private X-Forwarded-Host=" + addrOf(t, srv) + " X-Forwarded-For=127.0.0.1"

	// No token at all is told so, not what the authenticator says of a
	// wrong one (the issue: "its API token no longer works").
	noToken := errNoToken.Error() + "\n"
	code, body := get(t, srv, "/private/x", nil)
	wantAnswer(t, code, body, http.StatusUnauthorized, noToken)
	code, body = get(t, srv, "/private/x", http.Header{"Authorization": {"Bearer bad"}})
	wantAnswer(t, code, body, http.StatusUnauthorized, "missing or wrong token\n")
	code, body = get(t, srv, "/private/x", http.Header{"Authorization": {"Bearer good"}})
	wantAnswer(t, code, body, http.StatusOK, "private GET /x"+fwd)
	// The token in X-Skein-Token leaves Authorization to the service.
	code, body = get(t, srv, "/private/x", http.Header{api.TokenHeader: {"good"}, "Authorization": {"Bearer service-key"}})
	wantAnswer(t, code, body, http.StatusOK, "private GET /x"+fwd+" Authorization=Bearer service-key")
	// A service that does not exist is not told apart without a token.
	code, body = get(t, srv, "/nope/x", nil)
	wantAnswer(t, code, body, http.StatusUnauthorized, noToken)
	code, body = get(t, srv, "/nope/x", http.Header{"Authorization": {"Bearer good"}})
	wantAnswer(t, code, body, http.StatusNotFound, "service \"nope\" not found\n")
	// A public service needs none, and its own keys reach it.
	code, body = get(t, srv, "/open/x", http.Header{"Authorization": {"Bearer service-key"}, api.TokenHeader: {"good"}})
	wantAnswer(t, code, body, http.StatusOK, "open GET /x X-Forwarded-Prefix=/open X-Forwarded-Host="+addrOf(t, srv)+
		" X-Forwarded-For=127.0.0.1 Authorization=Bearer service-key")
}

func TestServer_ServesAndShutsDownWithAStreamOpen(t *testing.T) {
	st := newFakeState()
	st.addService(structs.Service{Name: "llama", Replicas: 1})
	h := newHolder(t, "held")
	st.addReplica(t, "llama", addrOf(t, h.srv), nil)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(ServerConfig{Listener: l, Handler: New(Config{State: st}), Logger: testLogger()})
	done := make(chan struct{})
	go func() {
		s.Serve()
		close(done)
	}()
	answer := make(chan error, 1)
	go func() {
		resp, err := client.Get("http://" + s.Addr().String() + "/llama/")
		if err == nil {
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		answer <- err
	}()
	testutil.WaitFor(t, 15*time.Second, func() error {
		if h.held.Load() != 1 {
			return errors.New("the request has not reached the replica")
		}
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	s.Shutdown(ctx)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Serve did not return after Shutdown")
	}
	select {
	case <-answer:
	case <-time.After(30 * time.Second):
		t.Fatal("a request held by its replica kept its connection past the shutdown")
	}
}

func testLogger() hclog.Logger { return hclog.NewNullLogger() }

// resetter is a replica that reads each request and resets its
// connection without an answer, as one that died with the request on its
// way would; it counts the requests it got.
func resetter(t *testing.T) (addr string, got *atomic.Int32) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	got = &atomic.Int32{}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			if _, err := http.ReadRequest(bufio.NewReader(c)); err == nil {
				got.Add(1)
			}
			c.(*net.TCPConn).SetLinger(0)
			c.Close()
		}
	}()
	return l.Addr().String(), got
}

func TestProxy_AGetWhoseConnectionIsResetGoesToAnotherReplicaAndAPostDoesNot(t *testing.T) {
	st := newFakeState()
	st.addService(structs.Service{Name: "llama", Replicas: 2})
	resetAddr, reset := resetter(t)
	st.addReplica(t, "llama", resetAddr, nil)
	st.addReplica(t, "llama", addrOf(t, echo(t, "live")), nil)
	_, srv := testProxy(t, st, nil)
	// Ties go either way: send GETs until one went to the resetting
	// replica first. Each ends at the live one.
	for i := 0; reset.Load() == 0; i++ {
		if i == 100 {
			t.Fatal("the resetting replica got none of 100 requests: the test proves nothing")
		}
		code, body := get(t, srv, "/llama/v1/models", nil)
		if code != http.StatusOK || !strings.HasPrefix(body, "live") {
			t.Fatalf("GET: %d %q, want the live replica's answer", code, body)
		}
	}
	// A POST reached the replica, which may have acted on it: it is not
	// sent again, and the client is told.
	st2 := newFakeState()
	st2.addService(structs.Service{Name: "llama", Replicas: 1})
	st2.addReplica(t, "llama", resetAddr, nil)
	_, srv2 := testProxy(t, st2, nil)
	before := reset.Load()
	code, _ := do(t, srv2, http.MethodPost, "/llama/v1/completions", nil, strings.NewReader("prompt"))
	if code != http.StatusBadGateway || reset.Load() != before+1 {
		t.Errorf("POST to a replica that resets: %d after %d tries, want 502 after one", code, reset.Load()-before)
	}
}

// idleCloser is a replica that closes each connection as soon as it has
// answered on it, as a server with a short keep-alive timeout does, but
// without saying so (no Connection: close): the ingress keeps the
// connection for the next request, which finds it closed. It counts the
// requests it got.
func idleCloser(t *testing.T) (addr string, got *atomic.Int32, closed <-chan struct{}) {
	t.Helper()
	got = &atomic.Int32{}
	closes := make(chan struct{}, 1000)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got.Add(1)
		fmt.Fprintf(w, "%s %s", r.Method, b)
	}))
	srv.Config.ConnState = func(c net.Conn, s http.ConnState) {
		if s == http.StateIdle {
			c.Close()
			closes <- struct{}{}
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return addrOf(t, srv), got, closes
}

// lockedBuffer is a log the proxy writes while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.b.String(), s)
}

// POSTs one after another to a replica that closes every connection after
// its answer: the next POST may be given the closed connection before
// the ingress noticed it closed, and nothing of it is then sent there: it
// goes on a fresh connection. Every POST is answered, and the replica
// gets each once. How often the closed connection is given depends on
// the scheduler, so the test sends POSTs until it happened a few times
// (the proxy's debug log says so), or fails as proving nothing.
func TestProxy_APostOnAKeptAliveConnectionTheReplicaClosedIsSentOnAFreshOne(t *testing.T) {
	const (
		wantResent = 3
		atMost     = 20000
	)
	st := newFakeState()
	st.addService(structs.Service{Name: "llama", Replicas: 1})
	addr, got, closed := idleCloser(t)
	st.addReplica(t, "llama", addr, nil)
	var log lockedBuffer
	p := New(Config{State: st, DialTimeout: 10 * time.Second,
		Logger: hclog.New(&hclog.LoggerOptions{Output: &log, Level: hclog.Debug})})
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	n, failed := 0, 0
	for ; n < atMost && log.count("had closed a kept-alive connection") < wantResent; n++ {
		prompt := "prompt " + strconv.Itoa(n)
		code, body := do(t, srv, http.MethodPost, "/llama/v1/completions", nil, strings.NewReader(prompt))
		if code == http.StatusOK {
			<-closed // the next POST is sent after the replica closed the connection
		}
		if code != http.StatusOK || body != "POST "+prompt {
			failed++
			if failed <= 3 {
				t.Errorf("POST %d: %d %q, want 200 %q", n, code, body, "POST "+prompt)
			}
		}
	}
	if failed > 0 {
		t.Errorf("%d of %d POSTs failed", failed, n)
	}
	if got.Load() != int32(n) {
		t.Errorf("the replica got %d requests for %d POSTs, want each once", got.Load(), n)
	}
	if resent := log.count("had closed a kept-alive connection"); resent < wantResent {
		t.Fatalf("a POST was given a connection the replica had closed %d times in %d, want %d: the test proves nothing", resent, n, wantResent)
	}
}

// aclShaped is a token of an ACL token's shape (SKA1.id.secret): a skein
// credential whether or not this cluster knows it.
const aclShaped = "SKA1.0123456789abcdef.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"

// credentialEcho is a replica that answers with every credential it got:
// its cookies, its Authorization and X-Skein-Token.
func credentialEcho(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var names []string
		for _, c := range r.Cookies() {
			names = append(names, c.Name+"="+c.Value)
		}
		fmt.Fprintf(w, "cookies=[%s] authorization=%q token=%q", strings.Join(names, " "), r.Header.Get("Authorization"), r.Header.Get(api.TokenHeader))
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestProxy_SkeinsCookiesAndTokensReachNoReplica_PublicOrNot(t *testing.T) {
	st := newFakeState()
	st.addService(structs.Service{Name: "private", Replicas: 1})
	st.addReplica(t, "private", addrOf(t, credentialEcho(t)), nil)
	st.addService(structs.Service{Name: "open", Replicas: 1, Spec: structs.ServiceSpec{Public: true}})
	st.addReplica(t, "open", addrOf(t, credentialEcho(t)), nil)
	_, srv := testProxy(t, st, tokenAuth{})
	// What a browser signed in to the UI on the same host sends to any
	// port of it (cookies are kept per host), and the service's own.
	cookies := "skein_token=" + aclShaped + "; theirs=1; __Host-skein_session=0123; Skein_Token=x; __Secure-skein_x=y; cart=2"
	for _, tc := range []struct {
		name   string
		path   string
		header http.Header
		want   string
	}{
		{"a public service, a skein token as bearer", "/open/x",
			http.Header{"Authorization": {"Bearer " + aclShaped}, "Cookie": {cookies}},
			`cookies=[theirs=1 cart=2] authorization="" token=""`},
		{"a public service, a skein token without a scheme", "/open/x",
			http.Header{"Authorization": {aclShaped}},
			`cookies=[] authorization="" token=""`},
		{"a public service, the service's own key", "/open/x",
			http.Header{"Authorization": {"Bearer sk-service"}, api.TokenHeader: {aclShaped}, "Cookie": {cookies}},
			`cookies=[theirs=1 cart=2] authorization="Bearer sk-service" token=""`},
		{"a private service, the token as bearer", "/private/x",
			http.Header{"Authorization": {"Bearer good"}, "Cookie": {cookies}},
			`cookies=[theirs=1 cart=2] authorization="" token=""`},
		{"a private service, the token in X-Skein-Token and another skein token as bearer", "/private/x",
			http.Header{api.TokenHeader: {"good"}, "Authorization": {"Bearer " + aclShaped}},
			`cookies=[] authorization="" token=""`},
		{"a private service, only skein's cookies", "/private/x",
			http.Header{api.TokenHeader: {"good"}, "Cookie": {"skein_token=" + aclShaped, "__Host-skein_token=" + aclShaped}},
			`cookies=[] authorization="" token=""`},
	} {
		code, body := get(t, srv, tc.path, tc.header)
		if code != http.StatusOK || body != tc.want {
			t.Errorf("%s: %d %s, want 200 %s", tc.name, code, body, tc.want)
		}
	}
}

func TestProxy_AReplicaCannotSetSkeinsCookies(t *testing.T) {
	replica := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, c := range []string{
			"skein_session=0123456789abcdef0123456789abcdef; Path=/ui/",
			"__Host-skein_session=0123456789abcdef0123456789abcdef; Path=/; Secure",
			"SKEIN_TOKEN=x; Path=/",
			"  skein_token =x",
			"__Secure-skein_other=1",
			"session=mine; Path=/; HttpOnly",
		} {
			w.Header().Add("Set-Cookie", c)
		}
		fmt.Fprint(w, "ok")
	}))
	t.Cleanup(replica.Close)
	st := newFakeState()
	st.addService(structs.Service{Name: "ui", Replicas: 1, Spec: structs.ServiceSpec{Public: true}})
	st.addReplica(t, "ui", addrOf(t, replica), nil)
	_, srv := testProxy(t, st, tokenAuth{})
	resp, err := client.Get(srv.URL + "/ui/login")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Values("Set-Cookie"); len(got) != 1 || got[0] != "session=mine; Path=/; HttpOnly" {
		t.Fatalf("the replica's cookies reached the client as %q, want only its own session=mine", got)
	}
}

func TestProxy_TheClustersAPITokenReachesNoPublicReplica(t *testing.T) {
	st := newFakeState()
	st.addService(structs.Service{Name: "open", Replicas: 1, Spec: structs.ServiceSpec{Public: true}})
	st.addReplica(t, "open", addrOf(t, credentialEcho(t)), nil)
	p := New(Config{State: st, Auth: tokenAuth{}, Credential: func(tok string) bool { return tok == "good" }})
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	code, body := get(t, srv, "/open/x", http.Header{"Authorization": {"bearer  good "}})
	wantAnswer(t, code, body, http.StatusOK, `cookies=[] authorization="" token=""`)
	code, body = get(t, srv, "/open/x", http.Header{"Authorization": {"Basic Z29vZA=="}})
	wantAnswer(t, code, body, http.StatusOK, `cookies=[] authorization="Basic Z29vZA==" token=""`)
}
