package node

import (
	"time"

	"github.com/skein-dev/skein/structs"
)

// stopTracked stops an allocation the state asks to stop. A job's is
// stopped at once with the grace the state gave it (a preemption's), or
// the configured kill grace, and the signal it gave (a drain's: the job's
// --signal) instead of SIGTERM. A service replica is drained first: the
// ingress of every node already skips an allocation being stopped, so it
// waits its service's DrainDelay for them all to have seen it, then gets
// SIGTERM with its service's DrainTimeout (or the preemption's grace) as
// its kill grace, for the requests in flight to finish.
func (n *Node) stopTracked(alloc *structs.Allocation) {
	reason := stopReason(alloc)
	job, ok := n.view.Job(alloc.JobID)
	if !ok || job.Service == "" {
		n.runner.StopSignalled(alloc.ID, reason, time.Duration(alloc.StopGrace), alloc.StopSignal)
		return
	}
	delay, grace := time.Duration(structs.DefaultDrainDelay), time.Duration(structs.DefaultDrainTimeout)
	if svc, ok := n.view.Service(job.Service); ok {
		if svc.Spec.DrainDelay > 0 {
			delay = time.Duration(svc.Spec.DrainDelay)
		}
		if svc.Spec.DrainTimeout > 0 {
			grace = time.Duration(svc.Spec.DrainTimeout)
		}
	}
	if alloc.StopGrace > 0 {
		grace = time.Duration(alloc.StopGrace)
	}
	id := alloc.ID
	n.log.Info("draining replica", "alloc", structs.ShortID(id), "service", job.Service, "delay", delay, "grace", grace)
	n.goLoop(func() {
		t := time.NewTimer(delay)
		defer t.Stop()
		select {
		case <-n.ctx.Done():
			return
		case <-t.C:
		}
		n.runner.StopAfter(id, reason, grace)
	})
}
