package leader

import (
	"errors"
	"time"

	"github.com/skein-dev/skein/fsm"
	"github.com/skein-dev/skein/sched"
	"github.com/skein-dev/skein/structs"
)

// GCInterval is how often the leader looks for finished jobs whose
// retention has passed: a tenth of the retention, from a second to a
// minute, so a job is removed at most that much after its time.
func GCInterval(retention time.Duration) time.Duration {
	return min(max(retention/10, time.Second), time.Minute)
}

// gcLoop keeps the state bounded while this node leads: at every interval
// it removes the finished jobs whose retention has passed and that
// nothing still needs (sched.Expired decides which), with their
// allocations, in JobGC entries of at most fsm.MaxGCJobs jobs. Each node
// removes the directories of its allocations once the state no longer
// holds them (agent/node).
func (l *Leader) gcLoop(stop <-chan struct{}) {
	tick := time.NewTicker(GCInterval(l.cfg.JobRetention))
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		for more := true; more; {
			var err error
			if more, err = l.collect(); err != nil {
				l.log.Warn("remove finished jobs; will try again", "error", err)
			}
			select {
			case <-stop:
				return
			default:
			}
		}
	}
}

// collect commits one JobGC entry for the jobs due now, if any. It
// reports whether a full entry went out, so more may be due.
func (l *Leader) collect() (more bool, err error) {
	retention := l.cfg.JobRetention
	at := now()
	due := l.fsm.ExpiredJobs(retention, at)
	if len(due) == 0 {
		return false, nil
	}
	needed, openArrays := l.fsm.GCHolds()
	ids := sched.Expired(due, needed, openArrays, at, retention, fsm.MaxGCJobs)
	if len(ids) == 0 {
		return false, nil
	}
	_, err = l.cfg.Apply(structs.JobGCType, structs.JobGCRequest{JobIDs: ids, Retention: structs.Duration(retention), At: at})
	if err != nil && !errors.Is(err, fsm.ErrJobRetained) && !errors.Is(err, fsm.ErrJobNotFound) {
		return false, err
	}
	// Jobs the state machine kept are named in err; the others are gone.
	l.log.Info("removed finished jobs past their retention", "jobs", len(ids), "retention", retention)
	if err != nil {
		l.log.Debug("some finished jobs were kept", "error", err)
	}
	return len(ids) == fsm.MaxGCJobs, nil
}
