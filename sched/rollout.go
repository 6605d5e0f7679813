package sched

import (
	"fmt"
	"time"

	"github.com/skein-dev/skein/structs"
)

// RolloutState is what NextRolloutStep reads of the cluster state (the
// FSM's queries).
type RolloutState interface {
	// ServiceReplicas returns a service's replica jobs, live and ended.
	ServiceReplicas(name string) []*structs.Job
	// Allocs returns a job's allocations, live and ended.
	Allocs(jobID string) []*structs.Allocation
}

// RolloutPolicy says when a replica of the version being rolled out has
// failed, which rolls the rollout back.
type RolloutPolicy struct {
	// Crashes is how many quick exits in a row (Job.Crashes) make a
	// replica crash-looping.
	Crashes int
	// Unhealthy is how long a replica may stay unhealthy after its
	// health check's grace.
	Unhealthy time.Duration
}

// DefaultRolloutPolicy is the policy of the leader's rollouts.
var DefaultRolloutPolicy = RolloutPolicy{Crashes: 3, Unhealthy: 30 * time.Second}

// rolloutReplica is a replica the service wants, as a rollout sees it.
type rolloutReplica struct {
	job  *structs.Job
	live *structs.Allocation // its live allocation, nil when it has none
	last *structs.Allocation // its latest ended allocation, nil when none
}

// available reports whether the replica serves: its allocation runs and
// is not being stopped, and it is healthy (or no check judges it).
func (r rolloutReplica) available(svc *structs.Service) bool {
	a := r.live
	if a == nil || a.State != structs.AllocRunning || a.DesiredState == structs.DesiredStop {
		return false
	}
	if a.Health != nil {
		return a.Health.Healthy
	}
	return svc.Spec.Health == nil
}

// NextRolloutStep decides the next step of svc's rollout, if it has an
// active one and a step is due; ok is false when there is nothing to do
// now (the state must change first). The step is one of, in order:
//   - while the rollout runs, a rollback when a replica of the new
//     version has failed (crash-looping, or unhealthy for longer than
//     the policy allows after its grace), saying which and why;
//   - Done, when every replica the service wants is of the rollout's
//     version and available (running, healthy);
//   - else Add and Stop: up to MaxSurge replicas of the version beyond
//     Replicas are made (never more of it than Replicas), and replicas of
//     older versions stop, unavailable ones first, as long as at least
//     Replicas-MaxUnavailable replicas remain and as many available ones.
//     So each new replica is healthy before the next old one drains.
//
// A rollback is driven by the same steps: the rollout's version is then
// the one it returned to, and the failed replicas are the older ones.
// The state re-checks each step when it applies it.
func NextRolloutStep(st RolloutState, svc *structs.Service, now time.Time, p RolloutPolicy) (structs.ServiceRolloutRequest, bool) {
	r := svc.Rollout
	if svc.Deleted || !r.Active() {
		return structs.ServiceRolloutRequest{}, false
	}
	step := structs.ServiceRolloutRequest{Name: svc.Name, Version: r.Version, At: now}
	var current, older []rolloutReplica
	for _, j := range st.ServiceReplicas(svc.Name) {
		if j.State.Terminal() || j.StopRequested {
			continue
		}
		rr := rolloutReplica{job: j}
		for _, a := range st.Allocs(j.ID) {
			switch {
			case a.Live():
				rr.live = a
			case rr.last == nil || a.CreateIndex > rr.last.CreateIndex:
				rr.last = a
			}
		}
		if j.ServiceVersion == r.Version {
			current = append(current, rr)
		} else {
			older = append(older, rr)
		}
	}
	if r.State == structs.RolloutRunning {
		for _, rr := range current {
			if why := failed(svc, rr, now, p); why != "" {
				step.RollBack, step.Reason = true, why
				return step, true
			}
		}
	}
	availCurrent, availOlder := 0, 0
	for _, rr := range current {
		if rr.available(svc) {
			availCurrent++
		}
	}
	for _, rr := range older {
		if rr.available(svc) {
			availOlder++
		}
	}
	if len(older) == 0 && len(current) == svc.Replicas && availCurrent == len(current) {
		step.Done = true
		return step, true
	}

	total := len(current) + len(older)
	step.Add = max(0, min(svc.Replicas+r.MaxSurge-total, svc.Replicas-len(current)))
	floor := svc.Replicas - r.MaxUnavailable
	excess := total - floor                             // how many may stop at all
	spare := availCurrent + availOlder - floor          // how many available ones may stop
	for _, wantAvailable := range []bool{false, true} { // the unavailable first
		for _, rr := range older {
			if excess <= 0 || rr.available(svc) != wantAvailable || wantAvailable && spare <= 0 {
				continue
			}
			step.Stop = append(step.Stop, rr.job.ID)
			excess--
			if wantAvailable {
				spare--
			}
		}
	}
	if step.Add == 0 && len(step.Stop) == 0 {
		return structs.ServiceRolloutRequest{}, false
	}
	return step, true
}

// failed says why a replica of the version being rolled out has failed,
// "" when it has not: it crash-loops (p.Crashes quick exits in a row), or
// it has been unhealthy for p.Unhealthy past its check's grace.
func failed(svc *structs.Service, rr rolloutReplica, now time.Time, p RolloutPolicy) string {
	name := replicaName(svc, rr.job)
	if rr.job.Crashes >= p.Crashes {
		what := "its attempts end at once"
		if a := rr.last; a != nil {
			what = a.Reason
			if what == "" {
				what = fmt.Sprintf("exited with code %d", a.ExitCode)
			}
		}
		return fmt.Sprintf("replica %s of version %d crash-looping: %s", name, rr.job.ServiceVersion, what)
	}
	a := rr.live
	if a == nil || a.State != structs.AllocRunning || a.Health == nil || a.Health.Healthy {
		return ""
	}
	var grace time.Duration
	if h := svc.Spec.Health; h != nil {
		grace = time.Duration(h.Grace)
	}
	since := a.Health.At
	if end := a.StartedAt.Add(grace); end.After(since) {
		since = end
	}
	if d := now.Sub(since); d >= p.Unhealthy {
		return fmt.Sprintf("replica %s of version %d unhealthy for %s: %s", name, rr.job.ServiceVersion, d.Round(time.Second), a.Health.Reason)
	}
	return ""
}

// replicaName is a replica's name within its service: "r5".
func replicaName(svc *structs.Service, j *structs.Job) string {
	if len(j.ID) > len(svc.ID)+1 && j.ID[:len(svc.ID)+1] == svc.ID+"-" {
		return j.ID[len(svc.ID)+1:]
	}
	return j.ID
}
