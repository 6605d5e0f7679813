package sched

import (
	"math"
	"slices"
	"time"

	"github.com/skein-dev/skein/structs"
)

// Multifactor is the queue's order once the cluster has accounts: each
// job's priority is the weighted sum of factors between 0 and 1 (Slurm's
// multifactor priority), and a user's own --priority orders only that
// user's jobs among the places they hold (reorder). Build it with
// NewMultifactor, once per pass.
type Multifactor struct {
	// Accounts is the account table it was built from.
	Accounts *structs.AccountTable
	Weights  structs.PriorityWeights
	// FairShare are the fair-tree factors by account and user; a job
	// outside every account, or of a user not in its account, has 0.
	FairShare map[structs.UsageKey]float64
	// QoS are the QoS by name.
	QoS map[string]*structs.QoS
	// ClusterGPUs are the GPUs of the ready nodes: a job's size factor is
	// its GPUs' part of them.
	ClusterGPUs int
}

// Factors are one job's priority factors, each 0 to 1, and the priority
// they weigh up to (before the owner's --priority reorders its jobs).
type Factors struct {
	Age       float64 `json:"age"`
	FairShare float64 `json:"fair_share"`
	JobSize   float64 `json:"job_size"`
	QoS       float64 `json:"qos"`
	Priority  int64   `json:"priority"`
}

// NewMultifactor builds the pass's multifactor from the fair-share state
// and the nodes; nil when the cluster has no accounts (the queue then
// goes by --priority and age alone).
func NewMultifactor(fs structs.FairShare, nodes []*structs.Node) *Multifactor {
	if !fs.Accounts.On() {
		return nil
	}
	m := &Multifactor{Accounts: fs.Accounts, Weights: fs.Accounts.PriorityWeights(), FairShare: FairShareFactors(FairTree(fs)), QoS: fs.Accounts.QoS}
	for _, n := range nodes {
		if n.Status == structs.NodeReady {
			m.ClusterGPUs += len(n.GPUs)
		}
	}
	return m
}

// Factors returns a job's factors at now.
func (m *Multifactor) Factors(j *structs.Job, now time.Time) Factors {
	return m.factors(j, now, m.FairShare[structs.UsageKey{Account: j.Spec.Account, User: j.Owner}])
}

// ownerIndex numbers the owners of a pass's jobs and keeps each one's
// fair-share factors by account, so each job costs one map lookup.
type ownerIndex struct {
	byName map[string]*ownerFS
}

type ownerFS struct {
	n        int32
	accounts []string
	factors  []float64
}

// lookup returns the number of j's owner and the fair-share factor of
// j's owner in j's account.
func (o *ownerIndex) lookup(m *Multifactor, j *structs.Job) (int32, float64) {
	if o.byName == nil {
		o.byName = map[string]*ownerFS{}
	}
	of := o.byName[j.Owner]
	if of == nil {
		of = &ownerFS{n: int32(len(o.byName))}
		o.byName[j.Owner] = of
	}
	for i, a := range of.accounts {
		if a == j.Spec.Account {
			return of.n, of.factors[i]
		}
	}
	fs := m.FairShare[structs.UsageKey{Account: j.Spec.Account, User: j.Owner}]
	of.accounts, of.factors = append(of.accounts, j.Spec.Account), append(of.factors, fs)
	return of.n, fs
}

// factors is Factors with the fair-share factor looked up.
func (m *Multifactor) factors(j *structs.Job, now time.Time, fs float64) Factors {
	f := Factors{FairShare: fs}
	if maxAge := time.Duration(m.Weights.MaxAge); maxAge > 0 {
		f.Age = min(float64(max(now.Sub(waitingSince(j)), 0))/float64(maxAge), 1)
	}
	if m.ClusterGPUs > 0 {
		f.JobSize = min(float64(jobGPUs(j))/float64(m.ClusterGPUs), 1)
	}
	if q := m.QoS[j.Spec.QoS]; q != nil {
		f.QoS = float64(q.Priority) / structs.MaxQoSPriority
	}
	w := m.Weights
	f.Priority = int64(math.Round(float64(w.Age)*f.Age + float64(w.FairShare)*f.FairShare +
		float64(w.JobSize)*f.JobSize + float64(w.QoS)*f.QoS))
	return f
}

// reorder gives each owner's jobs the owner's own order: the places its
// jobs hold in the queue (entries are sorted) go to its jobs by
// --priority, highest first, and among equal ones in the order they had.
// What one user's --priority changes is only which of its own jobs holds
// which of its places. Nothing moves unless some job has a --priority.
// owners is how many owners the entries number.
func reorder(entries []queueEntry, owners int) {
	if !slices.ContainsFunc(entries, func(e queueEntry) bool { return e.own != 0 }) {
		return
	}
	members := make([][]int32, owners)
	for i, e := range entries {
		members[e.owner] = append(members[e.owner], int32(i))
	}
	var keys []int64
	var moved []queueEntry
	for _, idx := range members {
		if len(idx) < 2 || !mixedPriorities(entries, idx) {
			continue
		}
		// One integer sort: --priority (highest first, as 1000 - p >= 0)
		// above the place in the group, which keeps equal ones in order.
		keys, moved = keys[:0], moved[:0]
		for k, i := range idx {
			keys = append(keys, int64(structs.MaxPriority-entries[i].own)<<32|int64(k))
			moved = append(moved, entries[i])
		}
		slices.Sort(keys)
		for k, i := range idx { // idx is in queue order: each place keeps its eff and since
			from := moved[keys[k]&(1<<32-1)]
			entries[i].job, entries[i].own = from.job, from.own
		}
	}
}

// mixedPriorities reports whether the jobs at idx differ in --priority.
func mixedPriorities(entries []queueEntry, idx []int32) bool {
	for _, i := range idx[1:] {
		if entries[i].own != entries[idx[0]].own {
			return true
		}
	}
	return false
}

// JobPriority is one queued job's place in the queue and why.
type JobPriority struct {
	JobID   string `json:"job_id"`
	Owner   string `json:"owner,omitempty"`
	Account string `json:"account,omitempty"`
	QoS     string `json:"qos,omitempty"`
	Factors
	// Own is the job's --priority, which orders its owner's jobs.
	Own int `json:"own_priority,omitempty"`
}

// Priorities returns the jobs in queue order with their factors, as a
// pass with m at now orders them; Priority is the place's (reorder). A
// nil m (no accounts) gives the priority --priority plus one point per
// age step, and no factors.
func Priorities(m *Multifactor, jobs []*structs.Job, now time.Time, step time.Duration) []JobPriority {
	entries := queueEntries(jobs, now, step, m)
	out := make([]JobPriority, len(entries))
	for i, e := range entries {
		j := e.job
		out[i] = JobPriority{JobID: j.ID, Owner: j.Owner, Account: j.Spec.Account, QoS: j.Spec.QoS, Own: j.Spec.Priority}
		if m != nil {
			out[i].Factors = m.Factors(j, now)
		}
		out[i].Priority = e.eff
	}
	return out
}
