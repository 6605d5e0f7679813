package fsm

import (
	"cmp"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"github.com/skein-dev/skein/structs"
)

// Reasons a job carries after a cancel.
const (
	reasonCancelled       = "cancelled by user"
	reasonCancelRequested = "cancel requested"
)

// applyJobSubmit creates a queued job, or returns the job an earlier request
// with the same RequestID created.
func (s *state) applyJobSubmit(l *raft.Log) any {
	var req structs.JobSubmitRequest
	decode(l, &req)
	if req.RequestID != "" {
		if id, ok := s.jobByRequest[req.RequestID]; ok {
			return s.jobs[id].Copy()
		}
	}
	if req.JobID == "" {
		return fmt.Errorf("job submit: %w: empty job id", ErrInvalidRequest)
	}
	short := structs.ShortID(req.JobID)
	if err := structs.ValidateRequestID(req.RequestID); err != nil {
		return fmt.Errorf("job %s: %w", short, err)
	}
	if _, ok := s.jobs[req.JobID]; ok {
		return fmt.Errorf("job %s: %w", short, ErrJobExists)
	}
	req.Spec.Normalize()
	if err := req.Spec.Validate(); err != nil {
		return fmt.Errorf("job %s: %w", short, err)
	}
	if err := s.checkSubmitLimits(req.Owner, &req.Spec); err != nil {
		return fmt.Errorf("job %s: %w", short, err)
	}
	if err := s.resolveJobAccount(req.Owner, &req.Spec); err != nil {
		return fmt.Errorf("job %s: %w", short, err)
	}
	if p, ok := s.partitions[structs.PartitionOf(&req.Spec)]; ok {
		if err := p.Fit(&req.Spec); err != nil {
			return fmt.Errorf("job %s: %w", short, err)
		}
	}
	newJob := func(id string) *structs.Job {
		j := &structs.Job{
			ID:          id,
			Owner:       req.Owner,
			AllowRoot:   req.AllowRoot,
			Spec:        req.Spec.Copy(),
			State:       structs.JobQueued,
			SubmittedAt: req.SubmittedAt,
			Held:        req.Spec.Hold,
			CreateIndex: l.Index,
			ModifyIndex: l.Index,
		}
		if b := req.Spec.Begin; b.After(req.SubmittedAt) {
			j.NotBefore = b
			j.Reason = "waiting for its begin time " + b.UTC().Format(time.RFC3339)
		}
		if j.Held {
			j.Reason = reasonSubmittedHeld
		}
		return j
	}
	a := req.Spec.Array
	if a == nil {
		j := newJob(req.JobID)
		j.RequestID = req.RequestID
		j.Number = s.nextJobNumber()
		s.addJob(j)
		s.emitJob(l.Index, structs.EventJobSubmitted, j, j.SubmittedAt, submitReason(j))
		return j.Copy()
	}
	// A job array: one job per index, the first answering for the request.
	var first *structs.Job
	for i := a.Start; i <= a.End; i++ {
		if _, ok := s.jobs[structs.ArrayTaskID(req.JobID, i)]; ok {
			return fmt.Errorf("job %s: %w", structs.ArrayTaskID(short, i), ErrJobExists)
		}
	}
	for i := a.Start; i <= a.End; i++ {
		j := newJob(structs.ArrayTaskID(req.JobID, i))
		j.ArrayID, j.ArrayIndex = req.JobID, i
		j.Number = s.nextJobNumber()
		if first == nil {
			first = j
			j.RequestID = req.RequestID
		}
		j.ArrayNumber = first.Number
		s.addJob(j)
		s.emitJob(l.Index, structs.EventJobSubmitted, j, j.SubmittedAt, submitReason(j))
	}
	return first.Copy()
}

