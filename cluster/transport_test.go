package cluster

import (
	"errors"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/skein-dev/skein/internal/testutil"
)

// A heartbeat being handled when raft shuts down must finish before the
// store may close, and none may be handled after: raft writes the term of
// a heartbeat to the store, and panics if the store is closed.
func TestRaftTransport_ShutWaitsForTheHeartbeatInFlightAndTurnsAwayTheRest(t *testing.T) {
	t.Parallel()
	listen := func() *raft.NetworkTransport {
		tr, err := raft.NewTCPTransport("127.0.0.1:0", nil, 2, time.Second, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = tr.Close() })
		return tr
	}
	server := &raftTransport{NetworkTransport: listen()}
	client := listen()
	entered, release := make(chan struct{}), make(chan struct{})
	var calls atomic.Int32
	server.SetHeartbeatHandler(func(rpc raft.RPC) {
		if calls.Add(1) == 1 {
			close(entered)
			<-release
		}
		rpc.Respond(&raft.AppendEntriesResponse{Term: 1, Success: true}, nil)
	})
	heartbeat := func() error {
		req := &raft.AppendEntriesRequest{
			RPCHeader: raft.RPCHeader{ID: []byte("c"), Addr: []byte(client.LocalAddr())},
			Term:      1,
		}
		return client.AppendEntries("s", server.LocalAddr(), req, &raft.AppendEntriesResponse{})
	}
	first := make(chan error, 1)
	go func() { first <- heartbeat() }()
	<-entered

	shut := make(chan struct{})
	go func() {
		server.shut()
		close(shut)
	}()
	testutil.Holds(t, 200*time.Millisecond, func() error {
		select {
		case <-shut:
			return errors.New("shut returned while a heartbeat was being handled")
		default:
			return nil
		}
	})
	close(release)
	<-shut
	if err := <-first; err != nil {
		t.Fatalf("the heartbeat in flight: %v", err)
	}
	if err := heartbeat(); err == nil {
		t.Fatal("a heartbeat after shut was answered")
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("the handler ran %d times; want once, for the heartbeat before shut", n)
	}
}
