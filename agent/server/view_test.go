package server

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/cluster"
	"github.com/skein-dev/skein/fsm"
	"github.com/skein-dev/skein/internal/fsmtest"
	"github.com/skein-dev/skein/structs"
)

// configRaft is a Raft whose configuration is servers and whose leader
// is leader; nothing else of it is asked.
type configRaft struct {
	Raft
	servers []cluster.RaftServer
	leader  *atomic.Value // string
}

func (r configRaft) Servers() ([]cluster.RaftServer, error) { return r.servers, nil }
func (r configRaft) Leader() (string, string)               { return "", r.leader.Load().(string) }

// viewServer serves node views from st's FSM as node "s1", a server
// when server is set, to every caller.
func viewServer(t *testing.T, st *fsmtest.States, server bool) (*httptest.Server, *api.Client, *atomic.Value) {
	t.Helper()
	return viewServerWith(t, st, server, TokenAuth(""))
}

// viewServerWith is viewServer with the node API's authenticator nodes.
func viewServerWith(t *testing.T, st *fsmtest.States, server bool, nodes Authenticator) (*httptest.Server, *api.Client, *atomic.Value) {
	t.Helper()
	r := configRaft{leader: &atomic.Value{}}
	r.leader.Store("s1")
	if server {
		r.servers = []cluster.RaftServer{{ID: "s1", Voter: true}}
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	s := &nodeRoutes{shared: &shared{cfg: Config{NodeID: "s1", Raft: r, NodeAuth: nodes}, fsm: st.F, log: hclog.NewNullLogger(),
		timeouts: Timeouts{}.withDefaults(), ctx: ctx}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+internalPrefix+"nodes/{id}/view", s.handleNodeView)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	c, err := api.NewClient(srv.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	return srv, c, r.leader
}

// viewState has nodes w1 and w2, each running a one-rank job.
func viewState(t *testing.T) *fsmtest.States {
	st := fsmtest.New(t)
	for _, id := range []string{"w1", "w2"} {
		st.Node(structs.Node{ID: id, Name: id, CPUs: 8, MemoryMiB: 1 << 14, Status: structs.NodeReady})
		st.Must(structs.JobSubmitType, structs.JobSubmitRequest{JobID: "job-" + id, Spec: structs.JobSpec{Command: []string{"true"}, Nodes: 1}, SubmittedAt: time.Now()})
		st.Must(structs.PlanApplyType, structs.PlanApplyRequest{At: time.Now(), Plan: structs.Plan{Placements: []structs.JobPlacement{
			{JobID: "job-" + id, Allocations: []structs.Allocation{{ID: "alloc-" + id, NodeID: id}}}}}})
	}
	return st
}

func TestNodeView_ServedToTheNodeAndAgainOnlyWhenItChanges(t *testing.T) {
	st := viewState(t)
	_, c, _ := viewServer(t, st, true)
	ctx := context.Background()

	v, err := c.NodeView(ctx, "w1", "", 0, "", time.Second)
	if err != nil || v.Data == nil || v.Hash == "" || v.Index != st.F.Index() || v.Leader != "s1" {
		t.Fatalf("first view: %+v, %v", v, err)
	}
	w := fsm.New(nil)
	if err := w.LoadView(bytes.NewReader(v.Data)); err != nil {
		t.Fatal(err)
	}
	_, has1 := w.Alloc("alloc-w1")
	_, has2 := w.Alloc("alloc-w2")
	if !has1 || has2 {
		t.Fatal("w1's view does not hold exactly w1's allocation")
	}

	// Nothing of w1's changes while the watch waits: 304, same hash.
	st.Report("w2", structs.AllocUpdate{AllocID: "alloc-w2", State: structs.AllocRunning})
	same, err := c.NodeView(ctx, "w1", v.Hash, v.Index, "s1", 200*time.Millisecond)
	if err != nil || same.Data != nil || same.Hash != v.Hash {
		t.Fatalf("unchanged view: %+v, %v; want no data and hash %s", same, err, v.Hash)
	}

	// A watch waiting on w1's view is answered by a change of it.
	got := make(chan *api.NodeView, 1)
	errs := make(chan error, 1)
	go func() {
		nv, err := c.NodeView(ctx, "w1", v.Hash, v.Index, "s1", MaxViewWait)
		got <- nv
		errs <- err
	}()
	st.Report("w1", structs.AllocUpdate{AllocID: "alloc-w1", State: structs.AllocRunning})
	changed := <-got
	if err := <-errs; err != nil || changed.Data == nil || changed.Hash == v.Hash {
		t.Fatalf("view after w1's allocation changed: %+v, %v", changed, err)
	}
	if err := w.LoadView(bytes.NewReader(changed.Data)); err != nil {
		t.Fatal(err)
	}
	if a, _ := w.Alloc("alloc-w1"); a.State != structs.AllocRunning {
		t.Fatalf("w1's allocation is %s in the new view, want running", a.State)
	}
}

func TestNodeView_RefusedByANodeOutsideRaftAndForABadWait(t *testing.T) {
	st := viewState(t)
	srv, c, _ := viewServer(t, st, false)
	_, err := c.NodeView(context.Background(), "w1", "", 0, "", time.Second)
	var e *api.Error
	if !errors.As(err, &e) || e.StatusCode != http.StatusServiceUnavailable || !strings.Contains(e.Message, "holds no copy of the state") {
		t.Fatalf("view from a node outside Raft: %v, want 503 saying to ask a server", err)
	}
	srv2, _, _ := viewServer(t, st, true)
	for _, u := range []string{srv.URL, srv2.URL} {
		resp, err := http.Get(u + internalPrefix + "nodes/w1/view?wait=31s")
		if err != nil {
			t.Fatal(err)
		}
		if err := api.ReadError(resp); resp.StatusCode != http.StatusBadRequest || !strings.Contains(err.Error(), `wait "31s": want a duration from 0s to 30s`) {
			t.Errorf("wait=31s: %d %v", resp.StatusCode, err)
		}
	}
}

func TestNodeView_ANewLeaderAnswersTheWatch(t *testing.T) {
	st := viewState(t)
	_, c, leader := viewServer(t, st, true)
	ctx := context.Background()
	v, err := c.NodeView(ctx, "w1", "", 0, "", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// The node knows s1 leads: nothing to say.
	if same, err := c.NodeView(ctx, "w1", v.Hash, v.Index, "s1", 100*time.Millisecond); err != nil || same.Data != nil {
		t.Fatalf("watch with the leader known: %+v, %v", same, err)
	}
	// Another server leads, and its first entry reaches this one.
	leader.Store("s2")
	st.Must(structs.LeaderElectedType, structs.LeaderElectedRequest{NodeID: "s2", At: time.Now()})
	got, err := c.NodeView(ctx, "w1", v.Hash, v.Index, "s1", MaxViewWait)
	if err != nil || got.Leader != "s2" || got.Hash != v.Hash {
		t.Fatalf("watch after the leader changed: %+v, %v; want leader s2 and the same view", got, err)
	}
}

// revocable refuses every caller once revoked is set.
type revocable struct{ revoked *atomic.Bool }

func (a revocable) Authenticate(r *http.Request) (*http.Request, error) {
	if a.revoked.Load() {
		return nil, errors.New("revoked")
	}
	return r, nil
}

func TestNodeView_AWatchIsNotAnsweredOnceItsCallerIsRefused(t *testing.T) {
	st := viewState(t)
	var revoked atomic.Bool
	_, c, _ := viewServerWith(t, st, true, revocable{&revoked})
	ctx := context.Background()
	v, err := c.NodeView(ctx, "w1", "", 0, "", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// A watch let in before its node was revoked, answered after: the
	// change it waited for (the next gossip key, say) is not sent.
	got := make(chan error, 1)
	go func() {
		_, err := c.NodeView(ctx, "w1", v.Hash, v.Index, "s1", MaxViewWait)
		got <- err
	}()
	revoked.Store(true)
	st.Report("w1", structs.AllocUpdate{AllocID: "alloc-w1", State: structs.AllocRunning})
	var e *api.Error
	if err := <-got; !errors.As(err, &e) || e.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a watch whose caller was revoked meanwhile: %v, want 401", err)
	}
}

// A server behind the view a node holds, or holding nothing yet (one
// restarted and replaying its log), answers no view: it would take the
// node back, or empty its view.
func TestNodeView_AServerBehindTheNodeAnswersNoView(t *testing.T) {
	st := viewState(t)
	_, c, _ := viewServer(t, st, true)
	ctx := context.Background()
	ahead := st.F.Index() + 100
	v, err := c.NodeView(ctx, "w1", "", ahead, "", 100*time.Millisecond)
	if err != nil || v.Data != nil {
		t.Fatalf("a view from a server behind the node's (index %d, the server's %d): %+v, %v; want none", ahead, st.F.Index(), v, err)
	}
	empty := fsmtest.New(t)
	_, fresh, _ := viewServer(t, empty, true)
	if v, err := fresh.NodeView(ctx, "w1", "", 0, "", 100*time.Millisecond); err != nil || v.Data != nil {
		t.Fatalf("a view from a server holding nothing: %+v, %v; want none", v, err)
	}
	// Caught up, the server answers.
	if v, err := c.NodeView(ctx, "w1", "", st.F.Index(), "", time.Second); err != nil || v.Data == nil {
		t.Fatalf("a view from a server as far as the node: %+v, %v; want one", v, err)
	}
}
