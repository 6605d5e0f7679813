package secure

import (
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"time"

	"github.com/skein-dev/skein/agent/peer"
	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/cluster"
	"github.com/skein-dev/skein/structs"
	"github.com/skein-dev/skein/trust"
)

// dep is what Run was given; Run comes before anything calls the
// methods that use it, except PrepareVoter, which checks.
func (s *Secure) dep() *Deps { return s.deps.Load() }

// Timings of the background duties.
const (
	// renewCheck is how often a node looks whether its certificate is due
	// for renewal (two thirds of its lifetime passed); a tenth of the
	// lifetime when that is shorter, so short test lifetimes renew too.
	renewCheck = time.Hour
	// retryPause is the pause after a duty failed (no leader, a call).
	retryPause = time.Second
	// rotationPoll is how often the leader looks whether every live node
	// installed the keyring of a rotation step.
	rotationPoll = 200 * time.Millisecond
	callTimeout  = 10 * time.Second
)

// Raft is what the trust duties need of Raft and gossip.
type Raft interface {
	IsLeader() bool
	Leader() (addr, id string)
	Barrier(timeout time.Duration) error
	Members() []cluster.Member
	Servers() ([]cluster.RaftServer, error)
	SetKeyring(primary []byte, others [][]byte) error
	UpdateMeta() error
}

// Deps are the parts made after the identity: Raft, the clients of other
// nodes, this node's gossip metadata and its audit log.
type Deps struct {
	Raft     Raft
	Peers    *peer.Peers
	Announce *peer.Announcer
	// Audit records an event this node took part in by itself (an
	// api.Audit* event and what it was); nil records none.
	Audit func(event, detail string)
}

// audit records an event in the audit log, when there is one.
func (s *Secure) audit(event, detail string) {
	if d := s.dep(); d != nil && d.Audit != nil {
		d.Audit(event, detail)
	}
}

// Run starts the background duties: committing the trust state once a
// founder leads, installing every keyring the cluster commits, carrying
// keyring rotations on while this node leads, and renewing this node's
// certificate. They stop with ctx.
func (s *Secure) Run(ctx context.Context, d Deps, goLoop func(func())) {
	s.deps.Store(&d)
	d.Announce.SetKeyring(s.KeyringGeneration())
	if s.CanVote() {
		goLoop(func() { s.initLoop(ctx) })
	}
	goLoop(func() { s.keyringLoop(ctx) })
	goLoop(func() { s.renewLoop(ctx) })
}

// initLoop commits the trust state the founder made, once it leads; on
// any other node holding the CA key it ends once it finds the state.
func (s *Secure) initLoop(ctx context.Context) {
	for {
		err := s.initTrust()
		if err == nil {
			return
		}
		s.log.Debug("commit the trust state", "error", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(retryPause / 4):
		}
	}
}

// WaitTrust waits until the cluster's trust state is applied here, for
// at most timeout.
func (s *Secure) WaitTrust(ctx context.Context, timeout time.Duration) error {
	deadline := time.After(timeout)
	for {
		_, changed := s.cfg.FSM.Watch()
		if _, ok := s.cfg.FSM.Trust(); ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline:
			return fmt.Errorf("the cluster's trust state was not committed within %s: see the log above", timeout)
		case <-changed:
		}
	}
}

func (s *Secure) initTrust() error {
	if !s.dep().Raft.IsLeader() {
		return cluster.ErrNotLeader
	}
	if err := s.dep().Raft.Barrier(callTimeout); err != nil {
		return err
	}
	if _, ok := s.cfg.FSM.Trust(); ok {
		return nil
	}
	s.keyringMu.Lock()
	ring := s.keyring
	s.keyringMu.Unlock()
	t := structs.Trust{CACerts: s.CA().CACerts, UserTokenHash: trust.HashSecret(s.userToken),
		Keyring: ring, Founder: s.cfg.NodeID, InitAt: now()}
	_, err := s.cfg.Apply(structs.TrustInitType, structs.TrustInitRequest{Trust: t, Name: s.cfg.Name})
	if err == nil {
		s.log.Info("committed the cluster's trust state")
	}
	return err
}

// keyringLoop installs every keyring the cluster commits, and, on the
// leader, moves a rotation on once every live node installed its step.
// It wakes on changes of the state and of the view: a worker's state
// never changes, its view carries the keyring.
func (s *Secure) keyringLoop(ctx context.Context) {
	for {
		_, changed := s.cfg.FSM.Watch()
		_, viewChanged := s.cfg.View.Watch()
		if err := s.installKeyring(); err != nil {
			s.log.Error("install the gossip keyring", "error", err)
		}
		if s.dep().Raft.IsLeader() {
			s.rotateIfDue()
			s.advanceRotation()
		}
		var poll <-chan time.Time // the rotation's steps and its start wait on what Raft and gossip say
		if t, ok := s.cfg.FSM.Trust(); ok && (t.Keyring.Rotating() || t.KeyringDue) && s.dep().Raft.IsLeader() {
			poll = time.After(rotationPoll)
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-viewChanged:
		case <-poll:
		}
	}
}

