package server

import (
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/fsm"
	"github.com/skein-dev/skein/structs"
	"github.com/skein-dev/skein/trust"
)

// TestACLAuth_ABootstrapAHeartbeatAwayIsWaitedFor: a node that has not yet
// applied the ACL bootstrap, asked with the token it made (through another
// node, a moment ago), waits for the bootstrap instead of refusing; with
// no bootstrap coming it refuses, saying the node may not have caught up.
func TestACLAuth_ABootstrapAHeartbeatAwayIsWaitedFor(t *testing.T) {
	f := fsm.New(nil)
	auth := ACLAuth{FSM: f, Legacy: TokenAuth("legacy")}
	tok, err := trust.NewACLToken()
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest("GET", "/v1/status", nil)
	req.Header.Set(api.TokenHeader, tok.String())

	if _, err := auth.Authenticate(req); !errors.Is(err, errACLNotYet) {
		t.Fatalf("no bootstrap coming: %v, want %v", err, errACLNotYet)
	}

	go func() {
		time.Sleep(100 * time.Millisecond)
		buf, err := structs.Encode(structs.ACLBootstrapType, structs.ACLBootstrapRequest{At: time.Now(), Token: structs.ACLToken{
			ID: tok.ID, SecretHash: trust.HashSecret(tok.Secret), User: "admin", Role: structs.RoleAdmin, CreatedAt: time.Now()}})
		if err != nil {
			t.Error(err)
			return
		}
		f.Apply(&raft.Log{Index: 1, Data: buf})
	}()
	r, err := auth.Authenticate(req)
	if err != nil {
		t.Fatalf("the bootstrap applied 100 ms after the request: %v, want the token taken", err)
	}
	if id := identityOf(r); id.User != "admin" || !id.ACL {
		t.Fatalf("identity %+v, want the admin's ACL token", id)
	}
}
