package endpoint

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/cluster"
	"github.com/skein-dev/skein/fsm"
	"github.com/skein-dev/skein/structs"
)

// clusterState is a cluster's state: the nodes of a view, its live
// allocations, job counts and events.
type clusterState struct {
	*fakeState
	view   fsm.StateView
	counts map[structs.JobState]int
	events []structs.Event
	asked  []fsm.EventQuery
}

func (s *clusterState) State() *fsm.StateView {
	v := s.view
	v.Nodes = s.nodes
	return &v
}
func (s *clusterState) JobCounts() map[structs.JobState]int { return s.counts }
func (s *clusterState) IndexedHash() (uint64, string)       { return 17, "cafe" }
func (s *clusterState) Node(id string) (*structs.Node, bool) {
	for _, n := range s.nodes {
		if n.ID == id {
			return n, true
		}
	}
	return nil, false
}
func (s *clusterState) Events(q fsm.EventQuery) fsm.EventPage {
	s.asked = append(s.asked, q)
	return fsm.EventPage{Events: s.events, Next: q.After}
}

// fakeRaft is a Raft configuration: its servers, who leads, or that it
// cannot tell.
type fakeRaft struct {
	servers []cluster.RaftServer
	leader  string
	err     error
}

func (r fakeRaft) Leader() (string, string)               { return "", r.leader }
func (r fakeRaft) Servers() ([]cluster.RaftServer, error) { return r.servers, r.err }

// aCluster is three nodes: gpu-01 (ready, the leader; GPU 0 held by job
// j1, GPU 1 free, GPU 2 cordoned, GPU 3 unhealthy), gpu-02 (ready, a
// nonvoter, one simulated GPU free) and cpu-01 (down, a worker, its one
// GPU healthy but not free); "me" is gpu-01.
func aCluster() (*clusterState, Cluster) {
	st := &clusterState{fakeState: newFakeState(), counts: map[structs.JobState]int{structs.JobRunning: 1}}
	st.nodes = []*structs.Node{
		{ID: "n1", Name: "gpu-01", Status: structs.NodeReady, GPUs: []structs.GPU{
			{Index: 0, UUID: "G0", Healthy: true}, {Index: 1, UUID: "G1", Healthy: true},
			{Index: 2, UUID: "G2", Healthy: true, Cordoned: true}, {Index: 3, UUID: "G3"}}},
		{ID: "n2", Name: "gpu-02", Status: structs.NodeReady, GPUSource: "simulated", GPUs: []structs.GPU{{Index: 0, UUID: "H0", Healthy: true}}},
		{ID: "n3", Name: "cpu-01", Status: structs.NodeDown, GPUs: []structs.GPU{{Index: 0, UUID: "K0", Healthy: true}}},
	}
	st.view.Index = 99
	st.view.LiveAllocs = []*structs.Allocation{{ID: "a1", JobID: "j1", NodeID: "n1", GPUs: []string{"G0"}}}
	raft := fakeRaft{leader: "n1", servers: []cluster.RaftServer{{ID: "n1", Address: "10.0.0.1:7471", Voter: true}, {ID: "n2", Address: "10.0.0.2:7471"}}}
	gossip := func() []api.Member {
		return []api.Member{{ID: "n3", Name: "cpu-01"}, {ID: "n2", Name: "gpu-02", Protocol: structs.Protocol{API: 3}}, {ID: "n1", Name: "gpu-01"}}
	}
	return st, Cluster{State: st, Raft: raft, Gossip: gossip, NodeName: "gpu-01", JobRetention: time.Hour, Mail: true}
}

func TestCluster_Status_CountsNodesFreeGPUsAndJobs(t *testing.T) {
	_, c := aCluster()
	st := c.Status(false)
	if st.Node != "gpu-01" || st.Leader != "gpu-01" || st.LeaderID != "n1" || st.RaftIndex != 99 {
		t.Errorf("status %+v: want this node, the leader gpu-01 and index 99", st)
	}
	if st.Nodes != 3 || st.NodesReady != 2 || st.GPUsTotal != 6 || st.GPUsFree != 2 || !st.GPUsSimulated {
		t.Errorf("nodes %d (%d ready), GPUs %d (%d free), simulated %v; want 3 (2), 6 (2: held, cordoned, unhealthy and down ones are not), true",
			st.Nodes, st.NodesReady, st.GPUsTotal, st.GPUsFree, st.GPUsSimulated)
	}
	if len(st.Jobs) != len(structs.JobStates) || st.Jobs[structs.JobRunning] != 1 {
		t.Errorf("jobs %v: want every state, running 1", st.Jobs)
	}
	if st.StateHash != "" || time.Duration(st.JobRetention) != time.Hour || !st.Mail {
		t.Errorf("hash %q, retention %v, mail %v: want no hash unasked, the node's settings", st.StateHash, st.JobRetention, st.Mail)
	}
	if st := c.Status(true); st.StateHash != "cafe" || st.HashIndex != 17 {
		t.Errorf("asked for the hash: %q at %d", st.StateHash, st.HashIndex)
	}
}

