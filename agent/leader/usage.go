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
// accounts: every interval one UsageCharge entry, stamped with the
// leader's time and half-life, decays what is recorded and charges what
// ran since the last one (fsm applyUsageCharge). A new leader goes on
// from the last committed charge, so nothing is charged twice or lost
// across a change of leader.
func (l *Leader) usageLoop(stop <-chan struct{}) {
	tick := time.NewTicker(cmp.Or(l.cfg.UsageInterval, DefaultUsageInterval))
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		if err := l.chargeUsage(); err != nil {
			l.log.Warn("charge usage; will try again", "error", err)
		}
	}
}

// chargeUsage commits one usage charge, if the cluster has accounts.
func (l *Leader) chargeUsage() error {
	if !l.fsm.FairShareOn() {
		return nil
	}
	_, err := l.cfg.Apply(structs.UsageChargeType, structs.UsageChargeRequest{
		At: now(), HalfLife: structs.Duration(cmp.Or(l.cfg.UsageHalfLife, structs.DefaultUsageHalfLife))})
	return err
}
