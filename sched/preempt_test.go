package sched

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/skein-dev/skein/structs"
	"pgregory.net/rapid"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// runningJob returns a running job with the given priority, preemptible or
// not, started minutes after epoch.
func runningJob(id string, prio int, preemptible bool, minutes int) *structs.Job {
	j := job(id, 0, func(s *structs.JobSpec) { s.Priority = prio; s.Preemptible = preemptible })
	j.State = structs.JobRunning
	j.StartedAt = epoch.Add(time.Duration(minutes) * time.Minute)
	return j
}

// gpus lists the UUIDs of GPUs from..to-1 of a gpuNode.
func gpus(node string, from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprintf("%s-g%d", node, i))
	}
	return out
}

// rank returns a live allocation of rank r of a job.
func rank(jobID string, r int, nodeID string, uuids []string) *structs.Allocation {
	a := running(jobID, nodeID, 0, 0, uuids...)
	a.ID = fmt.Sprintf("a-%s-%d", jobID, r)
	a.Rank = r
	return a
}

func TestPreemptions(t *testing.T) {
	high := func(gpus int, opts ...func(*structs.JobSpec)) *structs.Job {
		return job("high", gpus, append([]func(*structs.JobSpec){func(s *structs.JobSpec) { s.Priority = 10 }}, opts...)...)
	}
	cases := []struct {
		name    string
		nodes   []*structs.Node
		allocs  []*structs.Allocation
		running []*structs.Job
		job     *structs.Job
		want    []string
	}{
		{
			name:    "a job that fits is never a reason to preempt",
			nodes:   []*structs.Node{gpuNode("n1", 8, "H100", 80)},
			allocs:  []*structs.Allocation{rank("low", 0, "n1", gpus("n1", 0, 4))},
			running: []*structs.Job{runningJob("low", 0, true, 0)},
			job:     high(4),
		},
		{
			name:    "a lower-priority preemptible job makes room",
			nodes:   []*structs.Node{gpuNode("n1", 4, "H100", 80)},
			allocs:  []*structs.Allocation{rank("low", 0, "n1", gpus("n1", 0, 4))},
			running: []*structs.Job{runningJob("low", 0, true, 0)},
			job:     high(4),
			want:    []string{"low"},
		},
		{
			name:    "a job that is not preemptible is never a victim",
			nodes:   []*structs.Node{gpuNode("n1", 4, "H100", 80)},
			allocs:  []*structs.Allocation{rank("low", 0, "n1", gpus("n1", 0, 4))},
			running: []*structs.Job{runningJob("low", 0, false, 0)},
			job:     high(4),
		},
		{
			name:    "equal priority is never preempted",
			nodes:   []*structs.Node{gpuNode("n1", 4, "H100", 80)},
			allocs:  []*structs.Allocation{rank("same", 0, "n1", gpus("n1", 0, 4))},
			running: []*structs.Job{runningJob("same", 10, true, 0)},
			job:     high(4),
		},
		{
			name:    "higher priority is never preempted",
			nodes:   []*structs.Node{gpuNode("n1", 4, "H100", 80)},
			allocs:  []*structs.Allocation{rank("top", 0, "n1", gpus("n1", 0, 4))},
			running: []*structs.Job{runningJob("top", 20, true, 0)},
			job:     high(4),
		},
		{
			name:  "lowest priority goes first",
			nodes: []*structs.Node{gpuNode("n1", 4, "H100", 80), gpuNode("n2", 4, "H100", 80)},
			allocs: []*structs.Allocation{
				rank("p1", 0, "n1", gpus("n1", 0, 4)), rank("p0", 0, "n2", gpus("n2", 0, 4)),
			},
			running: []*structs.Job{runningJob("p1", 1, true, 0), runningJob("p0", 0, true, 0)},
			job:     high(4),
			want:    []string{"p0"},
		},
		{
			name:  "at equal priority the most recently started loses least work",
			nodes: []*structs.Node{gpuNode("n1", 4, "H100", 80), gpuNode("n2", 4, "H100", 80)},
			allocs: []*structs.Allocation{
				rank("old", 0, "n1", gpus("n1", 0, 4)), rank("new", 0, "n2", gpus("n2", 0, 4)),
			},
			running: []*structs.Job{runningJob("old", 0, true, 0), runningJob("new", 0, true, 30)},
			job:     high(4),
			want:    []string{"new"},
		},
		{
			name:  "a victim that is not needed is dropped",
			nodes: []*structs.Node{gpuNode("n1", 4, "H100", 80)},
			allocs: []*structs.Allocation{
				rank("small", 0, "n1", gpus("n1", 0, 1)), rank("big", 0, "n1", gpus("n1", 1, 4)),
			},
			running: []*structs.Job{runningJob("small", 0, true, 0), runningJob("big", 1, true, 0)},
			job:     high(3),
			want:    []string{"big"},
		},
		{
			name:  "several victims when one is not enough",
			nodes: []*structs.Node{gpuNode("n1", 4, "H100", 80)},
			allocs: []*structs.Allocation{
				rank("a", 0, "n1", gpus("n1", 0, 2)), rank("b", 0, "n1", gpus("n1", 2, 4)),
			},
			running: []*structs.Job{runningJob("a", 0, true, 0), runningJob("b", 1, true, 0)},
			job:     high(4),
			want:    []string{"a", "b"},
		},
		{
			name:  "a gang victim is taken whole",
			nodes: []*structs.Node{gpuNode("n1", 2, "H100", 80), gpuNode("n2", 2, "H100", 80)},
			allocs: []*structs.Allocation{
				rank("gang", 0, "n1", gpus("n1", 0, 2)), rank("gang", 1, "n2", gpus("n2", 0, 2)),
			},
			running: []*structs.Job{runningJob("gang", 0, true, 0)},
			job:     high(2),
			want:    []string{"gang"},
		},
		{
			name:  "a gang job gets room on as many nodes as it has ranks",
			nodes: []*structs.Node{gpuNode("n1", 4, "H100", 80), gpuNode("n2", 4, "H100", 80), gpuNode("n3", 4, "H100", 80)},
			allocs: []*structs.Allocation{
				rank("x", 0, "n1", gpus("n1", 0, 4)), rank("y", 0, "n2", gpus("n2", 0, 4)), rank("z", 0, "n3", gpus("n3", 0, 4)),
			},
			running: []*structs.Job{runningJob("x", 2, true, 0), runningJob("y", 0, true, 0), runningJob("z", 1, true, 0)},
			job:     high(4, gang(2)),
			want:    []string{"y", "z"},
		},
		{
			name:  "victims on nodes of the wrong GPU model do not help",
			nodes: []*structs.Node{gpuNode("a", 4, "A100", 80), gpuNode("h", 4, "H100", 80)},
			allocs: []*structs.Allocation{
				rank("onA", 0, "a", gpus("a", 0, 4)), rank("onH", 0, "h", gpus("h", 0, 4)),
			},
			running: []*structs.Job{runningJob("onA", 0, true, 0), runningJob("onH", 5, true, 0)},
			job:     high(4, model("H100")),
			want:    []string{"onH"},
		},
		{
			name:  "victims on nodes without the constraint do not help",
			nodes: []*structs.Node{gpuNode("n1", 4, "H100", 80), gpuNode("n2", 4, "H100", 80, withLabels("rack", "r2"))},
			allocs: []*structs.Allocation{
				rank("cheap", 0, "n1", gpus("n1", 0, 4)), rank("dear", 0, "n2", gpus("n2", 0, 4)),
			},
			running: []*structs.Job{runningJob("cheap", 0, true, 0), runningJob("dear", 5, true, 0)},
			job:     high(4, constraint("rack", "r2")),
			want:    []string{"dear"},
		},
		{
			name:  "not enough to gain: nobody is preempted",
			nodes: []*structs.Node{gpuNode("n1", 4, "H100", 80)},
			allocs: []*structs.Allocation{
				rank("low", 0, "n1", gpus("n1", 0, 2)), rank("keep", 0, "n1", gpus("n1", 2, 4)),
			},
			running: []*structs.Job{runningJob("low", 0, true, 0), runningJob("keep", 0, false, 0)},
			job:     high(4),
		},
		{
			name:  "a job already being preempted is not chosen again",
			nodes: []*structs.Node{gpuNode("n1", 4, "H100", 80)},
			allocs: []*structs.Allocation{
				rank("low", 0, "n1", gpus("n1", 0, 4)),
			},
			running: []*structs.Job{func() *structs.Job {
				j := runningJob("low", 0, true, 0)
				j.PreemptedBy = "other"
				return j
			}()},
			job: high(4),
		},
		{
			name:  "a job whose allocations are stopping is not chosen",
			nodes: []*structs.Node{gpuNode("n1", 4, "H100", 80)},
			allocs: []*structs.Allocation{func() *structs.Allocation {
				a := rank("low", 0, "n1", gpus("n1", 0, 4))
				a.DesiredState = structs.DesiredStop
				return a
			}()},
			running: []*structs.Job{runningJob("low", 0, true, 0)},
			job:     high(4),
		},
		{
			name:  "CPUs are freed too",
			nodes: []*structs.Node{gpuNode("n1", 4, "H100", 80, withCPUs(8))},
			allocs: []*structs.Allocation{func() *structs.Allocation {
				a := rank("cpu", 0, "n1", nil)
				a.CPUs = 8
				return a
			}()},
			running: []*structs.Job{runningJob("cpu", 0, true, 0)},
			job:     high(1, cpus(4)),
			want:    []string{"cpu"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Preemptions(fakeState{nodes: c.nodes, allocs: c.allocs}, c.job, c.running)
			if !slices.Equal(got, c.want) {
				t.Fatalf("Preemptions() = %v, want %v", got, c.want)
			}
		})
	}
}

