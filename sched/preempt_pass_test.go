package sched

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/structs"
)

// busyCluster is n 4-GPU nodes n0.. each wholly held by a running
// preemptible job low0.. of priority 0, in its second attempt.
func busyCluster(n int) fakeView {
	var v fakeView
	for i := range n {
		node, low := fmt.Sprintf("n%d", i), fmt.Sprintf("low%d", i)
		v.nodes = append(v.nodes, gpuNode(node, 4, "H100", 80))
		v.allocs = append(v.allocs, rank(low, 0, node, gpus(node, 0, 4)))
		r := runningJob(low, 0, true, i)
		r.Attempts = 2
		v.running = append(v.running, r)
	}
	return v
}

// urgent is a queued 4-GPU job of the given priority, submitted seconds
// after t0.
func urgent(id string, priority, seconds int, opts ...func(*structs.JobSpec)) *structs.Job {
	j := job(id, 4, append(opts, prio(priority))...)
	j.SubmittedAt = t0.Add(time.Duration(seconds) * time.Second)
	return j
}

func TestDecide_PreemptsLowerPriorityWorkAndSaysSo(t *testing.T) {
	v := busyCluster(1)
	v.queued = []*structs.Job{urgent("high", 10, 0)}
	d := Decide(v, Inputs{Now: t0})
	want := []structs.Preemption{{For: "high", Victims: []string{"low0"}, Attempts: []int{2}}}
	if !reflect.DeepEqual(d.Plan.Preemptions, want) {
		t.Fatalf("preemptions %+v, want %+v", d.Plan.Preemptions, want)
	}
	if got := blockedReason(d.Plan, "high"); got != "waiting for 1 preempted job to stop" {
		t.Fatalf("reason %q, want the preemption's", got)
	}
}

func TestDecide_PreemptsNothingFor(t *testing.T) {
	cases := []struct {
		name    string
		running func(*structs.Job)
		inputs  Inputs
		extra   *structs.Node
	}{
		{name: "a job of equal priority", running: func(j *structs.Job) { j.Spec.Priority = 10 }},
		{name: "a job that is not preemptible", running: func(j *structs.Job) { j.Spec.Preemptible = false }},
		{name: "a job being cancelled", running: func(j *structs.Job) { j.StopRequested = true }},
		{name: "anyone while a node is silent", extra: gpuNode("quiet", 1, "H100", 80),
			inputs: Inputs{Silent: map[string]bool{"quiet": true}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := busyCluster(1)
			v.queued = []*structs.Job{urgent("high", 10, 0)}
			if tc.running != nil {
				tc.running(v.running[0])
			}
			if tc.extra != nil {
				v.nodes = append(v.nodes, tc.extra)
			}
			tc.inputs.Now = t0
			d := Decide(v, tc.inputs)
			if len(d.Plan.Preemptions) != 0 || strings.Contains(blockedReason(d.Plan, "high"), "preempted") {
				t.Fatalf("preemptions %+v, reason %q; want none", d.Plan.Preemptions, blockedReason(d.Plan, "high"))
			}
		})
	}
}

func TestDecide_AVictimIsChosenOnceAPass(t *testing.T) {
	v := busyCluster(1)
	v.queued = []*structs.Job{urgent("first", 10, 0), urgent("second", 10, 1)}
	d := Decide(v, Inputs{Now: t0})
	if len(d.Plan.Preemptions) != 1 || d.Plan.Preemptions[0].For != "first" {
		t.Fatalf("preemptions %+v, want one, for first", d.Plan.Preemptions)
	}
	if got := blockedReason(d.Plan, "second"); strings.Contains(got, "preempted") {
		t.Fatalf("second's reason %q: it has no victim", got)
	}
}

func TestDecide_PreemptsForAtMostFourJobsAPass(t *testing.T) {
	v := busyCluster(maxPreemptsPerPass + 2)
	for i := range maxPreemptsPerPass + 2 {
		v.queued = append(v.queued, urgent(fmt.Sprintf("high%d", i), 10, i))
	}
	d := Decide(v, Inputs{Now: t0})
	var got []string
	for _, p := range d.Plan.Preemptions {
		got = append(got, p.For)
	}
	if want := []string{"high0", "high1", "high2", "high3"}; !slices.Equal(got, want) {
		t.Fatalf("preemptions for %v, want %v (the first in the queue)", got, want)
	}
}

