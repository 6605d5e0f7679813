package agent

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/skein-dev/skein/agent/runner"
	"github.com/skein-dev/skein/structs"
)

// localLoop makes this node's processes match its allocations in the local
// FSM: it starts what is committed to run here and stops what should stop.
// It acts only on applied state (DESIGN.md §1.4).
func (a *Agent) localLoop() {
	a.stopping = make(map[string]bool)
	for {
		_, changed := a.fsm.Watch()
		a.reconcileLocal()
		a.refreshMeta()
		select {
		case <-a.ctx.Done():
			return
		case <-changed:
		case <-a.localKick:
		}
	}
}

// kickLocal makes the local loop look again without a state change.
func (a *Agent) kickLocal() {
	select {
	case a.localKick <- struct{}{}:
	default:
	}
}

// reconcileLocal compares this node's live allocations with what the runner
// tracks. An allocation directory on disk means the runner has already
// handled the allocation (started, adopted, or reported it after a restart),
// so the loop never starts one twice.
func (a *Agent) reconcileLocal() {
	tracked := a.runner.Tracked()
	for id := range a.stopping {
		if !slices.Contains(tracked, id) {
			delete(a.stopping, id)
		}
	}
	fenced := a.isFenced()
	for _, alloc := range a.fsm.NodeAllocs(a.nodeID) {
		if !alloc.Live() {
			// Lost while this node was cut off: it is not ours any more.
			if slices.Contains(tracked, alloc.ID) && !a.stopping[alloc.ID] {
				a.stopping[alloc.ID] = true
				a.runner.StopWithin(alloc.ID, "no longer owned by this node: "+alloc.Reason, a.cfg.FenceGrace)
			}
			continue
		}
		if a.reports.inFlight(alloc.ID) {
			continue
		}
		isTracked := slices.Contains(tracked, alloc.ID)
		switch {
		case isTracked && alloc.DesiredState == structs.DesiredStop:
			if !a.stopping[alloc.ID] {
				a.stopping[alloc.ID] = true
				a.runner.StopAfter(alloc.ID, stopReason(alloc), time.Duration(alloc.StopGrace))
			}
		case isTracked || a.hasAllocDir(alloc.ID):
			// Running, or its outcome is on its way from the runner.
		case alloc.DesiredState == structs.DesiredStop:
			a.reports.add(structs.AllocUpdate{AllocID: alloc.ID, State: structs.AllocKilled,
				ExitCode: -1, Reason: "stopped before it started", At: now()})
		case alloc.State == structs.AllocRunning:
			a.reports.add(structs.AllocUpdate{AllocID: alloc.ID, State: structs.AllocLost,
				ExitCode: -1, Reason: "lost: the agent restarted and found no trace of the process", At: now()})
		case fenced:
			// No leader: the allocation may already be running elsewhere.
		default:
			a.startAlloc(alloc)
		}
	}
}

func (a *Agent) startAlloc(alloc *structs.Allocation) {
	job, ok := a.fsm.Job(alloc.JobID)
	if !ok {
		return
	}
	var err error
	if alloc.Rank == 0 && alloc.MasterPort != 0 {
		err = checkMasterPortFree(alloc.MasterPort)
	}
	if err == nil {
		err = a.runner.Start(runner.Task{
			Alloc: *alloc, Job: *job, NodeName: a.cfg.Name,
			Peers: a.peers(alloc), MasterPort: masterPortOf(alloc),
		})
	}
	if err != nil {
		a.logger.Error("start allocation", "alloc", structs.ShortID(alloc.ID), "error", err)
		a.reports.add(structs.AllocUpdate{AllocID: alloc.ID, State: structs.AllocFailed,
			ExitCode: -1, Reason: "start failed: " + err.Error(), At: now()})
	}
}

// peers lists every rank of an allocation's attempt with its node's name
// and address, for the launch environment.
func (a *Agent) peers(alloc *structs.Allocation) []runner.Peer {
	var ps []runner.Peer
	for _, o := range a.fsm.Allocs(alloc.JobID) {
		if o.Attempt != alloc.Attempt {
			continue
		}
		p := runner.Peer{Rank: o.Rank, Node: o.NodeID}
		if n, ok := a.fsm.Node(o.NodeID); ok {
			p.Node = n.Name
			if host, _, err := net.SplitHostPort(n.Addresses.Raft); err == nil {
				p.Addr = host
			}
		}
		ps = append(ps, p)
	}
	slices.SortFunc(ps, func(x, y runner.Peer) int { return x.Rank - y.Rank })
	return ps
}

func (a *Agent) hasAllocDir(id string) bool {
	_, err := os.Stat(filepath.Join(a.allocDir(), id))
	return !errors.Is(err, os.ErrNotExist)
}

func stopReason(alloc *structs.Allocation) string {
	if alloc.Reason != "" {
		return alloc.Reason
	}
	return "stop requested"
}