func TestPreemptor_ExcludedJobsAreNotChosenAgain(t *testing.T) {
	nodes := []*structs.Node{gpuNode("n1", 4, "H100", 80), gpuNode("n2", 4, "H100", 80)}
	allocs := []*structs.Allocation{rank("a", 0, "n1", gpus("n1", 0, 4)), rank("b", 0, "n2", gpus("n2", 0, 4))}
	running := []*structs.Job{runningJob("a", 0, true, 0), runningJob("b", 1, true, 0)}
	p := NewPreemptor(fakeState{nodes: nodes, allocs: allocs}, running)
	first := job("first", 4, func(s *structs.JobSpec) { s.Priority = 10 })
	second := job("second", 4, func(s *structs.JobSpec) { s.Priority = 10 })
	if v := p.Victims(first); !slices.Equal(v, []string{"a"}) {
		t.Fatalf("first job: victims %v, want [a]", v)
	}
	p.Exclude([]string{"a"})
	if v := p.Victims(second); !slices.Equal(v, []string{"b"}) {
		t.Fatalf("second job, a excluded: victims %v, want [b]", v)
	}
	p.Exclude([]string{"b"})
	if v := p.Victims(second); v != nil {
		t.Fatalf("every candidate excluded: victims %v, want none", v)
	}
}

