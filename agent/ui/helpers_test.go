package ui

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/fsm"
	"github.com/skein-dev/skein/gpu"
	"github.com/skein-dev/skein/structs"
)

// t0 stamps the test state's entries.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// state builds an FSM by applying entries, as Raft would.
type state struct {
	tb  testing.TB
	f   *fsm.FSM
	idx uint64
}

func newState(tb testing.TB) *state { return &state{tb: tb, f: fsm.New(nil)} }

func (s *state) at() time.Time { return t0.Add(time.Duration(s.idx) * time.Second) }

func (s *state) apply(mt structs.MessageType, msg any) any {
	s.tb.Helper()
	buf, err := structs.Encode(mt, msg)
	if err != nil {
		s.tb.Fatalf("encode: %v", err)
	}
	s.idx++
	resp := s.f.Apply(&raft.Log{Index: s.idx, Data: buf})
	if err, ok := resp.(error); ok {
		s.tb.Fatalf("apply %d: %v", mt, err)
	}
	return resp
}

// node registers a ready node with n simulated H100s.
func (s *state) node(id, name string, n int) {
	s.tb.Helper()
	gpus := make([]structs.GPU, n)
	for i := range gpus {
		gpus[i] = structs.GPU{Index: i, UUID: gpuUUID(id, i), Model: "H100", MemoryMiB: 81559, Healthy: true, Simulated: true}
	}
	s.apply(structs.NodeRegisterType, structs.NodeRegisterRequest{At: s.at(), Node: structs.Node{
		ID: id, Name: name, CPUs: 64, MemoryMiB: 512 << 10, GPUs: gpus, GPUSource: "simulated", Status: structs.NodeReady,
		Addresses: structs.Addresses{HTTP: "http://" + name + ":7070"},
	}})
}

func gpuUUID(nodeID string, i int) string { return fmt.Sprintf("GPU-%s-%d", nodeID, i) }

func (s *state) submit(id, owner string, spec structs.JobSpec) {
	s.tb.Helper()
	if spec.Nodes == 0 {
		spec.Nodes = 1
	}
	if spec.Command == nil {
		spec.Command = []string{"python", "train.py"}
	}
	s.apply(structs.JobSubmitType, structs.JobSubmitRequest{JobID: id, Spec: spec, SubmittedAt: s.at(), Owner: owner})
}

// run places a job on a node's GPUs and reports it running; it returns
// the allocation's ID.
func (s *state) run(jobID, nodeID string, gpus ...int) string {
	s.tb.Helper()
	allocID := "alloc-" + jobID
	var uuids []string
	for _, g := range gpus {
		uuids = append(uuids, gpuUUID(nodeID, g))
	}
	res := s.apply(structs.PlanApplyType, structs.PlanApplyRequest{At: s.at(), Plan: structs.Plan{Placements: []structs.JobPlacement{{
		JobID: jobID, Allocations: []structs.Allocation{{ID: allocID, NodeID: nodeID, GPUs: uuids}},
	}}}}).(*structs.PlanResult)
	if len(res.Rejected) > 0 {
		s.tb.Fatalf("place %s: %v", jobID, res.Rejected)
	}
	s.report(nodeID, allocID, structs.AllocRunning, 0, "")
	return allocID
}

func (s *state) report(nodeID, allocID string, st structs.AllocState, code int, reason string) {
	s.tb.Helper()
	s.apply(structs.AllocUpdateType, structs.AllocUpdateRequest{NodeID: nodeID,
		Updates: []structs.AllocUpdate{{AllocID: allocID, State: st, ExitCode: code, Reason: reason, At: s.at()}}})
}

func (s *state) block(jobID, reason string) {
	s.tb.Helper()
	s.apply(structs.PlanApplyType, structs.PlanApplyRequest{At: s.at(), Plan: structs.Plan{Blocked: []structs.JobBlocked{{JobID: jobID, Reason: reason}}}})
}

func (s *state) fault(nodeID string, index int, reason string) {
	s.tb.Helper()
	s.apply(structs.NodeGPUHealthType, structs.NodeGPUHealthRequest{NodeID: nodeID, At: s.at(), GPUs: []structs.GPUHealth{{
		UUID: gpuUUID(nodeID, index), Reason: reason, UnhealthySince: s.at(), LastFaultAt: s.at(),
	}}})
}

func (s *state) status(nodeID string, st structs.NodeStatus, reason string) {
	s.tb.Helper()
	s.apply(structs.NodeStatusType, structs.NodeStatusRequest{NodeID: nodeID, Status: st, Reason: reason, At: s.at()})
}

func (s *state) cordon(nodeID string, index int, reason string) {
	s.tb.Helper()
	s.apply(structs.GPUCordonType, structs.GPUCordonRequest{NodeID: nodeID, UUID: gpuUUID(nodeID, index), Cordon: true, Reason: reason, At: s.at()})
}

// fakeTelemetry is this node's GPUs at fixed readings.
type fakeTelemetry []gpu.Sample

func (f fakeTelemetry) Sample() []gpu.Sample { return f }

// The tokens the fake authenticator knows, and who holds them.
var viewers = map[string]Viewer{
	"reader-token":   {ACL: true, User: "rita", Role: structs.RoleReader},
	"alice-token":    {ACL: true, User: "alice", Role: structs.RoleSubmitter},
	"operator-token": {ACL: true, User: "olga", Role: structs.RoleOperator},
}

