package node

import (
	"sync/atomic"
	"time"

	"github.com/skein-dev/skein/gpu"
	"github.com/skein-dev/skein/structs"
)

// newMonitor picks the health monitor for this node's GPUs when the config
// gives none: NVML's events and periodic checks for real GPUs, and for
// simulated ones the monitor that `skein gpu fault` injects into.
func (n *Node) newMonitor() gpu.Monitor {
	switch {
	case n.cfg.GPUMonitor != nil:
		return n.cfg.GPUMonitor
	case len(n.cfg.Inventory.GPUs) == 0:
		return nil
	}
	return gpu.NewMonitor(n.cfg.Inventory, gpu.MonitorConfig{})
}

// gpuTrack is what the health loop knows of one GPU.
type gpuTrack struct {
	// lastFatal is the newest fatal event; since starts the current episode.
	lastFatal, since time.Time
	reason           string
	warning          string
	warningAt        time.Time
	pids             []uint32
}

// healthTracker turns a node's health events into the health it reports
// for each GPU. It applies the clean period: a GPU is unhealthy until no
// fatal event has come for that long. Only the health loop uses it, apart
// from mask, which is safe from any goroutine.
type healthTracker struct {
	inv          []structs.GPU
	started      time.Time
	clean        time.Duration
	allowForeign bool
	gpus         map[string]*gpuTrack // by UUID
	// mask has bit i set while GPU i is unhealthy, for gossip.
	mask atomic.Uint64
}

func newHealthTracker(inv []structs.GPU, clean time.Duration, allowForeign bool, started time.Time) *healthTracker {
	t := &healthTracker{inv: inv, started: started, clean: clean, allowForeign: allowForeign, gpus: map[string]*gpuTrack{}}
	for _, g := range inv {
		t.gpus[g.UUID] = &gpuTrack{}
	}
	return t
}

// seed takes over a quarantine the state still holds from before the
// agent restarted, so it lasts its clean period and no less.
func (t *healthTracker) seed(n *structs.Node) {
	for _, g := range n.GPUs {
		tr, ok := t.gpus[g.UUID]
		if ok && !g.Healthy && !g.LastFaultAt.IsZero() {
			tr.lastFatal, tr.since, tr.reason = g.LastFaultAt, g.UnhealthySince, g.Reason
		}
	}
}

// observe records one event. It returns false for an event about a GPU
// this node does not have.
func (t *healthTracker) observe(ev gpu.Event, now time.Time) bool {
	uuid := ev.UUID
	if uuid == "" {
		for _, g := range t.inv {
			if g.Index == ev.Index {
				uuid = g.UUID
			}
		}
	}
	tr, ok := t.gpus[uuid]
	if !ok {
		return false
	}
	at := ev.At
	if at.IsZero() {
		at = now
	}
	switch ev.Kind {
	case gpu.Fatal:
		if tr.lastFatal.IsZero() || at.Sub(tr.lastFatal) >= t.clean {
			tr.since = at
		}
		if at.After(tr.lastFatal) {
			tr.lastFatal = at
		}
		tr.reason = ev.Reason
	case gpu.Warning:
		tr.warning, tr.warningAt = ev.Reason, at
	case gpu.Processes:
		tr.pids = append(tr.pids[:0], ev.PIDs...)
	}
	return true
}

// changes compares what the node sees now with the committed node and
// returns the GPUs whose reported health must change. held are the GPUs
// live allocations of this node hold: processes on them are skein's.
func (t *healthTracker) changes(n *structs.Node, held map[string]bool, now time.Time) []structs.GPUHealth {
	var out []structs.GPUHealth
	var mask uint64
	for i := range n.GPUs {
		c := &n.GPUs[i]
		tr, ok := t.gpus[c.UUID]
		if !ok {
			continue
		}
		if !tr.lastFatal.After(c.ClearedAt) {
			// A person returned the GPU to service after this fault.
			tr.lastFatal, tr.since, tr.reason = time.Time{}, time.Time{}, ""
		}
		h := structs.GPUHealth{UUID: c.UUID, Healthy: true}
		switch inv := t.discovered(c.UUID); {
		case !tr.lastFatal.IsZero() && now.Sub(tr.lastFatal) < t.clean:
			h.Healthy, h.Reason, h.UnhealthySince, h.LastFaultAt = false, tr.reason, tr.since, tr.lastFatal
		case inv != nil && !inv.Healthy && t.started.After(c.ClearedAt):
			// Discovery found it unhealthy when the agent started.
			h.Healthy, h.Reason, h.UnhealthySince, h.LastFaultAt = false, inv.Reason, t.started, t.started
		}
		if !h.Healthy && c.Index >= 0 && c.Index < 64 {
			mask |= 1 << c.Index
		}
		if tr.warning != "" && now.Sub(tr.warningAt) < t.clean {
			h.Warning = tr.warning
		}
		if !held[c.UUID] {
			h.ForeignProcesses = len(tr.pids)
		}
		h.ForeignAllowed = t.allowForeign && h.ForeignProcesses > 0
		if t.differs(c, &h) {
			out = append(out, h)
		}
	}
	t.mask.Store(mask)
	return out
}

