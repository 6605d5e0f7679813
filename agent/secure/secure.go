package secure

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/skein-dev/skein/fsm"
	"github.com/skein-dev/skein/structs"
	"github.com/skein-dev/skein/trust"
)

// Errors of admission and trust. Those a caller got wrong are
// ErrForbidden or ErrInvalid; the server answers 403 and 400.
var (
	ErrForbidden  = errors.New("forbidden")
	ErrInvalid    = errors.New("invalid request")
	ErrNoCAKey    = errors.New("this node holds no CA key, so it cannot sign certificates")
	ErrNoTrust    = errors.New("the cluster has no trust state yet; try again in a moment")
	ErrRotating   = errors.New("a keyring rotation is under way; wait for it to finish")
	ErrRevoked    = errors.New("its admission to the cluster was revoked")
	ErrNeedsToken = errors.New("this node holds no certificate of the cluster: give it a join token (--join-token-file FILE or SKEIN_JOIN_TOKEN) from `skein join-token create` on a member")
)

// Config configures a node's trust.
type Config struct {
	NodeID string
	Name   string
	// DataDir is the agent's data dir; the keys and certificates live in
	// DataDir/tls.
	DataDir string
	// IPs are the addresses this node is reached at; its certificate
	// names them, so that clients checking host names accept it.
	IPs []net.IP
	// CertTTL is how long node certificates are valid.
	CertTTL time.Duration
	// FSM holds the replicated trust state: on a server the cluster's,
	// which the leader's duties (admission, renewal, join tokens, keyring
	// rotation) and the trust API read. A worker outside Raft holds none
	// (or, once a server, a copy it no longer follows).
	FSM *fsm.FSM
	// View is this node's view (agent/node), which carries the trust
	// record and the revocations to every node whatever its role: what
	// each node does for itself (install the keyring, refuse revoked
	// peers) reads it as well as FSM.
	View *fsm.FSM
	// Apply writes one entry through Raft (this node must lead).
	Apply  func(structs.MessageType, any) (any, error)
	Logger hclog.Logger
	// RenewClock is the clock this node judges its certificate's age by;
	// nil is time.Now. Tests move it ahead to see a renewal.
	RenewClock func() time.Time
}

// Start says how this node comes by its identity when it has none.
type Start struct {
	// Found creates a new cluster CA: the node founds a cluster.
	Found bool
	// UserToken is the API token the founder's cluster accepts; "" makes
	// one and writes it to DataDir/api-token.
	UserToken string
	// GossipKey is the founder's first gossip key (--encrypt); nil makes one.
	GossipKey []byte
	// JoinToken and JoinAddrs admit a node that joins.
	JoinToken string
	JoinAddrs []string
}

// Secure is one node's trust: its identity and, on the leader, the
// admission of others.
type Secure struct {
	cfg    Config
	log    hclog.Logger
	store  *trust.Store
	id     *trust.Identity
	ca     atomic.Pointer[trust.CA] // nil on a node without the CA key
	bundle []byte                   // CA certificates, PEM

	// founded is set when this run created the CA.
	founded bool
	// userToken is the founder's API token, whose hash the trust state
	// carries.
	userToken string
	deps      atomic.Pointer[Deps]
	// keyring is what this node installed; saved in DataDir/tls/keyring.json.
	keyringMu sync.Mutex
	keyring   structs.Keyring
	// gossipAddrs are the members the admitting node named.
	gossipAddrs []string
	// pushing holds the nodes the CA key is being handed to.
	pushingMu sync.Mutex
	pushing   map[string]bool
}

// Open loads this node's identity from DataDir/tls, or makes one: a new
// CA for a founder, a certificate from the cluster for a node with a join
// token.
func Open(cfg Config, start Start) (*Secure, error) {
	store, err := trust.NewStore(filepath.Join(cfg.DataDir, "tls"))
	if err != nil {
		return nil, err
	}
	s := &Secure{cfg: cfg, log: cfg.Logger, store: store, pushing: map[string]bool{}}
	certPEM, keyPEM, err := s.store.LoadNode()
	switch {
	case err == nil:
		if s.bundle, err = s.store.LoadCABundle(); err != nil {
			return nil, fmt.Errorf("load the CA bundle: %w", err)
		}
		if err := s.loadKeyring(); err != nil {
			return nil, err
		}
	case !errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("load this node's certificate: %w", err)
	case start.Found:
		if certPEM, keyPEM, err = s.found(start); err != nil {
			return nil, err
		}
	case start.JoinToken == "":
		return nil, ErrNeedsToken
	default:
		if certPEM, keyPEM, err = s.join(start); err != nil {
			return nil, err
		}
	}
	if s.id, err = trust.NewIdentity(certPEM, keyPEM, s.bundle); err != nil {
		return nil, fmt.Errorf("this node's certificate: %w", err)
	}
	if s.id.NodeID() != cfg.NodeID {
		return nil, fmt.Errorf("the certificate in %s names node %s, but this node is %s", s.store.Dir(), s.id.NodeID(), cfg.NodeID)
	}
	if err := s.loadCAKey(); err != nil {
		return nil, err
	}
	if s.userToken == "" && s.CanVote() {
		// A founder restarted before it committed the trust state.
		s.userToken = start.UserToken
		if b, err := os.ReadFile(s.UserTokenPath()); s.userToken == "" && err == nil {
			s.userToken = strings.TrimSpace(string(b))
		}
	}
	return s, nil
}

