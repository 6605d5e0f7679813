package leader

import (
	"cmp"
	"time"

	"github.com/skein-dev/skein/structs"
)

// DefaultUsageInterval is how often the leader charges the running
// allocations' use to their accounts when Config.UsageInterval is 0.
const DefaultUsageInterval = 30 * time.Second

// usageLoop charges usage while this node leads and the cluster has
// accounts or QoS: one UsageCharge entry an interval after the last
// committed one, stamped with the leader's time and half-life, decays
// what is recorded and charges what ran since (fsm applyUsageCharge). It
// looks every second at most, so the first charge follows the first
// account within a second, and from then on an allocation that ends is
// charged up to its end. A new leader goes on from the last committed
// charge, so nothing is charged twice or lost across a change of leader.
func (l *Leader) usageLoop(stop <-chan struct{}) {
	interval := cmp.Or(l.cfg.UsageInterval, DefaultUsageInterval)
	tick := time.NewTicker(min(interval, time.Second))
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		if err := l.chargeUsage(interval); err != nil {
			l.log.Warn("charge usage; will try again", "error", err)
		}
	}
}

// chargeUsage commits one usage charge if the cluster has accounts or
// QoS and the last charge is interval old, or there was none.
func (l *Leader) chargeUsage(interval time.Duration) error {
	on, last := l.fsm.UsageClock()
	at := now()
	if !on || (!last.IsZero() && at.Sub(last) < interval) {
		return nil
	}
	_, err := l.cfg.Apply(structs.UsageChargeType, structs.UsageChargeRequest{
		At: at, HalfLife: structs.Duration(cmp.Or(l.cfg.UsageHalfLife, structs.DefaultUsageHalfLife))})
	return err
}
