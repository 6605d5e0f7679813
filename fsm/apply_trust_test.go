package fsm

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/skein-dev/skein/structs"
)

// trustReq is a valid TrustInit for a cluster founded by node founder at t0.
func trustReq(founder string) structs.TrustInitRequest {
	return structs.TrustInitRequest{
		Trust: structs.Trust{
			CACerts:       []string{"-----BEGIN CERTIFICATE-----\nCA1\n-----END CERTIFICATE-----\n"},
			UserTokenHash: "user-token-hash",
			Keyring:       structs.Keyring{Primary: "key-1", Generation: 1},
			Founder:       founder,
			InitAt:        t0,
		},
		Name: "name-" + founder,
	}
}

// initTrust founds the cluster's trust with node "f" and fails the test if
// Apply refuses it.
func (h *harness) initTrust() {
	h.t.Helper()
	if _, ok := h.apply(structs.TrustInitType, trustReq("f")).(*structs.Trust); !ok {
		h.t.Fatalf("trust init refused")
	}
}

// secretOf is the secret hash of the join token id in these tests.
func secretOf(id string) string { return "secret-hash-of-" + id }

// joinToken is a valid join token created at t0, valid for an hour.
func joinToken(id string, maxUses int) structs.JoinToken {
	return structs.JoinToken{ID: id, SecretHash: secretOf(id), CreatedAt: t0, ExpiresAt: t0.Add(time.Hour), MaxUses: maxUses}
}

// createToken creates a join token and fails the test if Apply refuses it.
func (h *harness) createToken(tok structs.JoinToken) {
	h.t.Helper()
	if resp, ok := h.apply(structs.JoinTokenType, structs.JoinTokenRequest{Token: tok}).(*structs.JoinToken); !ok {
		h.t.Fatalf("create join token %s: got %v", tok.ID, resp)
	}
}

// admitReq admits nodeID with token tokID and its right secret at t0+10m.
func admitReq(tokID, nodeID string) structs.NodeAdmitRequest {
	return structs.NodeAdmitRequest{TokenID: tokID, SecretHash: secretOf(tokID), NodeID: nodeID, Name: "name-" + nodeID, At: t0.Add(10 * time.Minute)}
}

// admit applies admitReq and returns Apply's error.
func (h *harness) admit(tokID, nodeID string) error {
	h.t.Helper()
	return h.applyErr(structs.NodeAdmitType, admitReq(tokID, nodeID))
}

// mustAdmit is admit that fails the test if the node is refused.
func (h *harness) mustAdmit(tokID, nodeID string) {
	h.t.Helper()
	if err := h.admit(tokID, nodeID); err != nil {
		h.t.Fatalf("admit %s with %s: %v", nodeID, tokID, err)
	}
}

// revokeNode revokes a node's admission at t0+20m.
func (h *harness) revokeNode(nodeID, reason string) error {
	h.t.Helper()
	return h.applyErr(structs.NodeRevokeType, structs.NodeRevokeRequest{NodeID: nodeID, Reason: reason, At: t0.Add(20 * time.Minute)})
}

// wantRefusedUnchanged applies msg and fails unless Apply refuses it with
// target (and parts) and the state is as it was.
func wantRefusedUnchanged(t *testing.T, h *harness, mt structs.MessageType, msg any, target error, parts ...string) {
	t.Helper()
	before, toks, adms := h.f.Hash(), h.f.JoinTokens(), h.f.Admissions()
	trust, hasTrust := h.f.Trust()
	wantErrIs(t, h.applyErr(mt, msg), target, parts...)
	if h.f.Hash() != before || !reflect.DeepEqual(h.f.JoinTokens(), toks) || !reflect.DeepEqual(h.f.Admissions(), adms) {
		t.Fatal("a refused entry changed the state")
	}
	if got, ok := h.f.Trust(); ok != hasTrust || !reflect.DeepEqual(got, trust) {
		t.Fatal("a refused entry changed the trust state")
	}
}

