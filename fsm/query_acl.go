package fsm

import (
	"cmp"
	"maps"
	"slices"

	"github.com/skein-dev/skein/structs"
)

// ACL returns the cluster's ACL state; false before the ACL bootstrap.
func (f *FSM) ACL() (structs.ACLState, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.st.acl == nil {
		return structs.ACLState{}, false
	}
	return *f.st.acl, true
}

// ACLToken returns the ACL token with the given ID, revoked or expired too.
func (f *FSM) ACLToken(id string) (structs.ACLToken, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	tok, ok := f.st.aclTokens[id]
	return tok, ok
}

// ACLTokens returns every ACL token by creation time, then ID.
func (f *FSM) ACLTokens() []structs.ACLToken {
	f.mu.RLock()
	defer f.mu.RUnlock()
	toks := slices.Collect(maps.Values(f.st.aclTokens))
	slices.SortFunc(toks, func(a, b structs.ACLToken) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID))
	})
	return toks
}

// ACLUser returns what admins allow a user; false when nothing was set.
func (f *FSM) ACLUser(name string) (structs.ACLUser, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	u, ok := f.st.aclUsers[name]
	return u, ok
}

// ACLUsers returns every user an admin set something for, by name.
func (f *FSM) ACLUsers() []structs.ACLUser {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]structs.ACLUser, 0, len(f.st.aclUsers))
	for _, name := range slices.Sorted(maps.Keys(f.st.aclUsers)) {
		out = append(out, f.st.aclUsers[name])
	}
	return out
}
