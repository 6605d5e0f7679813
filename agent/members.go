package agent

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/cluster"
	"github.com/skein-dev/skein/structs"
)

// leaveTimeout bounds a graceful leave: stopping local jobs, handing over
// leadership and waiting to be removed from Raft.
const leaveTimeout = 30 * time.Second

// gossipMeta is what a node tells every other node by gossip, kept short:
// memberlist allows cluster.MaxAppMetaBytes.
type gossipMeta struct {
	Name      string `json:"n"`
	HTTP      string `json:"h"`
	GPUsFree  int    `json:"f"`
	GPUsTotal int    `json:"t"`
	Unhealthy uint64 `json:"u,omitempty"`
	Version   string `json:"v"`
}

// localMeta describes this node from its inventory, the GPU health it
// sees itself (ahead of the commit) and the local FSM. Free GPUs are the
// placeable ones no live allocation holds.
func (a *Agent) localMeta() gossipMeta {
	m := gossipMeta{Name: a.cfg.Name, GPUsTotal: len(a.inv.GPUs), Version: structs.Version}
	if a.listener != nil {
		m.HTTP = a.HTTPAddr()
	}
	used := map[string]bool{}
	for _, alloc := range a.fsm.NodeAllocs(a.nodeID) {
		if alloc.Live() {
			for _, g := range alloc.GPUs {
				used[g] = true
			}
		}
	}
	m.Unhealthy = a.health.mask.Load()
	gpus := a.inv.GPUs
	if n, ok := a.fsm.Node(a.nodeID); ok {
		gpus = n.GPUs
	}
	for _, g := range gpus {
		unhealthy := g.Index >= 0 && g.Index < 64 && m.Unhealthy&(1<<g.Index) != 0
		if ok, _ := g.Placeable(); ok && !unhealthy && !used[g.UUID] {
			m.GPUsFree++
		}
	}
	return m
}

// setMeta stores the encoded metadata; it reports whether it changed.
func (a *Agent) setMeta(m gossipMeta) bool {
	b, err := json.Marshal(m)
	if err != nil {
		return false
	}
	if old := a.meta.Load(); old != nil && string(*old) == string(b) {
		return false
	}
	a.meta.Store(&b)
	return true
}

// gossipMetaBytes is memberlist's view of this node's metadata.
func (a *Agent) gossipMetaBytes() []byte {
	if b := a.meta.Load(); b != nil {
		return *b
	}
	return nil
}

// refreshMeta re-announces this node when what gossip says of it changed.
// The broadcast can wait on the network, so metaLoop sends it.
func (a *Agent) refreshMeta() {
	if a.setMeta(a.localMeta()) {
		a.kickSchedule()
		select {
		case a.metaChanged <- struct{}{}:
		default: // a broadcast is already due; it will carry the new value
		}
	}
}

// metaLoop broadcasts this node's gossip metadata after it changed.
func (a *Agent) metaLoop() {
	for {
		select {
		case <-a.ctx.Done():
			return
		case <-a.metaChanged:
		}
		if err := a.raft.UpdateMeta(); err != nil {
			a.logger.Debug("broadcast gossip metadata", "error", err)
		}
	}
}

// members is the gossip view with each member's metadata decoded.
func (a *Agent) members() []api.Member {
	var out []api.Member
	for _, m := range a.raft.Members() {
		var meta gossipMeta
		_ = json.Unmarshal(m.Meta, &meta) // a peer's odd metadata only leaves fields empty
		out = append(out, api.Member{
			ID:         m.ID,
			Name:       meta.Name,
			Addr:       m.Addr,
			Status:     m.Status.String(),
			HTTP:       meta.HTTP,
			GPUsFree:   meta.GPUsFree,
			GPUsTotal:  meta.GPUsTotal,
			Unhealthy:  meta.Unhealthy,
			Version:    meta.Version,
			IsThisNode: m.ID == a.nodeID,
		})
	}
	return out
}

