package fsm

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/structs"
)

// trustState builds on richState a trust state with every kind of join
// token (unlimited, used up, revoked) and admission (founder, by token,
// revoked), and a rotated keyring.
func trustState(t *testing.T) *harness {
	h := richState(t)
	req := trustReq("f")
	req.Trust.CACerts = append(req.Trust.CACerts, "-----BEGIN CERTIFICATE-----\nCA0\n-----END CERTIFICATE-----\n")
	if _, ok := h.apply(structs.TrustInitType, req).(*structs.Trust); !ok {
		t.Fatal("trust init refused")
	}
	h.apply(structs.KeyringType, structs.KeyringRequest{Keyring: structs.Keyring{Primary: "key-2", Others: []string{"key-1"}, Generation: 2}})
	desc := joinToken("ok", 0)
	desc.Description = "rack 4"
	h.createToken(desc)
	h.createToken(joinToken("one", 1))
	h.createToken(joinToken("revoked", 0))
	h.apply(structs.JoinTokenType, structs.JoinTokenRequest{Token: structs.JoinToken{ID: "revoked"}, Revoke: true, At: t0.Add(time.Minute)})
	h.mustAdmit("one", "n1")
	h.mustAdmit("ok", "n2")
	h.mustAdmit("ok", "n3")
	if err := h.revokeNode("n3", "stolen"); err != nil {
		t.Fatal(err)
	}
	return h
}

// wantSameTrust fails unless two FSMs answer every trust query alike.
func wantSameTrust(t *testing.T, got, want *FSM) {
	t.Helper()
	gt, gok := got.Trust()
	wt, wok := want.Trust()
	switch {
	case gok != wok || !reflect.DeepEqual(gt, wt):
		t.Fatalf("trust %+v, want %+v", gt, wt)
	case !reflect.DeepEqual(got.JoinTokens(), want.JoinTokens()):
		t.Fatalf("join tokens %+v, want %+v", got.JoinTokens(), want.JoinTokens())
	case !reflect.DeepEqual(got.Admissions(), want.Admissions()):
		t.Fatalf("admissions %+v, want %+v", got.Admissions(), want.Admissions())
	}
}

func TestFSM_SnapshotRoundTripsTrustRecords(t *testing.T) {
	h := trustState(t)
	g := restoreFresh(t, h.f)
	if g.Hash() != h.f.Hash() || g.Index() != h.f.Index() {
		t.Fatalf("restored hash/index %s/%d, want %s/%d", g.Hash(), g.Index(), h.f.Hash(), h.f.Index())
	}
	wantSameTrust(t, g, h.f)
	if !reflect.DeepEqual(g.Jobs(), h.f.Jobs()) || !reflect.DeepEqual(g.Nodes(), h.f.Nodes()) {
		t.Fatal("restored jobs or nodes differ")
	}
	if !g.Admitted("n2") || !g.Revoked("n3") || !g.Admitted("f") {
		t.Fatal("restored admissions answer differently")
	}

	// Both go on identically: the used-up and revoked tokens stay refused,
	// the others admit and count.
	other := &harness{t: t, f: g, idx: h.idx}
	for _, x := range []*harness{h, other} {
		wantErrIs(t, x.admit("one", "n4"), ErrJoinTokenUsedUp)
		wantErrIs(t, x.admit("revoked", "n4"), ErrJoinTokenRevoked)
		wantErrIs(t, x.admit("ok", "n3"), ErrNodeRevoked)
		x.mustAdmit("ok", "n4")
		x.apply(structs.KeyringType, structs.KeyringRequest{Keyring: structs.Keyring{Primary: "key-3", Generation: 3}})
	}
	if g.Hash() != h.f.Hash() {
		t.Fatal("original and restored FSM diverged after the same entries")
	}
	wantSameTrust(t, g, h.f)
}

func TestFSM_SnapshotFormat_TrustRecordsAfterAllocs(t *testing.T) {
	h := trustState(t)
	data := snapshotBytes(t, h.f)
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if want := fmt.Sprintf(`{"version":6,"index":%d}`, h.idx); lines[0] != want {
		t.Fatalf("header %s, want %s", lines[0], want)
	}
	var types, tokens, admissions []string
	for _, l := range lines[1:] {
		typ := strings.TrimPrefix(strings.SplitN(l, ",", 2)[0], `{"type":`)
		if len(types) == 0 || types[len(types)-1] != typ {
			types = append(types, typ)
		}
		switch typ {
		case `"join_token"`:
			tokens = append(tokens, l)
		case `"admission"`:
			admissions = append(admissions, l)
		}
	}
	if want := []string{`"node"`, `"job"`, `"alloc"`, `"trust"`, `"join_token"`, `"admission"`, `"event_log"`, `"event"`}; !slices.Equal(types, want) {
		t.Fatalf("record types in order %v, want %v", types, want)
	}
	if !slices.IsSorted(tokens) || !slices.IsSorted(admissions) || len(tokens) != 3 || len(admissions) != 4 {
		t.Fatalf("tokens %d and admissions %d, want 3 and 4, each by ID", len(tokens), len(admissions))
	}
	if !strings.Contains(string(data), "secret-hash-of-") {
		t.Fatal("join tokens lost their secret hashes")
	}
	if string(snapshotBytes(t, h.f)) != string(data) {
		t.Fatal("two snapshots of the same state differ")
	}
}

