package node

import (
	"testing"
	"time"

	"github.com/skein-dev/skein/cluster"
)

func TestLeaseUntil_NeverExpiresOnlyForTheSoleRaftServer(t *testing.T) {
	sent := time.Date(2026, 11, 30, 2, 0, 0, 0, time.UTC)
	stop := 2500 * time.Millisecond
	expires := sent.Add(stop)
	tests := []struct {
		name    string
		servers []cluster.Server
		want    time.Time
	}{
		{"alone in the configuration", []cluster.Server{{ID: "me"}}, time.Time{}},
		// A restarted node whose FSM has not replayed the log yet knows no
		// other node, but Raft already lists them: the lease must expire.
		{"one of three servers", []cluster.Server{{ID: "me"}, {ID: "b"}, {ID: "c"}}, expires},
		{"a non-voter of a bigger cluster", []cluster.Server{{ID: "a", Voter: true}, {ID: "me"}}, expires},
		{"the configuration names another node only", []cluster.Server{{ID: "other"}}, expires},
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
type servers []cluster.Server

func (servers) IsLeader() bool                       { return false }
func (s servers) Servers() ([]cluster.Server, error) { return s, nil }

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
