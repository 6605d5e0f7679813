package fsm

import (
	"fmt"

	"github.com/hashicorp/raft"

	"github.com/skein-dev/skein/structs"
)

// applyJobRequeue puts a running batch job back in the queue (scontrol
// requeue) by the path a drain's eviction takes: its current attempt's
// live allocations are asked to stop and the job is marked Evicted, so
// that decideJob requeues it, without using a restart, once they have
// stopped. A queued job is left as it is, and one already stopping to
// be placed again (evicted or preempted) too; a finished job, a
// replica and a job being cancelled are refused. It returns a copy of
// the job.
func (s *state) applyJobRequeue(l *raft.Log) any {
	var req structs.JobRequeueRequest
	decode(l, &req)
	j, ok := s.jobs[req.JobID]
	if !ok {
		return fmt.Errorf("job %s: %w", structs.ShortID(req.JobID), ErrJobNotFound)
	}
	short := j.SlurmID()
	switch {
	case j.State.Terminal():
		return fmt.Errorf("job %s: %w (%s): only a running or pending job is requeued; submit it again", short, ErrJobFinished, j.State)
	case j.Service != "":
		return fmt.Errorf("job %s: %w: it is a replica of service %s, which places its replicas itself", short, ErrInvalidRequest, j.Service)
	case j.StopRequested:
		return fmt.Errorf("job %s: %w: it is being cancelled", short, ErrInvalidRequest)
	case j.State == structs.JobQueued, j.Evicted != "", j.PreemptedBy != "":
		return j.Copy()
	}
	why := "requeued with scontrol requeue"
	if req.By != "" {
		why += " by " + req.By
	}
	stopping := false
	for _, a := range s.jobAllocs[j.ID] {
		if a.Live() && a.Attempt == j.Attempts {
			stopAlloc(a, l.Index)
			a.Reason = why
			stopping = true
		}
	}
	if !stopping {
		// Every allocation of the attempt has ended already, which
		// decideJob settles at once: nothing is left to stop.
		s.requeueEvicted(j, why, req.At, l.Index)
		return j.Copy()
	}
	j.Evicted = why
	j.Reason = why + ": stopping, to be placed again"
	j.ModifyIndex = l.Index
	s.emitJob(l.Index, structs.EventJobPreempted, j, req.At, why)
	return j.Copy()
}
