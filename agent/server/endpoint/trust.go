package endpoint

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/cluster"
	"github.com/skein-dev/skein/fsm"
	"github.com/skein-dev/skein/structs"
)

// ErrPlaintext answers the trust API of a cluster that runs without TLS.
var ErrPlaintext = errors.New("this cluster runs without TLS (dev mode, loopback or --insecure-cluster): it has no CA, join tokens or keyring")

// Authority is what the trust endpoints ask of this node's cluster trust
// (agent/secure's Secure): it signs, keeps the keyring and commits what
// it decides itself. Its writes (Admit, CreateJoinToken,
// RevokeJoinToken, RotateKeyring, RevokeNode, Renew) are the leader's.
type Authority interface {
	Admit(req api.AdmitRequest) (*api.AdmitResponse, error)
	CA() api.CA
	CreateJoinToken(req api.JoinTokenCreateRequest) (*api.JoinTokenCreated, error)
	JoinTokens() []api.JoinToken
	RevokeJoinToken(id string) (*api.JoinToken, error)
	KeyringStatus() api.KeyringStatus
	RotateKeyring() error
	RevokeNode(nodeID, reason string) error
	Renew(nodeID string, csr []byte) ([]byte, error)
	AcceptCAKey(from string, keyPEM []byte) error
}

// TrustState is what the trust endpoints read of the state (fsm.FSM).
type TrustState interface {
	Trust() (structs.Trust, bool)
	Admission(nodeID string) (structs.Admission, bool)
	Revoked(nodeID string) bool
}

// Trust serves the trust API of a secure cluster: admission, join tokens,
// the CA, the keyring and revocation for users; renewal and the CA key's
// hand-over between nodes. Every method answers ErrPlaintext in a
// cluster without TLS.
type Trust struct {
	// Authority is this node's cluster trust; nil in a plaintext cluster.
	Authority Authority
	State     TrustState
	// Servers is the Raft configuration as this node knows it.
	Servers func() ([]cluster.RaftServer, error)
	// Gossip lists gossip's members as this node sees them; nil: no
	// gossip.
	Gossip func() []api.Member
}

// Secure refuses a plaintext cluster: it has no trust to serve.
func (t Trust) Secure() error {
	if t.Authority == nil {
		return ErrPlaintext
	}
	return nil
}

// lead has the leader do a trust write (Writer.Lead) and answers what do
// answered there.
func lead[T any](t Trust, w Writer, do func(Authority) (T, error)) (T, error) {
	var zero T
	if err := t.Secure(); err != nil {
		return zero, err
	}
	resp, err := w.Lead(nil, func() (any, error) { return do(t.Authority) })
	if err != nil {
		return zero, err
	}
	got, ok := resp.(T)
	if !ok {
		return zero, fmt.Errorf("trust: unexpected answer %T", resp)
	}
	return got, nil
}

// Admit admits a node with a join token, its credential; the leader
// signs its certificate.
func (t Trust) Admit(w Writer, req api.AdmitRequest) (*api.AdmitResponse, error) {
	return lead(t, w, func(a Authority) (*api.AdmitResponse, error) { return a.Admit(req) })
}

// CA is the cluster's CA bundle; it is public.
func (t Trust) CA() (api.CA, error) {
	if err := t.Secure(); err != nil {
		return api.CA{}, err
	}
	return t.Authority.CA(), nil
}

// CreateJoinToken creates a join token; the leader answers its secret.
func (t Trust) CreateJoinToken(w Writer, req api.JoinTokenCreateRequest) (*api.JoinTokenCreated, error) {
	return lead(t, w, func(a Authority) (*api.JoinTokenCreated, error) { return a.CreateJoinToken(req) })
}

// JoinTokens lists the join tokens, never their secrets; none is an
// empty list.
func (t Trust) JoinTokens() ([]api.JoinToken, error) {
	if err := t.Secure(); err != nil {
		return nil, err
	}
	tokens := t.Authority.JoinTokens()
	if tokens == nil {
		tokens = []api.JoinToken{}
	}
	return tokens, nil
}

// RevokeJoinToken revokes the join token id.
func (t Trust) RevokeJoinToken(w Writer, id string) (*api.JoinToken, error) {
	return lead(t, w, func(a Authority) (*api.JoinToken, error) { return a.RevokeJoinToken(id) })
}

