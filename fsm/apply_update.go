package fsm

import (
	"fmt"

	"github.com/hashicorp/raft"

	"github.com/skein-dev/skein/structs"
)

// Reasons a held job carries (Slurm's JobHeldUser).
const (
	reasonHeld          = "held: scontrol release lets it run"
	reasonSubmittedHeld = "held since submitted (hold): scontrol release lets it run"
)

// applyJobUpdate holds, releases or changes a queued job, or every queued
// task of an array, all or nothing. It returns copies of the jobs it
// changed ([]*structs.Job, in index order for an array).
func (s *state) applyJobUpdate(l *raft.Log) any {
	var req structs.JobUpdateRequest
	decode(l, &req)
	if req.Empty() {
		return fmt.Errorf("job update: %w: nothing to change", ErrInvalidRequest)
	}
	var jobs []*structs.Job
	switch {
	case req.JobID != "" && req.ArrayID != "":
		return fmt.Errorf("job update: %w: both job %s and array %s", ErrInvalidRequest,
			structs.ShortID(req.JobID), structs.ShortID(req.ArrayID))
	case req.ArrayID != "":
		if _, ok := s.arrayTasks[req.ArrayID]; !ok {
			return fmt.Errorf("job array %s: %w", structs.ShortID(req.ArrayID), ErrJobNotFound)
		}
		for _, j := range s.sortedTasks(req.ArrayID) {
			if j.State == structs.JobQueued && !j.StopRequested {
				jobs = append(jobs, j)
			}
		}
		if len(jobs) == 0 {
			return fmt.Errorf("job array %s: %w: no task waits in the queue", structs.ShortID(req.ArrayID), ErrInvalidRequest)
		}
	default:
		j, ok := s.jobs[req.JobID]
		if !ok {
			return fmt.Errorf("job %s: %w", structs.ShortID(req.JobID), ErrJobNotFound)
		}
		if j.State != structs.JobQueued || j.StopRequested {
			return fmt.Errorf("job %s: %w: it is %s; only a job waiting in the queue can be held, released or changed",
				structs.ShortID(j.ID), ErrInvalidRequest, j.State)
		}
		jobs = []*structs.Job{j}
	}
	// Check every job's new spec before changing any.
	specs := make([]structs.JobSpec, len(jobs))
	for i, j := range jobs {
		spec := j.Spec.Copy()
		if req.Name != nil {
			spec.Name = *req.Name
		}
		if req.TimeLimit != nil {
			spec.TimeLimit = *req.TimeLimit
		}
		if req.Priority != nil {
			spec.Priority = *req.Priority
		}
		if err := spec.Validate(); err != nil {
			return fmt.Errorf("job %s: %w", structs.ShortID(j.ID), err)
		}
		specs[i] = spec
	}
	out := make([]*structs.Job, len(jobs))
	for i, j := range jobs {
		j.Spec = specs[i]
		if req.Hold != nil && *req.Hold != j.Held {
			j.Held = *req.Hold
			j.Reason = ""
			if j.Held {
				j.Reason = reasonHeld
			}
		}
		j.ModifyIndex = l.Index
		out[i] = j.Copy()
	}
	return out
}
