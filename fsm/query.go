package fsm

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/skein-dev/skein/structs"
)

// maxCandidates is how many matching IDs an ambiguous-prefix error lists.
const maxCandidates = 5

// Node returns a copy of the node with the given ID.
func (f *FSM) Node(id string) (*structs.Node, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	n, ok := f.st.nodes[id]
	return n.Copy(), ok
}

// Nodes returns copies of all nodes, by name, then ID.
func (f *FSM) Nodes() []*structs.Node {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.sortedNodes()
}

// JobNumbersOn says whether jobs get numbers (JobNumbersStartType).
func (f *FSM) JobNumbersOn() bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.jobNumbersOn
}

// Job returns a copy of the job with the given ID.
func (f *FSM) Job(id string) (*structs.Job, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	j, ok := f.st.jobs[id]
	return j.Copy(), ok
}

// FindJob returns a copy of the job with exactly this ID, else of the only
// job whose ID starts with it, or whose ID is BASE-SUFFIX where the
// argument is a prefix of BASE followed by the same -SUFFIX: an array
// task as `skein jobs` shows it ("d7e40d7d-1"), or a service's replica
// ("6f90-r1"). A job number ("123") or an array task's ("120_3") names
// its job first (structs.ParseJobNumber); an array's number names no one
// job (ArrayTasks takes it). It fails with ErrJobNotFound, or with
// ErrAmbiguousID listing some of the candidates.
func (f *FSM) FindJob(idOrPrefix string) (*structs.Job, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if j, ok := f.st.jobs[idOrPrefix]; ok {
		return j.Copy(), nil
	}
	if n, index, ok := structs.ParseJobNumber(idOrPrefix); ok {
		if j, err := f.st.jobByNumber(n, index); j != nil || err != nil {
			return j.Copy(), err
		}
	}
	var ids []string
	if idOrPrefix != "" {
		for id := range f.st.jobs {
			if strings.HasPrefix(id, idOrPrefix) || suffixedPrefix(id, idOrPrefix) {
				ids = append(ids, id)
			}
		}
	}
	switch len(ids) {
	case 0:
		return nil, fmt.Errorf("job %s: %w", idOrPrefix, ErrJobNotFound)
	case 1:
		return f.st.jobs[ids[0]].Copy(), nil
	}
	slices.Sort(ids)
	shown := make([]string, 0, maxCandidates+1)
	for _, id := range ids[:min(len(ids), maxCandidates)] {
		shown = append(shown, structs.ShortID(id))
	}
	if len(ids) > maxCandidates {
		shown = append(shown, "...")
	}
	return nil, fmt.Errorf("job %s: %w: matches %d jobs (%s)", idOrPrefix, ErrAmbiguousID, len(ids), strings.Join(shown, ", "))
}

// jobByNumber returns the job numbered n, or with index >= 0 the task of
// that index of the array numbered n; an array's number alone is
// ErrAmbiguousID naming its first tasks. Nil and no error: no job has
// the number, and it may be read as a prefix of an ID.
func (s *state) jobByNumber(n uint64, index int) (*structs.Job, error) {
	if index >= 0 {
		for _, j := range s.arrayTasks[s.arrayNumbers[n]] {
			if j.ArrayIndex == index {
				return j, nil
			}
		}
		return nil, fmt.Errorf("job %d_%d: %w", n, index, ErrJobNotFound)
	}
	if arr, ok := s.arrayNumbers[n]; ok {
		tasks := s.sortedTasks(arr)
		shown := make([]string, 0, maxCandidates+1)
		for _, j := range tasks[:min(len(tasks), maxCandidates)] {
			shown = append(shown, j.SlurmID())
		}
		if len(tasks) > maxCandidates {
			shown = append(shown, "...")
		}
		return nil, fmt.Errorf("job %d: %w: an array of %d tasks (%s)", n, ErrAmbiguousID, len(tasks), strings.Join(shown, ", "))
	}
	return s.jobs[s.numberJobs[n]], nil
}

// suffixedPrefix reports whether id is BASE-SUFFIX and q is a prefix of
// BASE followed by -SUFFIX.
func suffixedPrefix(id, q string) bool {
	qi, ii := strings.LastIndexByte(q, '-'), strings.LastIndexByte(id, '-')
	if qi <= 0 || ii < 0 || q[qi:] != id[ii:] {
		return false
	}
	return strings.HasPrefix(id[:ii], q[:qi])
}