// installKeyring installs the cluster's keyring when it is newer than the
// one this node has, unless this node is revoked: a revoked node is cut off
// by the keys it does not get.
func (s *Secure) installKeyring() error {
	t, ok := s.newestTrust()
	if !ok || t.Keyring.Generation <= s.KeyringGeneration() || s.Revoked(s.cfg.NodeID) {
		return nil
	}
	primary, others, err := decodeRing(t.Keyring)
	if err != nil {
		return err
	}
	if err := s.dep().Raft.SetKeyring(primary, others); err != nil {
		return err
	}
	if err := s.saveKeyring(t.Keyring); err != nil {
		return err
	}
	s.dep().Announce.SetKeyring(t.Keyring.Generation)
	s.log.Info("installed the gossip keyring", "generation", t.Keyring.Generation, "rotating", t.Keyring.Rotating())
	return nil
}

// newestTrust is the newer of the trust records of this node's state and
// of its view: the one with the higher keyring generation, which only
// grows. A server's state is a little ahead of its view; a worker has
// only its view.
func (s *Secure) newestTrust() (structs.Trust, bool) {
	t, ok := s.cfg.FSM.Trust()
	if v, vok := s.cfg.View.Trust(); vok && (!ok || v.Keyring.Generation > t.Keyring.Generation) {
		return v, true
	}
	return t, ok
}

// RotateKeyring starts a rotation: a new key comes in beside the current
// one. The leader's keyring loop takes it on from there. This node must
// lead.
func (s *Secure) RotateKeyring() error {
	t, ok := s.cfg.FSM.Trust()
	if !ok {
		return ErrNoTrust
	}
	if t.Keyring.Rotating() {
		return ErrRotating
	}
	key, err := newGossipKey()
	if err != nil {
		return err
	}
	next, _ := nextRing(t.Keyring, key)
	_, err = s.cfg.Apply(structs.KeyringType, structs.KeyringRequest{Keyring: next})
	return err
}

// rotateIfDue starts the rotation a revocation made due, once no revoked
// node is left in the Raft configuration: a server still in it would get
// the new key with the entry that carries it.
func (s *Secure) rotateIfDue() {
	t, ok := s.cfg.FSM.Trust()
	if !ok || !t.KeyringDue || t.Keyring.Rotating() {
		return
	}
	servers, err := s.dep().Raft.Servers()
	if err != nil {
		s.log.Debug("read the Raft configuration before rotating the keyring", "error", err)
		return
	}
	for _, sv := range servers {
		if s.Revoked(sv.ID) {
			s.log.Debug("the keyring rotation waits for a revoked server to leave Raft", "id", structs.ShortID(sv.ID))
			return
		}
	}
	if err := s.RotateKeyring(); err != nil {
		s.log.Warn("rotate the gossip keyring after a revocation", "error", err)
		return
	}
	s.audit(api.AuditKeyringRotate, fmt.Sprintf("generation %d: a new key beside the current one, after a revocation", t.Keyring.Generation+1))
}

// advanceRotation commits the next step of a rotation once every live
// member announces the current generation.
func (s *Secure) advanceRotation() {
	t, ok := s.cfg.FSM.Trust()
	if !ok || !t.Keyring.Rotating() {
		return
	}
	for _, m := range s.dep().Peers.Members() {
		// A revoked node gets no keyring: the rotation is what cuts it off.
		if m.Status == cluster.StatusAlive.String() && m.Keyring < t.Keyring.Generation && s.cfg.FSM.Admitted(m.ID) {
			return
		}
	}
	next, _ := nextRing(t.Keyring, nil)
	if _, err := s.cfg.Apply(structs.KeyringType, structs.KeyringRequest{Keyring: next}); err != nil {
		s.log.Warn("keyring rotation step", "generation", next.Generation, "error", err)
		return
	}
	step := "switched to the new key"
	if t.Keyring.Next == "" {
		step = "dropped the old key"
	}
	s.audit(api.AuditKeyringRotate, fmt.Sprintf("generation %d: %s, every live node having installed generation %d", next.Generation, step, t.Keyring.Generation))
}

// KeyringStatus is the keyring as users see it.
func (s *Secure) KeyringStatus() api.KeyringStatus {
	t, _ := s.cfg.FSM.Trust()
	st := api.KeyringStatus{Generation: t.Keyring.Generation, Keys: len(t.Keyring.Keys()), Rotating: t.Keyring.Rotating(),
		Nodes: map[string]uint64{}}
	for _, m := range s.dep().Peers.Members() {
		if m.Status == cluster.StatusAlive.String() {
			st.Nodes[m.Name] = m.Keyring
		}
	}
	return st
}