var errBadToken = errors.New("unknown ACL token")

// fakeAPI stands for the user API: it records the calls it serves and
// answers them from answers (by "METHOD PATH"), else 200 {}.
type fakeAPI struct {
	mu      sync.Mutex
	calls   []string
	tokens  []string
	answers map[string]fakeAnswer
}

type fakeAnswer struct {
	status int
	body   string
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := r.Method + " " + r.URL.Path
	f.mu.Lock()
	f.calls = append(f.calls, key)
	f.tokens = append(f.tokens, r.Header.Get(api.TokenHeader))
	a, ok := f.answers[key]
	f.mu.Unlock()
	if !ok {
		a = fakeAnswer{http.StatusOK, "{}"}
	}
	w.WriteHeader(a.status)
	_, _ = io.WriteString(w, a.body)
}

func (f *fakeAPI) reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls, f.tokens = nil, nil
}

func (f *fakeAPI) called() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

// harness is a UI over a state, with a fake API and authenticator. With
// open, a request without a token is let in with every permission (a
// cluster without ACLs or token).
type harness struct {
	t    testing.TB
	st   *state
	ui   *UI
	api  *fakeAPI
	open bool
	// remote answers for the other nodes asked for their telemetry, by
	// node ID (none: beta's readings, remoteTelemetry); asked lists the
	// nodes asked.
	remote map[string]func(ctx context.Context) ([]gpu.Sample, error)
	asked  []string
}

func newHarness(t testing.TB, st *state, tel gpu.Telemetry) *harness {
	h := &harness{t: t, st: st, api: &fakeAPI{answers: map[string]fakeAnswer{}}, remote: map[string]func(context.Context) ([]gpu.Sample, error){}}
	h.ui = New(Config{FSM: st.f, NodeID: "n1", NodeName: "alpha", Telemetry: tel}, Host{
		API:           h.api,
		Authenticate:  h.authenticate,
		Leader:        func() string { return "n1" },
		NodeTelemetry: h.nodeTelemetry,
	})
	return h
}

// nodeTelemetry stands for the server's call to another node.
func (h *harness) nodeTelemetry(ctx context.Context, nodeID string) ([]gpu.Sample, error) {
	h.asked = append(h.asked, nodeID)
	if answer, ok := h.remote[nodeID]; ok {
		return answer(ctx)
	}
	return remoteTelemetry(), nil
}

// remoteTelemetry is what another node answers by default: GPU 1 busy.
func remoteTelemetry() []gpu.Sample {
	return []gpu.Sample{
		{Index: 0, Simulated: true, Has: gpu.HasUtil, UtilPercent: 0},
		{Index: 1, Simulated: true, Has: gpu.HasUtil | gpu.HasTemp, UtilPercent: 58, TempC: 47},
	}
}

func (h *harness) authenticate(r *http.Request, token string) (*http.Request, Viewer, error) {
	if token == "" && h.open {
		return r, Viewer{Role: structs.RoleAdmin}, nil
	}
	v, ok := viewers[token]
	if !ok {
		return nil, Viewer{}, errBadToken
	}
	r = r.Clone(r.Context())
	r.Header.Set(api.TokenHeader, token)
	return r, v, nil
}

// client is a browser of the harness's UI: it keeps cookies.
type client struct {
	h       *harness
	cookies map[string]*http.Cookie
}

func (h *harness) client(token string) *client {
	c := &client{h: h, cookies: map[string]*http.Cookie{}}
	if token != "" {
		c.cookies[TokenCookie] = &http.Cookie{Name: TokenCookie, Value: token}
	}
	return c
}

// do serves one request and keeps the cookies it sets.
func (c *client) do(method, target string, form url.Values) *httptest.ResponseRecorder {
	c.h.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	r := httptest.NewRequest(method, target, body)
	if form != nil {
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for _, ck := range c.cookies {
		r.AddCookie(ck)
	}
	w := httptest.NewRecorder()
	c.h.ui.ServeHTTP(w, r)
	for _, ck := range w.Result().Cookies() {
		if ck.MaxAge < 0 {
			delete(c.cookies, ck.Name)
		} else {
			c.cookies[ck.Name] = ck
		}
	}
	return w
}

// get fetches a page and fails unless it answers want.
func (c *client) get(target string, want int) string {
	c.h.t.Helper()
	w := c.do(http.MethodGet, target, nil)
	if w.Code != want {
		c.h.t.Fatalf("GET %s: %d, want %d:\n%s", target, w.Code, want, w.Body.String())
	}
	return w.Body.String()
}

var csrfInput = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

// csrf is the CSRF token of the last page's forms.
func csrfOf(t *testing.T, page string) string {
	t.Helper()
	m := csrfInput.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("the page has no form with a CSRF token:\n%s", page)
	}
	return m[1]
}

func contains(t *testing.T, page, what string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(page, want) {
			t.Errorf("%s lacks %q", what, want)
		}
	}
}

func lacks(t *testing.T, page, what string, unwanted ...string) {
	t.Helper()
	for _, u := range unwanted {
		if strings.Contains(page, u) {
			t.Errorf("%s shows %q", what, u)
		}
	}
}

var (
	jobLink  = regexp.MustCompile(`<td><a href="/ui/jobs/([^"?/]+)">`)
	nextLink = regexp.MustCompile(`<a href="([^"]+)" rel="next"`)
)