// ArrayTasks returns the tasks of the job array whose number is arrayID,
// else whose ID is arrayID or starts with it, in index order; ErrJobNotFound or ErrAmbiguousID
// otherwise.
func (f *FSM) ArrayTasks(arrayID string) ([]*structs.Job, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var matches []string
	if n, index, ok := structs.ParseJobNumber(arrayID); ok && index < 0 {
		if id, ok := f.st.arrayNumbers[n]; ok {
			matches = []string{id}
		}
	}
	if matches == nil {
		for id := range f.st.arrayTasks {
			if arrayID != "" && strings.HasPrefix(id, arrayID) {
				matches = append(matches, id)
			}
		}
	}
	if len(matches) == 0 {
		return nil, fmt.Errorf("job array %s: %w", arrayID, ErrJobNotFound)
	}
	if len(matches) > 1 {
		return nil, fmt.Errorf("job array %s: %w: matches %d arrays", arrayID, ErrAmbiguousID, len(matches))
	}
	tasks := f.st.sortedTasks(matches[0])
	for i, j := range tasks {
		tasks[i] = j.Copy()
	}
	return tasks, nil
}

// JobByRequestID returns a copy of the job a submit with this request ID created.
func (f *FSM) JobByRequestID(rid string) (*structs.Job, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	id, ok := f.st.jobByRequest[rid]
	if !ok {
		return nil, false
	}
	return f.st.jobs[id].Copy(), true
}

// Jobs returns copies of all jobs, by submission time, then ID.
func (f *FSM) Jobs() []*structs.Job {
	f.mu.RLock()
	defer f.mu.RUnlock()
	jobs := make([]*structs.Job, 0, len(f.st.jobs))
	for _, j := range f.st.jobs {
		jobs = append(jobs, j.Copy())
	}
	slices.SortFunc(jobs, func(a, b *structs.Job) int {
		return cmp.Or(a.SubmittedAt.Compare(b.SubmittedAt), cmp.Compare(a.ID, b.ID))
	})
	return jobs
}

// Allocs returns copies of a job's allocations of every attempt, by attempt,
// then rank.
func (f *FSM) Allocs(jobID string) []*structs.Allocation {
	f.mu.RLock()
	defer f.mu.RUnlock()
	allocs := copyAllocs(f.st.jobAllocs[jobID])
	slices.SortFunc(allocs, func(a, b *structs.Allocation) int {
		return cmp.Or(cmp.Compare(a.Attempt, b.Attempt), cmp.Compare(a.Rank, b.Rank), cmp.Compare(a.ID, b.ID))
	})
	return allocs
}

// Alloc returns a copy of the allocation with the given ID.
func (f *FSM) Alloc(id string) (*structs.Allocation, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	a, ok := f.st.allocs[id]
	return a.Copy(), ok
}

// AllocAt returns a copy of the allocation with the given ID, whether
// the state holds it, and the index of the state it was read from, in
// one read: a node that concludes from an allocation's absence must know
// the index of the state that lacked it, not that of one loaded since.
func (f *FSM) AllocAt(id string) (*structs.Allocation, bool, uint64) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	a, ok := f.st.allocs[id]
	return a.Copy(), ok, f.st.index
}

// JobCounts returns how many jobs are in each state; every state is present.
func (f *FSM) JobCounts() map[structs.JobState]int {
	f.mu.RLock()
	defer f.mu.RUnlock()
	counts := make(map[structs.JobState]int, len(structs.JobStates))
	for _, st := range structs.JobStates {
		counts[st] = 0
	}
	for _, j := range f.st.jobs {
		counts[j.State]++
	}
	return counts
}

// LiveAllocCounts returns how many live allocations each node holds; nodes
// holding none are absent. Unlike State, it copies no job, so a leader can
// call it often whatever the size of the queue.
func (f *FSM) LiveAllocCounts() map[string]int {
	f.mu.RLock()
	defer f.mu.RUnlock()
	counts := make(map[string]int, len(f.st.nodeLive))
	for id, set := range f.st.nodeLive {
		counts[id] = len(set)
	}
	return counts
}

// StateView is one consistent copy of what the scheduler reads, taken at
// Index. It is read-only: its nodes are the ones the state holds, shared
// rather than copied (a pass at 1,000 nodes would copy 3 MB), which the
// state never changes once stored.
type StateView struct {
	Index uint64
	// Nodes are all nodes, by name, then ID; never to be written.
	Nodes []*structs.Node
	// LiveAllocs are the allocations that still hold resources, by creation index.
	LiveAllocs []*structs.Allocation
	// Queued are the queued jobs in queue order: priority (highest first),
	// then submission time, then ID.
	Queued []*structs.Job
	// TimeLimits are the time limits of the jobs that have live
	// allocations and a limit, by job ID.
	TimeLimits map[string]time.Duration
	// Running are the running jobs that have live allocations, by ID.
	Running []*structs.Job
	// DepStates are the states of the jobs that queued jobs depend on
	// (--after), by job ID; a dependency that does not exist is absent.
	DepStates map[string]structs.JobState
	// Limits are the limits in force; OwnerGPUs the GPUs the live
	// allocations of each owner's jobs hold (owners holding none absent).
	Limits    *structs.LimitTable
	OwnerGPUs map[string]int
	// Accounts and Usage are the fair-share state (Accounts nil: none).
	Accounts *structs.AccountTable
	Usage    []structs.UsageRecord
}