// applyJobCancel cancels one job, or with ArrayID every task of a job array
// that has not ended, each as cancel describes. A single cancel returns a
// copy of the job; an array cancel returns copies of the tasks it
// cancelled, in index order ([]*structs.Job). A replica its service still
// wants is refused: a scale or delete of the service stops it.
func (s *state) applyJobCancel(l *raft.Log) any {
	var req structs.JobCancelRequest
	decode(l, &req)
	if req.ArrayID != "" {
		if req.JobID != "" {
			return fmt.Errorf("job cancel: %w: both job %s and array %s", ErrInvalidRequest,
				structs.ShortID(req.JobID), structs.ShortID(req.ArrayID))
		}
		return s.cancelArray(&req, l.Index)
	}
	j, ok := s.jobs[req.JobID]
	if !ok {
		return fmt.Errorf("job %s: %w", structs.ShortID(req.JobID), ErrJobNotFound)
	}
	if j.State.Terminal() {
		return fmt.Errorf("job %s: %w (%s)", structs.ShortID(j.ID), ErrJobFinished, j.State)
	}
	if s.wantsReplica(j) {
		return fmt.Errorf("job %s: %w: it is a replica of service %s, which restarts it: scale or delete the service instead",
			structs.ShortID(j.ID), ErrInvalidRequest, j.Service)
	}
	s.cancel(j, req.Reason, req.At, l.Index)
	return j.Copy()
}

// cancelArray cancels every task of an array that has not ended, in index
// order, all in one entry.
func (s *state) cancelArray(req *structs.JobCancelRequest, index uint64) any {
	short := structs.ShortID(req.ArrayID)
	if _, ok := s.arrayTasks[req.ArrayID]; !ok {
		return fmt.Errorf("job array %s: %w", short, ErrJobNotFound)
	}
	var tasks []*structs.Job
	for _, j := range s.sortedTasks(req.ArrayID) {
		if !j.State.Terminal() {
			s.cancel(j, req.Reason, req.At, index)
			tasks = append(tasks, j.Copy())
		}
	}
	if len(tasks) == 0 {
		return fmt.Errorf("job array %s: %w", short, ErrJobFinished)
	}
	return tasks
}

// cancel ends a job that has not ended. A job with nothing running ends at
// once; a running job's live allocations are asked to stop, and the job
// ends when the last of them has (see decideJob). A job already being
// cancelled is left as it is.
func (s *state) cancel(j *structs.Job, reason string, at time.Time, index uint64) {
	if j.StopRequested {
		return
	}
	if j.State == structs.JobRunning {
		stopping := false
		for _, a := range s.jobAllocs[j.ID] {
			if a.Live() {
				stopping = true
				stopAlloc(a, index)
			}
		}
		if stopping {
			j.StopRequested = true
			j.Reason = reasonCancelRequested
			if reason != "" {
				j.Reason += ": " + reason
			}
			j.ModifyIndex = index
			return
		}
	}
	s.finishJob(j, structs.JobCancelled, cmp.Or(reason, reasonCancelled), at, index)
}

// submitReason says what a new job asks for and whose it is; never its
// environment.
func submitReason(j *structs.Job) string {
	what := gpusText(j.Spec.GPUs)
	if j.Spec.Nodes > 1 {
		what += fmt.Sprintf(" on each of %d nodes", j.Spec.Nodes)
	}
	if j.Spec.Name != "" {
		what = fmt.Sprintf("%q, %s", j.Spec.Name, what)
	}
	if j.Service != "" {
		what = fmt.Sprintf("replica of service %s version %d, %s", j.Service, j.ServiceVersion, what)
	}
	if j.Owner != "" {
		what += " by " + j.Owner
	}
	return "queued: " + what
}

// cancelReason is the final reason of a job whose cancel waited for its
// allocations: the reason the cancel gave, else the default.
func cancelReason(j *structs.Job) string {
	if r, ok := strings.CutPrefix(j.Reason, reasonCancelRequested+": "); ok {
		return r
	}
	return reasonCancelled
}

// finishJob moves a job to a terminal state. The last replica of a
// deleted service to end takes the service out of the state.
func (s *state) finishJob(j *structs.Job, st structs.JobState, reason string, at time.Time, index uint64) {
	s.setJobState(j, st)
	j.Reason = reason
	j.FinishedAt = at
	j.PreemptedBy = ""
	j.ModifyIndex = index
	if reason == "" {
		reason = fmt.Sprintf("attempt %d: exit code %d", j.Attempts, j.ExitCode)
	}
	s.emitJob(index, jobEndEvents[st], j, at, reason)
	if svc := s.serviceOf(j); svc != nil {
		s.dropDeleted(svc)
	}
}

// stopAlloc asks a live allocation's process to stop.
func stopAlloc(a *structs.Allocation, index uint64) {
	if a.DesiredState != structs.DesiredStop {
		a.DesiredState = structs.DesiredStop
		a.ModifyIndex = index
	}
}