// TestFSM_HashFollowsTrustState checks that every change to each trust
// record type changes the state hash, and that a restored copy has it.
func TestFSM_HashFollowsTrustState(t *testing.T) {
	h := newHarness(t)
	revokeTok := structs.JoinTokenRequest{Token: structs.JoinToken{ID: "t1"}, Revoke: true, At: t0}
	steps := []struct {
		name string
		mt   structs.MessageType
		msg  any
	}{
		{"trust init", structs.TrustInitType, trustReq("f")},
		{"keyring", structs.KeyringType, structs.KeyringRequest{Keyring: structs.Keyring{Primary: "key-2", Generation: 2}}},
		{"token", structs.JoinTokenType, structs.JoinTokenRequest{Token: joinToken("t1", 0)}},
		{"admission", structs.NodeAdmitType, admitReq("t1", "n1")},
		{"second admission", structs.NodeAdmitType, admitReq("t1", "n2")},
		{"token revoked", structs.JoinTokenType, revokeTok},
		{"node revoked", structs.NodeRevokeType, structs.NodeRevokeRequest{NodeID: "n1", At: t0}},
		{"founder revoked", structs.NodeRevokeType, structs.NodeRevokeRequest{NodeID: "f", At: t0}},
	}
	seen := map[string]string{h.f.Hash(): "the empty state"}
	for _, st := range steps {
		if err := h.applyErr(st.mt, st.msg); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		hash := h.f.Hash()
		if prev, ok := seen[hash]; ok {
			t.Fatalf("after %s the hash is the one after %s", st.name, prev)
		}
		seen[hash] = st.name
		if g := restoreFresh(t, h.f); g.Hash() != hash {
			t.Fatalf("after %s a restored copy has another hash", st.name)
		}
	}
	// Repeated revokes change nothing, and neither does the hash.
	before := h.f.Hash()
	h.apply(structs.JoinTokenType, revokeTok)
	h.apply(structs.NodeRevokeType, structs.NodeRevokeRequest{NodeID: "n1", At: t0.Add(time.Hour)})
	if h.f.Hash() != before {
		t.Fatal("a repeated revoke changed the hash")
	}
}

func TestFSM_Restore_RejectsBadTrustRecords(t *testing.T) {
	const v1, v2 = `{"version":1,"index":9}` + "\n", `{"version":2,"index":9}` + "\n"
	trust := `{"type":"trust","trust":{"ca_certs":["CA"],"keyring":{"primary":"k","generation":1},"founder":"f","init_at":"2025-03-01T12:00:00Z"}}` + "\n"
	token := `{"type":"join_token","join_token":{"id":"t1","secret_hash":"h","uses":0}}` + "\n"
	admission := `{"type":"admission","admission":{"node_id":"f","name":"f"}}` + "\n"
	cases := []struct {
		name, data, want string
	}{
		{"trust in version 1", v1 + trust, "record 1: trust record in a version 1 snapshot"},
		{"token in version 1", v1 + token, "join_token record in a version 1 snapshot"},
		{"trust without body", v2 + `{"type":"trust"}`, "trust record without founder"},
		{"trust without founder", v2 + strings.Replace(trust, `"founder":"f"`, `"founder":""`, 1), "trust record without founder"},
		{"trust without CA", v2 + strings.Replace(trust, `["CA"]`, `[]`, 1), "trust state: invalid request: ca_certs is empty"},
		{"trust twice", v2 + trust + trust, "record 2: trust state twice"},
		{"token without id", v2 + trust + `{"type":"join_token","join_token":{"secret_hash":"h"}}`, "join token record without token id"},
		{"token before trust", v2 + token + trust, "join token t1 before the trust state"},
		{"token twice", v2 + trust + token + token, "record 3: join token t1 twice"},
		{"admission without node id", v2 + trust + `{"type":"admission"}`, "admission record without node id"},
		{"admission before trust", v2 + admission, "admission of node f before the trust state"},
		{"admission twice", v2 + trust + admission + admission, "admission of node f twice"},
	}
	h := trustState(t)
	before, idx := h.f.Hash(), h.f.Index()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := h.f.Restore(readCloser([]byte(tc.data)))
			wantErrIs(t, err, ErrBadSnapshot, tc.want)
			if h.f.Hash() != before || h.f.Index() != idx {
				t.Fatal("a refused restore changed state")
			}
		})
	}
	// The same records, well formed, restore.
	g := New(nil)
	if err := g.Restore(readCloser([]byte(v2 + trust + token + admission))); err != nil {
		t.Fatalf("restore: %v", err)
	}
	if !g.Admitted("f") || len(g.JoinTokens()) != 1 {
		t.Fatal("restored trust records missing")
	}
}
