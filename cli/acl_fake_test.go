package cli

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/structs"
)

// allPermissions lists every permission, in the order whoami answers them.
var allPermissions = []structs.Permission{
	structs.PermRead, structs.PermSubmit, structs.PermAnyJob, structs.PermLoaderEnv, structs.PermNodes, structs.PermACL,
}

// aclAgent is a fake agent that answers the ACL routes as api/acl.go
// documents them, keeping tokens in memory: bootstrap once, tokens that
// name a user and a role, 401 for a token it does not know (or one
// revoked or expired), 403 naming the missing permission.
type aclAgent struct {
	*fakeAgent
	mu      sync.Mutex
	tokens  []structs.ACLToken
	secrets map[string]string // token ID -> the token as its holder uses it
	users   map[string]structs.ACLUser
}

func newACLAgent(t *testing.T) *aclAgent {
	t.Helper()
	a := &aclAgent{fakeAgent: newFakeAgent(t), secrets: map[string]string{}, users: map[string]structs.ACLUser{}}
	a.handle("POST /v1/acl/bootstrap", a.bootstrap)
	a.handle("GET /v1/acl/whoami", a.whoami)
	a.handle("POST /v1/acl/tokens", a.guard(structs.PermACL, a.createToken))
	a.handle("GET /v1/acl/tokens", a.guard(structs.PermACL, a.listTokens))
	a.handle("DELETE /v1/acl/tokens/{id}", a.guard(structs.PermACL, a.revokeToken))
	a.handle("GET /v1/acl/users", a.guard(structs.PermACL, a.listUsers))
	a.handle("POST /v1/acl/users", a.guard(structs.PermACL, a.setUser))
	a.handle("POST /v1/jobs", a.guard(structs.PermSubmit, func(w http.ResponseWriter, _ *http.Request, _ *structs.ACLToken) {
		writeJSON(w, http.StatusCreated, structs.Job{ID: testJobID})
	}))
	return a
}

// caller returns the token a request carries; nil before a bootstrap
// (every caller may do everything), or an error status.
func (a *aclAgent) caller(r *http.Request) (*structs.ACLToken, int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.tokens) == 0 {
		return nil, 0
	}
	got := r.Header.Get(api.TokenHeader)
	for i := range a.tokens {
		t := &a.tokens[i]
		if a.secrets[t.ID] == got && !t.Revoked && !t.Expired(time.Now()) {
			return t, 0
		}
	}
	return nil, http.StatusUnauthorized
}

// guard answers only callers whose role holds need.
func (a *aclAgent) guard(need structs.Permission, h func(http.ResponseWriter, *http.Request, *structs.ACLToken)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		t, code := a.caller(r)
		switch {
		case code != 0:
			writeJSON(w, code, api.ErrorBody{Error: "missing or wrong API token: set --token or SKEIN_TOKEN"})
		case t != nil && !t.Role.Can(need):
			writeJSON(w, http.StatusForbidden, api.ErrorBody{Error: (&structs.PermissionError{Role: t.Role, Need: need}).Error()})
		default:
			h(w, r, t)
		}
	}
}

// newToken adds a token record and returns what creating it answers.
func (a *aclAgent) newToken(user string, role structs.Role, by string, ttl time.Duration, desc string) api.ACLTokenCreated {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := time.Now().Truncate(time.Second)
	t := structs.ACLToken{
		ID: fmt.Sprintf("%016x", len(a.tokens)+1), User: user, Role: role, CreatedBy: by, Description: desc, CreatedAt: now,
	}
	if ttl > 0 {
		t.ExpiresAt = now.Add(ttl)
	}
	a.tokens = append(a.tokens, t)
	a.secrets[t.ID] = "SKA1." + t.ID + ".secret-of-" + user
	return api.ACLTokenCreated{Token: a.secrets[t.ID], Info: api.TokenInfo(&t, now)}
}

