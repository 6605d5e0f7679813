package endpoint

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/cluster"
	"github.com/skein-dev/skein/fsm"
	"github.com/skein-dev/skein/structs"
)

// ClusterState is what the cluster's reads take of the state (fsm.FSM).
type ClusterState interface {
	NodesState
	State() *fsm.StateView
	JobCounts() map[structs.JobState]int
	IndexedHash() (uint64, string)
	Node(id string) (*structs.Node, bool)
	FindJob(ref string) (*structs.Job, error)
	Events(q fsm.EventQuery) fsm.EventPage
}

// RaftConfig is what the cluster's reads take of Raft: the
// configuration, and who leads it.
type RaftConfig interface {
	Leader() (addr, id string)
	Servers() ([]cluster.RaftServer, error)
}

// Cluster answers the reads of the cluster as a whole from this node's
// state, Raft and gossip: status, nodes, members, Raft peers, GPUs and
// events. Every caller that may read the cluster sees all of it: none
// of it tells an env value.
type Cluster struct {
	State ClusterState
	Raft  RaftConfig
	// Gossip lists gossip's members as this node sees them; nil: no
	// gossip.
	Gossip func() []api.Member
	// Alone reports whether gossip knows no node but this one; nil: no
	// gossip.
	Alone func() bool
	// NodeID and NodeName are this node's; JobRetention how long a
	// finished job stays, and Mail whether the node has a mail program,
	// as status reports them.
	NodeID, NodeName string
	JobRetention     time.Duration
	Mail             bool
}

// Status is the cluster at a glance: nodes, GPUs free, jobs by state,
// the leader, versions; with hash, the state's hash and the index it
// describes, to compare replicas.
func (c Cluster) Status(hash bool) api.Status {
	view := c.State.State()
	used := map[string]bool{}
	for _, alloc := range view.LiveAllocs {
		for _, g := range alloc.GPUs {
			used[g] = true
		}
	}
	st := api.Status{Node: c.NodeName, Jobs: map[structs.JobState]int{}, RaftIndex: view.Index, Version: structs.Version,
		Protocol:     structs.Protocol{Release: structs.Version, API: structs.APIVersion, Log: structs.LogVersion(), Snapshot: fsm.SnapshotVersion},
		JobRetention: structs.Duration(c.JobRetention), Mail: c.Mail}
	_, st.LeaderID = c.Raft.Leader()
	for _, n := range view.Nodes {
		st.Nodes++
		if n.Status == structs.NodeReady {
			st.NodesReady++
		}
		if n.ID == st.LeaderID {
			st.Leader = n.Name
		}
		if n.GPUSource == "simulated" {
			st.GPUsSimulated = true
		}
		for _, g := range n.GPUs {
			st.GPUsTotal++
			if ok, _ := g.Placeable(); ok && !used[g.UUID] && n.Status == structs.NodeReady {
				st.GPUsFree++
			}
		}
	}
	for _, state := range structs.JobStates {
		st.Jobs[state] = 0
	}
	for state, n := range c.State.JobCounts() {
		st.Jobs[state] = n
	}
	if hash {
		st.HashIndex, st.StateHash = c.State.IndexedHash()
	}
	return st
}

// Nodes lists every node with its role, the protocol gossip says it
// speaks, its live allocations and its GPUs by state: the jobs holding
// them, or free, held back or unhealthy.
func (c Cluster) Nodes() []api.NodeInfo {
	view := c.State.State()
	inUse := map[string]string{} // GPU UUID -> job ID
	live := map[string]int{}     // node ID -> live allocations
	for _, alloc := range view.LiveAllocs {
		live[alloc.NodeID]++
		for _, g := range alloc.GPUs {
			inUse[g] = alloc.JobID
		}
	}
	roles := c.roles()
	protocols := c.protocols()
	out := make([]api.NodeInfo, 0, len(view.Nodes))
	for _, n := range view.Nodes {
		info := api.NodeInfo{Node: *n, GPUsTotal: len(n.GPUs), LiveAllocs: live[n.ID]}
		info.Role = roleOf(roles, n.ID)
		info.Protocol = protocols[n.ID]
		for _, g := range n.GPUs {
			switch job, used := inUse[g.UUID]; {
			case used:
				if info.GPUJobs == nil {
					info.GPUJobs = map[string]string{}
				}
				info.GPUJobs[g.UUID] = job
			case !g.Healthy:
				info.GPUsUnhealthy++
			case g.HealthState() != structs.GPUHealthy:
				info.GPUsHeldBack++
			default:
				info.GPUsFree++
			}
		}
		out = append(out, info)
	}
	return out
}

// Members lists gossip's members, each with its role, by name then ID.
func (c Cluster) Members() []api.Member {
	var ms []api.Member
	if c.Gossip != nil {
		ms = c.Gossip()
	}
	roles := c.roles()
	for i := range ms {
		ms[i].Role = string(roleOf(roles, ms[i].ID))
	}
	slices.SortFunc(ms, func(x, y api.Member) int {
		return cmp.Or(cmp.Compare(x.Name, y.Name), cmp.Compare(x.ID, y.ID))
	})
	if ms == nil {
		ms = []api.Member{}
	}
	return ms
}

