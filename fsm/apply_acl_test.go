package fsm

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/structs"
)

// aclToken returns a valid token record for user with role, its ID made
// from n.
func aclToken(n int, user string, role structs.Role) structs.ACLToken {
	return structs.ACLToken{
		ID:         fmt.Sprintf("%016x", n),
		SecretHash: strings.Repeat(fmt.Sprintf("%x", n%16), 64),
		User:       user, Role: role, CreatedAt: t0,
	}
}

func (h *harness) bootstrapACL() {
	h.t.Helper()
	if _, ok := h.apply(structs.ACLBootstrapType, structs.ACLBootstrapRequest{Token: aclToken(1, "admin", structs.RoleAdmin), At: t0}).(*structs.ACLToken); !ok {
		h.t.Fatalf("ACL bootstrap refused")
	}
}

func TestFSM_ACLBootstrapHappensOnce(t *testing.T) {
	h := newHarness(t)
	if _, ok := h.f.ACL(); ok {
		t.Fatal("a new FSM has ACLs")
	}
	h.bootstrapACL()
	st, ok := h.f.ACL()
	if !ok || st.BootstrapToken != aclToken(1, "", "").ID || !st.BootstrappedAt.Equal(t0) {
		t.Fatalf("ACL state %+v, %v", st, ok)
	}
	before := h.f.Hash()
	err := h.applyErr(structs.ACLBootstrapType, structs.ACLBootstrapRequest{Token: aclToken(2, "mallory", structs.RoleAdmin), At: t0})
	wantErrIs(t, err, ErrACLBootstrapped)
	if h.f.Hash() != before {
		t.Fatal("a second bootstrap changed the state")
	}
}

func TestFSM_ACLBootstrapRefusesAnythingButAValidAdminToken(t *testing.T) {
	h := newHarness(t)
	for name, tok := range map[string]structs.ACLToken{
		"submitter": aclToken(1, "admin", structs.RoleSubmitter),
		"no user":   aclToken(1, "", structs.RoleAdmin),
		"bad hash":  func() structs.ACLToken { t := aclToken(1, "a", structs.RoleAdmin); t.SecretHash = "x"; return t }(),
	} {
		err := h.applyErr(structs.ACLBootstrapType, structs.ACLBootstrapRequest{Token: tok, At: t0})
		wantErrIs(t, err, ErrInvalidRequest)
		if _, ok := h.f.ACL(); ok {
			t.Fatalf("%s: a refused bootstrap turned ACLs on", name)
		}
	}
}

func TestFSM_ACLTokensNeedABootstrap(t *testing.T) {
	h := newHarness(t)
	before := h.f.Hash()
	wantErrIs(t, h.applyErr(structs.ACLTokenType, structs.ACLTokenRequest{Token: aclToken(2, "alice", structs.RoleSubmitter), At: t0}), ErrNoACL)
	wantErrIs(t, h.applyErr(structs.ACLUserType, structs.ACLUserRequest{User: structs.ACLUser{Name: "alice", AllowRoot: true}}), ErrNoACL)
	if h.f.Hash() != before {
		t.Fatal("a refused entry changed the state")
	}
}

func TestFSM_ACLTokenCreateAndRevoke(t *testing.T) {
	h := newHarness(t)
	h.bootstrapACL()
	alice := aclToken(2, "alice", structs.RoleSubmitter)
	got, ok := h.apply(structs.ACLTokenType, structs.ACLTokenRequest{Token: alice, At: t0}).(*structs.ACLToken)
	if !ok || !reflect.DeepEqual(*got, alice) {
		t.Fatalf("create answered %+v", got)
	}
	before := h.f.Hash()
	wantErrIs(t, h.applyErr(structs.ACLTokenType, structs.ACLTokenRequest{Token: alice, At: t0}), ErrACLTokenExists)
	bad := aclToken(3, "bob", "root")
	wantErrIs(t, h.applyErr(structs.ACLTokenType, structs.ACLTokenRequest{Token: bad, At: t0}), ErrInvalidRequest, "role")
	wantErrIs(t, h.applyErr(structs.ACLTokenType, structs.ACLTokenRequest{Token: structs.ACLToken{ID: "nope"}, Revoke: true, At: t0}), ErrACLTokenNotFound)
	if h.f.Hash() != before {
		t.Fatal("a refused token entry changed the state")
	}

	at := t0.Add(time.Hour)
	rev, ok := h.apply(structs.ACLTokenType, structs.ACLTokenRequest{Token: structs.ACLToken{ID: alice.ID}, Revoke: true, At: at}).(*structs.ACLToken)
	if !ok || !rev.Revoked || !rev.RevokedAt.Equal(at) {
		t.Fatalf("revoke answered %+v", rev)
	}
	// A second revocation keeps the first time.
	again, _ := h.apply(structs.ACLTokenType, structs.ACLTokenRequest{Token: structs.ACLToken{ID: alice.ID}, Revoke: true, At: at.Add(time.Hour)}).(*structs.ACLToken)
	if again == nil || !again.RevokedAt.Equal(at) {
		t.Fatalf("second revoke answered %+v", again)
	}
	if tok, _ := h.f.ACLToken(alice.ID); !tok.Revoked {
		t.Fatal("the revoked token is not revoked in the state")
	}
	// A create cannot smuggle in a token that was revoked already, or
	// make one unrevoked.
	created := aclToken(4, "carol", structs.RoleReader)
	created.Revoked, created.RevokedAt = true, at
	got, _ = h.apply(structs.ACLTokenType, structs.ACLTokenRequest{Token: created, At: t0}).(*structs.ACLToken)
	if got == nil || got.Revoked {
		t.Fatalf("create of a revoked record answered %+v", got)
	}
	if n := len(h.f.ACLTokens()); n != 3 {
		t.Fatalf("%d tokens, want 3", n)
	}
}

