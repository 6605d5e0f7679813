package fsm

import (
	"github.com/skein-dev/skein/structs"
)

// LimitUsage is what one user's jobs hold against the user's limits.
type LimitUsage struct {
	// Queued is how many of the user's jobs are queued.
	Queued int `json:"queued"`
	// GPUs is how many GPUs the live allocations of the user's jobs hold.
	GPUs int `json:"gpus"`
}

// Limits returns a copy of the limits; a table holding nothing when only
// the built-in defaults apply.
func (f *FSM) Limits() *structs.LimitTable {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.limitTable()
}

// CheckSubmitLimits is the limit check of a submit, as Apply makes it,
// against the current state: a node calls it before committing, so a
// submit over a limit costs no log entry. spec must be normalized.
func (f *FSM) CheckSubmitLimits(owner string, spec structs.JobSpec) error {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.checkSubmitLimits(owner, &spec)
}

// LimitUsage returns what one user's jobs hold now.
func (f *FSM) LimitUsage(user string) LimitUsage {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return LimitUsage{Queued: f.st.ownerQueued[user], GPUs: f.st.ownerGPUs[user]}
}

// LimitUsages returns what every user holding something holds (users
// holding nothing are absent), and how many jobs are queued in all.
func (f *FSM) LimitUsages() (map[string]LimitUsage, int) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make(map[string]LimitUsage, len(f.st.ownerQueued))
	for u, n := range f.st.ownerQueued {
		out[u] = LimitUsage{Queued: n}
	}
	for u, n := range f.st.ownerGPUs {
		use := out[u]
		use.GPUs = n
		out[u] = use
	}
	return out, len(f.st.queued)
}