func TestFSM_TrustInit_StoresTrustAndAdmitsFounder(t *testing.T) {
	h := newHarness(t)
	if _, ok := h.f.Trust(); ok {
		t.Fatal("a new FSM has a trust state")
	}
	req := trustReq("f")
	req.Trust.Keyring.Others = []string{"key-0"}
	resp, ok := h.apply(structs.TrustInitType, req).(*structs.Trust)
	if !ok || !reflect.DeepEqual(*resp, req.Trust) {
		t.Fatalf("trust init returned %v, want the trust state", resp)
	}
	got, ok := h.f.Trust()
	if !ok || !reflect.DeepEqual(got, req.Trust) {
		t.Fatalf("Trust() = %+v, %v; want %+v", got, ok, req.Trust)
	}
	want := structs.Admission{NodeID: "f", Name: "name-f", AdmittedAt: t0}
	if a, ok := h.f.Admission("f"); !ok || a != want {
		t.Fatalf("founder's admission %+v, want %+v", a, want)
	}
	if !h.f.Admitted("f") || h.f.Revoked("f") || h.f.Admitted("other") {
		t.Fatal("founder not admitted, or another node is")
	}

	// What the queries and Apply hand out is not the state.
	got.CACerts[0], got.Keyring.Others[0] = "changed", "changed"
	resp.CACerts[0] = "changed"
	if again, _ := h.f.Trust(); !reflect.DeepEqual(again, req.Trust) {
		t.Fatal("changing a returned trust state changed the FSM's")
	}
}

func TestFSM_TrustInit_Refusals(t *testing.T) {
	cases := []struct {
		name    string
		founded bool // the cluster has a trust state already
		edit    func(*structs.TrustInitRequest)
		target  error
		want    string
	}{
		{"second init", true, func(*structs.TrustInitRequest) {}, ErrTrustInitialized, "founded by node f"},
		{"no CA certificate", false, func(r *structs.TrustInitRequest) { r.Trust.CACerts = nil }, ErrInvalidRequest, "ca_certs is empty"},
		{"empty CA certificate", false, func(r *structs.TrustInitRequest) { r.Trust.CACerts = append(r.Trust.CACerts, "") }, ErrInvalidRequest, "ca_certs[1] is empty"},
		{"no primary key", false, func(r *structs.TrustInitRequest) { r.Trust.Keyring.Primary = "" }, ErrInvalidRequest, "keyring.primary is empty"},
		{"generation 0", false, func(r *structs.TrustInitRequest) { r.Trust.Keyring.Generation = 0 }, ErrInvalidRequest, "keyring.generation is 0"},
		{"key twice", false, func(r *structs.TrustInitRequest) { r.Trust.Keyring.Others = []string{"key-1"} }, ErrInvalidRequest, "keyring.others[0] repeats the primary key"},
		{"no founder", false, func(r *structs.TrustInitRequest) { r.Trust.Founder = "" }, ErrInvalidRequest, "founder is empty"},
		{"no time", false, func(r *structs.TrustInitRequest) { r.Trust.InitAt = time.Time{} }, ErrInvalidRequest, "init_at is not stamped"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			if tc.founded {
				h.initTrust()
			}
			req := trustReq("g")
			tc.edit(&req)
			wantRefusedUnchanged(t, h, structs.TrustInitType, req, tc.target, "trust init", tc.want)
			if h.f.Admitted("g") {
				t.Fatal("refused founder admitted")
			}
		})
	}
}

func TestFSM_JoinTokenCreate(t *testing.T) {
	h := newHarness(t)
	h.initTrust()
	tok := joinToken("t1", 2)
	tok.Description = "rack 4"
	resp, ok := h.apply(structs.JoinTokenType, structs.JoinTokenRequest{Token: tok}).(*structs.JoinToken)
	if !ok || *resp != tok {
		t.Fatalf("create returned %v, want %+v", resp, tok)
	}
	if got, ok := h.f.JoinToken("t1"); !ok || got != tok {
		t.Fatalf("JoinToken(t1) = %+v, %v; want %+v", got, ok, tok)
	}
	if _, ok := h.f.JoinToken("t2"); ok {
		t.Fatal("unknown token found")
	}
}

