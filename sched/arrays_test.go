package sched

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/skein-dev/skein/structs"
)

// task returns queued task i of array arr, capped at maxRunning tasks,
// submitted i seconds after t0 so the queue keeps index order.
func task(arr string, i, maxRunning, gpus int) *structs.Job {
	j := job(structs.ArrayTaskID(arr, i), gpus, func(s *structs.JobSpec) {
		s.Array = &structs.ArraySpec{Start: 0, End: 9, MaxRunning: maxRunning}
	})
	j.ArrayID, j.ArrayIndex = arr, i
	j.SubmittedAt = t0.Add(time.Duration(i) * time.Second)
	return j
}

func TestDecide_ArrayCaps(t *testing.T) {
	limit := "array arr runs its limit of 2 tasks"
	cases := []struct {
		name        string
		nodeGPUs    int
		live        []*structs.Allocation
		queued      []*structs.Job
		wantPlaced  []string
		wantBlocked map[string]string
	}{
		{
			name:        "tasks up to the cap run, the rest wait",
			nodeGPUs:    8,
			queued:      []*structs.Job{task("arr", 0, 2, 1), task("arr", 1, 2, 1), task("arr", 2, 2, 1)},
			wantPlaced:  []string{"arr-0", "arr-1"},
			wantBlocked: map[string]string{"arr-2": limit},
		},
		{
			name:        "tasks with live allocations count, a gang once",
			nodeGPUs:    8,
			live:        []*structs.Allocation{rank("arr-7", 0, "n1", nil), rank("arr-7", 1, "n1", nil)},
			queued:      []*structs.Job{task("arr", 0, 2, 1), task("arr", 1, 2, 1)},
			wantPlaced:  []string{"arr-0"},
			wantBlocked: map[string]string{"arr-1": limit},
		},
		{
			name:     "a task let through counts even when it finds no room",
			nodeGPUs: 1,
			queued:   []*structs.Job{task("arr", 0, 2, 1), task("arr", 1, 2, 1), task("arr", 2, 2, 1)},
			// arr-1 passes the cap, then finds no free GPU.
			wantPlaced: []string{"arr-0"},
			wantBlocked: map[string]string{"arr-2": limit, "arr-1": "first in line: 1 GPU on 1 node reserved for when " +
				"running jobs without a time limit end; 1 node: not enough free GPUs"},
		},
		{
			name:       "no cap: every task that fits runs",
			nodeGPUs:   8,
			live:       []*structs.Allocation{rank("arr-7", 0, "n1", nil)},
			queued:     []*structs.Job{task("arr", 0, 0, 1), task("arr", 1, 0, 1), task("arr", 2, 0, 1)},
			wantPlaced: []string{"arr-0", "arr-1", "arr-2"},
		},
		{
			name:        "arrays are capped apart",
			nodeGPUs:    8,
			live:        []*structs.Allocation{rank("other-3", 0, "n1", nil)},
			queued:      []*structs.Job{task("arr", 0, 1, 1), task("other", 0, 1, 1), task("arr", 1, 1, 1)},
			wantPlaced:  []string{"arr-0"},
			wantBlocked: map[string]string{"other-0": "array other runs its limit of 1 tasks", "arr-1": "array arr runs its limit of 1 tasks"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := fakeView{fakeState: fakeState{nodes: []*structs.Node{gpuNode("n1", tc.nodeGPUs, "H100", 80)}, allocs: tc.live},
				queued: tc.queued}
			d := Decide(v, Inputs{Now: t0})
			got := placedIDs(d.Plan)
			slices.Sort(got)
			if !slices.Equal(got, tc.wantPlaced) {
				t.Errorf("placed %v, want %v", got, tc.wantPlaced)
			}
			blocked := map[string]string{}
			for _, b := range d.Plan.Blocked {
				blocked[b.JobID] = b.Reason
			}
			if fmt.Sprint(blocked) != fmt.Sprint(tc.wantBlocked) {
				t.Errorf("blocked %v, want %v", blocked, tc.wantBlocked)
			}
		})
	}
}
