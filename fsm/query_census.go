package fsm

import (
	"time"

	"github.com/skein-dev/skein/structs"
)

// Census is what the state holds, counted: the numbers a metrics scrape
// reports. It is taken under one read lock and copies no job, node or
// allocation, so a scrape costs the leader's scheduling nothing but the
// lock's sharing.
type Census struct {
	Index uint64
	// Jobs and Allocs count every job and allocation by state; Nodes
	// every node by status, a ready node that drains as draining.
	Jobs   map[structs.JobState]int
	Allocs map[structs.AllocState]int
	Nodes  map[structs.NodeStatus]int
	// GPUs counts the GPUs of the nodes that have not left, by
	// structs.GPU.HealthState; GPUsHeld how many GPUs live allocations
	// hold.
	GPUs     map[string]int
	GPUsHeld int
	// Queued are the queued jobs that are not being cancelled.
	Queued []QueuedJob
}

// QueuedJob is what a census keeps of one queued job.
type QueuedJob struct {
	// Reason says why it waits (structs.Job.Reason).
	Reason   string
	Priority int
	// GPUs is what the job asks for in all: its nodes times its GPUs.
	GPUs int
	// NotBefore is the end of its restart backoff; zero for none.
	NotBefore time.Time
}

// Census counts the state.
func (f *FSM) Census() Census {
	f.mu.RLock()
	defer f.mu.RUnlock()
	c := Census{
		Index:  f.st.index,
		Jobs:   make(map[structs.JobState]int, len(structs.JobStates)),
		Allocs: map[structs.AllocState]int{},
		Nodes:  map[structs.NodeStatus]int{},
		GPUs:   map[string]int{},
		Queued: make([]QueuedJob, 0, len(f.st.queued)),
	}
	for _, j := range f.st.jobs {
		c.Jobs[j.State]++
	}
	for _, a := range f.st.allocs {
		c.Allocs[a.State]++
	}
	for _, n := range f.st.nodes {
		st := n.Status
		if st == structs.NodeReady && n.Drain != nil {
			st = structs.NodeDraining // a node that answers and drains
		}
		c.Nodes[st]++
		if n.Status == structs.NodeLeft {
			continue
		}
		for i := range n.GPUs {
			c.GPUs[n.GPUs[i].HealthState()]++
		}
	}
	c.GPUsHeld = len(f.st.gpuHolder)
	for _, j := range f.st.queued {
		if j.StopRequested {
			continue
		}
		c.Queued = append(c.Queued, QueuedJob{
			Reason: j.Reason, Priority: j.Spec.Priority, GPUs: max(j.Spec.Nodes, 1) * j.Spec.GPUs, NotBefore: j.NotBefore,
		})
	}
	return c
}

// GPUHolders returns, for each GPU of a node that a live allocation
// holds, the ID of that allocation's job, by GPU UUID.
func (f *FSM) GPUHolders(nodeID string) map[string]string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := map[string]string{}
	for _, a := range f.st.nodeLive[nodeID] {
		for _, uuid := range a.GPUs {
			out[uuid] = a.JobID
		}
	}
	return out
}
