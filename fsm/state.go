package fsm

import (
	"cmp"
	"maps"
	"slices"
	"time"

	"github.com/skein-dev/skein/structs"
)

// state is the data the FSM holds. Only Apply (under the write lock) and
// Restore (on a fresh state) change it; nothing it holds ever leaves the
// package except as a copy, but for nodes: a node is never changed once
// stored (Apply stores a changed copy in its place, see writableNode), so
// the scheduler's view shares them (State).
type state struct {
	index  uint64
	nodes  map[string]*structs.Node
	jobs   map[string]*structs.Job
	allocs map[string]*structs.Allocation

	// The trust state of a secure cluster: nil and empty in a plaintext
	// one. Tokens by ID, admissions by node ID.
	trust      *structs.Trust
	joinTokens map[string]structs.JoinToken
	admissions map[string]structs.Admission
	// viewTrustIndex is the index of the last entry that changed what
	// node views carry of the trust state (its creation, a keyring step,
	// a revocation); a restored state's own index. NodeViewStamp reads it.
	viewTrustIndex uint64

	// The limits an admin set; nil holds the built-in defaults.
	limits *structs.LimitTable

	// The account tree, QoS and priority weights an admin set (nil: none,
	// fair share off), the decayed usage by account and user, and when
	// usage was last charged (the leader's stamp).
	accounts *structs.AccountTable
	usage    map[structs.UsageKey]*structs.Usage
	usageAt  time.Time
	// usageClockSeen is set while a snapshot is read once its usage
	// clock record has been.
	usageClockSeen bool

	// Services by name; each replica is a job in jobs (Job.Service).
	services map[string]*structs.Service

	// Access control: nil and empty until the ACL bootstrap. Tokens by
	// ID, users by name.
	acl       *structs.ACLState
	aclTokens map[string]structs.ACLToken
	aclUsers  map[string]structs.ACLUser

	// partitions are the partitions' settings, by name (skein
	// partition set).
	partitions map[string]structs.Partition

	// lastJobNumber is the newest job number given (Job.Number): the
	// next job gets the one after it. It never goes back, so a number is
	// never given twice, even once its job is gone.
	lastJobNumber uint64

	// The newest events, made by Apply from the changes above.
	events eventLog
	// eventLogSeen is set while a snapshot is read once its event log
	// record has been; jobNumbersSeen once its job numbers record has.
	eventLogSeen   bool
	jobNumbersSeen bool

	// Derived from the maps above, kept up to date by addJob, setJobState,
	// addAlloc, hold, release and removeJob, and rebuilt record by record
	// on Restore.
	jobByRequest map[string]string                // request ID -> job ID
	jobAllocs    map[string][]*structs.Allocation // job ID -> its allocations, every attempt
	nodeAllocs   map[string]allocSet              // node ID -> every allocation placed on it
	nodeLive     map[string]allocSet              // node ID -> its live allocations
	live         map[string]*structs.Allocation   // alloc ID -> allocation still holding resources
	gpuHolder    map[string]string                // GPU UUID -> ID of the live allocation holding it
	nodeUsed     map[string]usage                 // node ID -> what its live allocations hold
	portHolder   map[nodePort]string              // rank 0's node and MASTER_PORT -> ID of the live rank 0 using it
	arrayTasks   map[string]jobSet                // array ID -> its tasks
	numberJobs   map[uint64]string                // job number -> job ID
	arrayNumbers map[uint64]string                // array number -> array ID
	serviceJobs  map[string]jobSet                // service name -> the replica jobs naming it, of every service of that name
	dependents   map[string]jobSet                // job ID -> the jobs whose Spec.After names it
	queued       jobSet                           // the jobs in state queued
	ownerQueued  map[string]int                   // owner -> how many of its jobs are queued
	ownerGPUs    map[string]int                   // owner -> GPUs its jobs' live allocations hold
	draining     map[string]bool                  // IDs of the nodes with a Drain
}

// allocSet is a set of allocations by ID.
type allocSet map[string]*structs.Allocation

// jobSet is a set of jobs by ID.
type jobSet map[string]*structs.Job

// nodePort is a TCP port on one node.
type nodePort struct {
	node string
	port int
}

// usage is the CPUs and memory live allocations hold on one node.
type usage struct {
	cpus      int
	memoryMiB int64
}

