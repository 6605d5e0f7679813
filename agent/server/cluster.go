package server

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/fsm"
	"github.com/skein-dev/skein/structs"
)

func (s *clusterRoutes) handleNodes(w http.ResponseWriter, r *http.Request) {
	view := s.fsm.State()
	inUse := map[string]string{} // GPU UUID -> job ID
	live := map[string]int{}     // node ID -> live allocations
	for _, alloc := range view.LiveAllocs {
		live[alloc.NodeID]++
		for _, g := range alloc.GPUs {
			inUse[g] = alloc.JobID
		}
	}
	roles := s.roles()
	protocols := s.protocols()
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
	writeJSON(w, http.StatusOK, out)
}

// protocols maps the IDs of the nodes gossip knows to what each speaks.
func (s *clusterRoutes) protocols() map[string]structs.Protocol {
	out := map[string]structs.Protocol{}
	if s.cfg.Peers == nil {
		return out
	}
	for _, m := range s.cfg.Peers.Members() {
		out[m.ID] = m.Protocol
	}
	return out
}

// roles maps node IDs to their place in the Raft configuration.
func (s *clusterRoutes) roles() map[string]structs.NodeRole {
	roles := map[string]structs.NodeRole{}
	servers, err := s.cfg.Raft.Servers()
	if err != nil {
		return roles
	}
	_, leaderID := s.cfg.Raft.Leader()
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

func (s *clusterRoutes) handleStatus(w http.ResponseWriter, r *http.Request) {
	view := s.fsm.State()
	used := map[string]bool{}
	for _, alloc := range view.LiveAllocs {
		for _, g := range alloc.GPUs {
			used[g] = true
		}
	}
	st := api.Status{Node: s.cfg.NodeName, Jobs: map[structs.JobState]int{}, RaftIndex: view.Index, Version: structs.Version,
		Protocol:     structs.Protocol{Release: structs.Version, API: structs.APIVersion, Log: structs.LogVersion(), Snapshot: fsm.SnapshotVersion},
		JobRetention: structs.Duration(s.cfg.JobRetention), Mail: s.cfg.Mail}
	_, st.LeaderID = s.cfg.Raft.Leader()
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
	for state, n := range s.fsm.JobCounts() {
		st.Jobs[state] = n
	}
	if r.URL.Query().Get("hash") == "true" {
		st.HashIndex, st.StateHash = s.fsm.IndexedHash()
	}
	writeJSON(w, http.StatusOK, st)
}

func (s *clusterRoutes) handleMembers(w http.ResponseWriter, r *http.Request) {
	roles := s.roles()
	ms := s.cfg.Peers.Members()
	for i := range ms {
		ms[i].Role = string(roleOf(roles, ms[i].ID))
	}
	slices.SortFunc(ms, func(x, y api.Member) int {
		return cmp.Or(cmp.Compare(x.Name, y.Name), cmp.Compare(x.ID, y.ID))
	})
	if ms == nil {
		ms = []api.Member{}
	}
	writeJSON(w, http.StatusOK, ms)
}

func (s *clusterRoutes) handleRaftPeers(w http.ResponseWriter, r *http.Request) {
	servers, err := s.cfg.Raft.Servers()
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, err)
		return
	}
	_, leaderID := s.cfg.Raft.Leader()
	peers := make([]api.RaftPeer, 0, len(servers))
	for _, sv := range servers {
		p := api.RaftPeer{ID: sv.ID, Address: sv.Address, Voter: sv.Voter, Leader: sv.ID == leaderID}
		if n, ok := s.fsm.Node(sv.ID); ok {
			p.Name = n.Name
		}
		peers = append(peers, p)
	}
	writeJSON(w, http.StatusOK, peers)
}

func (s *clusterRoutes) handleJoin(w http.ResponseWriter, r *http.Request) {
	var req api.JoinRequest
	if err := decodeBody(w, r, &req); err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	if len(req.Addrs) == 0 || len(req.Addrs) > 64 {
		writeError(w, http.StatusBadRequest, &structs.FieldError{Field: "addrs", Msg: fmt.Sprintf("%d addresses; give 1 to 64", len(req.Addrs))})
		return
	}
	n, err := s.cfg.Raft.Join(req.Addrs)
	if n == 0 {
		if err == nil {
			err = errors.New("no member answered")
		}
		writeError(w, http.StatusBadGateway, fmt.Errorf("join %v: %w", req.Addrs, err))
		return
	}
	writeJSON(w, http.StatusOK, api.JoinResponse{Joined: n})
}

// handleLeave answers, then leaves in the background: local jobs stop,
// leadership moves if this node leads, the node leaves gossip and Raft, and
// Done closes so the process can exit.
func (s *clusterRoutes) handleLeave(w http.ResponseWriter, r *http.Request) {
	if err := s.canLeave(); err != nil {
		writeError(w, http.StatusConflict, err)
		return
	}
	writeJSON(w, http.StatusOK, api.LeaveResponse{Node: s.cfg.NodeName})
	go s.cfg.Leave()
}

// canLeave refuses a leave that would take the cluster's last voter away
// while other nodes still depend on it.
func (s *clusterRoutes) canLeave() error {
	servers, err := s.cfg.Raft.Servers()
	if err != nil {
		return err
	}
	voters, selfVoter := 0, false
	for _, sv := range servers {
		if sv.Voter {
			voters++
			selfVoter = selfVoter || sv.ID == s.cfg.NodeID
		}
	}
	if selfVoter && voters == 1 && (len(servers) > 1 || !s.cfg.Peers.Alone()) {
		return errors.New("this node is the cluster's only Raft voter; leaving now would stop the cluster: wait until others are promoted (skein raft peers)")
	}
	return nil
}
