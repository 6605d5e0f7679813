package node

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"

	"github.com/skein-dev/skein/agent/runner"
	"github.com/skein-dev/skein/structs"
)

// localLoop makes this node's processes match its allocations in the local
// FSM: it starts what is committed to run here and stops what should stop.
// It acts only on applied state (docs/architecture.md, "Nothing starts
// from uncommitted state").
func (n *Node) localLoop() {
	n.stopping = make(map[string]bool)
	n.portBusy = make(map[string]int)
	for {
		_, changed := n.view.Watch()
		n.reconcileLocal()
		n.refreshMeta()
		select {
		case <-n.ctx.Done():
			return
		case <-changed:
		case <-n.localKick:
		}
	}
}

// kickLocal makes the local loop look again without a state change.
func (n *Node) kickLocal() {
	select {
	case n.localKick <- struct{}{}:
	default:
	}
}

// reconcileLocal compares this node's live allocations with what the runner
// tracks. An allocation directory on disk means the runner has already
// handled the allocation (started, adopted, or reported it after a restart),
// so the loop never starts one twice. Its cost follows the node's live and
// tracked allocations, not its history.
func (n *Node) reconcileLocal() {
	n.startMu.Lock()
	defer n.startMu.Unlock()
	tracked := map[string]bool{}
	for _, id := range n.runner.Tracked() {
		tracked[id] = true
	}
	for id := range n.stopping {
		if !tracked[id] {
			delete(n.stopping, id)
		}
	}
	live := n.view.NodeLiveAllocs(n.cfg.NodeID)
	isLive := make(map[string]bool, len(live))
	for _, alloc := range live {
		isLive[alloc.ID] = true
	}
	for id := range n.portBusy {
		if !isLive[id] {
			delete(n.portBusy, id)
		}
	}
	// What the runner tracks and the state no longer counts live was lost
	// while this node was cut off: it is not ours any more. One the state
	// does not know yet (a re-adopted job before the log has replayed:
	// it was placed at an index the state has not reached) is left alone;
	// one the state does not know at an index past its placement was
	// placed after the backup the state was restored from, and is not
	// ours either.
	for id := range tracked {
		if isLive[id] || n.stopping[id] {
			continue
		}
		// The view may be loaded anew meanwhile (at the agent's start,
		// from empty): the absence and the index are read together.
		alloc, ok, index := n.view.AllocAt(id)
		switch {
		case ok && !alloc.Live():
			n.stopping[id] = true
			n.runner.StopWithin(id, "no longer owned by this node: "+alloc.Reason, n.cfg.FenceGrace)
		case !ok:
			if placed, known := n.runner.CreateIndex(id); known && placed <= index {
				n.stopping[id] = true
				n.runner.StopWithin(id, "not in the cluster's state: it was restored from a backup taken before this allocation was placed", n.cfg.FenceGrace)
			}
		}
	}
	for _, alloc := range live {
		if n.reports.inFlight(alloc.ID) {
			continue
		}
		isTracked := tracked[alloc.ID]
		switch {
		case isTracked && alloc.DesiredState == structs.DesiredStop:
			if !n.stopping[alloc.ID] {
				n.stopping[alloc.ID] = true
				n.stopTracked(alloc)
			}
		case isTracked && alloc.State == structs.AllocPending:
			// Its start is on its way from the runner, or was reported
			// and lost: a state restored from a backup taken before the
			// report. Reported again once the job has started.
			if u, ok := n.runner.Started(alloc.ID); ok {
				n.reports.add(u)
			}
		case isTracked:
			// Running, or its outcome is on its way from the runner.
		case n.hasAllocDir(alloc.ID):
			// Over, and reported: a state restored from a backup taken
			// before the report lost it. Reported again.
			if u, ok := n.runner.Outcome(alloc.ID); ok {
				n.reports.add(u)
			}
		case alloc.DesiredState == structs.DesiredStop:
			n.reports.add(structs.AllocUpdate{AllocID: alloc.ID, State: structs.AllocKilled,
				ExitCode: -1, Reason: "stopped before it started: " + stopReason(alloc), At: now()})
		case alloc.State == structs.AllocRunning:
			n.reports.add(structs.AllocUpdate{AllocID: alloc.ID, State: structs.AllocLost,
				ExitCode: -1, Reason: "lost: the agent restarted and found no trace of the process", At: now()})
		case n.isFenced():
			// No lease (asked before each start: starts take time, and
			// the lease may run out meanwhile). The allocation may already
			// be running elsewhere.
		case n.noStarts:
			// The agent is going: see StopStarting.
		default:
			n.startAlloc(alloc)
		}
	}
}