// Keyring is the gossip keyring's state, never its keys.
func (t Trust) Keyring() (api.KeyringStatus, error) {
	if err := t.Secure(); err != nil {
		return api.KeyringStatus{}, err
	}
	return t.Authority.KeyringStatus(), nil
}

// RotateKeyring begins a rotation of the gossip keyring on the leader
// and answers the keyring's state there.
func (t Trust) RotateKeyring(w Writer) (api.KeyringStatus, error) {
	return lead(t, w, func(a Authority) (api.KeyringStatus, error) {
		if err := a.RotateKeyring(); err != nil {
			return api.KeyringStatus{}, err
		}
		return a.KeyringStatus(), nil
	})
}

// RevokeNode revokes the admission of node id: any node checks the
// reason and that it was admitted, the leader commits the revocation.
// The answer names the node only: how far cutting it off has come is
// CutOff's.
func (t Trust) RevokeNode(w Writer, id string, req api.NodeRevokeRequest) (api.NodeRevokeResult, error) {
	if err := t.Secure(); err != nil {
		return api.NodeRevokeResult{}, err
	}
	if len(req.Reason) > structs.MaxNameLen {
		return api.NodeRevokeResult{}, &structs.FieldError{Field: "reason", Msg: fmt.Sprintf("longer than %d characters", structs.MaxNameLen)}
	}
	if _, ok := t.State.Admission(id); !ok {
		return api.NodeRevokeResult{}, fmt.Errorf("%w: no admitted node with ID %q", fsm.ErrNodeNotAdmitted, id)
	}
	return lead(t, w, func(a Authority) (api.NodeRevokeResult, error) {
		return api.NodeRevokeResult{NodeID: id}, a.RevokeNode(id, req.Reason)
	})
}

// CutOff says how far cutting the revoked node id off has come, as this
// node can tell: out of the Raft configuration; the keyring rotated
// without it (its revocation applied here, and the rotation it made due
// begun and over, entries that come after it); no member of this node's
// gossip holding it alive.
func (t Trust) CutOff(id string) api.NodeRevokeResult {
	res := api.NodeRevokeResult{NodeID: id, OutOfRaft: true, Refused: true}
	var waiting []string
	if servers, err := t.Servers(); err != nil || slices.ContainsFunc(servers, func(sv cluster.RaftServer) bool { return sv.ID == id }) {
		res.OutOfRaft = false
		waiting = append(waiting, "its removal from Raft")
	}
	ts, _ := t.State.Trust()
	res.KeyringGeneration = ts.Keyring.Generation
	res.Rotated = t.State.Revoked(id) && !ts.KeyringDue && !ts.Keyring.Rotating()
	if !res.Rotated {
		waiting = append(waiting, fmt.Sprintf("the keyring's rotation without it (at generation %d)", ts.Keyring.Generation))
	}
	if t.Gossip != nil && slices.ContainsFunc(t.Gossip(), func(m api.Member) bool {
		return m.ID == id && m.Status == cluster.StatusAlive.String()
	}) {
		res.Refused = false
		waiting = append(waiting, "its refusal in gossip")
	}
	res.Done = len(waiting) == 0
	res.Waiting = strings.Join(waiting, ", ")
	return res
}

// Renew signs a new certificate for the calling node, which the
// certificate it called with names (node), from its CSR. The
// node-to-node API's: only the leader serves it.
func (t Trust) Renew(node string, req api.RenewRequest) (api.RenewResponse, error) {
	if err := t.Secure(); err != nil {
		return api.RenewResponse{}, err
	}
	cert, err := t.Authority.Renew(node, []byte(req.CSR))
	if err != nil {
		return api.RenewResponse{}, err
	}
	return api.RenewResponse{Cert: string(cert)}, nil
}

// AcceptCAKey takes the CA key the leader (from, as its certificate
// names it) hands this node before its promotion to voter.
func (t Trust) AcceptCAKey(from string, req api.CAKeyRequest) error {
	if err := t.Secure(); err != nil {
		return err
	}
	return t.Authority.AcceptCAKey(from, []byte(req.Key))
}