func TestPreemptions_PropertyVictimsAreEligibleSufficientAndEachNeeded(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		nodes, allocs, jobs := genCluster(t)
		if len(jobs) == 0 {
			return
		}
		want := jobs[0]
		want.Spec.Priority = rapid.IntRange(-2, 2).Draw(t, "priority")
		var runningJobs []*structs.Job
		byID := map[string]*structs.Job{}
		for i, a := range allocs {
			j := runningJob(a.JobID, rapid.IntRange(-3, 3).Draw(t, "victimPriority"),
				rapid.Bool().Draw(t, "preemptible"), rapid.IntRange(0, 5).Draw(t, "startedMinute"))
			if rapid.IntRange(0, 9).Draw(t, "stopping") == 0 {
				allocs[i].DesiredState = structs.DesiredStop
			}
			runningJobs = append(runningJobs, j)
			byID[j.ID] = j
		}
		s := fakeState{nodes: nodes, allocs: allocs}
		p := NewPreemptor(s, runningJobs)
		victims := p.Victims(want)
		if again := p.Victims(want); !slices.Equal(again, victims) {
			t.Fatalf("asked twice, the preemptor answered %v, then %v", victims, again)
		}

		without := func(gone []string) fakeState {
			var rest []*structs.Allocation
			for _, a := range allocs {
				if !slices.Contains(gone, a.JobID) {
					rest = append(rest, a)
				}
			}
			return fakeState{nodes: nodes, allocs: rest}
		}
		fits := func(st fakeState) bool {
			return placedOn(Place(st, []*structs.Job{want}), want.ID) != nil
		}
		eligible := func(j *structs.Job) bool {
			if !j.Spec.Preemptible || j.Spec.Priority >= want.Spec.Priority {
				return false
			}
			for _, a := range allocs {
				if a.JobID == j.ID && a.DesiredState == structs.DesiredStop {
					return false
				}
			}
			return true
		}
		if len(victims) == 0 {
			if fits(s) {
				return
			}
			var all []string
			for _, j := range runningJobs {
				if eligible(j) {
					all = append(all, j.ID)
				}
			}
			if fits(without(all)) {
				t.Fatalf("no victims, but stopping every eligible job (%v) would make room", all)
			}
			return
		}
		if fits(s) {
			t.Fatalf("victims %v chosen for a job that fits already", victims)
		}
		for _, id := range victims {
			j := byID[id]
			if j == nil || !eligible(j) {
				t.Fatalf("victim %s is not an eligible job: %+v", id, j)
			}
		}
		if !fits(without(victims)) {
			t.Fatalf("stopping victims %v does not make room", victims)
		}
		for i := range victims {
			rest := slices.Delete(slices.Clone(victims), i, i+1)
			if fits(without(rest)) {
				t.Fatalf("victim %s of %v is not needed", victims[i], victims)
			}
		}
	})
}

