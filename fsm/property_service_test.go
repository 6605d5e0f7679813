package fsm

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/skein-dev/skein/structs"
)

// TestFSM_ServicesKeepEveryInvariant drives the FSM as the other property
// tests do (placements, updates, lost nodes, GPU faults, cancels, plan
// cancels and preemptions, GC, limits) with services registered, scaled
// and deleted and replicas' health reported in the mix, and checks after
// every entry their invariants (check, with checkServices, and
// checkPreemptions). The other property tests keep their own lists of
// operations, so the failures they recorded still replay as they were.
func TestFSM_ServicesKeepEveryInvariant(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		m := newModel(rt)
		steps := rapid.IntRange(10, 80).Draw(rt, "steps")
		ops := []func(){m.register, m.submit, m.submit, m.plan, m.plan, m.plan, m.plan,
			m.update, m.update, m.update, m.update, m.cancel, m.nodeDown, m.gpuHealth, m.gc, m.limits, m.preempt,
			m.registerService, m.registerService, m.scaleService, m.scaleService, m.deleteService, m.healthReport, m.healthReport}
		for range steps {
			ops[rapid.IntRange(0, len(ops)-1).Draw(rt, "op")]()
			m.check()
			m.checkPreemptions()
		}
	})
}

// serviceNames are the names the model's services take: few, so a name
// is often in use, being deleted, or free again.
var serviceNames = []string{"llama", "embed"}

// registerService registers a service of a few replicas under a random
// name and owner. Only a name in use or a limit may refuse it.
func (m *model) registerService() {
	name := rapid.SampledFrom(serviceNames).Draw(m.rt, "service")
	svc := structs.Service{
		ID: m.id("s"), Name: name, Owner: rapid.SampledFrom(owners).Draw(m.rt, "owner"),
		Replicas: rapid.IntRange(0, 3).Draw(m.rt, "replicas"), CreatedAt: m.h.at(),
		Spec: structs.ServiceSpec{Job: spec(1, rapid.IntRange(0, 2).Draw(m.rt, "gpus"))},
	}
	svc.Spec.Job.Preemptible = rapid.Bool().Draw(m.rt, "preemptible")
	svc.Spec.Job.Priority = rapid.IntRange(0, 2).Draw(m.rt, "priority")
	_, inUse := m.h.f.Service(name)
	switch resp := m.h.apply(structs.ServiceRegisterType, structs.ServiceRegisterRequest{Service: svc}).(type) {
	case error:
		if !(inUse && errors.Is(resp, ErrServiceExists)) && !errors.Is(resp, ErrLimit) {
			m.rt.Fatalf("register of service %s refused: %v", name, resp)
		}
	default:
		if inUse {
			m.rt.Fatalf("service %s registered while the name was in use", name)
		}
	}
	m.learnReplicas(name)
}

// scaleService scales a service that may be gone or being deleted.
func (m *model) scaleService() {
	name := rapid.SampledFrom(serviceNames).Draw(m.rt, "service")
	n := rapid.IntRange(0, 4).Draw(m.rt, "replicas")
	err, _ := m.h.scaleReq(name, n).(error)
	svc, ok := m.h.f.Service(name)
	switch {
	case err == nil && (!ok || svc.Replicas != n):
		m.rt.Fatalf("scale of %s to %d: service %+v", name, n, svc)
	case err != nil && !errors.Is(err, ErrServiceNotFound) && !errors.Is(err, ErrServiceDeleted) && !errors.Is(err, ErrLimit):
		m.rt.Fatalf("scale of %s to %d refused: %v", name, n, err)
	}
	m.learnReplicas(name)
}

// deleteService deletes a service that may be gone or being deleted.
func (m *model) deleteService() {
	name := rapid.SampledFrom(serviceNames).Draw(m.rt, "service")
	_, existed := m.h.f.Service(name)
	err, _ := m.h.apply(structs.ServiceDeleteType, structs.ServiceDeleteRequest{Name: name, At: m.h.at()}).(error)
	if existed == (err != nil) {
		m.rt.Fatalf("delete of %s (there: %v): %v", name, existed, err)
	}
}

