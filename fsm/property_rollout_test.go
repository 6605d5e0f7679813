package fsm

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/skein-dev/skein/structs"
)

// TestFSM_RolloutsKeepEveryInvariant drives services through updates and
// random rollout steps, stale and current, among placements, updates,
// lost nodes, preemptions, scales and deletes, and checks after every
// entry the invariants of check and checkRollouts; each step is checked
// as it applies (rolloutStep): refused, it changes nothing; applied, it
// kept its rollout's limits.
func TestFSM_RolloutsKeepEveryInvariant(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		m := newModel(rt)
		steps := rapid.IntRange(10, 80).Draw(rt, "steps")
		ops := []func(){m.register, m.submit, m.plan, m.plan, m.plan, m.plan, m.update, m.update, m.update, m.update,
			m.nodeDown, m.preempt, m.gc, m.registerService, m.registerService, m.scaleService, m.deleteService,
			m.healthReport, m.healthReport, m.updateService, m.updateService, m.updateService,
			m.rolloutStep, m.rolloutStep, m.rolloutStep, m.rolloutStep, m.rolloutStep, m.rolloutStep}
		for range steps {
			ops[rapid.IntRange(0, len(ops)-1).Draw(rt, "op")]()
			m.check()
			m.checkRollouts()
		}
	})
}

// updateService updates a service that may be gone or being deleted
// with a new env and random limits.
func (m *model) updateService() {
	name := rapid.SampledFrom(serviceNames).Draw(m.rt, "service")
	before, existed := m.h.f.Service(name)
	sp := structs.ServiceSpec{Job: spec(1, rapid.IntRange(0, 2).Draw(m.rt, "gpus"))}
	sp.Job.Env = map[string]string{"V": fmt.Sprint(m.h.idx)}
	req := structs.ServiceUpdateRequest{Name: name, Spec: sp, At: m.h.at(),
		MaxSurge: rapid.IntRange(0, 2).Draw(m.rt, "surge"), MaxUnavailable: rapid.IntRange(0, 2).Draw(m.rt, "unavailable")}
	switch resp := m.h.apply(structs.ServiceUpdateType, req).(type) {
	case error:
		if existed && !before.Deleted {
			m.rt.Fatalf("update of %s refused: %v", name, resp)
		}
	case *structs.Service:
		last := before.Version
		if before.Rollout != nil {
			last = max(last, before.Rollout.Version, before.Rollout.From)
		}
		if resp.Version != last+1 || resp.Rollout.From != before.Version || resp.PrevSpec == nil {
			m.rt.Fatalf("update of %s (version %d, rollout %+v) gave version %d, rollout %+v", name, before.Version, before.Rollout, resp.Version, resp.Rollout)
		}
	}
}