func TestFSM_ACLTokenCountIsBounded(t *testing.T) {
	h := newHarness(t)
	h.bootstrapACL()
	for i := 2; i <= structs.MaxACLTokens; i++ {
		if err := h.applyErr(structs.ACLTokenType, structs.ACLTokenRequest{Token: aclToken(i, "u", structs.RoleReader), At: t0}); err != nil {
			t.Fatalf("token %d: %v", i, err)
		}
	}
	err := h.applyErr(structs.ACLTokenType, structs.ACLTokenRequest{Token: aclToken(structs.MaxACLTokens+1, "u", structs.RoleReader), At: t0})
	wantErrIs(t, err, ErrLimit, fmt.Sprint(structs.MaxACLTokens))
}

func TestFSM_ACLUserSetsRootAllowance(t *testing.T) {
	h := newHarness(t)
	h.bootstrapACL()
	u := structs.ACLUser{Name: "alice", AllowRoot: true, UpdatedAt: t0, UpdatedBy: "admin"}
	if got, ok := h.apply(structs.ACLUserType, structs.ACLUserRequest{User: u}).(*structs.ACLUser); !ok || *got != u {
		t.Fatalf("user set answered %+v", got)
	}
	wantErrIs(t, h.applyErr(structs.ACLUserType, structs.ACLUserRequest{User: structs.ACLUser{Name: "bad name"}}), ErrInvalidRequest, "user")
	if got, ok := h.f.ACLUser("alice"); !ok || !got.AllowRoot {
		t.Fatalf("ACLUser(alice) = %+v, %v", got, ok)
	}
	if users := h.f.ACLUsers(); len(users) != 1 {
		t.Fatalf("users %+v", users)
	}
}

func TestFSM_SnapshotRoundTripsACLRecords(t *testing.T) {
	h := richState(t)
	h.bootstrapACL()
	h.apply(structs.ACLTokenType, structs.ACLTokenRequest{Token: aclToken(2, "alice", structs.RoleSubmitter), At: t0})
	h.apply(structs.ACLTokenType, structs.ACLTokenRequest{Token: structs.ACLToken{ID: aclToken(2, "", "").ID}, Revoke: true, At: t0})
	exp := aclToken(3, "bob", structs.RoleOperator)
	exp.ExpiresAt = t0.Add(time.Hour)
	h.apply(structs.ACLTokenType, structs.ACLTokenRequest{Token: exp, At: t0})
	h.apply(structs.ACLUserType, structs.ACLUserRequest{User: structs.ACLUser{Name: "alice", AllowRoot: true, UpdatedAt: t0}})

	if v := strings.SplitN(string(snapshotBytes(t, h.f)), "\n", 2)[0]; !strings.HasPrefix(v, `{"version":6,`) {
		t.Fatalf("snapshot header %s, want version 6 (ACL records and events)", v)
	}
	g := restoreFresh(t, h.f)
	if g.Hash() != h.f.Hash() {
		t.Fatal("restored state hashes differently")
	}
	ga, _ := g.ACL()
	ha, _ := h.f.ACL()
	if ga != ha || !reflect.DeepEqual(g.ACLTokens(), h.f.ACLTokens()) || !reflect.DeepEqual(g.ACLUsers(), h.f.ACLUsers()) {
		t.Fatal("restored ACL records differ")
	}
}

func TestFSM_RestoreRefusesBadACLRecords(t *testing.T) {
	tok := `{"type":"acl_token","acl_token":{"id":"0000000000000002","secret_hash":"` + strings.Repeat("2", 64) + `","user":"a","role":"reader","created_at":"2025-03-01T12:00:00Z"}}` + "\n"
	acl := `{"type":"acl","acl":{"bootstrapped_at":"2025-03-01T12:00:00Z","bootstrap_token":"0000000000000002"}}` + "\n"
	v4 := `{"version":4,"index":9}` + "\n"
	cases := []struct{ name, data, want string }{
		{"acl record in version 3", `{"version":3,"index":9}` + "\n" + acl, "acl record in a version 3 snapshot"},
		{"token before the acl state", v4 + tok, "before the acl state"},
		{"acl state twice", v4 + acl + acl, "acl state twice"},
		{"token twice", v4 + acl + tok + tok, "twice"},
		{"invalid token", v4 + acl + strings.Replace(tok, `"reader"`, `"root"`, 1), "role"},
		{"invalid user", v4 + acl + `{"type":"acl_user","acl_user":{"name":"no spaces"}}`, "user"},
	}
	h := richState(t)
	before := h.f.Hash()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wantErrIs(t, h.f.Restore(readCloser([]byte(tc.data))), ErrBadSnapshot, tc.want)
			if h.f.Hash() != before {
				t.Fatal("a refused restore changed state")
			}
		})
	}
}
