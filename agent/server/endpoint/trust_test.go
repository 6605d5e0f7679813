package endpoint

import (
	"errors"
	"strings"
	"testing"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/cluster"
	"github.com/skein-dev/skein/fsm"
	"github.com/skein-dev/skein/structs"
)

// fakeAuthority is a cluster's trust without keys: it records what it
// was asked to do and answers as set.
type fakeAuthority struct {
	calls   []string
	keyring api.KeyringStatus
	tokens  []api.JoinToken
	err     error // the writes' answer
}

func (a *fakeAuthority) did(call string) { a.calls = append(a.calls, call) }

func (a *fakeAuthority) Admit(req api.AdmitRequest) (*api.AdmitResponse, error) {
	a.did("admit " + req.NodeID)
	return &api.AdmitResponse{Cert: "cert of " + req.NodeID}, a.err
}
func (a *fakeAuthority) CA() api.CA { return api.CA{Fingerprint: "fp"} }
func (a *fakeAuthority) CreateJoinToken(req api.JoinTokenCreateRequest) (*api.JoinTokenCreated, error) {
	a.did("create token")
	return &api.JoinTokenCreated{Token: "secret"}, a.err
}
func (a *fakeAuthority) JoinTokens() []api.JoinToken { return a.tokens }
func (a *fakeAuthority) RevokeJoinToken(id string) (*api.JoinToken, error) {
	a.did("revoke token " + id)
	return &api.JoinToken{ID: id}, a.err
}
func (a *fakeAuthority) KeyringStatus() api.KeyringStatus { return a.keyring }
func (a *fakeAuthority) RotateKeyring() error {
	a.did("rotate")
	if a.err == nil {
		a.keyring.Generation++
		a.keyring.Rotating = true
	}
	return a.err
}
func (a *fakeAuthority) RevokeNode(nodeID, reason string) error {
	a.did("revoke node " + nodeID + ": " + reason)
	return a.err
}
func (a *fakeAuthority) Renew(nodeID string, csr []byte) ([]byte, error) {
	a.did("renew " + nodeID)
	return []byte("cert for " + string(csr)), a.err
}
func (a *fakeAuthority) AcceptCAKey(from string, keyPEM []byte) error {
	a.did("ca key from " + from)
	return a.err
}

// trustState is the trust state: the keyring, and admissions by node ID.
type trustState struct {
	trust      structs.Trust
	admissions map[string]structs.Admission
}

func (s trustState) Trust() (structs.Trust, bool) { return s.trust, true }
func (s trustState) Admission(id string) (structs.Admission, bool) {
	a, ok := s.admissions[id]
	return a, ok
}
func (s trustState) Revoked(id string) bool { return s.admissions[id].Revoked }

// secureTrust is a secure cluster's Trust, with node n1 admitted.
func secureTrust(a *fakeAuthority) Trust {
	return Trust{Authority: a, State: trustState{admissions: map[string]structs.Admission{"n1": {NodeID: "n1"}}}}
}

func TestTrust_Plaintext_RefusesEveryRequestAndWritesNothing(t *testing.T) {
	tr := Trust{State: trustState{}}
	w := &fakeWriter{leads: true}
	errs := map[string]error{}
	_, errs["admit"] = tr.Admit(w, api.AdmitRequest{})
	_, errs["ca"] = tr.CA()
	_, errs["create"] = tr.CreateJoinToken(w, api.JoinTokenCreateRequest{})
	_, errs["tokens"] = tr.JoinTokens()
	_, errs["revoke token"] = tr.RevokeJoinToken(w, "t1")
	_, errs["keyring"] = tr.Keyring()
	_, errs["rotate"] = tr.RotateKeyring(w)
	_, errs["revoke node"] = tr.RevokeNode(w, "n1", api.NodeRevokeRequest{})
	_, errs["renew"] = tr.Renew("n1", api.RenewRequest{})
	errs["ca key"] = tr.AcceptCAKey("n1", api.CAKeyRequest{})
	for what, err := range errs {
		if !errors.Is(err, ErrPlaintext) {
			t.Errorf("%s: %v, want ErrPlaintext", what, err)
		}
	}
	w.nothing(t)
}

