package fsm

import (
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/skein-dev/skein/structs"
)

// applyJobPreempt stops running preemptible jobs to make room for a queued
// job of higher priority. Each victim's live allocations are asked to stop
// with the victim's PreemptGrace, and the victim is marked (PreemptedBy) so
// that decideJob requeues it, without using a restart, when they have
// stopped, however they end. Victims that committed state no longer allows
// (unknown, not running, already stopping, another attempt, not
// preemptible, not of lower priority) are skipped and listed in the
// returned error; the others are still preempted. A victim already
// preempted for the same job is left as it is, so a repeated request
// changes nothing.
func (s *state) applyJobPreempt(l *raft.Log) any {
	var req structs.JobPreemptRequest
	decode(l, &req)
	switch {
	case len(req.Victims) == 0:
		return fmt.Errorf("job preempt: %w: no victims", ErrInvalidRequest)
	case len(req.Attempts) != 0 && len(req.Attempts) != len(req.Victims):
		return fmt.Errorf("job preempt: %w: %d attempts for %d victims", ErrInvalidRequest, len(req.Attempts), len(req.Victims))
	}
	forJob, ok := s.jobs[req.For]
	switch {
	case !ok:
		return fmt.Errorf("job preempt: preempting job %s: %w", structs.ShortID(req.For), ErrJobNotFound)
	case forJob.State != structs.JobQueued || forJob.StopRequested:
		return fmt.Errorf("job preempt: preempting job %s: %w: it is %s, not waiting in the queue",
			structs.ShortID(req.For), ErrNotPreemptible, forJob.State)
	}
	reason := fmt.Sprintf("preempted by job %s (priority %d)", structs.ShortID(forJob.ID), forJob.Spec.Priority)
	if req.Reason != "" {
		reason += ": " + req.Reason
	}
	var skipped []error
	for i, id := range req.Victims {
		attempt := 0
		if len(req.Attempts) != 0 {
			attempt = req.Attempts[i]
		}
		if err := s.preempt(id, attempt, forJob, reason, l.Index); err != nil {
			skipped = append(skipped, err)
		}
	}
	return errors.Join(skipped...)
}

// preempt stops one victim for forJob, or says why it may not.
func (s *state) preempt(id string, attempt int, forJob *structs.Job, reason string, index uint64) error {
	j, ok := s.jobs[id]
	short := structs.ShortID(id)
	switch {
	case !ok:
		return fmt.Errorf("victim %s: %w", short, ErrJobNotFound)
	case j.PreemptedBy == forJob.ID:
		return nil // this preemption is under way
	case j.State != structs.JobRunning:
		return fmt.Errorf("victim %s: %w: it is %s, not running", short, ErrNotPreemptible, j.State)
	case attempt != 0 && attempt != j.Attempts:
		return fmt.Errorf("victim %s: %w: attempt %d was chosen, attempt %d runs", short, ErrNotPreemptible, attempt, j.Attempts)
	case j.PreemptedBy != "":
		return fmt.Errorf("victim %s: %w: already preempted by job %s", short, ErrNotPreemptible, structs.ShortID(j.PreemptedBy))
	case j.StopRequested:
		return fmt.Errorf("victim %s: %w: it is being cancelled", short, ErrNotPreemptible)
	case !j.Spec.Preemptible:
		return fmt.Errorf("victim %s: %w: not submitted as preemptible", short, ErrNotPreemptible)
	case j.Spec.Priority >= forJob.Spec.Priority:
		return fmt.Errorf("victim %s: %w: priority %d is not below %d", short, ErrNotPreemptible, j.Spec.Priority, forJob.Spec.Priority)
	}
	stopping := false
	for _, a := range s.jobAllocs[j.ID] {
		if a.Live() {
			stopping = true
			stopAlloc(a, index)
			a.Reason = reason
			a.StopGrace = j.Spec.PreemptGrace
		}
	}
	if !stopping {
		return fmt.Errorf("victim %s: %w: no live allocation", short, ErrNotPreemptible)
	}
	j.PreemptedBy = forJob.ID
	j.PreemptReason = reason
	j.Preemptions++
	j.Reason = reason + ": stopping"
	j.ModifyIndex = index
	return nil
}

// requeuePreempted puts a preempted job whose allocations have all ended
// back in the queue, at once and without using a restart. NotBefore is
// the moment it was requeued: its wait for the queue's aging starts again
// there (it has had its turn), so the age it had before it ran cannot lift
// it above the job it made room for and start a preemption loop.
func requeuePreempted(j *structs.Job, at time.Time, index uint64) {
	j.State = structs.JobQueued
	j.StartedAt = time.Time{}
	j.FinishedAt = time.Time{}
	j.NotBefore = at
	j.PreemptedBy = ""
	j.Reason = j.PreemptReason
	j.ModifyIndex = index
}

// restartsUsed is how many of its restarts a job has used: its attempts
// after the first, less those that ended in a preemption or in one of the
// free GPU-fault restarts.
func restartsUsed(j *structs.Job) int {
	return max(j.Attempts-1-j.Preemptions-j.GPUFaults, 0)
}