// differs reports whether a report would change the committed GPU. A
// persistent fault re-reported at every check moves LastFaultAt each time;
// that is committed only once it has moved by a quarter of the clean
// period, enough for a restarted agent to keep the quarantine.
func (t *healthTracker) differs(c *structs.GPU, h *structs.GPUHealth) bool {
	if c.Healthy != h.Healthy || c.Warning != h.Warning ||
		c.ForeignProcesses != h.ForeignProcesses || c.ForeignAllowed != h.ForeignAllowed {
		return true
	}
	if h.Healthy {
		return false
	}
	return c.Reason != h.Reason || !c.UnhealthySince.Equal(h.UnhealthySince) ||
		h.LastFaultAt.Sub(c.LastFaultAt) >= t.clean/4
}

func (t *healthTracker) discovered(uuid string) *structs.GPU {
	for i := range t.inv {
		if t.inv[i].UUID == uuid {
			return &t.inv[i]
		}
	}
	return nil
}

// healthLoop runs the GPU monitor and reports to the leader whenever what
// this node sees of its GPUs differs from the committed state: a fault, a
// GPU back after its clean period, foreign processes coming or going. It
// compares with the state instead of remembering what it sent, so a lost
// write, a new leader or an uncordon all converge by themselves, at the
// next event or tick (at most a second): it does not wake for every entry
// the node applies, which would copy the node's record each time.
func (n *Node) healthLoop(events chan gpu.Event) {
	select {
	case <-n.registered:
	case <-n.ctx.Done():
		return
	}
	// The view holds this node's record (with what was cordoned or
	// quarantined before a restart) a moment after the registration
	// committed: seed from it, not from an empty view.
	for seeded := false; !seeded; {
		_, changed := n.view.Watch()
		var self *structs.Node
		if self, seeded = n.view.Node(n.cfg.NodeID); seeded {
			n.health.seed(self)
			break
		}
		select {
		case <-n.ctx.Done():
			return
		case <-changed:
		}
	}
	tick := min(n.cfg.GPUCleanPeriod/4, time.Second)
	ticker := time.NewTicker(tick)
	defer ticker.Stop()
	retry := time.Time{}
	for {
		if nowT := time.Now(); !nowT.Before(retry) {
			if err := n.reportHealth(nowT); err != nil {
				n.log.Warn("report GPU health; will retry", "error", err)
				retry = nowT.Add(500 * time.Millisecond)
			} else {
				retry = time.Time{}
			}
		}
		select {
		case <-n.ctx.Done():
			return
		case ev := <-events:
			if !n.health.observe(ev, time.Now()) {
				n.log.Warn("health event for an unknown GPU", "index", ev.Index, "uuid", ev.UUID)
			} else if ev.Kind == gpu.Fatal {
				n.log.Warn("GPU fault", "index", ev.Index, "reason", ev.Reason)
			}
		case <-ticker.C:
		}
	}
}

// reportHealth sends the GPUs whose health changed, if any. Gossip goes
// first: the leader reads the unhealthy mask and stops placing on a failed
// GPU before the report has committed.
func (n *Node) reportHealth(nowT time.Time) error {
	self, ok := n.view.Node(n.cfg.NodeID)
	if !ok {
		return nil
	}
	held := map[string]bool{}
	for _, alloc := range n.view.NodeLiveAllocs(n.cfg.NodeID) {
		for _, g := range alloc.GPUs {
			held[g] = true
		}
	}
	changes := n.health.changes(self, held, nowT)
	n.refreshMeta()
	if len(changes) == 0 {
		return nil
	}
	return n.writeGPUHealth(structs.NodeGPUHealthRequest{NodeID: n.cfg.NodeID, GPUs: changes, At: now()})
}

// InjectFault injects a health event into this node's simulated GPUs
// (`skein gpu fault`, a development and test control); gpu.ErrNotSimulated
// when it has none.
func (n *Node) InjectFault(ev gpu.Event) error {
	if n.sim == nil {
		return gpu.ErrNotSimulated
	}
	return n.sim.Inject(ev)
}