func (a *aclAgent) bootstrap(w http.ResponseWriter, r *http.Request) {
	var req api.ACLBootstrapRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, api.ErrorBody{Error: err.Error()})
		return
	}
	a.mu.Lock()
	done := len(a.tokens) > 0
	a.mu.Unlock()
	if done {
		writeJSON(w, http.StatusConflict, api.ErrorBody{Error: "acl: already bootstrapped"})
		return
	}
	if req.User == "" {
		req.User = api.DefaultBootstrapUser
	}
	writeJSON(w, http.StatusOK, a.newToken(req.User, structs.RoleAdmin, "", 0, "bootstrap"))
}

func (a *aclAgent) whoami(w http.ResponseWriter, r *http.Request) {
	t, code := a.caller(r)
	if code != 0 {
		writeJSON(w, code, api.ErrorBody{Error: "missing or wrong API token: set --token or SKEIN_TOKEN"})
		return
	}
	who := api.WhoAmI{ACL: t != nil, Role: structs.RoleAdmin}
	if t != nil {
		who.User, who.Role, who.TokenID = t.User, t.Role, t.ID
	}
	for _, p := range allPermissions {
		if who.Role.Can(p) {
			who.Permissions = append(who.Permissions, p)
		}
	}
	writeJSON(w, http.StatusOK, who)
}

func (a *aclAgent) createToken(w http.ResponseWriter, r *http.Request, by *structs.ACLToken) {
	var req api.ACLTokenCreateRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, api.ErrorBody{Error: err.Error()})
		return
	}
	if _, err := structs.ParseRole(string(req.Role)); err != nil {
		writeJSON(w, http.StatusBadRequest, api.ErrorBody{Error: err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, a.newToken(req.User, req.Role, userOf(by), time.Duration(req.TTL), req.Description))
}

// userOf is the user of a caller's token; "" before a bootstrap.
func userOf(t *structs.ACLToken) string {
	if t == nil {
		return ""
	}
	return t.User
}

func (a *aclAgent) listTokens(w http.ResponseWriter, _ *http.Request, _ *structs.ACLToken) {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]api.ACLTokenInfo, 0, len(a.tokens))
	for i := range a.tokens {
		out = append(out, api.TokenInfo(&a.tokens[i], time.Now()))
	}
	writeJSON(w, http.StatusOK, out)
}

func (a *aclAgent) revokeToken(w http.ResponseWriter, r *http.Request, _ *structs.ACLToken) {
	a.mu.Lock()
	defer a.mu.Unlock()
	id := r.PathValue("id")
	var found *structs.ACLToken
	for i := range a.tokens {
		if strings.HasPrefix(a.tokens[i].ID, id) {
			if found != nil {
				writeJSON(w, http.StatusBadRequest, api.ErrorBody{Error: fmt.Sprintf("acl token %q: ambiguous ID prefix", id)})
				return
			}
			found = &a.tokens[i]
		}
	}
	if found == nil {
		writeJSON(w, http.StatusNotFound, api.ErrorBody{Error: fmt.Sprintf("acl token %q: not found", id)})
		return
	}
	found.Revoked, found.RevokedAt = true, time.Now()
	writeJSON(w, http.StatusOK, api.TokenInfo(found, time.Now()))
}

func (a *aclAgent) listUsers(w http.ResponseWriter, _ *http.Request, _ *structs.ACLToken) {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := []structs.ACLUser{}
	for _, u := range a.users {
		out = append(out, u)
	}
	writeJSON(w, http.StatusOK, out)
}

func (a *aclAgent) setUser(w http.ResponseWriter, r *http.Request, by *structs.ACLToken) {
	var req api.ACLUserSetRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, api.ErrorBody{Error: err.Error()})
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	u := structs.ACLUser{Name: req.User, AllowRoot: req.AllowRoot, UpdatedAt: time.Now(), UpdatedBy: userOf(by)}
	a.users[req.User] = u
	writeJSON(w, http.StatusOK, u)
}
