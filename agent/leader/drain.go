package leader

import (
	"errors"
	"time"

	"github.com/skein-dev/skein/fsm"
	"github.com/skein-dev/skein/sched"
	"github.com/skein-dev/skein/structs"
)

// drainTick is how often the drain loop looks again without a state
// change: a drain's deadline comes without one.
const drainTick = time.Second

// drainLoop moves the work off draining nodes while this node leads:
// whenever the state changes, and every drainTick, it asks
// sched.NextDrainStep for the next step of every draining node and
// commits it as a NodeDrainStep entry. The state re-checks each step; after a
// refusal the loop waits for the tick rather than the next change.
func (l *Leader) drainLoop(stop <-chan struct{}) {
	l.stepLoop(stop, drainTick, l.drainPass)
}

// drainPass commits the next step of every draining node that has one.
// It reports whether a step was refused or failed to commit.
func (l *Leader) drainPass() (refused bool) {
	for _, n := range l.fsm.DrainingNodes() {
		step, ok := sched.NextDrainStep(l.fsm, n, now())
		if !ok {
			continue
		}
		_, err := l.cfg.Apply(structs.NodeDrainStepType, step)
		switch {
		case errors.Is(err, fsm.ErrDrainStale), errors.Is(err, structs.ErrUpgradeFirst):
			l.log.Debug("drain step refused; deciding again", "node", n.Name, "error", err)
			refused = true
		case err != nil:
			l.log.Warn("commit a drain step", "node", n.Name, "error", err)
			refused = true
		case step.Done:
			l.log.Info("node drained", "node", n.Name)
		default:
			l.log.Info("drain step", "node", n.Name, "replace", len(step.Replace), "stop", len(step.Stop),
				"evict", len(step.Evict), "kill", len(step.Kill))
		}
	}
	return refused
}
