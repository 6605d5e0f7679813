package sched

import (
	"fmt"
	"time"
	"unicode/utf8"

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
// failed, which rolls the rollout back. How long a replica may stay
// unhealthy, and a rollout go without progress, are the service spec's
// (ServiceSpec.UnhealthyTimeout, ProgressDeadline).
type RolloutPolicy struct {
	// Crashes is how many quick exits in a row (Job.Crashes) make a
	// replica crash-looping.
	Crashes int
}

// DefaultRolloutPolicy is the policy of the leader's rollouts.
var DefaultRolloutPolicy = RolloutPolicy{Crashes: 3}

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
//     the spec's UnhealthyTimeout after its grace), saying which and
//     why, or when the rollout has made no progress for the spec's
//     ProgressDeadline (stalled), saying which replica holds it up;
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
				step.RollBack, step.Reason = true, clipReason(why)
				return step, true
			}
		}
		if why := stalled(svc, current, now); why != "" {
			step.RollBack, step.Reason = true, clipReason(why)
			return step, true
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
// it has been unhealthy for the spec's UnhealthyTimeout past its check's
// grace.
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
	since := a.Health.At
	if end := a.StartedAt.Add(grace(svc)); end.After(since) {
		since = end
	}
	if d := now.Sub(since); d >= svc.Spec.RolloutUnhealthyTimeout() {
		return fmt.Sprintf("replica %s of version %d unhealthy for %s: %s", name, rr.job.ServiceVersion, d.Round(time.Second), a.Health.Reason)
	}
	return ""
}

// stalled says why a running rollout has made no progress for its spec's
// ProgressDeadline, "" when it has made some since. Progress is the
// rollout's start, its latest step that made or stopped replicas
// (Rollout.ProgressAt), and each replica of the new version running to
// the end of its health grace (a replica loading its model is no stall;
// one unhealthy past it is) or becoming available. The reason names the
// first new replica not available and what holds it: for one not placed,
// the scheduler's reason it waits (Job.Reason).
func stalled(svc *structs.Service, current []rolloutReplica, now time.Time) string {
	r := svc.Rollout
	last := r.StartedAt
	if r.ProgressAt.After(last) {
		last = r.ProgressAt
	}
	var stuck *rolloutReplica
	for i, rr := range current {
		if a := rr.live; a != nil && a.State == structs.AllocRunning {
			if end := a.StartedAt.Add(grace(svc)); end.After(last) {
				last = end
			}
		}
		if rr.available(svc) {
			if at := availableAt(rr.live); at.After(last) {
				last = at
			}
		} else if stuck == nil {
			stuck = &current[i]
		}
	}
	deadline := svc.Spec.RolloutProgressDeadline()
	if now.Sub(last) < deadline {
		return ""
	}
	why := fmt.Sprintf("version %d made no progress in %s", r.Version, deadline)
	if stuck == nil {
		return why
	}
	return why + ": replica " + replicaName(svc, stuck.job) + " " + holdUp(*stuck)
}

// holdUp says what keeps a replica from being available: "not placed:
// WHY", "placed, not started: WHY" or "not healthy: WHY".
func holdUp(rr rolloutReplica) string {
	a := rr.live
	switch {
	case a == nil:
		return withWhy("not placed", rr.job.Reason)
	case a.State != structs.AllocRunning:
		return withWhy("placed, not started", a.Reason)
	case a.Health != nil:
		return withWhy("not healthy", a.Health.Reason)
	}
	return "not healthy"
}

// withWhy is what, followed by why when there is one.
func withWhy(what, why string) string {
	if why == "" {
		return what
	}
	return what + ": " + why
}

// availableAt is when an available replica's allocation became so: when
// its node found it healthy, or, without a report, when it started.
func availableAt(a *structs.Allocation) time.Time {
	if a.Health != nil {
		return a.Health.At
	}
	return a.StartedAt
}

// clipReason cuts a rollback's reason to what a step may carry
// (structs.MaxServiceReasonLen bytes), at a character's start: it quotes
// the scheduler's and the nodes' words, which may be longer.
func clipReason(s string) string {
	n := structs.MaxServiceReasonLen
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// grace is the health grace of svc's replicas: 0 without a check.
func grace(svc *structs.Service) time.Duration {
	if h := svc.Spec.Health; h != nil {
		return time.Duration(h.Grace)
	}
	return 0
}

// replicaName is a replica's name within its service: "r5".
func replicaName(svc *structs.Service, j *structs.Job) string {
	if len(j.ID) > len(svc.ID)+1 && j.ID[:len(svc.ID)+1] == svc.ID+"-" {
		return j.ID[len(svc.ID)+1:]
	}
	return j.ID
}