func TestFSM_JoinTokenCreate_Refusals(t *testing.T) {
	cases := []struct {
		name   string
		edit   func(*structs.JoinToken)
		target error
		want   string
	}{
		{"empty id", func(tok *structs.JoinToken) { tok.ID = "" }, ErrInvalidRequest, "id is empty"},
		{"id in use", func(tok *structs.JoinToken) { tok.ID = "used" }, ErrJoinTokenExists, "join token used"},
		{"id of a revoked token", func(tok *structs.JoinToken) { tok.ID = "revoked" }, ErrJoinTokenExists, "join token revoked"},
		{"no secret", func(tok *structs.JoinToken) { tok.SecretHash = "" }, ErrInvalidRequest, "secret_hash is empty"},
		{"no creation time", func(tok *structs.JoinToken) { tok.CreatedAt = time.Time{} }, ErrInvalidRequest, "created_at is not stamped"},
		{"expires when created", func(tok *structs.JoinToken) { tok.ExpiresAt = tok.CreatedAt }, ErrInvalidRequest, "is not after created_at"},
		{"expires before created", func(tok *structs.JoinToken) { tok.ExpiresAt = tok.CreatedAt.Add(-time.Second) }, ErrInvalidRequest, "is not after created_at"},
		{"negative max uses", func(tok *structs.JoinToken) { tok.MaxUses = -1 }, ErrInvalidRequest, "max_uses -1 is negative"},
		{"already used", func(tok *structs.JoinToken) { tok.Uses = 1 }, ErrInvalidRequest, "uses is 1, want 0"},
		{"created revoked", func(tok *structs.JoinToken) { tok.Revoked = true }, ErrInvalidRequest, "created revoked"},
	}
	h := newHarness(t)
	wantRefusedUnchanged(t, h, structs.JoinTokenType, structs.JoinTokenRequest{Token: joinToken("new", 0)}, ErrNoTrust)
	h.initTrust()
	h.createToken(joinToken("used", 1))
	h.createToken(joinToken("revoked", 1))
	h.apply(structs.JoinTokenType, structs.JoinTokenRequest{Token: structs.JoinToken{ID: "revoked"}, Revoke: true, At: t0})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tok := joinToken("new", 3)
			tc.edit(&tok)
			wantRefusedUnchanged(t, h, structs.JoinTokenType, structs.JoinTokenRequest{Token: tok}, tc.target, tc.want)
		})
	}
}

func TestFSM_JoinTokenRevoke_KeepsTheFirstTime(t *testing.T) {
	h := newHarness(t)
	h.initTrust()
	h.createToken(joinToken("t1", 0))
	revoke := func(id string, at time.Time) any {
		return h.apply(structs.JoinTokenType, structs.JoinTokenRequest{Token: structs.JoinToken{ID: id}, Revoke: true, At: at})
	}
	wantRefusedUnchanged(t, h, structs.JoinTokenType, structs.JoinTokenRequest{Token: structs.JoinToken{ID: "t9"}, Revoke: true, At: t0},
		ErrJoinTokenNotFound, "join token t9")
	wantRefusedUnchanged(t, h, structs.JoinTokenType, structs.JoinTokenRequest{Token: structs.JoinToken{ID: "t1"}, Revoke: true},
		ErrInvalidRequest, "at is not stamped")

	first := t0.Add(time.Minute)
	for _, at := range []time.Time{first, first.Add(time.Minute)} {
		resp, ok := revoke("t1", at).(*structs.JoinToken)
		if !ok || !resp.Revoked || !resp.RevokedAt.Equal(first) {
			t.Fatalf("revoke at %s returned %v, want t1 revoked at %s", at, resp, first)
		}
	}
	want := joinToken("t1", 0)
	want.Revoked, want.RevokedAt = true, first
	if got, _ := h.f.JoinToken("t1"); got != want {
		t.Fatalf("revoked token %+v, want %+v", got, want)
	}
	wantErrIs(t, h.admit("t1", "n1"), ErrJoinTokenRevoked, "join token t1")
}

