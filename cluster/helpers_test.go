package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// errRejected is what kvFSM returns (as a value) for "reject:" commands.
var errRejected = errors.New("rejected by fsm")

// kvFSM is a tiny key/value state machine. Commands are "key=value", which
// sets a key and returns the number of keys, or "reject:why", which returns
// an error value wrapping errRejected.
type kvFSM struct {
	mu       sync.Mutex
	data     map[string]string
	restores int
}

func newKV() *kvFSM { return &kvFSM{data: map[string]string{}} }

func (f *kvFSM) Apply(l *raft.Log) any {
	cmd := string(l.Data)
	if why, ok := strings.CutPrefix(cmd, "reject:"); ok {
		return fmt.Errorf("%w: %s", errRejected, why)
	}
	k, v, ok := strings.Cut(cmd, "=")
	if !ok {
		return fmt.Errorf("malformed command %q", cmd)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.data[k] = v
	return len(f.data)
}

func (f *kvFSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, err := json.Marshal(f.data)
	if err != nil {
		return nil, err
	}
	return kvSnapshot(b), nil
}

func (f *kvFSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	data := map[string]string{}
	if err := json.NewDecoder(rc).Decode(&data); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.data = data
	f.restores++
	return nil
}

func (f *kvFSM) get(k string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.data[k]
}

func (f *kvFSM) restoreCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.restores
}

type kvSnapshot []byte

func (s kvSnapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write(s); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

func (kvSnapshot) Release() {}

// testNode is one started Cluster and its FSM.
type testNode struct {
	id  string
	dir string
	c   *Cluster
	fsm *kvFSM
}

// startNode starts a member on 127.0.0.1 (bind "" picks a free port) with a
// fresh FSM and shuts it down when the test ends.
func startNode(t *testing.T, id, dir, bind string, bootstrap bool) *testNode {
	t.Helper()
	if bind == "" {
		bind = "127.0.0.1:0"
	}
	fsm := newKV()
	c, err := New(Config{NodeID: id, DataDir: dir, RaftBind: bind, FSM: fsm, Bootstrap: bootstrap})
	if err != nil {
		t.Fatalf("start %s: %v", id, err)
	}
	t.Cleanup(func() {
		if err := c.Shutdown(); err != nil {
			t.Errorf("shut down %s: %v", id, err)
		}
	})
	return &testNode{id: id, dir: dir, c: c, fsm: fsm}
}

// waitFor polls cond until it returns nil or the deadline passes, then
// fails the test with the last error.
func waitFor(t *testing.T, timeout time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met after %s: %v", timeout, err)
		}
		<-tick.C
	}
}

// waitLeader waits until n knows a leader.
func waitLeader(t *testing.T, n *testNode) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.c.WaitForLeader(ctx); err != nil {
		t.Fatalf("%s: %v", n.id, err)
	}
}

// nextEvent returns the next leadership event of n, failing after timeout.
func nextEvent(t *testing.T, n *testNode, timeout time.Duration) bool {
	t.Helper()
	select {
	case v := <-n.c.LeaderEvents():
		return v
	case <-time.After(timeout):
		t.Fatalf("%s: no leadership event within %s", n.id, timeout)
		return false
	}
}

// leaderOf returns the one node among nodes that is leader, or an error.
func leaderOf(nodes ...*testNode) (*testNode, error) {
	var found *testNode
	for _, n := range nodes {
		if !n.c.IsLeader() {
			continue
		}
		if found != nil {
			return nil, fmt.Errorf("two leaders: %s and %s", found.id, n.id)
		}
		found = n
	}
	if found == nil {
		return nil, errors.New("no leader")
	}
	return found, nil
}

// converged reports whether every node's FSM has key set to want.
func converged(key, want string, nodes ...*testNode) error {
	for _, n := range nodes {
		if got := n.fsm.get(key); got != want {
			return fmt.Errorf("%s: %s = %q, want %q", n.id, key, got, want)
		}
	}
	return nil
}