// fullCluster is 5,000 8-GPU nodes, each running one preemptible job on
// all its GPUs (priorities 0-2), and a 4-node gang of priority 10 that
// needs all the GPUs of 4 nodes.
func fullCluster() (fakeState, []*structs.Job, *structs.Job) {
	nodes := make([]*structs.Node, 5000)
	allocs := make([]*structs.Allocation, len(nodes))
	running := make([]*structs.Job, len(nodes))
	for i := range nodes {
		id := fmt.Sprintf("node-%04d", i)
		nodes[i] = gpuNode(id, 8, "H100", 80)
		jobID := fmt.Sprintf("low-%04d", i)
		allocs[i] = rank(jobID, 0, id, gpus(id, 0, 8))
		running[i] = runningJob(jobID, i%3, true, i%60)
	}
	high := job("high", 8, gang(4), func(s *structs.JobSpec) { s.Priority = 10 })
	return fakeState{nodes: nodes, allocs: allocs}, running, high
}

// BenchmarkPreemptor_New is the once-per-pass cost: the ledger and the
// candidates of a full 5,000-node cluster.
func BenchmarkPreemptor_New(b *testing.B) {
	st, running, _ := fullCluster()
	b.ReportAllocs()
	for b.Loop() {
		NewPreemptor(st, running)
	}
}

// BenchmarkPreemptor_Victims is the cost per blocked job looked at.
func BenchmarkPreemptor_Victims(b *testing.B) {
	st, running, high := fullCluster()
	p := NewPreemptor(st, running)
	b.ReportAllocs()
	for b.Loop() {
		if v := p.Victims(high); len(v) != 4 {
			b.Fatalf("%d victims, want 4", len(v))
		}
	}
}
