package server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/skein-dev/skein/agent/server/endpoint"
	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/fsm"
	"github.com/skein-dev/skein/internal/fsmtest"
	"github.com/skein-dev/skein/structs"
)

// eventServer serves GET /v1/events from st's FSM with a read bound of
// readTimeout, as the agent's server bounds requests.
func eventServer(t *testing.T, st *fsmtest.States, readTimeout time.Duration) (*httptest.Server, *api.Client) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	s := &clusterRoutes{shared: &shared{fsm: st.F, log: hclog.NewNullLogger(), timeouts: Timeouts{}.withDefaults(), ctx: ctx},
		clusterView: endpoint.Cluster{State: st.F}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/events", s.handleEvents)
	srv := httptest.NewUnstartedServer(mux)
	srv.Config.ReadTimeout = readTimeout
	srv.Start()
	t.Cleanup(srv.Close)
	c, err := api.NewClient(srv.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	return srv, c
}

// flapNode makes n events: node n1 going down and coming back.
func flapNode(st *fsmtest.States, n int) {
	for range n {
		s := structs.NodeDown
		if node, _ := st.F.Node("n1"); node.Status == structs.NodeDown {
			s = structs.NodeReady
		}
		st.Must(structs.NodeStatusType, structs.NodeStatusRequest{NodeID: "n1", Status: s, At: time.Now()})
	}
}

func TestEvents_QueryIsCheckedFieldByField(t *testing.T) {
	st := fsmtest.New(t)
	st.Node(structs.Node{ID: "n1", Name: "alpha"})
	srv, c := eventServer(t, st, time.Minute)
	for _, tc := range []struct {
		q    string
		code int
		want string
	}{
		{"after=x", http.StatusBadRequest, `after: event cursor "x"`},
		{"after=3.-1", http.StatusBadRequest, `SEQ "-1"`},
		{"limit=0", http.StatusBadRequest, "limit \"0\": want a number from 1 to 1000"},
		{"limit=1001", http.StatusBadRequest, "limit \"1001\""},
		{"node=beta", http.StatusNotFound, `node "beta"`},
	} {
		resp, err := http.Get(srv.URL + "/v1/events?" + tc.q)
		if err != nil {
			t.Fatal(err)
		}
		err = api.ReadError(resp)
		if resp.StatusCode != tc.code || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %d %v, want %d saying %q", tc.q, resp.StatusCode, err, tc.code, tc.want)
		}
	}
	// A node by name, and a job collected since (not in the state) by ID.
	p, err := c.Events(context.Background(), api.EventsQuery{Node: "alpha"})
	if err != nil || len(p.Events) != 1 || p.Events[0].Kind != structs.EventNodeJoined {
		t.Fatalf("events of alpha: %+v, %v", p, err)
	}
	if p, err := c.Events(context.Background(), api.EventsQuery{Job: "0123456789abcdef"}); err != nil || len(p.Events) != 0 {
		t.Fatalf("events of an unknown job: %+v, %v", p, err)
	}
}

