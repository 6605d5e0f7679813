package leader

import (
	"errors"
	"time"

	"github.com/skein-dev/skein/fsm"
	"github.com/skein-dev/skein/sched"
	"github.com/skein-dev/skein/structs"
)

// rolloutTick is how often the rollout loop looks again without a state
// change: a replica's unhealthy time, and a rollout's time without
// progress, grow without one.
const rolloutTick = time.Second

// rolloutLoop drives the services' rolling updates while this node leads:
// whenever the state changes, and every rolloutTick, it asks
// sched.NextRolloutStep for the next step of every active rollout and
// commits it as a ServiceRollout entry. The state re-checks each step, so
// a step decided on an older state, or by a leader that has just lost
// its lead, is refused instead of applied; after a refusal the loop
// waits for the tick rather than the next change (a refused entry is a
// change too).
func (l *Leader) rolloutLoop(stop <-chan struct{}) {
	l.stepLoop(stop, rolloutTick, l.rolloutPass)
}

// stepLoop runs pass whenever the state changes and every every, until
// stop closes; after a pass that reports a refusal it waits for the tick
// rather than the next change (a refused entry is a change too).
func (l *Leader) stepLoop(stop <-chan struct{}, every time.Duration, pass func() (refused bool)) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		_, changed := l.fsm.Watch()
		if pass() {
			changed = nil
		}
		select {
		case <-stop:
			return
		case <-changed:
		case <-tick.C:
		}
	}
}

// rolloutPass commits the next step of every active rollout that has one.
// It reports whether a step was refused or failed to commit.
func (l *Leader) rolloutPass() (refused bool) {
	for _, svc := range l.fsm.Services() {
		step, ok := sched.NextRolloutStep(l.fsm, svc, now(), sched.DefaultRolloutPolicy)
		if !ok {
			continue
		}
		_, err := l.cfg.Apply(structs.ServiceRolloutType, step)
		switch {
		case errors.Is(err, fsm.ErrRolloutStale):
			l.log.Debug("rollout step refused; deciding again", "service", svc.Name, "error", err)
			refused = true
		case err != nil:
			l.log.Warn("commit a rollout step", "service", svc.Name, "error", err)
			refused = true
		case step.RollBack:
			l.log.Warn("rolling back a service update", "service", svc.Name, "version", step.Version, "reason", step.Reason)
		case step.Done:
			l.log.Info("service rollout done", "service", svc.Name, "version", step.Version)
		default:
			l.log.Info("service rollout step", "service", svc.Name, "version", step.Version, "add", step.Add, "stop", len(step.Stop))
		}
	}
	return refused
}