// FairShare returns the account table and the usage records.
func (v *StateView) FairShare() structs.FairShare {
	return structs.FairShare{Accounts: v.Accounts, Usage: v.Usage}
}

// GPULimit returns an owner's running-GPU limit and the GPUs its jobs hold.
func (v *StateView) GPULimit(owner string) (limit, inUse int) {
	return v.Limits.For(owner).MaxGPUs, v.OwnerGPUs[owner]
}

// AllNodes returns v.Nodes.
func (v *StateView) AllNodes() []*structs.Node { return v.Nodes }

// AllLiveAllocs returns v.LiveAllocs.
func (v *StateView) AllLiveAllocs() []*structs.Allocation { return v.LiveAllocs }

// JobTimeLimit returns the time limit of a job with live allocations, 0
// for none.
func (v *StateView) JobTimeLimit(jobID string) time.Duration { return v.TimeLimits[jobID] }

// QueuedJobs returns v.Queued.
func (v *StateView) QueuedJobs() []*structs.Job { return v.Queued }

// RunningJobs returns v.Running.
func (v *StateView) RunningJobs() []*structs.Job { return v.Running }

// JobState returns the state of a job queued jobs depend on; false when
// it does not exist (or no queued job depends on it).
func (v *StateView) JobState(id string) (structs.JobState, bool) {
	st, ok := v.DepStates[id]
	return st, ok
}

// State returns a consistent deep copy of the scheduler's view, taken under
// one read lock.
func (f *FSM) State() *StateView {
	f.mu.RLock()
	defer f.mu.RUnlock()
	v := &StateView{Index: f.st.index, Nodes: f.st.sortedNodesShared(), Limits: f.st.limitTable(), OwnerGPUs: maps.Clone(f.st.ownerGPUs),
		Accounts: f.st.accounts.Copy()}
	if f.st.accounts.On() {
		v.Usage = f.st.usageRecords()
	}
	v.LiveAllocs = make([]*structs.Allocation, 0, len(f.st.live))
	v.TimeLimits = make(map[string]time.Duration)
	running := map[string]bool{}
	for _, a := range f.st.live {
		v.LiveAllocs = append(v.LiveAllocs, a.Copy())
		j, ok := f.st.jobs[a.JobID]
		if !ok {
			continue
		}
		if j.Spec.TimeLimit > 0 {
			v.TimeLimits[a.JobID] = time.Duration(j.Spec.TimeLimit)
		}
		if j.State == structs.JobRunning && !running[j.ID] {
			running[j.ID] = true
			v.Running = append(v.Running, j.Copy())
		}
	}
	slices.SortFunc(v.LiveAllocs, byCreation)
	slices.SortFunc(v.Running, func(a, b *structs.Job) int { return cmp.Compare(a.ID, b.ID) })
	v.DepStates = make(map[string]structs.JobState)
	for _, j := range f.st.queued {
		if !j.StopRequested && !j.Held {
			v.Queued = append(v.Queued, j.Copy())
			for _, d := range j.Spec.After {
				if dep, ok := f.st.jobs[d.JobID]; ok {
					v.DepStates[d.JobID] = dep.State
				}
			}
		}
	}
	slices.SortFunc(v.Queued, queueOrder)
	return v
}

// sortedNodes returns copies of all nodes, by name, then ID.
func (s *state) sortedNodes() []*structs.Node {
	nodes := s.sortedNodesShared()
	for i, n := range nodes {
		nodes[i] = n.Copy()
	}
	return nodes
}

// sortedNodesShared returns the nodes the state holds, by name, then ID:
// not copies, so they must never be written (Apply never changes a node
// it stored; see writableNode).
func (s *state) sortedNodesShared() []*structs.Node {
	nodes := make([]*structs.Node, 0, len(s.nodes))
	for _, n := range s.nodes {
		nodes = append(nodes, n)
	}
	slices.SortFunc(nodes, func(a, b *structs.Node) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.ID, b.ID))
	})
	return nodes
}

func copyAllocs(in []*structs.Allocation) []*structs.Allocation {
	out := make([]*structs.Allocation, len(in))
	for i, a := range in {
		out[i] = a.Copy()
	}
	return out
}

// sortedAllocs returns the allocations of a set by creation index (the
// state's own, not copies).
func sortedAllocs(set allocSet) []*structs.Allocation {
	out := slices.Collect(maps.Values(set))
	slices.SortFunc(out, byCreation)
	return out
}

// byCreation orders allocations by creation index; allocations of one plan
// follow by job ID, rank and ID.
func byCreation(a, b *structs.Allocation) int {
	return cmp.Or(cmp.Compare(a.CreateIndex, b.CreateIndex), cmp.Compare(a.JobID, b.JobID),
		cmp.Compare(a.Rank, b.Rank), cmp.Compare(a.ID, b.ID))
}
