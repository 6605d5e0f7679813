package fsm

import (
	"cmp"
	"maps"
	"slices"

	"github.com/skein-dev/skein/structs"
)

// Services returns copies of every service, by name: those being deleted
// too, until their last replica has stopped.
func (f *FSM) Services() []*structs.Service {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]*structs.Service, 0, len(f.st.services))
	for _, name := range slices.Sorted(maps.Keys(f.st.services)) {
		out = append(out, f.st.services[name].Copy())
	}
	return out
}

// Service returns a copy of the service with the given name.
func (f *FSM) Service(name string) (*structs.Service, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	svc, ok := f.st.services[name]
	return svc.Copy(), ok
}

// ServiceReplicas returns copies of the replica jobs of the service with
// the given name that the state holds, live and ended, by ID; none when
// there is no such service. Replicas of an earlier service of that name
// are not its. It reads the service's replicas, not every job.
func (f *FSM) ServiceReplicas(name string) []*structs.Job {
	f.mu.RLock()
	defer f.mu.RUnlock()
	svc, ok := f.st.services[name]
	if !ok {
		return nil
	}
	var jobs []*structs.Job
	for _, j := range f.st.serviceJobs[name] {
		if _, ok := replicaNumber(svc.ID, j.ID); ok {
			jobs = append(jobs, j.Copy())
		}
	}
	slices.SortFunc(jobs, func(a, b *structs.Job) int { return cmp.Compare(a.ID, b.ID) })
	return jobs
}