// RaftPeers lists the Raft configuration's servers, named as the state
// names their nodes; an error when Raft cannot tell.
func (c Cluster) RaftPeers() ([]api.RaftPeer, error) {
	servers, err := c.Raft.Servers()
	if err != nil {
		return nil, err
	}
	_, leaderID := c.Raft.Leader()
	peers := make([]api.RaftPeer, 0, len(servers))
	for _, sv := range servers {
		p := api.RaftPeer{ID: sv.ID, Address: sv.Address, Voter: sv.Voter, Leader: sv.ID == leaderID}
		if n, ok := c.State.Node(sv.ID); ok {
			p.Name = n.Name
		}
		peers = append(peers, p)
	}
	return peers, nil
}

// GPUs lists every GPU of every node, by node and GPU index, each with
// its health and the job that holds it.
func (c Cluster) GPUs() []api.GPUInfo {
	view := c.State.State()
	jobs := map[string]string{} // GPU UUID -> job ID
	for _, alloc := range view.LiveAllocs {
		for _, g := range alloc.GPUs {
			jobs[g] = alloc.JobID
		}
	}
	out := []api.GPUInfo{}
	for _, n := range view.Nodes {
		for _, g := range n.GPUs {
			out = append(out, api.GPUInfo{Node: n.Name, NodeID: n.ID, GPU: g, Health: g.HealthState(), Job: jobs[g.UUID]})
		}
	}
	return out
}

// EventQuery reads a query of the events (GET /v1/events): after a
// cursor (INDEX or INDEX.SEQ; "" from the oldest kept), at most limit
// ("" a full page), of a job (an ID or unique prefix; one the state no
// longer holds by its full ID, its events may still be kept) and of a
// node (an ID or name), as the state names them.
func (c Cluster) EventQuery(after, limit, job, node string) (fsm.EventQuery, error) {
	cursor, err := structs.ParseEventCursor(after)
	if err != nil {
		return fsm.EventQuery{}, fmt.Errorf("%w: after: %w", ErrInvalid, err)
	}
	q := fsm.EventQuery{After: cursor, Limit: fsm.MaxEventsPage}
	if limit != "" {
		n, err := strconv.Atoi(limit)
		if err != nil || n < 1 || n > fsm.MaxEventsPage {
			return fsm.EventQuery{}, fmt.Errorf("%w: limit %q: want a number from 1 to %d", ErrInvalid, limit, fsm.MaxEventsPage)
		}
		q.Limit = n
	}
	if job != "" {
		j, err := c.State.FindJob(job)
		switch {
		case err == nil:
			q.Job = j.ID
		case errors.Is(err, fsm.ErrJobNotFound):
			q.Job = job // collected since: its events may still be kept
		default:
			return fsm.EventQuery{}, err
		}
	}
	if node != "" {
		n, err := (Nodes{State: c.State}).Resolve(node)
		if err != nil {
			return fsm.EventQuery{}, err
		}
		q.Node = n.ID
	}
	return q, nil
}

// Events is a page of the events q asks for; none is an empty list.
func (c Cluster) Events(q fsm.EventQuery) api.EventsPage {
	p := c.State.Events(q)
	events := p.Events
	if events == nil {
		events = []structs.Event{}
	}
	return api.EventsPage{Events: events, Next: p.Next, Dropped: p.Dropped}
}

// CanLeave refuses a leave of this node that would take the cluster's
// last voter away while other nodes still depend on it.
func (c Cluster) CanLeave() error {
	servers, err := c.Raft.Servers()
	if err != nil {
		return err
	}
	voters, selfVoter := 0, false
	for _, sv := range servers {
		if sv.Voter {
			voters++
			selfVoter = selfVoter || sv.ID == c.NodeID
		}
	}
	alone := c.Alone == nil || c.Alone()
	if selfVoter && voters == 1 && (len(servers) > 1 || !alone) {
		return errors.New("this node is the cluster's only Raft voter; leaving now would stop the cluster: wait until others are promoted (skein raft peers)")
	}
	return nil
}

// protocols maps the IDs of the nodes gossip knows to what each speaks.
func (c Cluster) protocols() map[string]structs.Protocol {
	out := map[string]structs.Protocol{}
	if c.Gossip == nil {
		return out
	}
	for _, m := range c.Gossip() {
		out[m.ID] = m.Protocol
	}
	return out
}

// roles maps node IDs to their place in the Raft configuration.
func (c Cluster) roles() map[string]structs.NodeRole {
	roles := map[string]structs.NodeRole{}
	servers, err := c.Raft.Servers()
	if err != nil {
		return roles
	}
	_, leaderID := c.Raft.Leader()
	for _, sv := range servers {
		switch {
		case sv.ID == leaderID:
			roles[sv.ID] = structs.RoleLeader
		case sv.Voter:
			roles[sv.ID] = structs.RoleVoter
		default:
			roles[sv.ID] = structs.RoleNonvoter
		}
	}
	return roles
}

// roleOf is a node's role: its place in the Raft configuration, or worker
// outside it. With no configuration to read (roles empty) it is unknown.
func roleOf(roles map[string]structs.NodeRole, id string) structs.NodeRole {
	if r, ok := roles[id]; ok || len(roles) == 0 {
		return r
	}
	return structs.RoleWorker
}
