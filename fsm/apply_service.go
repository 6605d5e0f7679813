package fsm

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"github.com/skein-dev/skein/structs"
)

// crashWindow is how long a replica's attempt must run not to count as a
// crash (Job.Crashes).
const crashWindow = time.Minute

// applyServiceRegister creates a service and its replica jobs, queued, and
// returns a copy of the service. It refuses a name in use (by a service,
// or by one being deleted whose replicas have not all stopped), an
// invalid spec, and replicas that would pass the owner's or the cluster's
// queued-jobs limit; nothing is made then.
func (s *state) applyServiceRegister(l *raft.Log) any {
	var req structs.ServiceRegisterRequest
	decode(l, &req)
	svc := &req.Service
	if svc.ID == "" {
		return fmt.Errorf("service register: %w: empty service id", ErrInvalidRequest)
	}
	svc.Spec.Normalize()
	if err := svc.Validate(); err != nil {
		return fmt.Errorf("service register: %w", err)
	}
	if old, ok := s.services[svc.Name]; ok {
		if old.Deleted {
			return fmt.Errorf("service %s: %w: it is being deleted; register it again once its replicas have stopped",
				svc.Name, ErrServiceExists)
		}
		return fmt.Errorf("service %s: %w", svc.Name, ErrServiceExists)
	}
	for _, o := range s.services {
		if o.ID == svc.ID {
			return fmt.Errorf("service %s: %w: id %s is service %s's", svc.Name, ErrServiceExists, structs.ShortID(svc.ID), o.Name)
		}
	}
	if svc.Autoscale != nil {
		svc.Replicas = svc.Autoscale.Clamp(svc.Replicas)
	}
	if err := s.checkReplicaLimits(svc, svc.Replicas); err != nil {
		return fmt.Errorf("service %s: %w", svc.Name, err)
	}
	svc.NextReplica, svc.Deleted = 0, false
	svc.CreateIndex, svc.ModifyIndex = l.Index, l.Index
	s.services[svc.Name] = svc
	for range svc.Replicas {
		s.addReplica(svc, svc.CreatedAt, l.Index)
	}
	return svc.Copy()
}

// applyServiceScale sets how many replicas a service wants: new replica
// jobs are made, or the newest of those it wants (the highest replica
// numbers) are stopped as a user's cancel stops a job. It returns a copy
// of the service. A scale to what the service has already changes
// nothing; one that would pass the queued-jobs limits is refused.
func (s *state) applyServiceScale(l *raft.Log) any {
	var req structs.ServiceScaleRequest
	decode(l, &req)
	if err := req.Validate(); err != nil {
		return fmt.Errorf("service scale: %w", err)
	}
	svc, ok := s.services[req.Name]
	switch {
	case !ok:
		return fmt.Errorf("service %s: %w", req.Name, ErrServiceNotFound)
	case svc.Deleted:
		return fmt.Errorf("service %s: %w", req.Name, ErrServiceDeleted)
	}
	if err := s.scaleService(svc, req.Replicas, req.Reason, req.At, l.Index); err != nil {
		return err
	}
	return svc.Copy()
}

// scaleService makes svc want n replicas, as a scale does: new replica
// jobs, or the newest stopped. It stamps ScaledAt when Replicas changes.
func (s *state) scaleService(svc *structs.Service, n int, why string, at time.Time, index uint64) error {
	wanted := s.wantedReplicas(svc)
	if n == svc.Replicas && len(wanted) == svc.Replicas {
		return nil
	}
	if add := n - len(wanted); add > 0 {
		if err := s.checkReplicaLimits(svc, add); err != nil {
			return fmt.Errorf("service %s: %w", svc.Name, err)
		}
		for range add {
			s.addReplica(svc, at, index)
		}
	}
	reason := withReason(fmt.Sprintf("service %s scaled to %s", svc.Name, replicasText(n)), why)
	for i := len(wanted) - 1; i >= n; i-- {
		s.cancel(wanted[i], reason, at, index)
	}
	if n != svc.Replicas {
		svc.ScaledAt = at
	}
	svc.Reason = cmp.Or(why, fmt.Sprintf("scaled %d→%d", svc.Replicas, n))
	svc.Replicas = n
	svc.ModifyIndex = index
	return nil
}

// applyServiceDelete marks a service deleted and stops every replica it
// wants, as a user's cancel stops a job; the service leaves the state
// once none of its replicas is queued or running (dropDeleted), at once
// if none was. A second delete changes nothing. It returns a copy of the
// service.
func (s *state) applyServiceDelete(l *raft.Log) any {
	var req structs.ServiceDeleteRequest
	decode(l, &req)
	if err := req.Validate(); err != nil {
		return fmt.Errorf("service delete: %w", err)
	}
	svc, ok := s.services[req.Name]
	if !ok {
		return fmt.Errorf("service %s: %w", req.Name, ErrServiceNotFound)
	}
	if svc.Deleted {
		return svc.Copy()
	}
	wanted := s.wantedReplicas(svc)
	svc.Deleted = true
	svc.Reason = withReason("deleted", req.Reason)
	svc.ModifyIndex = l.Index
	reason := withReason(fmt.Sprintf("service %s deleted", svc.Name), req.Reason)
	for i := len(wanted) - 1; i >= 0; i-- {
		s.cancel(wanted[i], reason, req.At, l.Index)
	}
	s.dropDeleted(svc)
	return svc.Copy()
}

