package sched

import (
	"fmt"
	"time"

	"github.com/skein-dev/skein/structs"
)

// fakeState is a State over fixed slices; limits are the time limits of the
// jobs whose allocations run.
type fakeState struct {
	nodes  []*structs.Node
	allocs []*structs.Allocation
	limits map[string]time.Duration
}

func (s fakeState) AllNodes() []*structs.Node               { return s.nodes }
func (s fakeState) AllLiveAllocs() []*structs.Allocation    { return s.allocs }
func (s fakeState) JobTimeLimit(jobID string) time.Duration { return s.limits[jobID] }

// gpuNode returns a ready node with n healthy GPUs of one model, 64 CPUs and
// 512G of memory. GPU UUIDs are "<id>-g<index>".
func gpuNode(id string, n int, model string, memGiB int64, opts ...func(*structs.Node)) *structs.Node {
	nd := &structs.Node{ID: id, Name: id, CPUs: 64, MemoryMiB: 512 << 10, Status: structs.NodeReady}
	for i := range n {
		nd.GPUs = append(nd.GPUs, structs.GPU{
			Index: i, UUID: fmt.Sprintf("%s-g%d", id, i), Model: model, MemoryMiB: memGiB << 10, Healthy: true,
		})
	}
	for _, o := range opts {
		o(nd)
	}
	return nd
}

func withStatus(s structs.NodeStatus) func(*structs.Node) {
	return func(n *structs.Node) { n.Status = s }
}

func withLabels(kv ...string) func(*structs.Node) {
	return func(n *structs.Node) {
		n.Labels = map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			n.Labels[kv[i]] = kv[i+1]
		}
	}
}

func withCPUs(c int) func(*structs.Node) { return func(n *structs.Node) { n.CPUs = c } }

func withMemGiB(m int64) func(*structs.Node) { return func(n *structs.Node) { n.MemoryMiB = m << 10 } }

func withUnhealthy(idx ...int) func(*structs.Node) {
	return func(n *structs.Node) {
		for _, i := range idx {
			n.GPUs[i].Healthy = false
			n.GPUs[i].Reason = "xid 79"
		}
	}
}

func withCordoned(idx ...int) func(*structs.Node) {
	return func(n *structs.Node) {
		for _, i := range idx {
			n.GPUs[i].Cordoned = true
			n.GPUs[i].CordonReason = "bad fan"
		}
	}
}

// withForeign puts one process skein did not start on each GPU; allowed
// says the node allows placing next to them.
func withForeign(allowed bool, idx ...int) func(*structs.Node) {
	return func(n *structs.Node) {
		for _, i := range idx {
			n.GPUs[i].ForeignProcesses = 1
			n.GPUs[i].ForeignAllowed = allowed
		}
	}
}

// job returns a queued job asking for gpus GPUs on one node.
func job(id string, gpus int, opts ...func(*structs.JobSpec)) *structs.Job {
	j := &structs.Job{ID: id, State: structs.JobQueued, Spec: structs.JobSpec{
		Command: []string{"train"}, Nodes: 1, GPUs: gpus,
	}}
	for _, o := range opts {
		o(&j.Spec)
	}
	return j
}

func gang(n int) func(*structs.JobSpec)     { return func(s *structs.JobSpec) { s.Nodes = n } }
func model(m string) func(*structs.JobSpec) { return func(s *structs.JobSpec) { s.GPUModel = m } }

func spreadOut(s *structs.JobSpec) { s.Spread = true }
func gpuMemGiB(m structs.SizeMiB) func(*structs.JobSpec) {
	return func(s *structs.JobSpec) { s.GPUMemoryMinMiB = m << 10 }
}
func cpus(c int) func(*structs.JobSpec) { return func(s *structs.JobSpec) { s.CPUs = c } }
func memGiB(m structs.SizeMiB) func(*structs.JobSpec) {
	return func(s *structs.JobSpec) { s.MemoryMiB = m << 10 }
}
func constraint(k, v string) func(*structs.JobSpec) {
	return func(s *structs.JobSpec) {
		if s.Constraints == nil {
			s.Constraints = map[string]string{}
		}
		s.Constraints[k] = v
	}
}

// running returns a live allocation holding GPUs on a node.
func running(jobID, nodeID string, cpus int, memMiB int64, gpus ...string) *structs.Allocation {
	return &structs.Allocation{
		ID: "a-" + jobID, JobID: jobID, NodeID: nodeID, GPUs: gpus, CPUs: cpus, MemoryMiB: memMiB,
		State: structs.AllocRunning, DesiredState: structs.DesiredRun,
	}
}

// placedOn returns "node:gpu,gpu" per rank of a job's placement, or nil.
func placedOn(p structs.Plan, jobID string) []string {
	for _, jp := range p.Placements {
		if jp.JobID != jobID {
			continue
		}
		out := make([]string, len(jp.Allocations))
		for i, a := range jp.Allocations {
			out[i] = a.NodeID + ":" + fmt.Sprint(a.GPUs)
		}
		return out
	}
	return nil
}

// blockedReason returns the reason a job was blocked, or "".
func blockedReason(p structs.Plan, jobID string) string {
	for _, b := range p.Blocked {
		if b.JobID == jobID {
			return b.Reason
		}
	}
	return ""
}

// fakeView is a View over a fakeState, a queue, the running jobs and the
// states of other jobs (those queued jobs depend on).
type fakeView struct {
	fakeState
	queued  []*structs.Job
	running []*structs.Job
	states  map[string]structs.JobState
	// gpuLimits and gpusInUse are the owners' GPU limits (absent: none)
	// and what their jobs hold.
	gpuLimits map[string]int
	gpusInUse map[string]int
	// fairShare is the accounts, QoS and usage (none: fair share off).
	fairShare structs.FairShare
}

func (v fakeView) FairShare() structs.FairShare { return v.fairShare }

func (v fakeView) GPULimit(owner string) (int, int) {
	limit, ok := v.gpuLimits[owner]
	if !ok {
		limit = structs.Unlimited
	}
	return limit, v.gpusInUse[owner]
}

func (v fakeView) QueuedJobs() []*structs.Job  { return v.queued }
func (v fakeView) RunningJobs() []*structs.Job { return v.running }
func (v fakeView) JobState(id string) (structs.JobState, bool) {
	st, ok := v.states[id]
	return st, ok
}

// cancelReason returns the reason a decision cancels a job, or "".
func cancelReason(p structs.Plan, jobID string) string {
	for _, c := range p.Cancels {
		if c.JobID == jobID {
			return c.Reason
		}
	}
	return ""
}

// copyAll deep-copies a slice with cp; nil stays nil.
func copyAll[T any](in []*T, cp func(*T) *T) []*T {
	if in == nil {
		return nil
	}
	out := make([]*T, len(in))
	for i, x := range in {
		out[i] = cp(x)
	}
	return out
}