// admitState is a cluster founded by f with tokens of every kind: ok (no
// limit), one (one use, used by node a), revoked, short (expired at
// t0+1m); node r was admitted and revoked.
func admitState(t *testing.T) *harness {
	h := newHarness(t)
	h.initTrust()
	h.createToken(joinToken("ok", 0))
	h.createToken(joinToken("one", 1))
	h.createToken(joinToken("revoked", 0))
	short := joinToken("short", 0)
	short.ExpiresAt = t0.Add(time.Minute)
	h.createToken(short)
	h.apply(structs.JoinTokenType, structs.JoinTokenRequest{Token: structs.JoinToken{ID: "revoked"}, Revoke: true, At: t0})
	h.mustAdmit("one", "a")
	h.mustAdmit("ok", "r")
	if err := h.revokeNode("r", "stolen"); err != nil {
		t.Fatalf("revoke r: %v", err)
	}
	return h
}

// TestFSM_NodeAdmit_CheckAdmitAgreesWithApply runs every refusal of
// NodeAdmit, and a success, through CheckAdmit and then Apply: both give
// the same answer, CheckAdmit never changes the state and a refused entry
// changes nothing.
func TestFSM_NodeAdmit_CheckAdmitAgreesWithApply(t *testing.T) {
	edit := func(tokID, nodeID string, f func(*structs.NodeAdmitRequest)) structs.NodeAdmitRequest {
		r := admitReq(tokID, nodeID)
		f(&r)
		return r
	}
	cases := []struct {
		name   string
		req    structs.NodeAdmitRequest
		target error // nil: admitted
		want   string
	}{
		{"admitted", admitReq("ok", "n1"), nil, ""},
		{"last use", admitReq("one", "n1"), ErrJoinTokenUsedUp, "admitted 1 of 1 nodes"},
		{"no node id", admitReq("ok", ""), ErrInvalidRequest, "node_id is empty"},
		{"no time", edit("ok", "n1", func(r *structs.NodeAdmitRequest) { r.At = time.Time{} }), ErrInvalidRequest, "at is not stamped"},
		{"unknown token", admitReq("nope", "n1"), ErrJoinTokenNotFound, "join token nope"},
		{"no token", admitReq("", "n1"), ErrJoinTokenNotFound, ""},
		{"wrong secret", edit("ok", "n1", func(r *structs.NodeAdmitRequest) { r.SecretHash = secretOf("one") }), ErrJoinTokenSecret, "join token ok"},
		{"no secret", edit("ok", "n1", func(r *structs.NodeAdmitRequest) { r.SecretHash = "" }), ErrJoinTokenSecret, ""},
		{"secret prefix", edit("ok", "n1", func(r *structs.NodeAdmitRequest) { r.SecretHash = r.SecretHash[:5] }), ErrJoinTokenSecret, ""},
		{"wrong secret of a revoked token", edit("revoked", "n1", func(r *structs.NodeAdmitRequest) { r.SecretHash = "x" }), ErrJoinTokenSecret, ""},
		{"revoked token", admitReq("revoked", "n1"), ErrJoinTokenRevoked, "join token revoked: join token revoked at"},
		{"expired token", admitReq("short", "n1"), ErrJoinTokenExpired, "join token short"},
		{"at expiry", edit("short", "n1", func(r *structs.NodeAdmitRequest) { r.At = t0.Add(time.Minute) }), ErrJoinTokenExpired, ""},
		{"just before expiry", edit("short", "n1", func(r *structs.NodeAdmitRequest) { r.At = t0.Add(time.Minute - 1) }), nil, ""},
		{"node admitted", admitReq("ok", "a"), ErrNodeAdmitted, "node a"},
		{"founder", admitReq("ok", "f"), ErrNodeAdmitted, "node f"},
		{"node revoked", admitReq("ok", "r"), ErrNodeRevoked, "node r"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := admitState(t)
			before := h.f.Hash()
			checked := h.f.CheckAdmit(tc.req)
			if h.f.Hash() != before {
				t.Fatal("CheckAdmit changed the state")
			}
			if tc.target == nil {
				if checked != nil {
					t.Fatalf("CheckAdmit refused: %v", checked)
				}
				tok, _ := h.f.JoinToken(tc.req.TokenID)
				resp, ok := h.apply(structs.NodeAdmitType, tc.req).(*structs.Admission)
				want := structs.Admission{NodeID: tc.req.NodeID, Name: tc.req.Name, TokenID: tc.req.TokenID, AdmittedAt: tc.req.At}
				if !ok || *resp != want {
					t.Fatalf("admit returned %v, want %+v", resp, want)
				}
				if got, _ := h.f.Admission(tc.req.NodeID); got != want || !h.f.Admitted(tc.req.NodeID) {
					t.Fatalf("admission %+v, want %+v", got, want)
				}
				if after, _ := h.f.JoinToken(tc.req.TokenID); after.Uses != tok.Uses+1 {
					t.Fatalf("token uses %d after an admission, want %d", after.Uses, tok.Uses+1)
				}
				return
			}
			wantErrIs(t, checked, tc.target, tc.want)
			before, toks := h.f.Hash(), h.f.JoinTokens()
			applied := h.applyErr(structs.NodeAdmitType, tc.req)
			if applied == nil || applied.Error() != checked.Error() {
				t.Fatalf("Apply said %v, CheckAdmit %v", applied, checked)
			}
			if h.f.Hash() != before || !reflect.DeepEqual(h.f.JoinTokens(), toks) {
				t.Fatal("a refused admission changed the state")
			}
		})
	}
	h := newHarness(t)
	wantErrIs(t, h.f.CheckAdmit(admitReq("ok", "n1")), ErrNoTrust)
	wantRefusedUnchanged(t, h, structs.NodeAdmitType, admitReq("ok", "n1"), ErrNoTrust)
}