// startAlloc starts one of this node's allocations, unless its port says
// to wait (see Ports, in ports.go): a rank above 0 of a gang until rank 0
// runs, a rank 0 whose port another program holds until the leader has
// moved it.
func (n *Node) startAlloc(alloc *structs.Allocation) {
	job, ok := n.view.Job(alloc.JobID)
	if !ok {
		return
	}
	port := masterPortOf(alloc, job)
	var err error
	switch {
	case alloc.MasterPort != 0 && alloc.Rank > 0:
		if !n.rankZeroRuns(alloc) {
			return // its view changes when rank 0 runs
		}
	case alloc.MasterPort != 0:
		if busy := checkMasterPortFree(port); busy != nil {
			if n.portBusy[alloc.ID] != port {
				n.portBusy[alloc.ID] = port
				n.log.Warn("MASTER_PORT held by another program: asking the leader for another", "alloc", structs.ShortID(alloc.ID), "port", port, "error", busy)
				n.reports.add(structs.AllocUpdate{AllocID: alloc.ID, State: structs.AllocPending, PortBusy: port, At: now()})
			}
			return
		}
	case port == 0:
		port, err = freeLocalPort()
	}
	delete(n.portBusy, alloc.ID)
	if err == nil {
		task := runner.Task{
			Alloc: *alloc, Job: *job, NodeName: n.cfg.Name,
			Peers: n.peers(alloc), MasterPort: port,
			PortEnv: n.portEnv(job),
		}
		if self, ok := n.view.Node(n.cfg.NodeID); ok {
			task.NodeCPUs = self.CPUs
			for _, g := range alloc.GPUs {
				if i := slices.IndexFunc(self.GPUs, func(x structs.GPU) bool { return x.UUID == g }); i >= 0 {
					task.GPUIndexes = append(task.GPUIndexes, self.GPUs[i].Index)
				}
			}
		}
		err = n.runner.Start(task)
	}
	if err != nil {
		n.log.Error("start allocation", "alloc", structs.ShortID(alloc.ID), "error", err)
		n.reports.add(structs.AllocUpdate{AllocID: alloc.ID, State: structs.AllocFailed,
			ExitCode: -1, Reason: "start failed: " + err.Error(), At: now()})
	}
}

// portEnv names the variable a service replica gets its port in (its
// service's PortEnv); "" for a job that is no replica.
func (n *Node) portEnv(job *structs.Job) string {
	if job.Service == "" {
		return ""
	}
	if svc, ok := n.view.Service(job.Service); ok && svc.Spec.PortEnv != "" {
		return svc.Spec.PortEnv
	}
	return structs.DefaultPortEnv
}

// peers lists every rank of an allocation's attempt with its node's name
// and address, for the launch environment.
func (n *Node) peers(alloc *structs.Allocation) []runner.Peer {
	var ps []runner.Peer
	for _, o := range n.view.Allocs(alloc.JobID) {
		if o.Attempt != alloc.Attempt {
			continue
		}
		p := runner.Peer{Rank: o.Rank, Node: o.NodeID}
		if n, ok := n.view.Node(o.NodeID); ok {
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

func (n *Node) hasAllocDir(id string) bool {
	_, err := os.Stat(filepath.Join(n.cfg.AllocDir, id))
	return !errors.Is(err, os.ErrNotExist)
}

func stopReason(alloc *structs.Allocation) string {
	if alloc.Reason != "" {
		return alloc.Reason
	}
	return "stop requested"
}
