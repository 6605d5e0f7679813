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
	if err := s.resolveJobAccount(svc.Owner, &svc.Spec.Job); err != nil {
		return fmt.Errorf("service %s: %w", svc.Name, err)
	}
	svc.NextReplica, svc.Deleted = 0, false
	svc.Version, svc.Rollout, svc.PrevSpec = 1, nil, nil
	svc.CreateIndex, svc.ModifyIndex = l.Index, l.Index
	s.services[svc.Name] = svc
	s.emitService(l.Index, structs.EventServiceRegistered, svc, svc.CreatedAt,
		withReason(fmt.Sprintf("%s of version 1", replicasText(svc.Replicas)), ownerText(svc.Owner)))
	for range svc.Replicas {
		s.addReplica(svc, svc.CreatedAt, l.Index)
	}
	return svc.Copy()
}

// liveService is the service name names, unless there is none or it is
// being deleted.
func (s *state) liveService(name string) (*structs.Service, error) {
	svc, ok := s.services[name]
	switch {
	case !ok:
		return nil, fmt.Errorf("service %s: %w", name, ErrServiceNotFound)
	case svc.Deleted:
		return nil, fmt.Errorf("service %s: %w", name, ErrServiceDeleted)
	}
	return svc, nil
}

// applyServiceScale sets how many replicas a service wants: new replica
// jobs are made, or the newest of those it wants (the highest replica
// numbers) are stopped as a user's cancel stops a job. It returns a copy
// of the service. A scale to what the service has already changes
// nothing; one that would pass the queued-jobs limits is refused, and so
// is one of an autoscaled service while a rollout runs or rolls back
// (only the leader's autoscaler scales such a service, and it pauses for
// rollouts: a decision it made before the update is stale).
func (s *state) applyServiceScale(l *raft.Log) any {
	var req structs.ServiceScaleRequest
	decode(l, &req)
	if err := req.Validate(); err != nil {
		return fmt.Errorf("service scale: %w", err)
	}
	svc, err := s.liveService(req.Name)
	if err != nil {
		return err
	}
	if svc.Autoscale != nil && svc.Rollout.Active() && req.Replicas != svc.Replicas {
		return fmt.Errorf("service %s: %w: a rollout to version %d is in progress", svc.Name, ErrAutoscalePaused, svc.Rollout.Version)
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
	add := n - len(wanted)
	if add > 0 {
		if err := s.checkReplicaLimits(svc, add); err != nil {
			return fmt.Errorf("service %s: %w", svc.Name, err)
		}
	}
	s.emitService(index, structs.EventServiceScaled, svc, at, withReason(fmt.Sprintf("%d→%d", svc.Replicas, n), why))
	for range add {
		s.addReplica(svc, at, index)
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
	s.emitService(l.Index, structs.EventServiceDeleted, svc, req.At,
		withReason(fmt.Sprintf("stopping %s", replicasText(len(wanted))), req.Reason))
	reason := withReason(fmt.Sprintf("service %s deleted", svc.Name), req.Reason)
	for i := len(wanted) - 1; i >= 0; i-- {
		s.cancel(wanted[i], reason, req.At, l.Index)
	}
	s.dropDeleted(svc)
	return svc.Copy()
}

// addReplica makes the service's next replica job, queued, and returns it: the service's
// job (of its current Version) on one node, its owner's, submitted at `at`. Its number is
// NextReplica, skipping any whose ID the state holds, so no replica takes
// the ID of another job.
func (s *state) addReplica(svc *structs.Service, at time.Time, index uint64) *structs.Job {
	id := structs.ReplicaJobID(svc.ID, svc.NextReplica)
	for s.jobs[id] != nil {
		svc.NextReplica++
		id = structs.ReplicaJobID(svc.ID, svc.NextReplica)
	}
	svc.NextReplica++
	spec := svc.Spec.Job.Copy()
	spec.Nodes = 1
	j := &structs.Job{
		ID:             id,
		Owner:          svc.Owner,
		AllowRoot:      svc.AllowRoot,
		Spec:           spec,
		State:          structs.JobQueued,
		SubmittedAt:    at,
		Service:        svc.Name,
		ServiceVersion: svc.Version,
		Number:         s.nextJobNumber(),
		CreateIndex:    index,
		ModifyIndex:    index,
	}
	s.addJob(j)
	s.emitJob(index, structs.EventJobSubmitted, j, at, submitReason(j))
	return j
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
	s.emitJob(index, structs.EventJobRestarted, j, at, j.Reason)
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

// ownerText names a service's owner for an event, "" when it has none.
func ownerText(owner string) string {
	if owner == "" {
		return ""
	}
	return "by " + owner
}

// withReason is what, with the caller's words, if any, after it.
func withReason(what, extra string) string {
	if extra == "" {
		return what
	}
	return what + ": " + extra
}

// applyServiceUpdate gives a service a new spec and starts a rollout to
// it: the spec is validated as a register's, Version goes up by one (past
// any version a rollback left behind, so no two specs share a number),
// and the spec it replaces is kept as PrevSpec, the one a rollback
// returns to. An update while a rollout runs or rolls back replaces that
// rollout: the new one starts from the latest spec (its From is the
// current Version), and replicas of every older version are replaced.
// No replica is made or stopped here: the leader's rollout steps do
// that (applyServiceRollout). It returns a copy of the service.
func (s *state) applyServiceUpdate(l *raft.Log) any {
	var req structs.ServiceUpdateRequest
	decode(l, &req)
	req.Normalize()
	if err := req.Validate(); err != nil {
		return fmt.Errorf("service update: %w", err)
	}
	svc, err := s.liveService(req.Name)
	if err != nil {
		return err
	}
	if err := s.resolveJobAccount(svc.Owner, &req.Spec.Job); err != nil {
		return fmt.Errorf("service %s: %w", svc.Name, err)
	}
	if svc.Autoscale != nil {
		if err := svc.Autoscale.ValidateFor(&req.Spec); err != nil {
			return fmt.Errorf("service update: %w", err)
		}
	}
	prev := svc.Spec.Copy()
	next := svc.Version
	if r := svc.Rollout; r != nil {
		next = max(next, r.Version, r.From)
	}
	next++
	svc.Rollout = &structs.Rollout{
		Version: next, From: svc.Version,
		MaxSurge: req.MaxSurge, MaxUnavailable: req.MaxUnavailable,
		State: structs.RolloutRunning, Reason: req.Reason, StartedAt: req.At,
	}
	svc.Spec, svc.PrevSpec, svc.Version = req.Spec.Copy(), &prev, next
	svc.Reason = withReason(fmt.Sprintf("updating to version %d", next), req.Reason)
	svc.ModifyIndex = l.Index
	s.emitService(l.Index, structs.EventServiceUpdated, svc, req.At,
		withReason(fmt.Sprintf("rolling out version %d over version %d", next, svc.Rollout.From), req.Reason))
	return svc.Copy()
}

// applyServiceRollout applies one step of a service's rollout (see
// structs.ServiceRolloutRequest); a step that makes or stops replicas is
// progress, stamped as the rollout's ProgressAt (the leader's At). It refuses, changing nothing, a step
// for a rollout that is not the active one at req.Version, a Stop that
// names anything but a wanted replica of an older version, an Add past
// the replicas the service wants or MaxSurge beyond them, a step that
// would leave fewer than Replicas-MaxUnavailable replicas, or stop an
// available one when no more than that are available, a Done while an
// older replica remains or the replicas are not Replicas, and a RollBack
// of a rollout already rolling back. It returns a copy of the service.
func (s *state) applyServiceRollout(l *raft.Log) any {
	var req structs.ServiceRolloutRequest
	decode(l, &req)
	if err := req.Validate(); err != nil {
		return fmt.Errorf("service rollout: %w", err)
	}
	svc, err := s.liveService(req.Name)
	if err != nil {
		return err
	}
	if !svc.Rollout.Active() || svc.Rollout.Version != req.Version {
		return fmt.Errorf("service %s: %w: no rollout to version %d runs", svc.Name, ErrRolloutStale, req.Version)
	}
	r := svc.Rollout
	wanted := s.wantedReplicas(svc)
	var older []*structs.Job
	for _, j := range wanted {
		if j.ServiceVersion != r.Version {
			older = append(older, j)
		}
	}
	switch {
	case req.RollBack:
		if r.State != structs.RolloutRunning || svc.PrevSpec == nil {
			return fmt.Errorf("service %s: %w: the rollout to version %d is already rolling back", svc.Name, ErrRolloutStale, r.Version)
		}
		svc.Spec, svc.PrevSpec = *svc.PrevSpec, nil
		svc.Version = r.From
		r.Version, r.From = r.From, r.Version
		r.State = structs.RolloutRollingBack
		r.Reason = structs.Clip(withReason("rolled back", req.Reason), structs.MaxServiceReasonLen)
		svc.Reason = fmt.Sprintf("rolling back to version %d", svc.Version)
		s.emitService(l.Index, structs.EventServiceRolledBack, svc, req.At,
			withReason(fmt.Sprintf("rolling back from version %d to %d", r.From, r.Version), req.Reason))
	case req.Done:
		switch {
		case len(older) > 0:
			return fmt.Errorf("service %s: %w: %s of older versions remain", svc.Name, ErrRolloutStale, replicasText(len(older)))
		case len(wanted) != svc.Replicas:
			return fmt.Errorf("service %s: %w: %s of version %d, %d wanted", svc.Name, ErrRolloutStale, replicasText(len(wanted)), r.Version, svc.Replicas)
		}
		if r.State == structs.RolloutRunning {
			r.State, r.Reason = structs.RolloutDone, withReason(fmt.Sprintf("every replica runs version %d", r.Version), r.Reason)
			s.emitService(l.Index, structs.EventServiceRolledOut, svc, req.At, r.Reason)
		} else {
			r.State = structs.RolloutRolledBack
			s.emitService(l.Index, structs.EventServiceRolledBack, svc, req.At,
				fmt.Sprintf("rolled back: every replica runs version %d", r.Version))
		}
		svc.PrevSpec = nil
		svc.Reason = fmt.Sprintf("version %d", svc.Version)
	default:
		if err := s.checkRolloutStep(svc, &req, wanted, older); err != nil {
			return fmt.Errorf("service %s: %w", svc.Name, err)
		}
		for range req.Add {
			s.addReplica(svc, req.At, l.Index)
		}
		reason := fmt.Sprintf("service %s: replaced by version %d", svc.Name, r.Version)
		for _, id := range req.Stop {
			s.cancel(s.jobs[id], reason, req.At, l.Index)
		}
		if req.At.After(r.ProgressAt) {
			r.ProgressAt = req.At
		}
	}
	svc.ModifyIndex = l.Index
	return svc.Copy()
}

// checkRolloutStep checks a step's Add and Stop against the state: the
// replicas the service wants (wanted) and those of them of an older
// version than the rollout's (older).
func (s *state) checkRolloutStep(svc *structs.Service, req *structs.ServiceRolloutRequest, wanted, older []*structs.Job) error {
	r := svc.Rollout
	if req.Add > 0 {
		if n := len(wanted) + req.Add; n > svc.Replicas+r.MaxSurge {
			return fmt.Errorf("%w: %s would pass %d wanted and a surge of %d", ErrRolloutStale, replicasText(n), svc.Replicas, r.MaxSurge)
		}
		if n := len(wanted) - len(older) + req.Add; n > svc.Replicas {
			return fmt.Errorf("%w: %s of version %d would pass the %d wanted", ErrRolloutStale, replicasText(n), r.Version, svc.Replicas)
		}
		if err := s.checkReplicaLimits(svc, req.Add); err != nil {
			return err
		}
	}
	available := 0
	for _, j := range wanted {
		if s.replicaAvailable(svc, j) {
			available++
		}
	}
	stopsAvailable := 0
	for i, id := range req.Stop {
		j := s.jobs[id]
		if j == nil || !slices.Contains(older, j) {
			return fmt.Errorf("%w: stop %s: not a replica of an older version the service wants", ErrRolloutStale, id)
		}
		if slices.Contains(req.Stop[:i], id) {
			return fmt.Errorf("%w: stop %s: named twice", ErrInvalidRequest, id)
		}
		if s.replicaAvailable(svc, j) {
			stopsAvailable++
		}
	}
	floor := svc.Replicas - r.MaxUnavailable
	if n := len(wanted) + req.Add - len(req.Stop); len(req.Stop) > 0 && n < floor {
		return fmt.Errorf("%w: %s would remain, fewer than %d wanted less %d unavailable", ErrRolloutStale, replicasText(n), svc.Replicas, r.MaxUnavailable)
	}
	if stopsAvailable > 0 && available-stopsAvailable < floor {
		return fmt.Errorf("%w: %d available would remain, fewer than %d wanted less %d unavailable",
			ErrRolloutStale, available-stopsAvailable, svc.Replicas, r.MaxUnavailable)
	}
	return nil
}

// replicaAvailable reports whether a replica serves: its allocation runs
// and is not being stopped, and it is healthy (or its service has no
// health check and its node reported none).
func (s *state) replicaAvailable(svc *structs.Service, j *structs.Job) bool {
	for _, a := range s.jobAllocs[j.ID] {
		if a.State != structs.AllocRunning || a.DesiredState == structs.DesiredStop {
			continue
		}
		if a.Health != nil {
			return a.Health.Healthy
		}
		return svc.Spec.Health == nil
	}
	return false
}
