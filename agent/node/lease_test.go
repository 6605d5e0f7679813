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