// memberLoop drains gossip events. The leader records graceful leaves in the
// state; liveness itself is judged by heartbeats (liveness.go).
func (a *Agent) memberLoop() {
	for {
		select {
		case <-a.ctx.Done():
			return
		case ev := <-a.raft.MemberEvents():
			if ev.Type == cluster.EventUpdate && a.raft.IsLeader() {
				a.kickSchedule() // a GPU mask may have changed
			}
			if ev.Type != cluster.EventLeft || !a.raft.IsLeader() {
				continue
			}
			if n, ok := a.fsm.Node(ev.Member.ID); ok && n.Status != structs.NodeLeft {
				if err := a.setNodeStatus(n, structs.NodeLeft, "left the cluster"); err != nil {
					a.logger.Warn("record node leave", "node", n.Name, "error", err)
				}
			}
		}
	}
}

func (a *Agent) handleMembers(w http.ResponseWriter, r *http.Request) {
	roles := a.roles()
	ms := a.members()
	for i := range ms {
		ms[i].Role = string(roles[ms[i].ID])
	}
	slices.SortFunc(ms, func(x, y api.Member) int {
		return cmp.Or(cmp.Compare(x.Name, y.Name), cmp.Compare(x.ID, y.ID))
	})
	if ms == nil {
		ms = []api.Member{}
	}
	writeJSON(w, http.StatusOK, ms)
}

func (a *Agent) handleRaftPeers(w http.ResponseWriter, r *http.Request) {
	servers, err := a.raft.Servers()
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, err)
		return
	}
	_, leaderID := a.raft.Leader()
	peers := make([]api.RaftPeer, 0, len(servers))
	for _, s := range servers {
		p := api.RaftPeer{ID: s.ID, Address: s.Address, Voter: s.Voter, Leader: s.ID == leaderID}
		if n, ok := a.fsm.Node(s.ID); ok {
			p.Name = n.Name
		}
		peers = append(peers, p)
	}
	writeJSON(w, http.StatusOK, peers)
}

func (a *Agent) handleJoin(w http.ResponseWriter, r *http.Request) {
	var req api.JoinRequest
	if err := decodeBody(w, r, &req); err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	if len(req.Addrs) == 0 || len(req.Addrs) > 64 {
		writeError(w, http.StatusBadRequest, &structs.FieldError{Field: "addrs", Msg: fmt.Sprintf("%d addresses; give 1 to 64", len(req.Addrs))})
		return
	}
	n, err := a.raft.Join(req.Addrs)
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
func (a *Agent) handleLeave(w http.ResponseWriter, r *http.Request) {
	if err := a.canLeave(); err != nil {
		writeError(w, http.StatusConflict, err)
		return
	}
	writeJSON(w, http.StatusOK, api.LeaveResponse{Node: a.cfg.Name})
	go a.Leave()
}

// canLeave refuses a leave that would take the cluster's last voter away
// while other nodes still depend on it.
func (a *Agent) canLeave() error {
	servers, err := a.raft.Servers()
	if err != nil {
		return err
	}
	voters, selfVoter := 0, false
	for _, s := range servers {
		if s.Voter {
			voters++
			selfVoter = selfVoter || s.ID == a.nodeID
		}
	}
	if selfVoter && voters == 1 && len(servers) > 1 {
		return errors.New("this node is the cluster's only Raft voter; leaving now would stop the cluster: wait until others are promoted (skein raft peers)")
	}
	return nil
}

// Leave stops local jobs, leaves the cluster gracefully and closes Done.
func (a *Agent) Leave() {
	a.leaving.Do(func() {
		defer close(a.done)
		a.logger.Info("leaving the cluster")
		a.stopAllJobs("node leaving the cluster")
		a.reports.flush(5 * time.Second)
		if err := a.raft.Leave(leaveTimeout); err != nil {
			a.logger.Warn("leave was not clean", "error", err)
		}
	})
}
