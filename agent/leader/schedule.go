package leader

import (
	"cmp"
	"time"

	"github.com/skein-dev/skein/fsm"
	"github.com/skein-dev/skein/sched"
	"github.com/skein-dev/skein/structs"
)

// Pacing of the scheduling loop.
const (
	// maxReplans is how many passes in a row may plan again at once
	// because part of their plan was refused; then the loop waits for
	// the next change, so a scheduler and a state machine that disagree
	// cannot spin.
	maxReplans = 3
	// retryPause is the wait after a pass whose commit failed (no
	// quorum, leadership lost) before the next.
	retryPause = 200 * time.Millisecond
	// silentAfter, in a server's heartbeat intervals, is how long the
	// leader may not hear from a node before it stops placing work
	// there; a worker, which renews less often, is given two of its own
	// intervals if that is longer (Leader.quiet).
	silentAfter = 4
	// DefaultPassInterval is the least time between the start of a
	// scheduling pass that committed while other changes came in and the
	// next pass's when Config.PassInterval is 0: under a burst of
	// changes, at most one pass runs and one waits, so the burst is
	// planned in a few passes that each place many jobs instead of one
	// pass per entry.
	DefaultPassInterval = 50 * time.Millisecond
	// StarvedPassInterval is the least time between two passes' starts
	// while the process is short of CPU: a pass places as much however
	// late it runs, and each one put off leaves the CPU to Raft's
	// heartbeats and the nodes' leases, which must not wait.
	StarvedPassInterval = 250 * time.Millisecond
)

// scheduleLoop runs a scheduling pass whenever the state changes, a job's
// restart backoff ends or gossip says something that changes what may be
// placed, until stop closes or StopScheduling is called. A pass whose
// plan was partly refused, by the check before its commit or by Apply,
// plans again at once from the fresh state. Passes are coalesced: after
// a pass that committed while other changes came in, the next waits for
// the rest of the pass interval, and plans every change until then (see
// nextPass).
func (l *Leader) scheduleLoop(stop <-chan struct{}) {
	after := l.cfg.After
	if after == nil {
		after = time.After
	}
	replans := 0
	for {
		_, changed := l.fsm.Watch()
		started := time.Now()
		refused, wake, err := l.pass()
		took := time.Since(started)
		burst := l.lastBurst()
		switch {
		case err != nil:
			l.log.Warn("scheduling pass failed", "error", err)
			select {
			case <-stop:
				return
			case <-l.halt:
				return
			case <-time.After(retryPause):
			}
			continue
		case refused && replans < maxReplans:
			replans++
			continue
		case refused:
			l.log.Warn("plans refused several times in a row; waiting for the state to change", "passes", replans+1)
		}
		replans = 0
		// Wait for the next state change, the end of a job's restart
		// backoff, or a kick.
		backoff := time.NewTimer(time.Until(wake))
		if wake.IsZero() {
			backoff.Stop()
		}
		select {
		case <-stop:
			backoff.Stop()
			return
		case <-l.halt:
			backoff.Stop()
			return
		case <-changed:
		case <-backoff.C:
		case <-l.kick:
		}
		backoff.Stop()
		if rest := time.Until(l.nextPass(started, took, burst)); rest > 0 {
			select {
			case <-stop:
				return
			case <-l.halt:
				return
			case <-after(rest):
			}
		}
	}
}

// nextPass is the earliest start of the pass after one that started at
// started and took took. A pass that committed while other changes came
// in (burst) starts the pass interval: submissions are arriving faster
// than passes place them, each pass's entries would compete with them
// for the log, and the pass after the interval places all that came.
// Any other pass holds the next back only as long again as it took,
// within the interval: a change after it is planned at once (an idle
// cluster's next job, submitted after the reports of the last one's
// start and end), while passes that keep finding little to do take
// about half a core at most. A process short of CPU spaces every pass
// by the starved interval.
func (l *Leader) nextPass(started time.Time, took time.Duration, burst bool) time.Time {
	interval := l.passInterval()
	if burst || (l.cfg.Starved != nil && l.cfg.Starved()) {
		return started.Add(interval)
	}
	return started.Add(min(interval, 2*took)) // as long again after its end
}

// lastBurst reports whether other entries were applied beside its own
// while the last pass committed.
func (l *Leader) lastBurst() bool {
	l.passMu.Lock()
	defer l.passMu.Unlock()
	return l.burst
}

// passInterval is the least time between two passes' starts now.
func (l *Leader) passInterval() time.Duration {
	interval := cmp.Or(l.cfg.PassInterval, DefaultPassInterval)
	if l.cfg.Starved != nil && l.cfg.Starved() {
		interval = max(interval, StarvedPassInterval)
	}
	return interval
}

