package fsm

import (
	"errors"
	"fmt"
	"slices"
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
// preempted for the same job (and, when one is named, in the same attempt)
// is left as it is, so a repeated request changes nothing. A plan's
// Preemptions go through the same checks and marks (runPlan); this entry
// type stays for logs written before plans carried them.
func (s *state) applyJobPreempt(l *raft.Log) any {
	var req structs.JobPreemptRequest
	decode(l, &req)
	if len(req.Victims) == 0 {
		return fmt.Errorf("job preempt: %w: no victims", ErrInvalidRequest)
	}
	forJob, err := s.checkPreemption(req.For, req.Victims, req.Attempts)
	if err != nil {
		return fmt.Errorf("job preempt: %w", err)
	}
	reason := preemptReason(forJob, req.Reason)
	var skipped []error
	for i, id := range req.Victims {
		if err := s.preempt(id, attemptOf(req.Attempts, i), forJob, reason, req.At, l.Index, false); err != nil {
			skipped = append(skipped, err)
		}
	}
	return errors.Join(skipped...)
}

// checkPreemption checks the shape of a preemption and that its preempting
// job still waits in the queue, and returns that job.
func (s *state) checkPreemption(forID string, victims []string, attempts []int) (*structs.Job, error) {
	if len(attempts) != 0 && len(attempts) != len(victims) {
		return nil, fmt.Errorf("%w: %d attempts for %d victims", ErrInvalidRequest, len(attempts), len(victims))
	}
	forJob, ok := s.jobs[forID]
	switch {
	case !ok:
		return nil, fmt.Errorf("preempting job %s: %w", structs.ShortID(forID), ErrJobNotFound)
	case forJob.State != structs.JobQueued || forJob.StopRequested:
		return nil, fmt.Errorf("preempting job %s: %w: it is %s, not waiting in the queue",
			structs.ShortID(forID), ErrNotPreemptible, forJob.State)
	}
	return forJob, nil
}

// preemptReason is what a victim of forJob is told, with the leader's
// words, if any, after it.
func preemptReason(forJob *structs.Job, extra string) string {
	reason := fmt.Sprintf("preempted by job %s (priority %d)", structs.ShortID(forJob.ID), forJob.Spec.Priority)
	if extra != "" {
		reason += ": " + extra
	}
	return reason
}

// attemptOf is the attempt chosen for victim i, 0 when none was given.
func attemptOf(attempts []int, i int) int {
	if len(attempts) == 0 {
		return 0
	}
	return attempts[i]
}

// preempt stops one victim for forJob, or says why it may not. A dry run
// only checks.
func (s *state) preempt(id string, attempt int, forJob *structs.Job, reason string, at time.Time, index uint64, dry bool) error {
	j, ok := s.jobs[id]
	short := structs.ShortID(id)
	switch {
	case !ok:
		return fmt.Errorf("victim %s: %w", short, ErrJobNotFound)
	case j.PreemptedBy == forJob.ID && (attempt == 0 || attempt == j.Attempts):
		return nil // this preemption is under way
	case j.State != structs.JobRunning:
		return fmt.Errorf("victim %s: %w: it is %s, not running", short, ErrNotPreemptible, j.State)
	case attempt != 0 && attempt != j.Attempts:
		return fmt.Errorf("victim %s: %w: attempt %d was chosen, attempt %d runs", short, ErrNotPreemptible, attempt, j.Attempts)
	case j.PreemptedBy != "":
		return fmt.Errorf("victim %s: %w: already preempted by job %s", short, ErrNotPreemptible, structs.ShortID(j.PreemptedBy))
	case j.StopRequested:
		return fmt.Errorf("victim %s: %w: it is being cancelled", short, ErrNotPreemptible)
	case structs.MayPreempt(s.accounts, forJob, j):
		// preemptible and of lower priority, or of a QoS forJob's preempts
	case !j.Spec.Preemptible:
		return fmt.Errorf("victim %s: %w: not submitted as preemptible", short, ErrNotPreemptible)
	case j.Spec.Priority >= forJob.Spec.Priority:
		return fmt.Errorf("victim %s: %w: priority %d is not below %d", short, ErrNotPreemptible, j.Spec.Priority, forJob.Spec.Priority)
	}
	if !slices.ContainsFunc(s.jobAllocs[j.ID], (*structs.Allocation).Live) {
		return fmt.Errorf("victim %s: %w: no live allocation", short, ErrNotPreemptible)
	}
	if dry {
		return nil
	}
	for _, a := range s.jobAllocs[j.ID] {
		if a.Live() {
			stopAlloc(a, index)
			a.Reason = reason
			a.StopGrace = j.Spec.PreemptGrace
		}
	}
	j.PreemptedBy = forJob.ID
	j.PreemptReason = reason
	j.Preemptions++
	j.Reason = reason + ": stopping"
	j.ModifyIndex = index
	s.emitJob(index, structs.EventJobPreempted, j, at, reason)
	return nil
}

// requeuePreempted puts a preempted job whose allocations have all ended
// back in the queue, at once and without using a restart. NotBefore is
// the moment it was requeued: its wait for the queue's aging starts again
// there (it has had its turn), so the age it had before it ran cannot lift
// it above the job it made room for and start a preemption loop.
func (s *state) requeuePreempted(j *structs.Job, at time.Time, index uint64) {
	s.setJobState(j, structs.JobQueued)
	j.StartedAt = time.Time{}
	j.FinishedAt = time.Time{}
	j.NotBefore = at
	j.PreemptedBy = ""
	j.Reason = j.PreemptReason
	j.ModifyIndex = index
	s.emitJob(index, structs.EventJobRestarted, j, at, "requeued: "+j.PreemptReason)
}

// restartsUsed is how many of its restarts a job has used
// (Job.RestartsUsed).
func restartsUsed(j *structs.Job) int { return j.RestartsUsed() }
