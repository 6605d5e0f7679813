package sched

import (
	"reflect"
	"testing"
	"time"

	"github.com/skein-dev/skein/structs"
)

// drainFake is a state of jobs, their allocations and services.
type drainFake struct {
	jobs     map[string]*structs.Job
	allocs   map[string][]*structs.Allocation
	services map[string]*structs.Service
}

func (f *drainFake) NodeLiveAllocs(nodeID string) []*structs.Allocation {
	var out []*structs.Allocation
	for _, id := range []string{"web-r0", "web-r1", "ckpt", "plain", "gone"} {
		for _, a := range f.allocs[id] {
			if a.NodeID == nodeID && a.Live() {
				out = append(out, a)
			}
		}
	}
	return out
}
func (f *drainFake) Job(id string) (*structs.Job, bool)        { j, ok := f.jobs[id]; return j, ok }
func (f *drainFake) Allocs(id string) []*structs.Allocation    { return f.allocs[id] }
func (f *drainFake) Service(n string) (*structs.Service, bool) { s, ok := f.services[n]; return s, ok }
func (f *drainFake) add(j *structs.Job, a *structs.Allocation) {
	f.jobs[j.ID] = j
	f.allocs[j.ID] = append(f.allocs[j.ID], a)
}
func liveOn(job, node string) *structs.Allocation {
	return &structs.Allocation{ID: "a-" + job, JobID: job, NodeID: node, Attempt: 1, State: structs.AllocRunning, DesiredState: structs.DesiredRun}
}

var drainT0 = time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)

// drainState holds on n1 a replica of web (with a health check), a
// restartable job ckpt and a job plain that cannot run again.
func drainState() *drainFake {
	f := &drainFake{jobs: map[string]*structs.Job{}, allocs: map[string][]*structs.Allocation{}, services: map[string]*structs.Service{
		"web": {Name: "web", Replicas: 1, Spec: structs.ServiceSpec{Health: &structs.HealthCheck{Kind: structs.HealthHTTP, Path: "/"}}},
	}}
	f.add(&structs.Job{ID: "web-r0", Service: "web", State: structs.JobRunning, Attempts: 1}, liveOn("web-r0", "n1"))
	f.add(&structs.Job{ID: "ckpt", State: structs.JobRunning, Attempts: 1, Spec: structs.JobSpec{Restarts: 2}}, liveOn("ckpt", "n1"))
	f.add(&structs.Job{ID: "plain", State: structs.JobRunning, Attempts: 1}, liveOn("plain", "n1"))
	return f
}

func TestNextDrainStep(t *testing.T) {
	n := func(d structs.NodeDrain) *structs.Node {
		return &structs.Node{ID: "n1", Status: structs.NodeReady, Drain: &d}
	}
	cases := []struct {
		name  string
		setup func(f *drainFake)
		drain structs.NodeDrain
		want  structs.NodeDrainStepRequest
		ok    bool
	}{
		{"first step: replace the replica, evict the restartable job", nil, structs.NodeDrain{},
			structs.NodeDrainStepRequest{Replace: []string{"web-r0"}, Evict: []string{"ckpt"}}, true},
		{"replacement not healthy yet: nothing stops", func(f *drainFake) {
			f.jobs["web-r0"].ReplacedBy = "web-r1"
			a := liveOn("web-r1", "n2")
			a.Health = &structs.AllocHealth{Healthy: false}
			f.add(&structs.Job{ID: "web-r1", Service: "web", State: structs.JobRunning, Attempts: 1}, a)
			f.jobs["ckpt"].Evicted = "evicted"
			f.allocs["ckpt"][0].DesiredState = structs.DesiredStop
		}, structs.NodeDrain{}, structs.NodeDrainStepRequest{}, false},
		{"replacement healthy: the replica stops", func(f *drainFake) {
			f.jobs["web-r0"].ReplacedBy = "web-r1"
			a := liveOn("web-r1", "n2")
			a.Health = &structs.AllocHealth{Healthy: true}
			f.add(&structs.Job{ID: "web-r1", Service: "web", State: structs.JobRunning, Attempts: 1}, a)
			f.jobs["ckpt"].Evicted = "evicted"
			f.allocs["ckpt"][0].DesiredState = structs.DesiredStop
		}, structs.NodeDrain{}, structs.NodeDrainStepRequest{Stop: []string{"web-r0"}}, true},
		{"replacement ended: another is made", func(f *drainFake) {
			f.jobs["web-r0"].ReplacedBy = "web-r1"
			f.jobs["web-r1"] = &structs.Job{ID: "web-r1", Service: "web", State: structs.JobCancelled}
		}, structs.NodeDrain{}, structs.NodeDrainStepRequest{Replace: []string{"web-r0"}, Evict: []string{"ckpt"}}, true},
		{"past the deadline: everything stops", nil, structs.NodeDrain{Deadline: drainT0.Add(-time.Second)},
			structs.NodeDrainStepRequest{Stop: []string{"web-r0"}, Evict: []string{"ckpt"}, Kill: []string{"plain"}}, true},
		{"before the deadline: plain runs out", nil, structs.NodeDrain{Deadline: drainT0.Add(time.Hour)},
			structs.NodeDrainStepRequest{Replace: []string{"web-r0"}, Evict: []string{"ckpt"}}, true},
		{"forced", nil, structs.NodeDrain{Force: true},
			structs.NodeDrainStepRequest{Stop: []string{"web-r0"}, Evict: []string{"ckpt"}, Kill: []string{"plain"}}, true},
		{"a job out of restarts is not evicted", func(f *drainFake) {
			f.jobs["ckpt"].Attempts = 3
			f.allocs["ckpt"][0].Attempt = 3
			f.jobs["web-r0"].ReplacedBy = "web-r9"
			f.jobs["web-r9"] = &structs.Job{ID: "web-r9", Service: "web", State: structs.JobQueued}
		}, structs.NodeDrain{}, structs.NodeDrainStepRequest{}, false},
		{"nothing left: done", func(f *drainFake) {
			for _, as := range f.allocs {
				for _, a := range as {
					a.State = structs.AllocSucceeded
				}
			}
		}, structs.NodeDrain{}, structs.NodeDrainStepRequest{Done: true}, true},
		{"nothing left and drained: no step", func(f *drainFake) {
			for _, as := range f.allocs {
				for _, a := range as {
					a.State = structs.AllocSucceeded
				}
			}
		}, structs.NodeDrain{DrainedAt: drainT0}, structs.NodeDrainStepRequest{}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := drainState()
			if c.setup != nil {
				c.setup(f)
			}
			got, ok := NextDrainStep(f, n(c.drain), drainT0)
			c.want.NodeID, c.want.At = "n1", drainT0
			if ok != c.ok || (ok && !reflect.DeepEqual(got, c.want)) {
				t.Fatalf("got %+v, %v; want %+v, %v", got, ok, c.want, c.ok)
			}
		})
	}
	if _, ok := NextDrainStep(drainState(), &structs.Node{ID: "n1"}, drainT0); ok {
		t.Fatal("a node that does not drain has a drain step")
	}
}
