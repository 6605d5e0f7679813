package server

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/skein-dev/skein/agent/peer"
	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/cluster"
	"github.com/skein-dev/skein/fsm"
	"github.com/skein-dev/skein/structs"
)

const busyToken = "busy-test-token"

// raftRole is what a Server and its Peers read of Raft: whether this node
// leads, and which node does. Both nodes are Raft voters, with others.
type raftRole struct {
	self     string
	leads    bool
	leaderID string
	others   []string
}

func (r raftRole) IsLeader() bool            { return r.leads }
func (r raftRole) Leader() (addr, id string) { return "", r.leaderID }
func (r raftRole) Servers() ([]cluster.RaftServer, error) {
	servers := []cluster.RaftServer{{ID: r.self, Voter: true}, {ID: r.leaderID, Voter: true}}
	for _, id := range r.others {
		servers = append(servers, cluster.RaftServer{ID: id, Voter: true})
	}
	return servers, nil
}
func (r raftRole) Join([]string) (int, error) { return 0, nil }

func (r raftRole) MembersVersion() uint64 { return 0 }

// Members are the servers, alive in gossip.
func (r raftRole) Members() []cluster.Member {
	servers, _ := r.Servers()
	out := make([]cluster.Member, 0, len(servers))
	for _, s := range servers {
		out = append(out, cluster.Member{ID: s.ID, Status: cluster.StatusAlive})
	}
	return out
}

// heldLog applies entries to a real FSM as Raft would, one at a time, but
// holds each until the test lets it go: a write in flight on the leader,
// for as long as the test needs.
type heldLog struct {
	f       *fsm.FSM
	entered chan struct{}
	release chan struct{}

	mu  sync.Mutex
	idx uint64
}

func newHeldLog() *heldLog {
	return &heldLog{f: fsm.New(nil), entered: make(chan struct{}, 16), release: make(chan struct{}, 16)}
}

func (l *heldLog) apply(t structs.MessageType, msg any) (any, error) {
	l.entered <- struct{}{}
	<-l.release
	buf, err := structs.Encode(t, msg)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.idx++
	resp := l.f.Apply(&raft.Log{Index: l.idx, Type: raft.LogCommand, Data: buf})
	if err, ok := resp.(error); ok {
		return nil, err
	}
	return resp, nil
}

// heard records the heartbeats a server took.
type heard struct {
	mu    sync.Mutex
	nodes []string
}

func (h *heard) HeardFrom(nodeID string, _ time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.nodes = append(h.nodes, nodeID)
}

func (h *heard) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.nodes)
}

// busyNode is one node's API server on loopback, in a plaintext cluster.
type busyNode struct {
	url   string
	log   *heldLog
	heard *heard
	// starved is what the node's overload monitor says.
	starved atomic.Bool
}

// startBusyNode serves a node's API: the leader when leaderID is its own
// ID, otherwise a node that forwards writes to leaderAddr.
func startBusyNode(t *testing.T, id, leaderID, leaderAddr string, maxWrites int) *busyNode {
	t.Helper()
	return startBusyNodeAs(t, raftRole{self: id, leads: leaderID == id, leaderID: leaderID}, leaderAddr, maxWrites)
}