func TestTrust_Writes_OffTheLeaderArePassedOnWithoutTouchingTrust(t *testing.T) {
	a := &fakeAuthority{}
	tr := secureTrust(a)
	w := &fakeWriter{}
	_, err1 := tr.Admit(w, api.AdmitRequest{NodeID: "n9"})
	_, err2 := tr.CreateJoinToken(w, api.JoinTokenCreateRequest{})
	_, err3 := tr.RevokeJoinToken(w, "t1")
	_, err4 := tr.RotateKeyring(w)
	_, err5 := tr.RevokeNode(w, "n1", api.NodeRevokeRequest{Reason: "stolen"})
	for i, err := range []error{err1, err2, err3, err4, err5} {
		if !errors.Is(err, ErrForwarded) {
			t.Errorf("write %d: %v, want ErrForwarded", i+1, err)
		}
	}
	if len(w.forwarded) != 5 || len(a.calls) != 0 {
		t.Errorf("forwarded %q, authority asked %q; want five requests passed on as they came and nothing done here", w.forwarded, a.calls)
	}
}

func TestTrust_Writes_OnTheLeaderAnswerWhatTheAuthorityDid(t *testing.T) {
	a := &fakeAuthority{keyring: api.KeyringStatus{Generation: 4}}
	tr := secureTrust(a)
	w := &fakeWriter{leads: true}
	if resp, err := tr.Admit(w, api.AdmitRequest{NodeID: "n9"}); err != nil || resp.Cert != "cert of n9" {
		t.Errorf("admit: %+v, %v", resp, err)
	}
	if tok, err := tr.RevokeJoinToken(w, "t1"); err != nil || tok.ID != "t1" {
		t.Errorf("revoke token: %+v, %v", tok, err)
	}
	if ks, err := tr.RotateKeyring(w); err != nil || ks.Generation != 5 || !ks.Rotating {
		t.Errorf("rotate: %+v, %v; want the keyring as the rotation left it", ks, err)
	}
	if res, err := tr.RevokeNode(w, "n1", api.NodeRevokeRequest{Reason: "stolen"}); err != nil || res != (api.NodeRevokeResult{NodeID: "n1"}) {
		t.Errorf("revoke node: %+v, %v", res, err)
	}
	want := []string{"admit n9", "revoke token t1", "rotate", "revoke node n1: stolen"}
	if strings.Join(a.calls, "|") != strings.Join(want, "|") {
		t.Errorf("authority asked %q, want %q", a.calls, want)
	}
}

func TestTrust_Writes_TheAuthorityRefusalIsTheAnswer(t *testing.T) {
	refused := errors.New("token used up")
	a := &fakeAuthority{err: refused, keyring: api.KeyringStatus{Generation: 4}}
	tr := secureTrust(a)
	w := &fakeWriter{leads: true}
	if _, err := tr.Admit(w, api.AdmitRequest{NodeID: "n9"}); !errors.Is(err, refused) {
		t.Errorf("admit: %v, want the refusal", err)
	}
	if ks, err := tr.RotateKeyring(w); !errors.Is(err, refused) || ks.Generation != 0 {
		t.Errorf("rotate: %+v, %v; want the refusal and no keyring", ks, err)
	}
}

func TestTrust_RevokeNode_RefusedWhereItArrives(t *testing.T) {
	for _, c := range []struct {
		name  string
		id    string
		req   api.NodeRevokeRequest
		check func(error) bool
	}{
		{"a long reason", "n1", api.NodeRevokeRequest{Reason: strings.Repeat("x", structs.MaxNameLen+1)}, func(err error) bool {
			var fe *structs.FieldError
			return errors.As(err, &fe) && fe.Field == "reason"
		}},
		{"a node never admitted", "n7", api.NodeRevokeRequest{}, func(err error) bool { return errors.Is(err, fsm.ErrNodeNotAdmitted) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := &fakeAuthority{}
			w := &fakeWriter{}
			if _, err := secureTrust(a).RevokeNode(w, c.id, c.req); !c.check(err) {
				t.Errorf("%v, want it refused", err)
			}
			w.nothing(t)
			if len(a.calls) != 0 {
				t.Errorf("authority asked %q", a.calls)
			}
		})
	}
}

func TestTrust_Reads_NoTokensIsAnEmptyList(t *testing.T) {
	a := &fakeAuthority{keyring: api.KeyringStatus{Generation: 2, Keys: 1}}
	tr := secureTrust(a)
	if tokens, err := tr.JoinTokens(); err != nil || tokens == nil || len(tokens) != 0 {
		t.Errorf("join tokens: %#v, %v; want an empty list", tokens, err)
	}
	if ks, err := tr.Keyring(); err != nil || ks.Generation != 2 {
		t.Errorf("keyring: %+v, %v", ks, err)
	}
	if ca, err := tr.CA(); err != nil || ca.Fingerprint != "fp" {
		t.Errorf("ca: %+v, %v", ca, err)
	}
}