func TestFSM_NodeAdmit_CountsUsesUpToMaxUses(t *testing.T) {
	h := newHarness(t)
	h.initTrust()
	h.createToken(joinToken("three", 3))
	h.createToken(joinToken("any", 0))
	for _, n := range []string{"n1", "n2", "n3"} {
		h.mustAdmit("three", n)
	}
	wantErrIs(t, h.admit("three", "n4"), ErrJoinTokenUsedUp, "admitted 3 of 3 nodes")
	if tok, _ := h.f.JoinToken("three"); tok.Uses != 3 {
		t.Fatalf("uses %d, want 3", tok.Uses)
	}
	for i := range 10 {
		h.mustAdmit("any", fmt.Sprintf("m%d", i))
	}
	if tok, _ := h.f.JoinToken("any"); tok.Uses != 10 {
		t.Fatalf("uses of an unlimited token %d, want 10", tok.Uses)
	}
	var byThree []string
	for _, a := range h.f.Admissions() {
		if a.TokenID == "three" {
			byThree = append(byThree, a.NodeID)
		}
	}
	if !reflect.DeepEqual(byThree, []string{"n1", "n2", "n3"}) {
		t.Fatalf("admitted by token three: %v", byThree)
	}
	// A refused node does not use the token.
	h.createToken(joinToken("two", 2))
	wantErrIs(t, h.admit("two", "n1"), ErrNodeAdmitted)
	if tok, _ := h.f.JoinToken("two"); tok.Uses != 0 {
		t.Fatalf("a refused admission used the token: %d", tok.Uses)
	}
}