// rolloutStep applies a random step to a service's rollout: of its
// version or another, adding, stopping some of its replicas (or a job
// that is none), rolling back or ending it.
func (m *model) rolloutStep() {
	// Mostly a service whose rollout runs, when there is one.
	var running, all []*structs.Service
	for _, svc := range m.h.f.Services() {
		all = append(all, svc)
		if svc.Rollout.Active() {
			running = append(running, svc)
		}
	}
	if len(running) > 0 && rapid.IntRange(0, 4).Draw(m.rt, "a running rollout") > 0 {
		all = running
	}
	if len(all) == 0 {
		return
	}
	svc := rapid.SampledFrom(all).Draw(m.rt, "service")
	name := svc.Name
	version := rapid.IntRange(1, 4).Draw(m.rt, "version")
	if svc.Rollout != nil && rapid.IntRange(0, 7).Draw(m.rt, "current") > 0 {
		version = svc.Rollout.Version
	}
	req := structs.ServiceRolloutRequest{Name: name, Version: version, At: m.h.at()}
	switch rapid.IntRange(0, 9).Draw(m.rt, "kind") {
	case 0:
		req.RollBack, req.Reason = true, "replica r0 failed"
	case 1:
		req.Done = true
	default:
		req.Add = rapid.IntRange(0, 2).Draw(m.rt, "add")
		if req.Add == 0 && rapid.Bool().Draw(m.rt, "add one") {
			req.Add = 1
		}
		for _, id := range replicaIDs(m.h.f, name) {
			if rapid.IntRange(0, 2).Draw(m.rt, "stop "+id) == 0 {
				req.Stop = append(req.Stop, id)
			}
		}
		if rapid.IntRange(0, 9).Draw(m.rt, "stop a stranger") == 0 {
			req.Stop = append(req.Stop, "j-none")
		}
	}
	wantedBefore := map[string]*structs.Job{}
	for _, j := range m.h.f.ServiceReplicas(name) {
		if !j.State.Terminal() && !j.StopRequested {
			wantedBefore[j.ID] = j
		}
	}
	hash := m.h.f.Hash()
	err := m.h.applyErr(structs.ServiceRolloutType, req)
	m.learnReplicas(name)
	if err != nil {
		if m.h.f.Hash() != hash {
			m.rt.Fatalf("refused step %+v changed the state: %v", req, err)
		}
		if !errors.Is(err, ErrRolloutStale) && !errors.Is(err, ErrServiceDeleted) && !errors.Is(err, ErrLimit) && !errors.Is(err, ErrInvalidRequest) {
			var fe *structs.FieldError
			if !errors.As(err, &fe) {
				m.rt.Fatalf("step %+v refused oddly: %v", req, err)
			}
		}
		return
	}
	r := svc.Rollout
	if !r.Active() || r.Version != req.Version {
		m.rt.Fatalf("step %+v applied to rollout %+v", req, r)
	}
	wanted := 0
	for _, j := range m.h.f.ServiceReplicas(name) {
		if !j.State.Terminal() && !j.StopRequested {
			wanted++
		}
	}
	for _, id := range req.Stop {
		j, ok := wantedBefore[id]
		if !ok || j.ServiceVersion == r.Version {
			m.rt.Fatalf("step %+v stopped %s, no wanted replica of an older version", req, id)
		}
	}
	switch {
	case req.Add > 0 && wanted > svc.Replicas+r.MaxSurge:
		m.rt.Fatalf("step %+v left %d wanted, more than %d and a surge of %d", req, wanted, svc.Replicas, r.MaxSurge)
	case len(req.Stop) > 0 && wanted < svc.Replicas-r.MaxUnavailable:
		m.rt.Fatalf("step %+v left %d wanted, fewer than %d less %d", req, wanted, svc.Replicas, r.MaxUnavailable)
	case req.Done && wanted != svc.Replicas:
		m.rt.Fatalf("done with %d wanted of %d", wanted, svc.Replicas)
	}
}

// checkRollouts asserts what versions keep true: a service without an
// active rollout wants only replicas of its version; one with an active
// rollout is at the rollout's version, and keeps the previous spec while
// it may still roll back; no replica has a version the service never had.
func (m *model) checkRollouts() {
	f := m.h.f
	for _, svc := range f.Services() {
		r := svc.Rollout
		last := svc.Version
		if r != nil {
			last = max(last, r.From, r.Version)
		}
		for _, j := range f.ServiceReplicas(svc.Name) {
			wanted := !j.State.Terminal() && !j.StopRequested
			switch {
			case j.ServiceVersion < 1 || j.ServiceVersion > last:
				m.rt.Fatalf("replica %s of version %d; service %s is at %d (rollout %+v)", j.ID, j.ServiceVersion, svc.Name, svc.Version, r)
			case wanted && !svc.Deleted && !r.Active() && j.ServiceVersion != svc.Version:
				m.rt.Fatalf("replica %s of version %d wanted by service %s at version %d, no rollout running (%+v)", j.ID, j.ServiceVersion, svc.Name, svc.Version, r)
			}
		}
		switch {
		case r.Active() && r.Version != svc.Version:
			m.rt.Fatalf("service %s at version %d runs rollout %+v", svc.Name, svc.Version, r)
		case (r != nil && r.State == structs.RolloutRunning) != (svc.PrevSpec != nil):
			m.rt.Fatalf("service %s: rollout %+v, previous spec kept: %v", svc.Name, r, svc.PrevSpec != nil)
		case r != nil && !slices.Contains([]string{structs.RolloutRunning, structs.RolloutDone, structs.RolloutRollingBack, structs.RolloutRolledBack}, r.State):
			m.rt.Fatalf("service %s: rollout state %q", svc.Name, r.State)
		}
	}
}