func newState() *state {
	return &state{
		nodes:        map[string]*structs.Node{},
		jobs:         map[string]*structs.Job{},
		allocs:       map[string]*structs.Allocation{},
		joinTokens:   map[string]structs.JoinToken{},
		admissions:   map[string]structs.Admission{},
		aclTokens:    map[string]structs.ACLToken{},
		aclUsers:     map[string]structs.ACLUser{},
		services:     map[string]*structs.Service{},
		partitions:   map[string]structs.Partition{},
		jobByRequest: map[string]string{},
		jobAllocs:    map[string][]*structs.Allocation{},
		nodeAllocs:   map[string]allocSet{},
		nodeLive:     map[string]allocSet{},
		draining:     map[string]bool{},
		live:         map[string]*structs.Allocation{},
		gpuHolder:    map[string]string{},
		nodeUsed:     map[string]usage{},
		portHolder:   map[nodePort]string{},
		arrayTasks:   map[string]jobSet{},
		numberJobs:   map[uint64]string{},
		arrayNumbers: map[uint64]string{},
		serviceJobs:  map[string]jobSet{},
		dependents:   map[string]jobSet{},
		queued:       jobSet{},
		ownerQueued:  map[string]int{},
		ownerGPUs:    map[string]int{},
		usage:        map[structs.UsageKey]*structs.Usage{},
	}
}

// nextJobNumber gives the next job number (Job.Number).
func (s *state) nextJobNumber() uint64 {
	s.lastJobNumber++
	return s.lastJobNumber
}

// addJob stores a new job.
func (s *state) addJob(j *structs.Job) {
	s.jobs[j.ID] = j
	if j.RequestID != "" {
		s.jobByRequest[j.RequestID] = j.ID
	}
	if j.ArrayID != "" {
		addToSet(s.arrayTasks, j.ArrayID, j.ID, j)
		if j.ArrayNumber != 0 {
			s.arrayNumbers[j.ArrayNumber] = j.ArrayID
		}
	}
	if j.Number != 0 {
		s.numberJobs[j.Number] = j.ID
		s.lastJobNumber = max(s.lastJobNumber, j.Number)
	}
	if j.Service != "" {
		addToSet(s.serviceJobs, j.Service, j.ID, j)
	}
	for _, d := range j.Spec.After {
		addToSet(s.dependents, d.JobID, j.ID, j)
	}
	if j.State == structs.JobQueued {
		s.queued[j.ID] = j
		addCount(s.ownerQueued, j.Owner, 1)
	}
}

// setJobState moves a job to state st, keeping the queue index and the
// owners' queued counts in step: every change of a job's state goes
// through here.
func (s *state) setJobState(j *structs.Job, st structs.JobState) {
	was := j.State == structs.JobQueued
	j.State = st
	if st == structs.JobQueued {
		s.queued[j.ID] = j
	} else {
		delete(s.queued, j.ID)
	}
	switch is := st == structs.JobQueued; {
	case is && !was:
		addCount(s.ownerQueued, j.Owner, 1)
	case was && !is:
		addCount(s.ownerQueued, j.Owner, -1)
	}
}

// removeJob deletes a finished job with its allocations, none of them
// live, from the state and from every index.
func (s *state) removeJob(j *structs.Job) {
	for _, a := range s.jobAllocs[j.ID] {
		delete(s.allocs, a.ID)
		removeFromSet(s.nodeAllocs, a.NodeID, a.ID)
	}
	delete(s.jobAllocs, j.ID)
	delete(s.jobs, j.ID)
	if _, ok := s.queued[j.ID]; ok {
		delete(s.queued, j.ID)
		addCount(s.ownerQueued, j.Owner, -1)
	}
	if j.RequestID != "" && s.jobByRequest[j.RequestID] == j.ID {
		delete(s.jobByRequest, j.RequestID)
	}
	if j.ArrayID != "" {
		removeFromSet(s.arrayTasks, j.ArrayID, j.ID)
		if _, ok := s.arrayTasks[j.ArrayID]; !ok && j.ArrayNumber != 0 {
			delete(s.arrayNumbers, j.ArrayNumber)
		}
	}
	if j.Number != 0 {
		delete(s.numberJobs, j.Number)
	}
	if j.Service != "" {
		removeFromSet(s.serviceJobs, j.Service, j.ID)
	}
	for _, d := range j.Spec.After {
		removeFromSet(s.dependents, d.JobID, j.ID)
	}
}