func TestFSM_NodeRevoke_ThenAdmitRefused(t *testing.T) {
	h := newHarness(t)
	h.initTrust()
	h.createToken(joinToken("ok", 0))
	h.mustAdmit("ok", "n1")

	wantRefusedUnchanged(t, h, structs.NodeRevokeType, structs.NodeRevokeRequest{NodeID: "n9", At: t0}, ErrNodeNotAdmitted, "node n9")
	wantRefusedUnchanged(t, h, structs.NodeRevokeType, structs.NodeRevokeRequest{At: t0}, ErrInvalidRequest, "node_id is empty")
	wantRefusedUnchanged(t, h, structs.NodeRevokeType, structs.NodeRevokeRequest{NodeID: "n1"}, ErrInvalidRequest, "at is not stamped")

	resp, ok := h.apply(structs.NodeRevokeType, structs.NodeRevokeRequest{NodeID: "n1", Reason: "decommissioned", At: t0.Add(time.Hour)}).(*structs.Admission)
	want := structs.Admission{NodeID: "n1", Name: "name-n1", TokenID: "ok", AdmittedAt: t0.Add(10 * time.Minute),
		Revoked: true, RevokedAt: t0.Add(time.Hour), Reason: "decommissioned"}
	if !ok || *resp != want {
		t.Fatalf("revoke returned %v, want %+v", resp, want)
	}
	if h.f.Admitted("n1") || !h.f.Revoked("n1") {
		t.Fatal("revoked node still admitted")
	}
	// Again: nothing changes, the first time and reason stay.
	before := h.f.Hash()
	if err := h.revokeNode("n1", "again"); err != nil {
		t.Fatalf("second revoke: %v", err)
	}
	if got, _ := h.f.Admission("n1"); got != want || h.f.Hash() != before {
		t.Fatalf("second revoke changed the admission: %+v", got)
	}
	wantErrIs(t, h.f.CheckAdmit(admitReq("ok", "n1")), ErrNodeRevoked, "node n1")
	wantRefusedUnchanged(t, h, structs.NodeAdmitType, admitReq("ok", "n1"), ErrNodeRevoked, "node n1")

	// The founder may be revoked too.
	if err := h.revokeNode("f", "founder retired"); err != nil {
		t.Fatalf("revoke founder: %v", err)
	}
	if h.f.Admitted("f") || !h.f.Revoked("f") {
		t.Fatal("revoked founder still admitted")
	}
	if _, ok := h.f.Trust(); !ok {
		t.Fatal("revoking the founder dropped the trust state")
	}
}

func TestFSM_NodeRevoke_MakesAKeyringRotationDueUntilOneBegins(t *testing.T) {
	h := newHarness(t)
	h.initTrust()
	h.createToken(joinToken("ok", 0))
	h.mustAdmit("ok", "n1")
	if tr, _ := h.f.Trust(); tr.KeyringDue {
		t.Fatal("a rotation is due before any revocation")
	}
	if err := h.revokeNode("n1", "stolen"); err != nil {
		t.Fatal(err)
	}
	tr, _ := h.f.Trust()
	if !tr.KeyringDue {
		t.Fatal("revoking a node did not make a keyring rotation due")
	}
	// The step that brings a new key in clears it.
	next := tr.Keyring
	next.Generation++
	next.Next = "key-new"
	if _, ok := h.apply(structs.KeyringType, structs.KeyringRequest{Keyring: next}).(*structs.Keyring); !ok {
		t.Fatal("rotation step refused")
	}
	if tr, _ := h.f.Trust(); tr.KeyringDue {
		t.Fatal("the rotation began but is still due")
	}
}