// addReplica makes the service's next replica job, queued: the service's
// job on one node, its owner's, submitted at `at`. Its number is
// NextReplica, skipping any whose ID the state holds, so no replica takes
// the ID of another job.
func (s *state) addReplica(svc *structs.Service, at time.Time, index uint64) {
	id := structs.ReplicaJobID(svc.ID, svc.NextReplica)
	for s.jobs[id] != nil {
		svc.NextReplica++
		id = structs.ReplicaJobID(svc.ID, svc.NextReplica)
	}
	svc.NextReplica++
	spec := svc.Spec.Job.Copy()
	spec.Nodes = 1
	s.addJob(&structs.Job{
		ID:          id,
		Owner:       svc.Owner,
		AllowRoot:   svc.AllowRoot,
		Spec:        spec,
		State:       structs.JobQueued,
		SubmittedAt: at,
		Service:     svc.Name,
		CreateIndex: index,
		ModifyIndex: index,
	})
}

// checkReplicaLimits refuses n new replicas of a service that would pass
// its owner's or the cluster's queued-jobs limit: replicas are queued
// jobs like any other.
func (s *state) checkReplicaLimits(svc *structs.Service, n int) error {
	if n == 0 {
		return nil
	}
	return s.checkQueuedLimits(svc.Owner, n, fmt.Sprintf("service %s adds %s", svc.Name, replicasText(n)))
}

// wantedReplicas returns the replica jobs a service still wants (see
// wantsReplica), the state's own, by replica number, oldest first.
func (s *state) wantedReplicas(svc *structs.Service) []*structs.Job {
	type numbered struct {
		n int
		j *structs.Job
	}
	var rs []numbered
	for _, j := range s.serviceJobs[svc.Name] {
		if n, ok := replicaNumber(svc.ID, j.ID); ok && !j.State.Terminal() && !j.StopRequested {
			rs = append(rs, numbered{n, j})
		}
	}
	slices.SortFunc(rs, func(a, b numbered) int { return cmp.Compare(a.n, b.n) })
	jobs := make([]*structs.Job, len(rs))
	for i, r := range rs {
		jobs[i] = r.j
	}
	return jobs
}

// serviceOf returns the service j is a replica of, or nil: j is no
// replica, or its service has left the state (a later service of the
// same name has replicas of its own).
func (s *state) serviceOf(j *structs.Job) *structs.Service {
	if j.Service == "" {
		return nil
	}
	svc, ok := s.services[j.Service]
	if !ok {
		return nil
	}
	if _, ok := replicaNumber(svc.ID, j.ID); !ok {
		return nil
	}
	return svc
}

// wantsReplica reports whether j is a replica its service still wants:
// the service is not deleted, and j has not ended and is not being
// stopped. Such a job restarts whenever an attempt ends.
func (s *state) wantsReplica(j *structs.Job) bool {
	svc := s.serviceOf(j)
	return svc != nil && !svc.Deleted && !j.State.Terminal() && !j.StopRequested
}

// dropDeleted removes a deleted service from the state once none of its
// replicas is queued or running. Its ended replicas stay, as any ended
// job does, until the GC removes them.
func (s *state) dropDeleted(svc *structs.Service) {
	if !svc.Deleted || s.services[svc.Name] != svc {
		return
	}
	for _, j := range s.serviceJobs[svc.Name] {
		if _, ok := replicaNumber(svc.ID, j.ID); ok && !j.State.Terminal() {
			return
		}
	}
	delete(s.services, svc.Name)
}

// restartReplica puts a replica its service still wants back in the
// queue once an attempt is over, however the attempt (its allocation a)
// ended: restarts never run out. An attempt that ended within
// crashWindow of its start, or before it started, is a crash: each crash
// in a row waits longer before the next attempt (restartBackoff, through
// NotBefore), and an attempt that ran crashWindow or more ends the
// streak. A lost node or a failed GPU is not the replica's doing: it
// restarts at once, and its streak stays as it was.
func (s *state) restartReplica(j *structs.Job, a *structs.Allocation, at time.Time, index uint64) {
	s.requeue(j, index)
	what := failure(j, a)
	switch {
	case !a.StartedAt.IsZero() && a.FinishedAt.Sub(a.StartedAt) >= crashWindow:
		j.Crashes = 0
		j.Reason = "restarting: " + what
	case a.State == structs.AllocLost || a.GPUFault != "":
		j.Reason = "restarting: " + what
	default:
		j.Crashes++
		d := restartBackoff(j.Crashes)
		j.NotBefore = at.Add(d)
		if j.Crashes == 1 {
			j.Reason = fmt.Sprintf("restarting in %s: %s (it ran less than a minute)", d, what)
		} else {
			j.Reason = fmt.Sprintf("crash-looping: restarting in %s: %s (%d quick exits in a row)", d, what, j.Crashes)
		}
	}
}

// replicaNumber returns n when jobID is structs.ReplicaJobID(serviceID, n).
func replicaNumber(serviceID, jobID string) (int, bool) {
	rest, ok := strings.CutPrefix(jobID, serviceID+"-r")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	if err != nil || n < 0 || structs.ReplicaJobID(serviceID, n) != jobID {
		return 0, false
	}
	return n, true
}

// replicasText says how many replicas: "1 replica", "3 replicas".
func replicasText(n int) string {
	if n == 1 {
		return "1 replica"
	}
	return strconv.Itoa(n) + " replicas"
}

// withReason is what, with the caller's words, if any, after it.
func withReason(what, extra string) string {
	if extra == "" {
		return what
	}
	return what + ": " + extra
}