// renewLoop renews this node's certificate when two thirds of its
// lifetime have passed.
func (s *Secure) renewLoop(ctx context.Context) {
	for {
		leaf := s.id.Leaf()
		wait := min(renewCheck, leaf.NotAfter.Sub(leaf.NotBefore)/10)
		if trust.NeedsRenewal(leaf, s.renewClock()) {
			if err := s.renew(ctx); err != nil {
				s.log.Warn("renew this node's certificate", "error", err, "expires", leaf.NotAfter)
				wait = retryPause
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// RenewNow renews this node's certificate at once, whatever its age.
func (s *Secure) RenewNow(ctx context.Context) error { return s.renew(ctx) }

func (s *Secure) renewClock() time.Time {
	if s.cfg.RenewClock != nil {
		return s.cfg.RenewClock()
	}
	return time.Now()
}

// renew asks the leader (or, leading, itself) to sign a new key's CSR.
func (s *Secure) renew(ctx context.Context) error {
	keyPEM, csr, err := s.newCSR()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	c, err := s.dep().Peers.LeaderClient(ctx)
	if err != nil {
		return err
	}
	var cert []byte
	if c == nil {
		cert, err = s.Renew(s.cfg.NodeID, csr)
	} else {
		var resp *api.RenewResponse
		if resp, err = c.Renew(ctx, api.RenewRequest{CSR: string(csr)}); err == nil {
			cert = []byte(resp.Cert)
		}
	}
	if err != nil {
		return err
	}
	// On disk first: once the node presents the new certificate, a
	// restart must find it too.
	if err := s.id.Check(cert, keyPEM); err != nil {
		return err
	}
	if err := s.store.SaveNode(cert, keyPEM); err != nil {
		return err
	}
	if err := s.id.Renew(cert, keyPEM); err != nil {
		return err
	}
	s.log.Info("renewed this node's certificate", "expires", s.id.Leaf().NotAfter)
	return nil
}

// PrepareVoter hands the CA key to a node Raft is about to promote, so
// that it can sign certificates once it leads. It returns at once; the
// hand-over runs in the background, once per node at a time.
func (s *Secure) PrepareVoter(nodeID string) {
	ca := s.ca.Load()
	if ca == nil || s.deps.Load() == nil {
		return
	}
	s.pushingMu.Lock()
	if s.pushing[nodeID] {
		s.pushingMu.Unlock()
		return
	}
	s.pushing[nodeID] = true
	s.pushingMu.Unlock()
	go func() {
		defer func() {
			s.pushingMu.Lock()
			delete(s.pushing, nodeID)
			s.pushingMu.Unlock()
		}()
		if err := s.pushCAKey(nodeID, ca); err != nil {
			s.log.Warn("hand the CA key to a node about to vote", "id", structs.ShortID(nodeID), "error", err)
		}
	}()
}

func (s *Secure) pushCAKey(nodeID string, ca *trust.CA) error {
	if !s.cfg.FSM.Admitted(nodeID) {
		return fmt.Errorf("node %s is not admitted", structs.ShortID(nodeID))
	}
	addr := s.dep().Peers.HTTPAddrOf(nodeID)
	if addr == "" {
		return errors.New("its API address is not known yet")
	}
	keyPEM, err := ca.KeyPEM()
	if err != nil {
		return err
	}
	c, err := s.dep().Peers.Client(addr)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	if err := c.PushCAKey(ctx, api.CAKeyRequest{Key: string(keyPEM)}); err != nil {
		return err
	}
	s.log.Info("handed the CA key to a node about to vote", "id", structs.ShortID(nodeID))
	return nil
}

// AcceptCAKey stores the CA key the leader handed over; from is the node
// ID the caller's certificate names, which must be the leader's.
func (s *Secure) AcceptCAKey(from string, keyPEM []byte) error {
	if _, leader := s.dep().Raft.Leader(); leader == "" || from != leader {
		return fmt.Errorf("%w: only the leader hands the CA key over", ErrForbidden)
	}
	if s.ca.Load() != nil {
		return nil
	}
	ca, err := trust.ParseCA(firstCert(s.bundle), keyPEM)
	if err != nil {
		return fmt.Errorf("%w: key: %w", ErrInvalid, err)
	}
	if err := s.store.SaveCA(s.bundle, keyPEM); err != nil {
		return err
	}
	s.ca.Store(ca)
	s.log.Info("received the CA key: this node may now vote")
	if err := s.dep().Raft.UpdateMeta(); err != nil {
		s.log.Debug("announce that this node may vote", "error", err)
	}
	return nil
}

// firstCert is the first certificate of a PEM bundle, the current CA.
func firstCert(bundle []byte) []byte {
	if block, _ := pem.Decode(bundle); block != nil {
		return pem.EncodeToMemory(block)
	}
	return bundle
}