// startBusyNodeAs is startBusyNode in the Raft role given.
func startBusyNodeAs(t *testing.T, role raftRole, leaderAddr string, maxWrites int) *busyNode {
	t.Helper()
	id, leaderID := role.self, role.leaderID
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n := &busyNode{url: "http://" + ln.Addr().String(), log: newHeldLog(), heard: &heard{}}
	if leaderAddr != "" {
		// The leader's registration is where a node finds its address.
		n.log.release <- struct{}{}
		if _, err := n.log.apply(structs.NodeRegisterType, structs.NodeRegisterRequest{Node: structs.Node{
			ID: leaderID, Name: leaderID, Status: structs.NodeReady, CPUs: 8, MemoryMiB: 1024,
			Addresses: structs.Addresses{HTTP: leaderAddr},
		}, At: time.Now().UTC()}); err != nil {
			t.Fatal(err)
		}
		<-n.log.entered
	}
	done := make(chan struct{})
	s := New(Config{
		Listener: ln, NodeID: id, NodeName: id, FSM: n.log.f, Raft: role, Apply: n.log.apply,
		Peers: peer.New(peer.Config{NodeID: id, HTTPAddr: n.url, Raft: role, FSM: n.log.f, Token: busyToken,
			CallTimeout: 10 * time.Second, Done: done}),
		Heartbeats: n.heard,
		UserAuth:   ACLAuth{FSM: n.log.f, Legacy: TokenAuth(busyToken)},
		NodeAuth:   TokenAuth(busyToken),
		MaxWrites:  maxWrites,
		Starved:    n.starved.Load,
		Logger:     hclog.NewNullLogger(),
	})
	go s.Serve()
	t.Cleanup(func() {
		close(done)
		// Let go whatever is still held, so the server can stop.
		for range cap(n.log.release) {
			select {
			case n.log.release <- struct{}{}:
			default:
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
	})
	return n
}

// send sends a request to a node with the cluster's token and returns the
// answer's status, headers and body.
func send(method, url string, body any) (int, http.Header, string, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return 0, nil, "", err
	}
	req, err := http.NewRequest(method, url, bytes.NewReader(b))
	if err != nil {
		return 0, nil, "", err
	}
	req.Header.Set(api.TokenHeader, busyToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, "", err
	}
	defer resp.Body.Close()
	var out bytes.Buffer
	_, err = out.ReadFrom(resp.Body)
	return resp.StatusCode, resp.Header, out.String(), err
}

// post is send, failing the test on a transport error.
func post(t *testing.T, method, url string, body any) (int, http.Header, string) {
	t.Helper()
	code, h, b, err := send(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	return code, h, b
}

func submitBody(requestID string) api.SubmitRequest {
	return api.SubmitRequest{RequestID: requestID, Spec: structs.JobSpec{Command: []string{"true"}, CPUs: 1}}
}

// holdOneWrite submits a job to the leader and waits until its write is in
// flight, held; the returned channel gives the submit's status once the
// test lets the write go.
func holdOneWrite(t *testing.T, leader *busyNode) <-chan int {
	t.Helper()
	code := make(chan int, 1)
	go func() {
		c, _, body, err := send(http.MethodPost, leader.url+"/v1/jobs", submitBody("held"))
		if err != nil {
			t.Errorf("the held submission: %v", err)
		} else if c != http.StatusCreated {
			t.Errorf("the held submission: %d %s", c, body)
		}
		code <- c
	}()
	select {
	case <-leader.log.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the first submission never reached the leader's log")
	}
	return code
}

// With MaxWrites 1 and one write in flight, the next is refused at once
// with 429 and Retry-After, and nothing of it is done; node heartbeats and
// reads are still served meanwhile; once the write in flight ends, the
// refused one goes through.
func TestBounded_AWriteOverTheBoundIs429WithRetryAfterAndChangesNothing(t *testing.T) {
	leader := startBusyNode(t, "leader", "leader", "", 1)
	held := holdOneWrite(t, leader)

	code, h, body := post(t, http.MethodPost, leader.url+"/v1/jobs", submitBody("refused"))
	if code != http.StatusTooManyRequests || h.Get("Retry-After") != "1" || h.Get(api.BusyHeader) == "" {
		t.Fatalf("submit over the bound: %d, Retry-After %q, %s %q: %s; want 429, Retry-After 1 and the busy mark",
			code, h.Get("Retry-After"), api.BusyHeader, h.Get(api.BusyHeader), body)
	}
	if !strings.Contains(body, "cluster busy") || !strings.Contains(body, "1 writes in flight, its limit") {
		t.Fatalf("refusal body %s: want it to say the cluster is busy and name the limit", body)
	}
	// A cancel is a bounded write too.
	if code, _, body := post(t, http.MethodDelete, leader.url+"/v1/jobs/nosuchjob", nil); code != http.StatusTooManyRequests {
		t.Fatalf("cancel over the bound: %d %s; want 429", code, body)
	}

	// The nodes' own reports and the users' reads never wait for users'
	// writes.
	if code, _, body := post(t, http.MethodPost, leader.url+"/v1/internal/heartbeat", api.HeartbeatRequest{NodeID: "n1"}); code != http.StatusOK {
		t.Fatalf("heartbeat while the writes are at their bound: %d %s", code, body)
	}
	if leader.heard.count() != 1 {
		t.Fatalf("the leader recorded %d heartbeats; want 1", leader.heard.count())
	}
	if code, _, body := post(t, http.MethodGet, leader.url+"/v1/status", nil); code != http.StatusOK {
		t.Fatalf("status while the writes are at their bound: %d %s", code, body)
	}

	leader.log.release <- struct{}{}
	if c := <-held; c != http.StatusCreated {
		t.Fatalf("the write in flight ended %d; want 201", c)
	}
	if _, ok := leader.log.f.JobByRequestID("refused"); ok {
		t.Fatal("the refused submission made a job")
	}
	// The bound is free again: the refused submission, sent again, is
	// taken.
	leader.log.release <- struct{}{}
	if code, _, body := post(t, http.MethodPost, leader.url+"/v1/jobs", submitBody("refused")); code != http.StatusCreated {
		t.Fatalf("the refused submission sent again: %d %s; want 201", code, body)
	}
	if n := len(leader.log.f.Jobs()); n != 2 {
		t.Fatalf("%d jobs; want 2", n)
	}
}

// A node that does not lead passes the leader's 429 to its client as the
// leader answered it: status, Retry-After, busy mark and message.
func TestBounded_AForwardedWritePassesTheLeaders429On(t *testing.T) {
	leader := startBusyNode(t, "leader", "leader", "", 1)
	follower := startBusyNode(t, "follower", "leader", leader.url, 1)
	held := holdOneWrite(t, leader)

	_, _, direct := post(t, http.MethodPost, leader.url+"/v1/jobs", submitBody("direct"))
	code, h, body := post(t, http.MethodPost, follower.url+"/v1/jobs", submitBody("forwarded"))
	if code != http.StatusTooManyRequests || h.Get("Retry-After") != "1" || h.Get(api.BusyHeader) == "" {
		t.Fatalf("forwarded submit over the leader's bound: %d, Retry-After %q, %s %q: %s; want 429, Retry-After 1 and the busy mark",
			code, h.Get("Retry-After"), api.BusyHeader, h.Get(api.BusyHeader), body)
	}
	if body != direct {
		t.Fatalf("forwarded refusal %q; want the leader's own %q", body, direct)
	}
	leader.log.release <- struct{}{}
	<-held
	if _, ok := leader.log.f.JobByRequestID("forwarded"); ok {
		t.Fatal("the refused forwarded submission made a job")
	}
}

// The api client, refused as busy through a node that forwards to the
// leader, waits as the leader asked, says so once, and sends the same
// submission again, which the leader then takes: one job.
func TestBounded_TheClientWaitsForABusyLeaderThroughAForward(t *testing.T) {
	leader := startBusyNode(t, "leader", "leader", "", 1)
	follower := startBusyNode(t, "follower", "leader", leader.url, 1)
	held := holdOneWrite(t, leader)
	var waits []time.Duration
	c, err := api.NewClient(follower.url, busyToken)
	if err != nil {
		t.Fatal(err)
	}
	c = c.WithBusyRetry(time.Minute, func(wait time.Duration) {
		waits = append(waits, wait)
		// Refused once: the write in flight ends while the client waits,
		// and the next write may go through.
		leader.log.release <- struct{}{}
		leader.log.release <- struct{}{}
	})
	job, err := c.SubmitJob(context.Background(), submitBody("waited"))
	if err != nil {
		t.Fatal(err)
	}
	<-held
	if len(waits) != 1 || waits[0] < time.Second || waits[0] > 1500*time.Millisecond {
		t.Fatalf("the client waited %v; want once, the leader's second and at most half as much again", waits)
	}
	if got, ok := leader.log.f.JobByRequestID("waited"); !ok || got.ID != job.ID {
		t.Fatalf("job %s submitted through the follower is not the leader's (%v)", job.ID, ok)
	}
	if n := len(leader.log.f.Jobs()); n != 2 {
		t.Fatalf("%d jobs; want 2, the held one and the one that waited", n)
	}
}