func TestFSM_Keyring(t *testing.T) {
	h := newHarness(t)
	wantRefusedUnchanged(t, h, structs.KeyringType, structs.KeyringRequest{Keyring: structs.Keyring{Primary: "key-2", Generation: 2}}, ErrNoTrust)
	h.initTrust()
	cases := []struct {
		name   string
		k      structs.Keyring
		target error
		want   string
	}{
		{"same generation", structs.Keyring{Primary: "key-2", Generation: 1}, ErrKeyringGeneration, "generation 1, want 2"},
		{"skipped generation", structs.Keyring{Primary: "key-2", Generation: 3}, ErrKeyringGeneration, "generation 3, want 2"},
		{"no primary", structs.Keyring{Others: []string{"key-1"}, Generation: 2}, ErrInvalidRequest, "keyring.primary is empty"},
		{"primary in others", structs.Keyring{Primary: "key-2", Others: []string{"key-1", "key-2"}, Generation: 2}, ErrInvalidRequest, "keyring.others[1] repeats the primary key"},
		{"next is the primary", structs.Keyring{Primary: "key-2", Next: "key-2", Generation: 2}, ErrInvalidRequest, "keyring.next repeats another key"},
		{"next in others", structs.Keyring{Primary: "key-2", Next: "key-1", Others: []string{"key-1"}, Generation: 2}, ErrInvalidRequest, "keyring.next repeats another key"},
		{"other twice", structs.Keyring{Primary: "key-2", Others: []string{"key-1", "key-1"}, Generation: 2}, ErrInvalidRequest, "keyring.others[1] repeats an earlier key"},
		{"empty other", structs.Keyring{Primary: "key-2", Others: []string{""}, Generation: 2}, ErrInvalidRequest, "keyring.others[0] is empty"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wantRefusedUnchanged(t, h, structs.KeyringType, structs.KeyringRequest{Keyring: tc.k}, tc.target, "keyring", tc.want)
		})
	}
	for _, k := range []structs.Keyring{
		{Primary: "key-2", Others: []string{"key-1"}, Generation: 2},
		{Primary: "key-2", Generation: 3},
	} {
		resp, ok := h.apply(structs.KeyringType, structs.KeyringRequest{Keyring: k}).(*structs.Keyring)
		if !ok || !reflect.DeepEqual(*resp, k) {
			t.Fatalf("keyring returned %v, want %+v", resp, k)
		}
		if tr, _ := h.f.Trust(); !reflect.DeepEqual(tr.Keyring, k) || tr.Founder != "f" || len(tr.CACerts) != 1 {
			t.Fatalf("trust after the keyring change %+v, want keyring %+v and the rest kept", tr, k)
		}
	}
}

func TestFSM_TrustQueries_SortAndCopy(t *testing.T) {
	h := newHarness(t)
	h.initTrust()
	for _, tc := range []struct {
		id string
		at time.Time
	}{{"b", t0}, {"c", t0.Add(-time.Minute)}, {"a", t0}} {
		tok := joinToken(tc.id, 0)
		tok.CreatedAt = tc.at
		h.createToken(tok)
	}
	var ids []string
	for _, tok := range h.f.JoinTokens() {
		ids = append(ids, tok.ID)
	}
	if want := []string{"c", "a", "b"}; !reflect.DeepEqual(ids, want) {
		t.Fatalf("tokens in order %v, want %v", ids, want)
	}
	h.mustAdmit("a", "z")
	h.mustAdmit("a", "m")
	ids = nil
	for _, a := range h.f.Admissions() {
		ids = append(ids, a.NodeID)
	}
	if want := []string{"f", "m", "z"}; !reflect.DeepEqual(ids, want) {
		t.Fatalf("admissions in order %v, want %v", ids, want)
	}
	toks := h.f.JoinTokens()
	toks[0].Uses = 99
	if tok, _ := h.f.JoinToken(toks[0].ID); tok.Uses == 99 {
		t.Fatal("changing a returned token changed the FSM's")
	}
	if h.f.Revoked("nobody") || h.f.Admitted("nobody") {
		t.Fatal("an unknown node is admitted or revoked")
	}
}