func TestEvents_APageSaysWhatWasDropped(t *testing.T) {
	st := fsmtest.New(t)
	st.Node(structs.Node{ID: "n1"})
	flapNode(st, fsm.MaxEvents)
	_, c := eventServer(t, st, time.Minute)
	p, err := c.Events(context.Background(), api.EventsQuery{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if want := (structs.EventCursor{Index: 1}); p.Dropped != want || len(p.Events) != 10 || p.Events[0].Index != 2 {
		t.Fatalf("dropped %s, %d events from %s; want dropped %s, 10 from 2.0", p.Dropped, len(p.Events), p.Events[0].Cursor(), want)
	}
	if p, err := c.Events(context.Background(), api.EventsQuery{After: p.Next, Limit: 10}); err != nil || !p.Dropped.IsZero() {
		t.Fatalf("next page: %+v, %v; want nothing dropped", p.Dropped, err)
	}
}

// TestEvents_FollowOutlastsTheReadBoundAndResumesAfterABreak follows the
// stream past the server's read bound, breaks its connection, and checks
// that the client resumes after the last event it had: every event once,
// in order.
func TestEvents_FollowOutlastsTheReadBoundAndResumesAfterABreak(t *testing.T) {
	st := fsmtest.New(t)
	st.Node(structs.Node{ID: "n1"})
	const readTimeout = 100 * time.Millisecond
	srv, c := eventServer(t, st, readTimeout)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan structs.Event, 100)
	breaks := make(chan error, 10)
	done := make(chan error, 1)
	go func() {
		done <- c.FollowEvents(ctx, api.EventsQuery{}, func(err error, _ time.Duration) { breaks <- err },
			func(e structs.Event) error { got <- e; return nil })
	}()
	next := func() structs.Event {
		t.Helper()
		select {
		case e := <-got:
			return e
		case <-time.After(10 * time.Second):
			t.Fatal("no event within 10s")
		}
		return structs.Event{}
	}
	var seen []structs.Event
	seen = append(seen, next()) // the join
	// An event every third of the read bound, for three times the bound:
	// the same stream carries them all.
	tick := time.NewTicker(readTimeout / 3)
	defer tick.Stop()
	for range 9 {
		<-tick.C
		flapNode(st, 1)
		seen = append(seen, next())
	}
	select {
	case err := <-breaks:
		t.Fatalf("the stream broke within the read bound: %v", err)
	default:
	}
	srv.CloseClientConnections()
	flapNode(st, 3)
	for range 3 {
		seen = append(seen, next())
	}
	select {
	case <-breaks:
	case <-time.After(10 * time.Second):
		t.Fatal("the closed connection was not noticed")
	}
	want := st.F.Events(fsm.EventQuery{}).Events
	if len(seen) != len(want) {
		t.Fatalf("followed %d events, the state holds %d", len(seen), len(want))
	}
	for i := range want {
		if seen[i] != want[i] {
			t.Fatalf("event %d followed %+v, want %+v", i, seen[i], want[i])
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("follow ended with %v, want nil once cancelled", err)
	}
}

func TestEvents_AFollowerBehindTheRingIsToldWhatWasDropped(t *testing.T) {
	st := fsmtest.New(t)
	st.Node(structs.Node{ID: "n1"})
	flapNode(st, fsm.MaxEvents+1)
	_, c := eventServer(t, st, time.Minute)
	// Bounded, so that a stream that never delivers fails the test
	// instead of retrying until the package's timeout.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var first []structs.Event
	err := c.FollowEvents(ctx, api.EventsQuery{}, nil, func(e structs.Event) error {
		first = append(first, e)
		if len(first) == 2 {
			cancel()
		}
		return nil
	})
	if err != nil || len(first) < 2 {
		t.Fatalf("follow got %d events, error %v; want 2", len(first), err)
	}
	if d := first[0]; d.Kind != structs.EventsDropped || d.Cursor() != (structs.EventCursor{Index: 2}) ||
		!strings.Contains(d.Reason, "up to 2.0 were dropped") {
		t.Fatalf("first event %+v, want events-dropped up to 2.0", d)
	}
	if first[1].Index != 3 {
		t.Fatalf("second event %s, want the oldest kept, 3.0", first[1].Cursor())
	}
}

// TestEvents_AQuietFollowGetsKeepAlives: while no event comes, each tick
// writes an empty line (flushed); an event ends the wait.
func TestEvents_AQuietFollowGetsKeepAlives(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := &clusterRoutes{shared: &shared{fsm: fsm.New(nil), log: hclog.NewNullLogger(), timeouts: Timeouts{}.withDefaults(), ctx: ctx}}
	w := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodGet, "/v1/events?follow=true", nil)
	changed, tick := make(chan struct{}), make(chan time.Time)
	res := make(chan bool, 1)
	go func() { res <- s.waitEvents(w, r, changed, tick) }()
	tick <- time.Now()
	tick <- time.Now() // taken only once the first is written
	close(changed)
	if !<-res {
		t.Fatal("the wait ended the stream on an event")
	}
	if got := w.Body.String(); got != "\n\n" || !w.Flushed {
		t.Fatalf("wrote %q (flushed %v), want two flushed empty lines", got, w.Flushed)
	}
	cancel()
	if s.waitEvents(w, r, make(chan struct{}), tick) {
		t.Fatal("the wait went on after the server shut down")
	}
}