func TestTrust_RenewAndCAKey_NameTheCallingNode(t *testing.T) {
	a := &fakeAuthority{}
	tr := secureTrust(a)
	if resp, err := tr.Renew("n1", api.RenewRequest{CSR: "csr"}); err != nil || resp.Cert != "cert for csr" {
		t.Errorf("renew: %+v, %v", resp, err)
	}
	if err := tr.AcceptCAKey("leader-1", api.CAKeyRequest{Key: "k"}); err != nil {
		t.Errorf("ca key: %v", err)
	}
	if got := strings.Join(a.calls, "|"); got != "renew n1|ca key from leader-1" {
		t.Errorf("authority asked %q", got)
	}
	a.err = errors.New("not the leader's certificate")
	if _, err := tr.Renew("n1", api.RenewRequest{CSR: "csr"}); !errors.Is(err, a.err) {
		t.Errorf("renew refused: %v", err)
	}
}

func TestTrust_CutOff_SaysWhatIsStillUnderWay(t *testing.T) {
	revoked := trustState{trust: structs.Trust{Keyring: structs.Keyring{Generation: 7}},
		admissions: map[string]structs.Admission{"n1": {NodeID: "n1", Revoked: true}}}
	inRaft := func() ([]cluster.RaftServer, error) { return []cluster.RaftServer{{ID: "n0"}, {ID: "n1"}}, nil }
	outOfRaft := func() ([]cluster.RaftServer, error) { return []cluster.RaftServer{{ID: "n0"}}, nil }
	noRaft := func() ([]cluster.RaftServer, error) { return nil, errors.New("raft is shutting down") }
	alive := func() []api.Member { return []api.Member{{ID: "n1", Status: cluster.StatusAlive.String()}} }
	gone := func() []api.Member { return []api.Member{{ID: "n1", Status: "left"}} }
	rotating := revoked
	rotating.trust.Keyring.Next = "k2"
	due := revoked
	due.trust.KeyringDue = true
	notYet := trustState{admissions: map[string]structs.Admission{"n1": {NodeID: "n1"}}}
	for _, c := range []struct {
		name    string
		tr      Trust
		want    api.NodeRevokeResult
		waiting string
	}{
		{"all done", Trust{State: revoked, Servers: outOfRaft, Gossip: gone},
			api.NodeRevokeResult{NodeID: "n1", OutOfRaft: true, KeyringGeneration: 7, Rotated: true, Refused: true, Done: true}, ""},
		{"no gossip to ask", Trust{State: revoked, Servers: outOfRaft},
			api.NodeRevokeResult{NodeID: "n1", OutOfRaft: true, KeyringGeneration: 7, Rotated: true, Refused: true, Done: true}, ""},
		{"still a Raft server", Trust{State: revoked, Servers: inRaft, Gossip: gone},
			api.NodeRevokeResult{NodeID: "n1", KeyringGeneration: 7, Rotated: true, Refused: true}, "its removal from Raft"},
		{"Raft unreadable", Trust{State: revoked, Servers: noRaft, Gossip: gone},
			api.NodeRevokeResult{NodeID: "n1", KeyringGeneration: 7, Rotated: true, Refused: true}, "its removal from Raft"},
		{"the rotation under way", Trust{State: rotating, Servers: outOfRaft, Gossip: gone},
			api.NodeRevokeResult{NodeID: "n1", OutOfRaft: true, KeyringGeneration: 7, Refused: true}, "the keyring's rotation without it (at generation 7)"},
		{"the rotation not begun", Trust{State: due, Servers: outOfRaft, Gossip: gone},
			api.NodeRevokeResult{NodeID: "n1", OutOfRaft: true, KeyringGeneration: 7, Refused: true}, "the keyring's rotation without it (at generation 7)"},
		{"the revocation not applied here", Trust{State: notYet, Servers: outOfRaft, Gossip: gone},
			api.NodeRevokeResult{NodeID: "n1", OutOfRaft: true, Refused: true}, "the keyring's rotation without it (at generation 0)"},
		{"alive in gossip", Trust{State: revoked, Servers: inRaft, Gossip: alive},
			api.NodeRevokeResult{NodeID: "n1", KeyringGeneration: 7, Rotated: true}, "its removal from Raft, its refusal in gossip"},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.want.Waiting = c.waiting
			if got := c.tr.CutOff("n1"); got != c.want {
				t.Errorf("got  %+v\nwant %+v", got, c.want)
			}
		})
	}
}
