package node

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/skein-dev/skein/agent/runner"
	"github.com/skein-dev/skein/cluster"
)

func TestLeaseUntil_NeverExpiresOnlyForTheSoleRaftServer(t *testing.T) {
	sent := time.Date(2026, 11, 30, 2, 0, 0, 0, time.UTC)
	stop := 2500 * time.Millisecond
	expires := sent.Add(stop)
	tests := []struct {
		name    string
		servers []cluster.RaftServer
		want    time.Time
	}{
		{"alone in the configuration", []cluster.RaftServer{{ID: "me"}}, time.Time{}},
		// A restarted node whose FSM has not replayed the log yet knows no
		// other node, but Raft already lists them: the lease must expire.
		{"one of three servers", []cluster.RaftServer{{ID: "me"}, {ID: "b"}, {ID: "c"}}, expires},
		{"a non-voter of a bigger cluster", []cluster.RaftServer{{ID: "a", Voter: true}, {ID: "me"}}, expires},
		{"the configuration names another node only", []cluster.RaftServer{{ID: "other"}}, expires},
		{"configuration unknown", nil, expires},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := leaseUntil(sent, stop, tc.servers, "me"); !got.Equal(tc.want) {
				t.Errorf("leaseUntil = %v, want %v", got, tc.want)
			}
		})
	}
}

// servers is a Raft configuration that never changes.
type servers []cluster.RaftServer

func (servers) IsLeader() bool                           { return false }
func (s servers) Servers() ([]cluster.RaftServer, error) { return s, nil }

// TestRenewEvery_AWorkerRenewsAtItsOwnLowerRate: a server renews its lease
// every heartbeat interval, a worker (a node Raft's configuration does not
// list) every worker interval.
func TestRenewEvery_AWorkerRenewsAtItsOwnLowerRate(t *testing.T) {
	cfg := Config{NodeID: "me", HeartbeatInterval: 250 * time.Millisecond, WorkerHeartbeat: 625 * time.Millisecond}
	for _, tc := range []struct {
		name string
		raft servers
		want time.Duration
	}{
		{"a voter", servers{{ID: "me", Voter: true}, {ID: "b", Voter: true}}, 250 * time.Millisecond},
		{"a standby", servers{{ID: "a", Voter: true}, {ID: "me"}}, 250 * time.Millisecond},
		{"a worker", servers{{ID: "a", Voter: true}, {ID: "b", Voter: true}}, 625 * time.Millisecond},
	} {
		cfg.Raft = tc.raft
		n := &Node{cfg: cfg}
		if got := n.renewEvery(); got != tc.want {
			t.Errorf("%s renews every %s, want %s", tc.name, got, tc.want)
		}
	}
}

// TestIsFenced_OnceTheLeaseRunsOutBeforeTheHeartbeatSaysSo: a heartbeat
// waits for a slow server until the lease runs out, and only its error
// sets the fence. From the lease's end on, the node starts no job (its
// supervisor would stop it at once); the sole server's lease never ends.
func TestIsFenced_OnceTheLeaseRunsOutBeforeTheHeartbeatSaysSo(t *testing.T) {
	dir := t.TempDir()
	r, err := runner.New(runner.Config{AllocDir: filepath.Join(dir, "allocs"), LeasePath: filepath.Join(dir, "lease.json"), AllowUnconfined: true,
		SupervisorCmd: []string{os.Args[0]}, AgentEnv: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Shutdown)
	stop := time.Second // far above a stall between the renewal and the first look
	for _, tc := range []struct {
		name       string
		raft       servers
		fencedThen bool
	}{
		{"one of three servers", servers{{ID: "me", Voter: true}, {ID: "b", Voter: true}, {ID: "c", Voter: true}}, true},
		{"the sole server", servers{{ID: "me", Voter: true}}, false},
	} {
		n := &Node{cfg: Config{NodeID: "me", StopAfter: stop, Raft: tc.raft}, runner: r}
		sent := time.Now()
		n.renewLease(sent)
		if n.isFenced() {
			t.Errorf("%s: fenced with a lease just renewed", tc.name)
		}
		time.Sleep(time.Until(sent.Add(stop)))
		if got := n.isFenced(); got != tc.fencedThen {
			t.Errorf("%s: fenced %v once StopAfter passed since the renewal, want %v", tc.name, got, tc.fencedThen)
		}
	}
}