// pass runs one scheduling pass: sched.Decide over one copy of the state,
// with what the leader knows from outside Raft (the nodes it has not heard
// from lately, the GPU masks gossip announces); the leader stamps the
// allocations, drops what the newest state refuses, and commits the rest
// in bounded entries. It reports whether any part of the plan was
// refused, and when the earliest job still in its restart backoff becomes
// placeable (zero: none waits). Once StopScheduling has run it does
// nothing.
func (l *Leader) pass() (refused bool, wake time.Time, err error) {
	l.passMu.Lock()
	defer l.passMu.Unlock()
	l.burst = false
	if l.halted {
		return false, time.Time{}, nil
	}
	nowT := time.Now()
	placed := 0
	if l.cfg.Metrics != nil {
		defer func() { l.cfg.Metrics.Pass(time.Since(nowT), placed) }()
	}
	view := l.fsm.State()
	gossip := l.cfg.Gossip()
	d := sched.Decide(view, sched.Inputs{
		Now:             nowT,
		Silent:          l.silentNodes(view.Nodes, gossip.Failed, nowT),
		GossipUnhealthy: gossip.Unhealthy,
	})
	plan := d.Plan
	if planEmpty(plan) {
		return false, d.Wake, nil
	}
	at := now()
	for i := range plan.Placements {
		for j := range plan.Placements[i].Allocations {
			alloc := &plan.Placements[i].Allocations[j]
			alloc.ID = structs.NewID()
			alloc.CreatedAt = at
		}
	}
	// A plan made from the newest state needs no check before its commit
	// (Apply checks it anyway); one the state has moved past since is
	// checked against it, and what it refuses is not sent.
	if l.fsm.Index() != view.Index {
		if res := l.fsm.CheckPlan(plan); !resultEmpty(res) {
			refused = true
			plan = withoutRefused(plan, res)
			l.logRefused("before commit", res)
		}
	}
	if planEmpty(plan) {
		return refused, d.Wake, nil
	}
	res, entries, err := l.commitPlan(plan, at)
	// Entries applied beside its own while it planned and committed say
	// a burst is under way (nextPass).
	l.burst = l.fsm.Index() != view.Index+uint64(entries)
	if !resultEmpty(res) {
		refused = true
		l.logRefused("on commit", res)
	}
	if err == nil && l.cfg.Metrics != nil {
		placed = l.measureCommitted(view, withoutRefused(plan, res), at)
	}
	return refused, d.Wake, err
}

// measureCommitted reports to the metrics what a committed plan did: the
// jobs it placed, with the attempt before of those placed again, and its
// preemptions. It returns how many jobs it placed.
func (l *Leader) measureCommitted(view *fsm.StateView, plan structs.Plan, at time.Time) int {
	m := l.cfg.Metrics
	placed := make(map[string]bool, len(plan.Placements))
	for _, pl := range plan.Placements {
		placed[pl.JobID] = true
	}
	for _, j := range view.Queued {
		if !placed[j.ID] {
			continue
		}
		var previous []*structs.Allocation
		if j.Attempts > 0 {
			for _, a := range l.fsm.Allocs(j.ID) {
				if a.Attempt == j.Attempts {
					previous = append(previous, a)
				}
			}
		}
		m.Placed(j, previous, at)
	}
	victims := 0
	for _, pr := range plan.Preemptions {
		victims += len(pr.Victims)
	}
	if victims > 0 {
		m.Preempted(victims)
	}
	return len(plan.Placements)
}

// silentNodes are the nodes, this one aside, the leader suspects: it has
// not heard from them for longer than quiet (one
// that died moments ago, or any node in the first instant of a new
// leadership, before its heartbeats arrive), or gossip has declared them
// failed. No work is placed there, and nothing is preempted while one is
// silent (the job might fit there a moment later). Only the lease and the
// node monitor mark a node down.
func (l *Leader) silentNodes(nodes []*structs.Node, failed map[string]bool, nowT time.Time) map[string]bool {
	recent := l.quiet()
	silent := map[string]bool{}
	for _, n := range nodes {
		if n.ID != l.cfg.NodeID && (failed[n.ID] || !l.heardWithin(n.ID, recent, nowT)) {
			silent[n.ID] = true
		}
	}
	return silent
}

// logRefused logs the parts of a plan the state machine refused.
func (l *Leader) logRefused(when string, res *structs.PlanResult) {
	for _, part := range []struct {
		what    string
		refused []structs.JobBlocked
	}{{"placements", res.Rejected}, {"cancels", res.RejectedCancels}, {"preemption victims", res.RejectedVictims}} {
		if len(part.refused) > 0 {
			l.log.Warn(part.what+" refused "+when+"; planning again", "count", len(part.refused),
				"job", structs.ShortID(part.refused[0].JobID), "first", part.refused[0].Reason)
		}
	}
}
