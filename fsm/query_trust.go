package fsm

import (
	"cmp"
	"maps"
	"slices"

	"github.com/skein-dev/skein/structs"
)

// Trust returns a copy of the cluster's trust state; false in a cluster
// that has none (plaintext, or not yet initialized).
func (f *FSM) Trust() (structs.Trust, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.st.trust == nil {
		return structs.Trust{}, false
	}
	return *copyTrust(f.st.trust), true
}

// JoinTokens returns every join token, revoked and expired ones too, by
// creation time, then ID.
func (f *FSM) JoinTokens() []structs.JoinToken {
	f.mu.RLock()
	defer f.mu.RUnlock()
	toks := slices.Collect(maps.Values(f.st.joinTokens))
	slices.SortFunc(toks, func(a, b structs.JoinToken) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID))
	})
	return toks
}

// JoinToken returns the join token with the given ID.
func (f *FSM) JoinToken(id string) (structs.JoinToken, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	tok, ok := f.st.joinTokens[id]
	return tok, ok
}

// Admission returns the admission of a node, revoked or not.
func (f *FSM) Admission(nodeID string) (structs.Admission, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	a, ok := f.st.admissions[nodeID]
	return a, ok
}

// Admissions returns every admission, revoked ones too, by node ID.
func (f *FSM) Admissions() []structs.Admission {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]structs.Admission, 0, len(f.st.admissions))
	for _, id := range slices.Sorted(maps.Keys(f.st.admissions)) {
		out = append(out, f.st.admissions[id])
	}
	return out
}

// Admitted reports whether a node is admitted and not revoked.
func (f *FSM) Admitted(nodeID string) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	a, ok := f.st.admissions[nodeID]
	return ok && !a.Revoked
}

// Revoked reports whether a node's admission was revoked.
func (f *FSM) Revoked(nodeID string) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.admissions[nodeID].Revoked
}

// CheckAdmit runs NodeAdmit's checks against committed state without
// changing it: the leader calls it before committing an admission, so a
// wrong secret or a used-up token costs no log entry. It is the very check
// Apply runs (checkAdmit), so against the same state both give the same
// answer; entries committed in between may still change Apply's.
func (f *FSM) CheckAdmit(req structs.NodeAdmitRequest) error {
	f.mu.RLock()
	defer f.mu.RUnlock()
	_, err := f.st.checkAdmit(&req)
	return err
}
