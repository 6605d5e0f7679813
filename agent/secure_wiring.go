package agent

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"github.com/skein-dev/skein/agent/secure"
	"github.com/skein-dev/skein/agent/server"
	"github.com/skein-dev/skein/cluster"
	"github.com/skein-dev/skein/fsm"
	"github.com/skein-dev/skein/structs"
	"github.com/skein-dev/skein/trust"
)

// openTrust loads or makes this node's identity in a secure cluster: a
// founder creates the CA, a joining node is admitted with its join token.
func (a *Agent) openTrust(gossipKey []byte) error {
	hasCert := fileExists(filepath.Join(a.dataDir, "tls", "node.crt"))
	if !hasCert && fileExists(filepath.Join(a.dataDir, "raft", "raft.db")) {
		return fmt.Errorf("data dir %s holds a cluster that runs without TLS: start it with --insecure-cluster, or start a secure cluster in a new data dir", a.dataDir)
	}
	ips := []net.IP{net.ParseIP(a.cfg.AdvertiseAddr)}
	if bind := net.ParseIP(a.cfg.BindAddr); !bind.IsUnspecified() && !bind.Equal(ips[0]) {
		ips = append(ips, bind)
	}
	sec, err := secure.Open(secure.Config{
		NodeID:  a.nodeID,
		Name:    a.cfg.Name,
		DataDir: a.dataDir,
		IPs:     ips,
		CertTTL: a.cfg.CertTTL,
		FSM:     a.fsm,
		View:    a.view,
		Apply:   a.apply,
		Logger:  a.logger.Named("trust"),
		// Tests move this ahead to see a renewal.
		RenewClock: a.cfg.CertClock,
	}, secure.Start{
		Found:     a.singleNode(),
		UserToken: a.cfg.Token,
		GossipKey: gossipKey,
		JoinToken: a.cfg.JoinToken,
		JoinAddrs: a.cfg.Join,
	})
	if err != nil {
		return err
	}
	a.secure = sec
	return nil
}

// serverAuth returns who may call the user API and the node-to-node API.
// Once the cluster has ACLs, users present ACL tokens (server.ACLAuth);
// before, in a secure cluster, the cluster's API token, checked against
// the hash the cluster keeps, and in a plaintext one the --token. Nodes
// present their certificates in a secure cluster, the --token in a
// plaintext one.
func (a *Agent) serverAuth() (user, nodes server.Authenticator) {
	if a.secure == nil {
		return server.ACLAuth{FSM: a.fsm, Legacy: server.TokenAuth(a.cfg.Token)}, server.TokenAuth(a.cfg.Token)
	}
	fallback := server.Authenticator(server.DenyAuth("this node has not caught up with the cluster's state yet; try again"))
	if tok := a.secure.FounderToken(); tok != "" {
		fallback = server.TokenAuth(tok)
	}
	legacy := server.HashedTokenAuth{
		Hash: func() (string, bool) {
			t, ok := a.fsm.Trust()
			return t.UserTokenHash, ok
		},
		Sum:      trust.HashSecret,
		Fallback: fallback,
	}
	return server.ACLAuth{FSM: a.fsm, Legacy: legacy}, server.NodeCertAuth{NodeID: trust.PeerNodeID, Check: a.secure.CheckPeer}
}

// tlsListener serves the API over TLS in a secure cluster: users need
// no certificate, nodes present theirs.
func (a *Agent) tlsListener(l net.Listener) net.Listener {
	if a.secure == nil {
		return l
	}
	return tls.NewListener(l, a.secure.ServerTLS(tls.VerifyClientCertIfGiven))
}

// logHowToUse tells the founder's user how to reach the cluster and add
// nodes.
func (a *Agent) logHowToUse() {
	if a.secure == nil || !a.secure.Founded() {
		return
	}
	use := "export SKEIN_ADDR=" + a.HTTPAddr() + " SKEIN_CACERT=" + a.secure.CACertPath()
	if a.cfg.Token == "" {
		use += " SKEIN_TOKEN_FILE=" + a.secure.UserTokenPath()
	}
	tlsFlag := ""
	if net.ParseIP(a.cfg.BindAddr).IsLoopback() {
		tlsFlag = "--tls "
	}
	a.logger.Info("a new secure cluster: its CA, this node's certificate and key are in " + filepath.Dir(a.secure.CACertPath()))
	a.logger.Info("to use the CLI: " + use)
	a.logger.Info("to add a node: skein join-token create > token, then on that node: skein agent " + tlsFlag +
		"--data-dir DIR --join " + a.cfg.AdvertiseAddr + " --join-token-file token")
	a.logger.Info("to give users tokens of their own: skein acl bootstrap > admin.token (once; the API token then stops working), then skein acl token create --user NAME --role submitter")
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return !errors.Is(err, os.ErrNotExist)
}

// peerTLS is the TLS configuration of calls to other nodes; nil in a
// plaintext cluster.
func (a *Agent) peerTLS() *tls.Config {
	if a.secure == nil {
		return nil
	}
	return a.secure.ClientTLS()
}

// checkPeer checks, in a secure cluster, that an answer from another node
// did not come over a connection to a revoked one; nil in a plaintext one.
func (a *Agent) checkPeer() func(*tls.ConnectionState) error {
	if a.secure == nil {
		return nil
	}
	return a.secure.CheckPeer
}

// The cluster trust callbacks: nil in a plaintext cluster, where every
// gossip member may join Raft and vote.

func (a *Agent) raftTLS() *cluster.TLSPair {
	if a.secure == nil {
		return nil
	}
	return &cluster.TLSPair{Server: a.secure.ServerTLS(tls.RequireAndVerifyClientCert), Client: a.secure.ClientTLS()}
}

func (a *Agent) admitted() func(string) bool {
	if a.secure == nil {
		return nil
	}
	return a.fsm.Admitted
}

// revoked is Config.Revoked of the cluster: a revocation in the state or
// in this node's view (a worker has only the view) takes the node out of
// Raft and out of gossip.
func (a *Agent) revoked() func(string) bool {
	if a.secure == nil {
		return nil
	}
	return a.secure.Revoked
}

// revocationLoop cuts off each node as its revocation reaches this node
// (its state or its view): the connections it keeps alive to this node's
// API are closed, and the leader's reconcile takes it out of Raft at once.
// It runs in a secure cluster only.
func (a *Agent) revocationLoop() {
	seen := map[string]bool{}
	for first := true; ; first = false {
		_, changed := a.fsm.Watch()
		_, viewChanged := a.view.Watch()
		for _, f := range []*fsm.FSM{a.fsm, a.view} {
			for _, adm := range f.Admissions() {
				if !adm.Revoked || seen[adm.NodeID] {
					continue
				}
				seen[adm.NodeID] = true
				if first {
					continue // revoked before this agent started: none of its connections is here
				}
				a.raft.Reconcile()
				if n := a.conns.CloseTagged(adm.NodeID); n > 0 {
					a.logger.Warn("closed the connections of a revoked node", "id", structs.ShortID(adm.NodeID), "connections", n)
				}
			}
		}
		select {
		case <-a.ctx.Done():
			return
		case <-changed:
		case <-viewChanged:
		}
	}
}

func (a *Agent) canVote() func() bool {
	if a.secure == nil {
		return nil
	}
	return a.secure.CanVote
}

func (a *Agent) prepareVoter() func(string) {
	if a.secure == nil {
		return nil
	}
	return a.secure.PrepareVoter
}