// A job no preemption can help (its GPU model is nowhere) still counts as
// looked at: past the limit, the queue behind it preempts nothing.
func TestDecide_LooksForVictimsForAtMostSixteenJobsAPass(t *testing.T) {
	for _, hopeless := range []int{maxPreemptChecksPerPass - 1, maxPreemptChecksPerPass} {
		v := busyCluster(1)
		for i := range hopeless {
			v.queued = append(v.queued, urgent(fmt.Sprintf("a100-%02d", i), 20, i, model("A100")))
		}
		v.queued = append(v.queued, urgent("high", 10, 0))
		d := Decide(v, Inputs{Now: t0})
		if want := hopeless < maxPreemptChecksPerPass; (len(d.Plan.Preemptions) == 1) != want {
			t.Fatalf("%d hopeless jobs ahead: preemptions %+v, want one: %v", hopeless, d.Plan.Preemptions, want)
		}
	}
}

// While a job's victims stop it preempts no more, says what it waits for,
// and the jobs behind it wait too, so the GPUs go to it.
func TestDecide_APreemptionUnderWayHoldsTheQueueBehindIt(t *testing.T) {
	v := busyCluster(1)
	v.allocs[0].DesiredState = structs.DesiredStop
	v.running[0].PreemptedBy = "urgent"
	// Stopping other would make room for urgent on the spare node, and
	// leave a GPU free there that small would fit on.
	v.nodes = append(v.nodes, gpuNode("spare", 5, "H100", 80))
	v.allocs = append(v.allocs, rank("other", 0, "spare", gpus("spare", 0, 3)))
	v.running = append(v.running, runningJob("other", 0, true, 0))
	top, small := urgent("top", 20, 0), urgent("small", 0, 0)
	top.Spec.GPUs, small.Spec.GPUs = 1, 1
	v.queued = []*structs.Job{top, urgent("urgent", 10, 0), small}

	d := Decide(v, Inputs{Now: t0})
	if got := placedIDs(d.Plan); !slices.Equal(got, []string{"top"}) {
		t.Fatalf("placed %v, want only top, which is ahead of urgent", got)
	}
	if len(d.Plan.Preemptions) != 0 {
		t.Fatalf("preemptions %+v; urgent's are under way", d.Plan.Preemptions)
	}
	if got := blockedReason(d.Plan, "urgent"); got != "waiting for 1 preempted job to stop" {
		t.Fatalf("urgent's reason %q", got)
	}
	if got, want := blockedReason(d.Plan, "small"),
		"waiting: job urgent (priority 10) is preempting lower-priority jobs to run first"; got != want {
		t.Fatalf("small's reason %q, want %q", got, want)
	}
}

func TestHoldBehindPreemptions_KeepsTheFreedGPUsForThePreemptingJob(t *testing.T) {
	mk := func(id string, prio, minute int) *structs.Job {
		return &structs.Job{ID: id, State: structs.JobQueued, SubmittedAt: t0.Add(time.Duration(minute) * time.Minute),
			Spec: structs.JobSpec{Priority: prio}}
	}
	top, urgent, other, also, low := mk("top", 20, 5), mk("urgent", 10, 1), mk("other", 10, 2), mk("also", 5, 0), mk("low", 0, 0)
	preempting := map[string]int{"urgent": 1, "also": 2}
	// The queue in any order: the first preempting job is found by priority.
	for _, queued := range [][]*structs.Job{{top, urgent, other, also, low}, {low, also, other, urgent, top}} {
		keep, held := holdBehindPreemptions(queued, queued, preempting)
		var heldIDs []string
		for _, b := range held {
			heldIDs = append(heldIDs, b.JobID)
		}
		slices.Sort(heldIDs)
		kept := ids(keep)
		slices.Sort(kept)
		if fmt.Sprint(kept) != "[also top urgent]" || fmt.Sprint(heldIDs) != "[low other]" {
			t.Fatalf("kept %v, held %v; want [also top urgent] kept, [low other] held", kept, heldIDs)
		}
	}
	queued := []*structs.Job{top, urgent, other, also, low}
	if keep, held := holdBehindPreemptions(queued, queued, nil); len(keep) != len(queued) || held != nil {
		t.Fatalf("with no preemption under way %d of %d jobs kept, %d held", len(keep), len(queued), len(held))
	}
}
