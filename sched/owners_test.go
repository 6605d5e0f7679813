package sched

import (
	"testing"

	"github.com/skein-dev/skein/structs"
)

// owned sets a job's owner.
func owned(j *structs.Job, owner string) *structs.Job {
	j.Owner = owner
	return j
}

func TestDecide_KeepsOwnersWithinTheirGPULimits(t *testing.T) {
	cases := []struct {
		name   string
		limits map[string]int
		inUse  map[string]int
		queued []*structs.Job
		placed []string
		reason map[string]string
	}{
		{
			name:   "jobs fill the limit in queue order, the next waits",
			limits: map[string]int{"alice": 4},
			inUse:  map[string]int{"alice": 1},
			queued: []*structs.Job{owned(job("a1", 2), "alice"), owned(job("a2", 2), "alice"), owned(job("a3", 1), "alice")},
			placed: []string{"a1", "a3"},
			reason: map[string]string{"a2": "waiting: alice's GPU limit (4) is in use"},
		},
		{
			name:   "another owner is not held back",
			limits: map[string]int{"alice": 2},
			inUse:  map[string]int{"alice": 2},
			queued: []*structs.Job{owned(job("a1", 1), "alice"), owned(job("b1", 4), "bob")},
			placed: []string{"b1"},
			reason: map[string]string{"a1": "waiting: alice's GPU limit (2) is in use"},
		},
		{
			name:   "a gang counts every rank",
			limits: map[string]int{"alice": 6},
			queued: []*structs.Job{owned(job("g", 4, gang(2)), "alice")},
			reason: map[string]string{"g": "waiting: alice's GPU limit (6) is less than the 8 GPUs the job needs"},
		},
		{
			name:   "a job without GPUs always may run",
			limits: map[string]int{"alice": 0},
			queued: []*structs.Job{owned(job("cpu", 0), "alice")},
			placed: []string{"cpu"},
		},
		{
			name:   "the owner of jobs from before ACLs has limits too",
			limits: map[string]int{"": 1},
			queued: []*structs.Job{job("x", 1), job("y", 1)},
			placed: []string{"x"},
			reason: map[string]string{"y": "waiting: the GPU limit (1) of jobs without an owner is in use"},
		},
		{
			name:   "a limit lowered below what runs places nothing more",
			limits: map[string]int{"alice": 2},
			inUse:  map[string]int{"alice": 5},
			queued: []*structs.Job{owned(job("a1", 1), "alice")},
			reason: map[string]string{"a1": "waiting: alice's GPU limit (2) is in use"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := fakeView{queued: tc.queued, gpuLimits: tc.limits, gpusInUse: tc.inUse}
			v.nodes = []*structs.Node{gpuNode("n1", 8, "H100", 80), gpuNode("n2", 8, "H100", 80)}
			d := Decide(v, Inputs{Now: t0})
			var placed []string
			for _, p := range d.Plan.Placements {
				placed = append(placed, p.JobID)
			}
			if !equalIDs(placed, tc.placed) {
				t.Fatalf("placed %v, want %v", placed, tc.placed)
			}
			for id, want := range tc.reason {
				if got := blockedReason(d.Plan, id); got != want {
					t.Errorf("job %s: reason %q, want %q", id, got, want)
				}
			}
		})
	}
}

func TestDecide_PreemptsNothingForAnOwnerAtItsGPULimit(t *testing.T) {
	v := busyCluster(1)
	v.queued = []*structs.Job{owned(urgent("high", 10, 0), "alice")}
	v.gpuLimits, v.gpusInUse = map[string]int{"alice": 4}, map[string]int{"alice": 2}
	d := Decide(v, Inputs{Now: t0})
	if len(d.Plan.Preemptions) != 0 {
		t.Fatalf("preemptions %+v for a job its owner's limit keeps waiting", d.Plan.Preemptions)
	}
	if got, want := blockedReason(d.Plan, "high"), "waiting: alice's GPU limit (4) is in use"; got != want {
		t.Fatalf("reason %q, want %q", got, want)
	}
	// With room under the limit, the same job preempts as before.
	v.gpusInUse["alice"] = 0
	if d := Decide(v, Inputs{Now: t0}); len(d.Plan.Preemptions) != 1 {
		t.Fatalf("preemptions %+v, want one for the job now under its limit", d.Plan.Preemptions)
	}
}

// equalIDs compares two lists of IDs, nil and empty alike.
func equalIDs(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
