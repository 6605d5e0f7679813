package fsm

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/skein-dev/skein/structs"
)

// TestFSM_JoinTokensNeverAdmitTooMany drives the trust state with random
// token creations and revocations, admissions (with right and wrong
// secrets, unknown tokens, nodes already admitted or revoked) and node
// revocations, and checks after every entry that no token admitted more
// nodes than its MaxUses, that its Uses count exactly the nodes it
// admitted, that no node was admitted twice and that a revoked node stays
// revoked; CheckAdmit must answer every admission as Apply does, and a
// restored snapshot must equal the state it was taken from.
func TestFSM_JoinTokensNeverAdmitTooMany(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		m := &trustModel{rt: rt, h: newHarness(rt), admitted: map[string]bool{"f": true}, revoked: map[string]bool{}}
		m.h.initTrust()
		ops := []func(){m.create, m.admit, m.admit, m.admit, m.admit, m.revokeToken, m.revokeNode}
		for range rapid.IntRange(5, 60).Draw(rt, "steps") {
			ops[rapid.IntRange(0, len(ops)-1).Draw(rt, "op")]()
			m.check()
		}
		g := restoreFresh(rt, m.h.f)
		if g.Hash() != m.h.f.Hash() || !reflect.DeepEqual(g.JoinTokens(), m.h.f.JoinTokens()) ||
			!reflect.DeepEqual(g.Admissions(), m.h.f.Admissions()) {
			rt.Fatalf("restored trust state differs")
		}
	})
}

// trustModel is what the property test knows: the tokens it created, the
// nodes that were admitted once and those revoked since.
type trustModel struct {
	rt       *rapid.T
	h        *harness
	tokens   []string
	admitted map[string]bool
	revoked  map[string]bool
}

// trustNodes are the nodes the property test admits, few so that they repeat.
var trustNodes = []string{"f", "n0", "n1", "n2", "n3", "n4", "n5", "n6"}

// create makes a token with up to 3 uses that expires within 30 entries.
func (m *trustModel) create() {
	id := fmt.Sprintf("t%d", len(m.tokens))
	at := m.h.at()
	tok := structs.JoinToken{
		ID: id, SecretHash: secretOf(id), CreatedAt: at,
		ExpiresAt: at.Add(time.Duration(rapid.IntRange(1, 30).Draw(m.rt, "ttl")) * time.Second),
		MaxUses:   rapid.IntRange(0, 3).Draw(m.rt, "max uses"),
	}
	m.h.createToken(tok)
	m.tokens = append(m.tokens, id)
}

// admit tries to admit a node with a token, usually with its secret, and
// checks that CheckAdmit agrees with Apply and that a refusal changes
// nothing.
func (m *trustModel) admit() {
	tokID := rapid.SampledFrom(append([]string{"ghost"}, m.tokens...)).Draw(m.rt, "token")
	req := structs.NodeAdmitRequest{
		TokenID: tokID, SecretHash: secretOf(tokID),
		NodeID: rapid.SampledFrom(trustNodes).Draw(m.rt, "node"), At: m.h.at(),
	}
	if rapid.IntRange(0, 4).Draw(m.rt, "wrong secret") == 0 {
		req.SecretHash = secretOf("other")
	}
	before := m.h.f.Hash()
	checked := m.h.f.CheckAdmit(req)
	applied := m.h.applyErr(structs.NodeAdmitType, req)
	if fmt.Sprint(checked) != fmt.Sprint(applied) {
		m.rt.Fatalf("CheckAdmit said %v, Apply %v", checked, applied)
	}
	if applied != nil {
		if m.h.f.Hash() != before {
			m.rt.Fatalf("refused admission changed the state: %v", applied)
		}
		return
	}
	if m.admitted[req.NodeID] {
		m.rt.Fatalf("node %s admitted twice", req.NodeID)
	}
	m.admitted[req.NodeID] = true
}

func (m *trustModel) revokeToken() {
	if len(m.tokens) == 0 {
		return
	}
	id := rapid.SampledFrom(m.tokens).Draw(m.rt, "token")
	if err := m.h.applyErr(structs.JoinTokenType, structs.JoinTokenRequest{Token: structs.JoinToken{ID: id}, Revoke: true, At: m.h.at()}); err != nil {
		m.rt.Fatalf("revoke token %s: %v", id, err)
	}
}

func (m *trustModel) revokeNode() {
	id := rapid.SampledFrom(trustNodes).Draw(m.rt, "node")
	err := m.h.applyErr(structs.NodeRevokeType, structs.NodeRevokeRequest{NodeID: id, Reason: "test", At: m.h.at()})
	switch {
	case m.admitted[id] && err != nil:
		m.rt.Fatalf("revoke admitted node %s: %v", id, err)
	case !m.admitted[id] && err == nil:
		m.rt.Fatalf("revoked node %s that was never admitted", id)
	case err == nil:
		m.revoked[id] = true
	}
}

// check compares the state with the model.
func (m *trustModel) check() {
	byToken := map[string]int{}
	for _, a := range m.h.f.Admissions() {
		if !m.admitted[a.NodeID] {
			m.rt.Fatalf("node %s admitted, the model says never", a.NodeID)
		}
		if a.Revoked != m.revoked[a.NodeID] || m.h.f.Admitted(a.NodeID) == a.Revoked {
			m.rt.Fatalf("node %s revoked %v, want %v", a.NodeID, a.Revoked, m.revoked[a.NodeID])
		}
		byToken[a.TokenID]++
	}
	if len(m.h.f.Admissions()) != len(m.admitted) {
		m.rt.Fatalf("%d admissions, the model has %d", len(m.h.f.Admissions()), len(m.admitted))
	}
	for _, tok := range m.h.f.JoinTokens() {
		if tok.MaxUses != 0 && tok.Uses > tok.MaxUses {
			m.rt.Fatalf("token %s used %d times, at most %d", tok.ID, tok.Uses, tok.MaxUses)
		}
		if tok.Uses != byToken[tok.ID] {
			m.rt.Fatalf("token %s counts %d uses, it admitted %d nodes", tok.ID, tok.Uses, byToken[tok.ID])
		}
	}
}