func TestCluster_Nodes_GPUsByStateAndRolesFromRaft(t *testing.T) {
	_, c := aCluster()
	nodes := c.Nodes()
	if len(nodes) != 3 {
		t.Fatalf("%d nodes, want 3", len(nodes))
	}
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]
	if n1.Role != structs.RoleLeader || n2.Role != structs.RoleNonvoter || n3.Role != structs.RoleWorker {
		t.Errorf("roles %s, %s, %s; want leader, nonvoter, worker", n1.Role, n2.Role, n3.Role)
	}
	if n1.GPUsTotal != 4 || n1.GPUJobs["G0"] != "j1" || n1.GPUsFree != 1 || n1.GPUsHeldBack != 1 || n1.GPUsUnhealthy != 1 || n1.LiveAllocs != 1 {
		t.Errorf("gpu-01 %+v: want G0 held by j1, one free, one held back, one unhealthy, one live allocation", n1)
	}
	if n2.Protocol.API != 3 {
		t.Errorf("gpu-02 speaks %+v, want what gossip says", n2.Protocol)
	}
	c.Raft = fakeRaft{err: errors.New("shut down")}
	for _, n := range c.Nodes() {
		if n.Role != "" {
			t.Errorf("Raft unreadable: %s is %q, want unknown", n.Name, n.Role)
		}
	}
}

func TestCluster_Members_ByNameWithRoles(t *testing.T) {
	_, c := aCluster()
	var got []string
	for _, m := range c.Members() {
		got = append(got, m.Name+":"+m.Role)
	}
	if strings.Join(got, " ") != "cpu-01:worker gpu-01:leader gpu-02:nonvoter" {
		t.Errorf("members %q", got)
	}
	c.Gossip = nil
	if ms := c.Members(); ms == nil || len(ms) != 0 {
		t.Errorf("no gossip: %#v, want an empty list", ms)
	}
}

func TestCluster_RaftPeers_NamedAsTheStateNamesThem(t *testing.T) {
	_, c := aCluster()
	peers, err := c.RaftPeers()
	if err != nil || len(peers) != 2 || peers[0] != (api.RaftPeer{ID: "n1", Name: "gpu-01", Address: "10.0.0.1:7471", Voter: true, Leader: true}) || peers[1].Name != "gpu-02" {
		t.Errorf("peers %+v, %v", peers, err)
	}
	c.Raft = fakeRaft{err: errors.New("shut down")}
	if _, err := c.RaftPeers(); err == nil {
		t.Error("Raft unreadable: no error")
	}
}

func TestCluster_GPUs_EachWithTheJobHoldingIt(t *testing.T) {
	_, c := aCluster()
	gpus := c.GPUs()
	if len(gpus) != 6 || gpus[0].Job != "j1" || gpus[0].Node != "gpu-01" || gpus[1].Job != "" || gpus[2].Health != structs.GPUCordoned {
		t.Errorf("gpus %+v", gpus)
	}
}

func TestCluster_EventQuery_NamesJobAndNodeAsTheStateDoes(t *testing.T) {
	st, c := aCluster()
	st.jobs["job-abc"] = &structs.Job{ID: "job-abc"}
	st.jobs["job-abd"] = &structs.Job{ID: "job-abd"}
	q, err := c.EventQuery("12.3", "10", "job-abc", "gpu-02")
	if err != nil || q.After != (structs.EventCursor{Index: 12, Seq: 3}) || q.Limit != 10 || q.Job != "job-abc" || q.Node != "n2" {
		t.Errorf("query %+v, %v", q, err)
	}
	if q, err := c.EventQuery("", "", "gone-1", ""); err != nil || q.Job != "gone-1" || q.Limit != fsm.MaxEventsPage {
		t.Errorf("a job collected since: %+v, %v; want its ID kept and a full page", q, err)
	}
	for _, bad := range []struct{ after, limit, job, node string }{
		{after: "x"}, {limit: "0"}, {limit: "100000"}, {job: "job-ab"}, {node: "nope"},
	} {
		if q, err := c.EventQuery(bad.after, bad.limit, bad.job, bad.node); err == nil {
			t.Errorf("%+v: %+v, want it refused", bad, q)
		}
	}
	if _, err := c.EventQuery("", "0", "", ""); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `limit "0"`) {
		t.Errorf("limit 0: %v, want a bad request naming it", err)
	}
}

func TestCluster_Events_NoneIsAnEmptyList(t *testing.T) {
	st, c := aCluster()
	p := c.Events(fsm.EventQuery{Limit: 5})
	if p.Events == nil || len(p.Events) != 0 || len(st.asked) != 1 || st.asked[0].Limit != 5 {
		t.Errorf("page %#v, asked %+v", p, st.asked)
	}
}

func TestCluster_CanLeave_RefusesTheLastVoterWhileOthersDependOnIt(t *testing.T) {
	lone := []cluster.RaftServer{{ID: "me", Voter: true}}
	withWorker := []cluster.RaftServer{{ID: "me", Voter: true}, {ID: "n2"}}
	twoVoters := []cluster.RaftServer{{ID: "me", Voter: true}, {ID: "n2", Voter: true}}
	alone, notAlone := func() bool { return true }, func() bool { return false }
	for _, c := range []struct {
		name    string
		servers []cluster.RaftServer
		alone   func() bool
		refused bool
	}{
		{"the only node", lone, alone, false},
		{"the only node, no gossip", lone, nil, false},
		{"the only voter, with a nonvoter", withWorker, alone, true},
		{"the only voter, with workers in gossip", lone, notAlone, true},
		{"one of two voters", twoVoters, notAlone, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			cl := Cluster{Raft: fakeRaft{servers: c.servers}, Alone: c.alone, NodeID: "me"}
			if err := cl.CanLeave(); (err != nil) != c.refused {
				t.Errorf("%v, want refused %v", err, c.refused)
			}
		})
	}
	if err := (Cluster{Raft: fakeRaft{err: errors.New("shut down")}, NodeID: "me"}).CanLeave(); err == nil {
		t.Error("Raft unreadable: a leave allowed")
	}
}
