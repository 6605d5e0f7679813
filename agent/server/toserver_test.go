package server

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/skein-dev/skein/agent/peer"
	"github.com/skein-dev/skein/cluster"
)

// workerRaft is a worker's Raft: in no configuration, with members whose
// gossip names them servers at the given API addresses.
type workerRaft struct {
	raftRole
	servers []string
}

func (r workerRaft) Servers() ([]cluster.RaftServer, error) { return nil, nil }
func (r workerRaft) Members() []cluster.Member {
	var ms []cluster.Member
	for i, addr := range r.servers {
		meta, _ := json.Marshal(peer.Meta{Name: addr, HTTP: addr, Server: true})
		ms = append(ms, cluster.Member{ID: "s" + string(rune('0'+i)), Status: cluster.StatusAlive, Meta: meta})
	}
	return ms
}

func TestToServer_AWorkerPassesRequestsOnAndSkipsAServerItCannotReach(t *testing.T) {
	// A server that gossip still lists as alive but whose port is closed.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + l.Addr().String()
	l.Close()
	var (
		mu  sync.Mutex
		got []string
	)
	live := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		got = append(got, r.Method+" "+r.URL.Path+" "+string(body)+" via "+r.Header.Get(ProxiedHeader)+" for "+r.Header.Get("X-Forwarded-For"))
		writeJSON(w, http.StatusOK, struct{}{})
	}))
	t.Cleanup(live.Close)

	r := workerRaft{raftRole: raftRole{self: "w1"}, servers: []string{dead, live.URL}}
	s := &Server{shared: &shared{cfg: Config{NodeID: "w1", NodeName: "worker-1", Raft: r,
		Peers: peer.New(peer.Config{NodeID: "w1", Raft: r})}, log: hclog.NewNullLogger(), timeouts: Timeouts{}.withDefaults()}}
	local := 0
	h := s.toServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { local++ }))
	// Either server may be picked first; each request reaches the live one.
	for range 8 {
		w := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "/v1/jobs", strings.NewReader(`{"spec":{}}`))
		req.RemoteAddr = "10.9.0.7:5000"
		h.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			t.Fatalf("passed on: %d %s", w.Code, w.Body)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	want := `POST /v1/jobs {"spec":{}} via worker-1 for 10.9.0.7`
	if len(got) != 8 || got[0] != want || got[7] != want {
		t.Fatalf("the live server got %d requests, first %q; want 8 of %q", len(got), got[0], want)
	}
	// Its own routes a worker answers itself.
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/metrics", nil))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, internalPrefix+"nodes/w1/view", nil))
	if local != 2 || len(got) != 8 {
		t.Fatalf("%d requests answered locally (want 2), %d passed on (want 8)", local, len(got))
	}
}