// addAlloc stores a new allocation and, if it is live, lets it hold its
// resources.
func (s *state) addAlloc(a *structs.Allocation) {
	s.allocs[a.ID] = a
	s.jobAllocs[a.JobID] = append(s.jobAllocs[a.JobID], a)
	addToSet(s.nodeAllocs, a.NodeID, a.ID, a)
	if a.Live() {
		s.hold(a)
	}
}

// hold marks a live allocation's GPUs, CPUs and memory as taken.
func (s *state) hold(a *structs.Allocation) {
	s.live[a.ID] = a
	addToSet(s.nodeLive, a.NodeID, a.ID, a)
	for _, g := range a.GPUs {
		s.gpuHolder[g] = a.ID
	}
	if a.Rank == 0 && a.MasterPort != 0 {
		s.portHolder[nodePort{a.NodeID, a.MasterPort}] = a.ID
	}
	s.chargeOwner(a, 1)
	u := s.nodeUsed[a.NodeID]
	u.cpus += a.CPUs
	u.memoryMiB += a.MemoryMiB
	s.setUsed(a.NodeID, u)
}

// release frees what hold took, once the allocation is terminal.
func (s *state) release(a *structs.Allocation) {
	delete(s.live, a.ID)
	removeFromSet(s.nodeLive, a.NodeID, a.ID)
	for _, g := range a.GPUs {
		if s.gpuHolder[g] == a.ID {
			delete(s.gpuHolder, g)
		}
	}
	if p := (nodePort{a.NodeID, a.MasterPort}); s.portHolder[p] == a.ID {
		delete(s.portHolder, p)
	}
	s.chargeOwner(a, -1)
	s.chargeAllocEnd(a)
	u := s.nodeUsed[a.NodeID]
	u.cpus -= a.CPUs
	u.memoryMiB -= a.MemoryMiB
	s.setUsed(a.NodeID, u)
}

// chargeOwner adds (sign 1) or takes back (-1) a live allocation's GPUs
// to the count of its job's owner. The job is always in the state: an
// allocation is stored after its job and a job goes only once its
// allocations are not live.
func (s *state) chargeOwner(a *structs.Allocation, sign int) {
	if j, ok := s.jobs[a.JobID]; ok && len(a.GPUs) > 0 {
		addCount(s.ownerGPUs, j.Owner, sign*len(a.GPUs))
	}
}

// addCount adds d to the count at k, keeping only keys that count
// something.
func addCount(m map[string]int, k string, d int) {
	if n := m[k] + d; n != 0 {
		m[k] = n
	} else {
		delete(m, k)
	}
}

// setUsed records a node's usage, keeping only nodes that use something.
func (s *state) setUsed(nodeID string, u usage) {
	if u == (usage{}) {
		delete(s.nodeUsed, nodeID)
	} else {
		s.nodeUsed[nodeID] = u
	}
}

// sortedTasks returns the tasks of an array in index order (the state's
// own, not copies).
func (s *state) sortedTasks(arrayID string) []*structs.Job {
	tasks := slices.Collect(maps.Values(s.arrayTasks[arrayID]))
	slices.SortFunc(tasks, func(a, b *structs.Job) int { return cmp.Compare(a.ArrayIndex, b.ArrayIndex) })
	return tasks
}

// addToSet adds v, whose ID is id, to the set at key k of an index.
func addToSet[S ~map[string]V, V any](index map[string]S, k, id string, v V) {
	set, ok := index[k]
	if !ok {
		set = S{}
		index[k] = set
	}
	set[id] = v
}

// removeFromSet removes id from the set at key k of an index, and the set
// once it is empty, so an index never keeps keys for nothing.
func removeFromSet[S ~map[string]V, V any](index map[string]S, k, id string) {
	set := index[k]
	delete(set, id)
	if len(set) == 0 {
		delete(index, k)
	}
}

// writableNode stores a copy of the node n in its place and returns the
// copy, for Apply to change: a node once stored is never changed, since
// the views State handed out share it.
func (s *state) writableNode(n *structs.Node) *structs.Node {
	c := n.Copy()
	s.nodes[c.ID] = c
	return c
}