// found creates the cluster's CA, this node's certificate and the first
// gossip key.
func (s *Secure) found(start Start) (certPEM, keyPEM []byte, err error) {
	ca, err := trust.NewCA(time.Now())
	if err != nil {
		return nil, nil, err
	}
	caKey, err := ca.KeyPEM()
	if err != nil {
		return nil, nil, err
	}
	if err := s.store.SaveCA(ca.CertPEM, caKey); err != nil {
		return nil, nil, err
	}
	s.bundle = ca.CertPEM
	keyPEM, csr, err := s.newCSR()
	if err != nil {
		return nil, nil, err
	}
	if certPEM, err = ca.SignNode(csr, s.cfg.NodeID, s.cfg.CertTTL, time.Now()); err != nil {
		return nil, nil, err
	}
	if err := s.store.SaveNode(certPEM, keyPEM); err != nil {
		return nil, nil, err
	}
	gossipKey := start.GossipKey
	if gossipKey == nil {
		if gossipKey, err = newGossipKey(); err != nil {
			return nil, nil, err
		}
	}
	if err := s.saveKeyring(structs.Keyring{Primary: encodeKey(gossipKey), Generation: 1}); err != nil {
		return nil, nil, err
	}
	s.userToken = start.UserToken
	if s.userToken == "" {
		if s.userToken, err = s.writeUserToken(); err != nil {
			return nil, nil, err
		}
	}
	s.founded = true
	s.log.Info("created the cluster CA", "fingerprint", trust.Fingerprint(ca.Cert), "ca_cert", s.CACertPath())
	return certPEM, keyPEM, nil
}

// newCSR makes a new key for this node and a request for a certificate
// naming its node ID and addresses.
func (s *Secure) newCSR() (keyPEM, csr []byte, err error) {
	key, keyPEM, err := trust.NewKey()
	if err != nil {
		return nil, nil, err
	}
	if csr, err = trust.NewCSR(key, s.cfg.NodeID, s.cfg.IPs); err != nil {
		return nil, nil, err
	}
	return keyPEM, csr, nil
}

// writeUserToken makes the founder's API token and writes it, 0600, to
// DataDir/api-token.
func (s *Secure) writeUserToken() (string, error) {
	tok, err := newSecret()
	if err != nil {
		return "", err
	}
	path := s.UserTokenPath()
	if err := os.WriteFile(path, []byte(tok+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("write the API token %s: %w", path, err)
	}
	s.log.Info("made the cluster's API token", "file", path)
	return tok, nil
}

// loadCAKey loads the CA key when this node holds one.
func (s *Secure) loadCAKey() error {
	keyPEM, err := s.store.LoadCAKey()
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("load the CA key: %w", err)
	}
	ca, err := trust.ParseCA(firstCert(s.bundle), keyPEM)
	if err != nil {
		return fmt.Errorf("the CA key in %s: %w", s.store.Dir(), err)
	}
	s.ca.Store(ca)
	return nil
}

// Identity is this node's certificate and the CA pool, for TLS.
func (s *Secure) Identity() *trust.Identity { return s.id }

// ServerTLS is the TLS configuration of this node's listeners: clients
// present node certificates when clientCerts requires them; revoked nodes
// are refused.
func (s *Secure) ServerTLS(clientCerts tls.ClientAuthType) *tls.Config {
	return s.id.ServerTLS(s.Revoked, clientCerts)
}

// ClientTLS is the TLS configuration of this node's calls to others.
func (s *Secure) ClientTLS() *tls.Config { return s.id.ClientTLS(s.Revoked) }

// Revoked reports whether a node's admission was revoked, as far as this
// node knows: in the state it holds or in its view. A revocation is
// forever, so either saying so is enough: a server's state is a little
// ahead of its view, a worker's view is all it has (and ahead of the state
// it kept from when it was a server).
func (s *Secure) Revoked(nodeID string) bool {
	return s.cfg.FSM.Revoked(nodeID) || s.cfg.View.Revoked(nodeID)
}

// CheckPeer fails for a connection to a node this node knows revoked: a
// connection opened before the revocation was known here outlives the
// handshake's check.
func (s *Secure) CheckPeer(cs *tls.ConnectionState) error {
	id, err := trust.PeerNodeID(cs)
	if err != nil {
		return err
	}
	if s.Revoked(id) {
		return fmt.Errorf("node %s: %w", structs.ShortID(id), ErrRevoked)
	}
	return nil
}

// CanVote reports whether this node holds the CA key, which a node must
// before it may vote (and so lead).
func (s *Secure) CanVote() bool { return s.ca.Load() != nil }

// CACertPath is the file of the CA bundle, for users' SKEIN_CACERT.
func (s *Secure) CACertPath() string { return filepath.Join(s.store.Dir(), "ca.crt") }

// UserTokenPath is where a founder writes the API token it made.
func (s *Secure) UserTokenPath() string { return filepath.Join(s.cfg.DataDir, "api-token") }

// GossipAddrs are the members the admitting node named (empty after a
// restart).
func (s *Secure) GossipAddrs() []string { return s.gossipAddrs }

// FounderToken is the API token a founder serves with until the trust
// state, which carries its hash, is committed; "" on other nodes.
func (s *Secure) FounderToken() string { return s.userToken }

// Founded reports whether this run created the cluster CA.
func (s *Secure) Founded() bool { return s.founded }

// CAFingerprint is the fingerprint of the cluster CA, as join tokens pin it.
func (s *Secure) CAFingerprint() string {
	certs, err := trust.ParseCerts(s.bundle)
	if err != nil || len(certs) == 0 {
		return ""
	}
	return trust.Fingerprint(certs[0])
}