// healthReport reports a random health for a random allocation of the
// model's jobs, as a running report: it may start a pending allocation,
// and is kept only for a running replica's.
func (m *model) healthReport() {
	var allocs []*structs.Allocation
	for _, id := range m.jobs {
		allocs = append(allocs, m.h.f.Allocs(id)...)
	}
	if len(allocs) == 0 {
		return
	}
	a := rapid.SampledFrom(allocs).Draw(m.rt, "alloc")
	h := structs.AllocHealth{Healthy: rapid.Bool().Draw(m.rt, "healthy"), Reason: rapid.SampledFrom([]string{"", "GET /health: 503"}).Draw(m.rt, "why"), At: m.h.at()}
	_ = m.h.applyErr(structs.AllocUpdateType, structs.AllocUpdateRequest{NodeID: a.NodeID, Updates: []structs.AllocUpdate{
		{AllocID: a.ID, State: structs.AllocRunning, At: m.h.at(), Health: &h},
	}})
}

// scaleReq applies a ServiceScale entry without a reason.
func (h *harness) scaleReq(name string, n int) any {
	return h.apply(structs.ServiceScaleType, structs.ServiceScaleRequest{Name: name, Replicas: n, At: h.at()})
}

// learnReplicas adds the replica jobs of a service the model does not know
// yet to its jobs, so plans, updates, cancels and the GC reach them.
func (m *model) learnReplicas(name string) {
	for _, j := range m.h.f.ServiceReplicas(name) {
		if !slices.Contains(m.jobs, j.ID) {
			m.jobs = append(m.jobs, j.ID)
		}
	}
}

// checkServices asserts what services keep true after every entry: a
// service that is not deleted wants exactly Replicas replicas (but while
// a rollout replaces them: see checkRollouts), each
// queued or running on one node, its owner's; a deleted one wants none
// and stays only while one of its replicas is queued or running; every
// replica that has not ended belongs to a service in the state; only a
// running replica's allocation has a health.
func (m *model) checkServices() {
	f := m.h.f
	for _, svc := range f.Services() {
		wanted, live := 0, 0
		for _, j := range f.ServiceReplicas(svc.Name) {
			n, ok := replicaNumber(svc.ID, j.ID)
			switch {
			case !ok || n >= svc.NextReplica || j.Service != svc.Name:
				m.rt.Fatalf("replica %s of service %s (%s, next %d) is not its", j.ID, svc.Name, svc.ID, svc.NextReplica)
			case j.Spec.Nodes != 1 || j.Owner != svc.Owner:
				m.rt.Fatalf("replica %s runs on %d nodes as %q, service %s is %q's", j.ID, j.Spec.Nodes, j.Owner, svc.Name, svc.Owner)
			}
			if !j.State.Terminal() {
				live++
				if !j.StopRequested {
					wanted++
				}
			}
		}
		switch {
		case !svc.Deleted && !svc.Rollout.Active() && wanted != svc.Replicas:
			m.rt.Fatalf("service %s wants %d replicas, %d are wanted", svc.Name, svc.Replicas, wanted)
		case svc.Deleted && wanted != 0:
			m.rt.Fatalf("deleted service %s still wants %d replicas", svc.Name, wanted)
		case svc.Deleted && live == 0:
			m.rt.Fatalf("deleted service %s stays with no replica running", svc.Name)
		}
	}
	for _, j := range f.Jobs() {
		if j.Service != "" && !j.State.Terminal() {
			svc, ok := f.Service(j.Service)
			if !ok || !strings.HasPrefix(j.ID, svc.ID+"-r") {
				m.rt.Fatalf("replica %s is %s, but its service %s is gone", j.ID, j.State, j.Service)
			}
		}
		for _, a := range f.Allocs(j.ID) {
			if a.Health != nil && (a.State != structs.AllocRunning || j.Service == "") {
				m.rt.Fatalf("allocation %s (%s) of job %s (service %q) has a health", a.ID, a.State, j.ID, j.Service)
			}
		}
	}
}
