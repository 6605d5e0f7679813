package server

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/skein-dev/skein/agent/leader"
	"github.com/skein-dev/skein/api"
)

func TestLeaseRelay_AServerPassesAWorkersRenewalToTheLeader(t *testing.T) {
	leader := startBusyNodeAs(t, raftRole{self: "a", leads: true, leaderID: "a", others: []string{"b"}}, "", 0)
	follower := startBusyNode(t, "b", "a", leader.url, 0)

	code, _, body := post(t, http.MethodPost, follower.url+"/v1/internal/heartbeat", api.HeartbeatRequest{NodeID: "w1"})
	if code != http.StatusOK || !strings.Contains(body, `"leader_id": "a"`) {
		t.Fatalf("heartbeat through a server that does not lead: %d %s, want 200 naming leader a", code, body)
	}
	leader.heard.mu.Lock()
	got := slices.Clone(leader.heard.nodes)
	leader.heard.mu.Unlock()
	if !slices.Equal(got, []string{"w1"}) {
		t.Errorf("the leader heard from %v, want [w1]", got)
	}
	if n := follower.heard.count(); n != 0 {
		t.Errorf("the server that does not lead recorded %d heartbeats itself, want 0", n)
	}
}

func TestLeaseRelay_TheLeaderTakesRoundsOnlyFromServersAndWithinTheBound(t *testing.T) {
	leader := startBusyNodeAs(t, raftRole{self: "a", leads: true, leaderID: "a", others: []string{"b"}}, "", 0)
	follower := startBusyNode(t, "b", "a", leader.url, 0)
	url := "/v1/internal/heartbeats"
	for _, c := range []struct {
		name, to string
		req      api.RelayedHeartbeatsRequest
		code     int
		want     string
	}{
		{"a node outside Raft", leader.url, api.RelayedHeartbeatsRequest{From: "w9", NodeIDs: []string{"w1"}}, http.StatusForbidden, "only a server"},
		{"too many nodes", leader.url, api.RelayedHeartbeatsRequest{From: "b", NodeIDs: make([]string, maxRelayed+1)}, http.StatusBadRequest, fmt.Sprintf("at most %d", maxRelayed)},
		{"a server that does not lead", follower.url, api.RelayedHeartbeatsRequest{From: "a", NodeIDs: []string{"w1"}}, http.StatusServiceUnavailable, "not the leader"},
	} {
		code, _, body := post(t, http.MethodPost, c.to+url, c.req)
		if code != c.code || !strings.Contains(body, c.want) {
			t.Errorf("%s: %d %s, want %d saying %q", c.name, code, body, c.code, c.want)
		}
	}
	if n := leader.heard.count(); n != 0 {
		t.Errorf("refused rounds recorded %d heartbeats, want 0", n)
	}
	code, _, body := post(t, http.MethodPost, leader.url+url, api.RelayedHeartbeatsRequest{From: "b", NodeIDs: []string{"w1", "w2"}})
	if code != http.StatusOK || leader.heard.count() != 2 {
		t.Errorf("a round from server b: %d %s, %d heard; want 200 and 2", code, body, leader.heard.count())
	}
}

// maxRelayed is the bound on the nodes of one round (the tests name their
// leader node leader).
const maxRelayed = leader.MaxRelayedNodes
