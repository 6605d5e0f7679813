package peer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/skein-dev/skein/cluster"
	"github.com/skein-dev/skein/fsm"
)

func TestPeers_CallsLeaveFromTheAddressGiven(t *testing.T) {
	seen := make(chan string, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := net.SplitHostPort(r.RemoteAddr)
		seen <- host
	}))
	t.Cleanup(srv.Close)
	for _, streams := range []bool{false, true} {
		p := New(Config{DialFrom: net.ParseIP("127.0.0.7"), CallTimeout: 10 * time.Second})
		c := p.Calls()
		if streams {
			c = p.Streams()
		}
		resp, err := c.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if got := <-seen; got != "127.0.0.7" {
			t.Fatalf("a call (streams: %v) came from %s, want 127.0.0.7", streams, got)
		}
		c.CloseIdleConnections()
	}
}

// gossipRaft is what Peers reads of Raft and gossip: members, the leader
// Raft names, none of them this node.
type gossipRaft struct {
	leader  string
	members []cluster.Member
}

func (g gossipRaft) IsLeader() bool            { return false }
func (g gossipRaft) Leader() (addr, id string) { return "", g.leader }
func (g gossipRaft) Members() []cluster.Member { return g.members }
func (g gossipRaft) MembersVersion() uint64    { return 0 }

// versionedRaft is gossipRaft with a member table that says when it moved,
// counting the reads of its members.
type versionedRaft struct {
	gossipRaft
	version uint64
	reads   *int
}

func (v versionedRaft) MembersVersion() uint64 { return v.version }
func (v versionedRaft) Members() []cluster.Member {
	*v.reads++
	return v.members
}

// TestPeers_MembersAreDecodedAgainOnlyWhenTheTableMoved: a worker looks
// for a server in the gossip view for every renewal of its lease, so the
// view is decoded once per change of the member table, not per look.
func TestPeers_MembersAreDecodedAgainOnlyWhenTheTableMoved(t *testing.T) {
	reads := 0
	raft := &versionedRaft{gossipRaft: gossipRaft{members: []cluster.Member{member(t, "a", true), member(t, "w", false)}}, version: 1, reads: &reads}
	p := New(Config{NodeID: "w", Raft: raft, FSM: fsm.New(nil), CallTimeout: time.Second})
	for range 10 {
		if addr, err := p.ServerAddr(); err != nil || addr != "http://a:7470" {
			t.Fatalf("server %q (%v), want http://a:7470", addr, err)
		}
	}
	if reads != 1 {
		t.Errorf("the members were read %d times for 10 looks at an unchanged table, want 1", reads)
	}
	// a leaves Raft and b becomes a server: seen once the table moved.
	raft.members = []cluster.Member{member(t, "a", false), member(t, "b", true), member(t, "w", false)}
	raft.version++
	if addr, err := p.ServerAddr(); err != nil || addr != "http://b:7470" {
		t.Fatalf("server %q (%v) after the change, want http://b:7470", addr, err)
	}
	// What Members hands out is a copy: changing it changes no later look.
	ms := p.Members()
	for i := range ms {
		ms[i].Server, ms[i].HTTP = true, "http://evil:7470"
	}
	if addr, err := p.ServerAddr(); err != nil || addr != "http://b:7470" {
		t.Fatalf("server %q (%v) after a caller changed what Members returned, want http://b:7470", addr, err)
	}
	if reads != 2 {
		t.Errorf("the members were read %d times, want 2 (one per version)", reads)
	}
}

// member is a live member of gossip, a server when server is set.
func member(t *testing.T, id string, server bool) cluster.Member {
	t.Helper()
	meta, err := json.Marshal(Meta{Name: id, HTTP: "http://" + id + ":7470", Server: server})
	if err != nil {
		t.Fatal(err)
	}
	return cluster.Member{ID: id, Meta: meta, Status: cluster.StatusAlive}
}

func TestPeers_AWorkerAsksTheServersOtherThanTheLeaderWhileThereAreAny(t *testing.T) {
	raft := gossipRaft{leader: "a", members: []cluster.Member{
		member(t, "a", true), member(t, "b", true), member(t, "c", true), member(t, "w", false),
	}}
	p := New(Config{NodeID: "w", Raft: raft, FSM: fsm.New(nil), CallTimeout: time.Second})
	seen := map[string]int{}
	for range 200 {
		addr, err := p.ServerAddr()
		if err != nil {
			t.Fatal(err)
		}
		seen[addr]++
	}
	if seen["http://a:7470"] > 0 || seen["http://b:7470"] == 0 || seen["http://c:7470"] == 0 || len(seen) != 2 {
		t.Errorf("servers picked %v; want b and c, both, and never the leader a", seen)
	}
	// With the leader the only server alive, it is the one asked.
	raft.members = []cluster.Member{member(t, "a", true), member(t, "w", false)}
	p = New(Config{NodeID: "w", Raft: raft, FSM: fsm.New(nil), CallTimeout: time.Second})
	if addr, err := p.ServerAddr(); err != nil || addr != "http://a:7470" {
		t.Errorf("the only server is the leader: picked %q %v, want it", addr, err)
	}
}

func TestDialBound_ASlowServerIsWaitedForAndAnUnreachableOneGivenUpOn(t *testing.T) {
	const bound = 50 * time.Millisecond
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(6 * bound) // reached, but slow to answer
		_, _ = io.WriteString(w, "renewed")
	}))
	t.Cleanup(slow.Close)
	parent, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	call := func(c *http.Client, url string) error {
		ctx, done := DialBound(parent, bound)
		defer done()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err == nil && string(b) != "renewed" {
			err = fmt.Errorf("answer %q", b)
		}
		return err
	}
	if err := call(&http.Client{}, slow.URL); err != nil {
		t.Fatalf("a server reached but slow: %v, want its answer", err)
	}
	// A dial that never completes, as to a dead host: given up on at the
	// bound, long before the parent's deadline. (net/http may go on
	// dialling for its pool after the request gave up: the dial ends with
	// the test.)
	ended := make(chan struct{})
	t.Cleanup(func() { close(ended) })
	hang := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-ended:
			return nil, errors.New("the test ended")
		}
	}}}
	start := time.Now()
	err := call(hang, "http://10.255.255.1:7470/")
	if !errors.Is(err, context.Canceled) || time.Since(start) > 20*time.Second {
		t.Fatalf("a server never reached: %v after %s, want canceled at the bound", err, time.Since(start))
	}
	if parent.Err() != nil {
		t.Fatal("the parent's deadline passed: the bound did not end the call")
	}
}
