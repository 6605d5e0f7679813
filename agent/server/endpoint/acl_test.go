package endpoint

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/fsm"
	"github.com/skein-dev/skein/structs"
	"github.com/skein-dev/skein/trust"
)

// tokenAnswer answers a token entry as Apply does: the record it kept.
func tokenAnswer(_ structs.MessageType, e any) (any, error) {
	switch e := e.(type) {
	case structs.ACLBootstrapRequest:
		return &e.Token, nil
	case structs.ACLTokenRequest:
		return &e.Token, nil
	}
	return nil, errors.New("not a token entry")
}

func TestACL_Bootstrap_TheLeaderMakesAnAdminTokenAndKeepsOnlyItsHash(t *testing.T) {
	w := &fakeWriter{leads: true, answer: tokenAnswer}
	created, err := ACL{State: aclState{}}.Bootstrap(w, api.ACLBootstrapRequest{})
	if err != nil {
		t.Fatal(err)
	}
	rec := w.only(t, structs.ACLBootstrapType).(structs.ACLBootstrapRequest).Token
	if rec.User != api.DefaultBootstrapUser || rec.Role != structs.RoleAdmin || rec.CreatedAt.IsZero() {
		t.Errorf("record %+v, want the default user as admin, stamped", rec)
	}
	tok, err := trust.ParseACLToken(created.Token)
	if err != nil || tok.ID != rec.ID || rec.SecretHash != trust.HashSecret(tok.Secret) || strings.Contains(rec.SecretHash, tok.Secret) {
		t.Errorf("token %q (%v) against record %+v: want the record to hold its ID and only its secret's hash", created.Token, err, rec)
	}
}

func TestACL_CreateToken_RefusalsNameTheFieldAndElsewhereNoTokenIsMade(t *testing.T) {
	a := ACL{State: aclState{}}
	admin := Identity{ACL: true, User: "root", Role: structs.RoleAdmin}
	for _, c := range []struct {
		req  api.ACLTokenCreateRequest
		want string
	}{
		{api.ACLTokenCreateRequest{User: "alice", Role: "king"}, "role"},
		{api.ACLTokenCreateRequest{User: "alice", Role: structs.RoleReader, TTL: structs.Duration(-time.Second)}, "ttl"},
		{api.ACLTokenCreateRequest{User: "alice", Role: structs.RoleReader, Description: strings.Repeat("x", structs.MaxDescriptionLen+1)}, "description"},
	} {
		w := &fakeWriter{leads: true}
		if _, err := a.CreateToken(w, admin, c.req); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error naming %s", c.req, err, c.want)
		}
		w.nothing(t)
	}
	w := &fakeWriter{}
	if _, err := a.CreateToken(w, admin, api.ACLTokenCreateRequest{User: "alice", Role: structs.RoleReader}); !errors.Is(err, ErrForwarded) {
		t.Fatalf("on a node that does not lead: %v, want it passed on", err)
	}
	w = &fakeWriter{leads: true, answer: tokenAnswer}
	if _, err := a.CreateToken(w, admin, api.ACLTokenCreateRequest{User: "alice", Role: structs.RoleReader, TTL: structs.Duration(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	rec := w.only(t, structs.ACLTokenType).(structs.ACLTokenRequest).Token
	if rec.CreatedBy != "root" || rec.ExpiresAt.Sub(rec.CreatedAt) != time.Hour {
		t.Errorf("record %+v, want made by root, expiring in an hour", rec)
	}
}

func TestACL_RevokeToken_ByAUniquePrefix(t *testing.T) {
	a := ACL{State: aclState{tokens: []structs.ACLToken{{ID: "abc1"}, {ID: "abd2"}}}}
	w := &fakeWriter{leads: true, answer: tokenAnswer}
	if _, err := a.RevokeToken(w, "ab"); err == nil || !strings.Contains(err.Error(), "names 2 tokens") {
		t.Errorf("an ambiguous prefix: %v, want it refused", err)
	}
	if _, err := a.RevokeToken(w, "zz"); !errors.Is(err, fsm.ErrACLTokenNotFound) {
		t.Errorf("no token: %v, want fsm.ErrACLTokenNotFound", err)
	}
	w.nothing(t)
	if _, err := a.RevokeToken(w, "abd"); err != nil {
		t.Fatal(err)
	}
	if e := w.only(t, structs.ACLTokenType).(structs.ACLTokenRequest); e.Token.ID != "abd2" || !e.Revoke {
		t.Errorf("entry %+v, want abd2 revoked", e)
	}
}

func TestACL_SetUser_RecordsWhoChangedIt(t *testing.T) {
	w := &fakeWriter{leads: true, answer: func(_ structs.MessageType, e any) (any, error) { return e, nil }}
	admin := Identity{ACL: true, User: "root", Role: structs.RoleAdmin}
	if _, err := (ACL{State: aclState{}}).SetUser(w, admin, api.ACLUserSetRequest{User: "bad/name"}); err == nil {
		t.Fatal("a bad user name was taken")
	}
	if _, err := (ACL{State: aclState{}}).SetUser(w, admin, api.ACLUserSetRequest{User: "alice", AllowRoot: true}); err != nil {
		t.Fatal(err)
	}
	if u := w.only(t, structs.ACLUserType).(structs.ACLUserRequest).User; u.Name != "alice" || !u.AllowRoot || u.UpdatedBy != "root" || u.UpdatedAt.IsZero() {
		t.Errorf("entry %+v, want alice allowed root, by root, stamped", u)
	}
}

func TestWhoAmI_ListsThePermissionsOfTheRole(t *testing.T) {
	got := WhoAmI(Identity{ACL: true, User: "alice", Role: structs.RoleReader})
	if len(got.Permissions) != 1 || got.Permissions[0] != structs.PermRead {
		t.Errorf("a reader's permissions %v, want only read", got.Permissions)
	}
}
