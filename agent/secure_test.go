package agent

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/fsm"
	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
	"github.com/skein-dev/skein/trust"
)

// startSecureCluster starts n agents with TLS on loopback: the first
// founds the cluster and its CA, each other is admitted with a join token.
func startSecureCluster(t *testing.T, n int) *testCluster {
	t.Helper()
	return startClusterWith(t, n, func(_ int, cfg *Config) { cfg.Security = SecurityTLS })
}

// stateHash is the leader's state hash, after every node applied it.
func (tc *testCluster) stateHash() string {
	tc.t.Helper()
	tc.checkInvariants()
	s, err := tc.client(tc.live()[0]).StatusWithHash(context.Background())
	if err != nil {
		tc.t.Fatal(err)
	}
	return s.StateHash
}

// post sends body to path on a's API with the HTTP client hc and returns
// the status code (0 when the connection itself failed).
func post(t *testing.T, hc *http.Client, url string, body any, header http.Header) int {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// nodeClient is an HTTP client presenting agent a's node certificate.
func nodeClient(a *Agent) *http.Client {
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: a.secure.ClientTLS()}}
}

func TestSecure_ThreeNodes_AdmittedVoteAndRunJobs(t *testing.T) {
	t.Parallel()
	tc := startSecureCluster(t, 3)
	for _, a := range tc.agents {
		if !strings.HasPrefix(a.HTTPAddr(), "https://") {
			t.Errorf("%s serves %s, want https", a.Name(), a.HTTPAddr())
		}
		if !a.fsm.Admitted(a.nodeID) {
			t.Errorf("%s is not admitted", a.Name())
		}
		// Every voter must be able to sign once it leads.
		if !a.secure.CanVote() {
			t.Errorf("%s votes but holds no CA key", a.Name())
		}
	}
	job := tc.submit(tc.agents[2], structs.JobSpec{Command: []string{"sleep", "30"}, GPUs: 1})
	waitJob(t, tc.agents[0], job.ID, runningAlloc)
	// The user token is the founder's, checked by every node against the
	// hash the cluster keeps; a wrong one is refused everywhere.
	for _, a := range tc.agents {
		c := tc.client(a)
		if _, err := c.Jobs(context.Background(), false); err != nil {
			t.Errorf("%s: %v", a.Name(), err)
		}
		bad, _ := api.NewClient(a.HTTPAddr(), "wrong")
		conf, _ := api.ClusterTLS([]byte(strings.Join(a.secure.CA().CACerts, "")))
		if _, err := bad.WithTLS(conf).Jobs(context.Background(), false); err == nil {
			t.Errorf("%s accepted a wrong API token", a.Name())
		}
	}
	tc.checkInvariants()
}

func TestSecure_JoinWithoutOrWithAWrongToken_IsRefusedAndChangesNothing(t *testing.T) {
	t.Parallel()
	tc := startSecureCluster(t, 1)
	good := tc.joinToken(api.JoinTokenCreateRequest{})
	before := tc.stateHash()
	tok, err := trust.ParseJoinToken(good)
	if err != nil {
		t.Fatal(err)
	}
	wrongSecret := trust.JoinToken{ID: tok.ID, Secret: strings.Repeat("A", 43), CAFingerprint: tok.CAFingerprint}
	otherCA, err := trust.NewCA(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	otherCluster := trust.JoinToken{ID: tok.ID, Secret: tok.Secret, CAFingerprint: trust.Fingerprint(otherCA.Cert)}
	cases := []struct {
		name  string
		token string
		want  string
	}{
		{"no token", "", "holds no certificate"},
		{"wrong secret", wrongSecret.String(), "refused to admit"},
		{"token pinning another CA", otherCluster.String(), "pin"},
		{"not a token", "SKJ1.nonsense", "join token"},
	}
	for _, tcase := range cases {
		t.Run(tcase.name, func(t *testing.T) {
			cfg := clusterConfig(t, "intruder", tc.net)
			cfg.Security = SecurityTLS
			cfg.Join = []string{tc.agents[0].HTTPAddr()}
			cfg.JoinToken = tcase.token
			a, err := New(cfg)
			if err == nil {
				a.Shutdown()
				t.Fatal("an agent with a bad join token started")
			}
			if !strings.Contains(err.Error(), tcase.want) {
				t.Errorf("error %q does not say %q", err, tcase.want)
			}
		})
	}
	// The token the intruders tried was used by none of them.
	if got := tc.stateHash(); got != before {
		t.Errorf("refused joins changed the state: hash %s, was %s", got, before)
	}
	if n := len(tc.agents[0].raft.Members()); n != 1 {
		t.Errorf("%d gossip members, want 1", n)
	}
}

func TestSecure_JoinTokenUses_AreCountedClusterWide(t *testing.T) {
	t.Parallel()
	tc := startSecureCluster(t, 1)
	tok := tc.joinToken(api.JoinTokenCreateRequest{Uses: 1})
	start := func(name string) (*Agent, error) {
		cfg := clusterConfig(t, name, tc.net)
		cfg.Security = SecurityTLS
		cfg.Join = []string{tc.agents[0].HTTPAddr(), tc.agents[0].raft.GossipAddr()}
		cfg.JoinToken = tok
		a, err := New(cfg)
		if err == nil {
			t.Cleanup(a.Shutdown)
			tc.agents = append(tc.agents, a)
		}
		return a, err
	}
	if _, err := start("first"); err != nil {
		t.Fatalf("first use of a one-use token: %v", err)
	}
	_, err := start("second")
	if err == nil || !strings.Contains(err.Error(), "used up") {
		t.Fatalf("second use of a one-use token: %v, want refused as used up", err)
	}
	tokens, err := tc.client(tc.agents[0]).JoinTokens(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(tokens) != 1 || tokens[0].Uses != 1 || tokens[0].State != "used_up" {
		t.Errorf("tokens %+v, want one used up after 1 use", tokens)
	}
}

func TestSecure_InternalRoutes_RefuseUserTokensForgedReportsAndOtherCAs(t *testing.T) {
	t.Parallel()
	tc := startSecureCluster(t, 3)
	ld := tc.leader()
	leader := tc.agents[ld]
	job := tc.submit(tc.agents[(ld+1)%3], structs.JobSpec{Command: []string{"sleep", "60"}, GPUs: 1})
	waitJob(t, leader, job.ID, runningAlloc)
	before := tc.stateHash()

	var alloc *structs.Allocation
	for _, al := range leader.fsm.Allocs(job.ID) {
		alloc = al
	}
	victimID := alloc.NodeID
	forger := tc.agents[(tc.indexOf(victimID)+1)%3]
	internal := leader.HTTPAddr() + "/v1/internal/"
	forged := map[string]any{
		"register":      api.RegisterRequest{Node: structs.Node{ID: victimID, Name: "fake", GPUs: []structs.GPU{{UUID: "GPU-fake", Index: 0, Model: "H100"}}}},
		"heartbeat":     api.HeartbeatRequest{NodeID: victimID},
		"alloc-updates": api.AllocUpdatesRequest{NodeID: victimID, Updates: []structs.AllocUpdate{{AllocID: alloc.ID, State: structs.AllocSucceeded}}},
		"gpu-health":    structs.NodeGPUHealthRequest{NodeID: victimID, At: time.Now()},
		"loads":         api.LoadsRequest{NodeID: victimID, Services: []structs.ServiceLoad{{Service: "web", InFlight: 1000}}},
	}
	userTLS, err := api.ClusterTLS([]byte(strings.Join(leader.secure.CA().CACerts, "")))
	if err != nil {
		t.Fatal(err)
	}
	userHC := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: userTLS}}
	plainHC := &http.Client{Timeout: 5 * time.Second}

	// A certificate of another CA naming the victim's node ID.
	otherCA, err := trust.NewCA(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	key, keyPEM, err := trust.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	csr, err := trust.NewCSR(key, victimID, nil)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, err := otherCA.SignNode(csr, victimID, time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := trust.NewIdentity(certPEM, keyPEM, otherCA.CertPEM)
	if err != nil {
		t.Fatal(err)
	}
	foreignHC := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: foreign.ClientTLS(nil)}}
	// The forger's own node ID, signed by the cluster's CA, but expired.
	expiredHC := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: expiredTLS(t, leader, forger.nodeID)}}

	for route, body := range forged {
		if code := post(t, userHC, internal+route, body, http.Header{api.TokenHeader: {clusterToken}}); code != http.StatusUnauthorized {
			t.Errorf("%s with the user token: %d, want 401", route, code)
		}
		if code := post(t, plainHC, strings.Replace(internal, "https://", "http://", 1)+route, body, http.Header{api.TokenHeader: {clusterToken}}); code != 0 && code < 400 {
			t.Errorf("%s over plaintext: %d, want refused", route, code)
		}
		if code := post(t, foreignHC, internal+route, body, nil); code != 0 {
			t.Errorf("%s with another CA's certificate: %d, want the handshake refused", route, code)
		}
		if code := post(t, expiredHC, internal+route, body, nil); code != 0 {
			t.Errorf("%s with an expired certificate: %d, want the handshake refused", route, code)
		}
		if code := post(t, nodeClient(forger), internal+route, body, nil); code != http.StatusForbidden {
			t.Errorf("%s for another node with a valid node certificate: %d, want 403", route, code)
		}
	}
	// The other internal routes take no user token either.
	csrPEM, err := trust.NewCSR(key, forger.nodeID, nil)
	if err != nil {
		t.Fatal(err)
	}
	for route, body := range map[string]any{"renew": api.RenewRequest{CSR: string(csrPEM)}, "ca-key": api.CAKeyRequest{Key: string(keyPEM)}} {
		if code := post(t, userHC, internal+route, body, http.Header{api.TokenHeader: {clusterToken}}); code != http.StatusUnauthorized {
			t.Errorf("%s with the user token: %d, want 401", route, code)
		}
	}
	req, err := http.NewRequest(http.MethodGet, internal+"autoscale/web", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(api.TokenHeader, clusterToken)
	if resp, err := userHC.Do(req); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("autoscale/web with the user token: %v, %v, want 401", resp, err)
	} else {
		resp.Body.Close()
	}
	// Only the leader hands a node the CA key: a node that does not lead
	// pushing a key of its own is refused, and the key stays.
	sender, target := tc.agents[(ld+1)%3], tc.agents[(ld+2)%3]
	caKey, err := os.ReadFile(filepath.Join(target.DataDir(), "tls", "ca.key"))
	if err != nil {
		t.Fatal(err)
	}
	if code := post(t, nodeClient(sender), target.HTTPAddr()+"/v1/internal/ca-key", api.CAKeyRequest{Key: string(keyPEM)}, nil); code != http.StatusForbidden {
		t.Errorf("a CA key pushed by a node that does not lead: %d, want 403", code)
	}
	if now, err := os.ReadFile(filepath.Join(target.DataDir(), "tls", "ca.key")); err != nil || !bytes.Equal(now, caKey) {
		t.Errorf("a refused CA key push changed the stored key (%v)", err)
	}

	if after := tc.stateHash(); after != before {
		t.Errorf("refused reports changed the state")
	}
	if j, _ := leader.fsm.Job(job.ID); j.State != structs.JobRunning {
		t.Errorf("the victim's job is %s, want running", j.State)
	}
}

func TestSecure_RevokedNode_LeavesRaftAndCannotRejoin(t *testing.T) {
	t.Parallel()
	tc := startSecureCluster(t, 3)
	ld := tc.leader()
	victim := (ld + 1) % 3
	v := tc.agents[victim]
	vID, vDir := v.nodeID, v.DataDir()
	c := tc.client(tc.agents[ld])
	if _, err := c.RevokeNode(context.Background(), vID, api.NodeRevokeRequest{Reason: "stolen"}); err != nil {
		t.Fatal(err)
	}
	// Out of Raft, marked down, and the keyring rotated past it.
	testutil.WaitFor(t, 20*time.Second, func() error {
		servers, err := tc.agents[ld].raft.Servers()
		if err != nil {
			return err
		}
		for _, s := range servers {
			if s.ID == vID {
				return fmt.Errorf("revoked node still a raft server")
			}
		}
		if n, ok := tc.agents[ld].fsm.Node(vID); !ok || n.Status != structs.NodeDown {
			return fmt.Errorf("revoked node not down yet")
		}
		if tr, _ := tc.agents[ld].fsm.Trust(); tr.Keyring.Rotating() || tr.Keyring.Generation < 4 {
			return fmt.Errorf("keyring at generation %d, rotating %v", tr.Keyring.Generation, tr.Keyring.Rotating())
		}
		return nil
	})
	tc.kill(victim)
	// It comes back with its certificate: refused everywhere.
	cfg := clusterConfig(t, "revoked", tc.net)
	cfg.Security = SecurityTLS
	cfg.DataDir = vDir
	cfg.Join = []string{tc.agents[ld].raft.GossipAddr()}
	a, err := New(cfg)
	if err == nil {
		t.Cleanup(a.Shutdown)
		testutil.WaitFor(t, 5*time.Second, func() error {
			if a.fsm.Index() >= tc.agents[ld].fsm.Index() {
				return fmt.Errorf("the revoked node caught up with the leader's state")
			}
			return nil
		})
	}
	servers, err := tc.agents[ld].raft.Servers()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range servers {
		if s.ID == vID {
			t.Fatal("the revoked node is back in raft")
		}
	}
	if tok, err := trust.ParseJoinToken(tc.joinToken(api.JoinTokenCreateRequest{})); err == nil {
		err := tc.agents[ld].fsm.CheckAdmit(structs.NodeAdmitRequest{TokenID: tok.ID, SecretHash: trust.HashSecret(tok.Secret), NodeID: vID, At: time.Now()})
		if err == nil {
			t.Error("a revoked node ID may be admitted again")
		}
	}
}

func TestSecure_KeyringRotation_UnderLoadLosesNothing(t *testing.T) {
	t.Parallel()
	tc := startSecureCluster(t, 3)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	failed := make(chan string, 16)
	go func() {
		for ctx.Err() == nil {
			for _, m := range tc.agents[0].peers.Members() {
				if m.Status != "alive" {
					select {
					case failed <- m.Name:
					default:
					}
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	if _, err := tc.client(tc.agents[1]).RotateKeyring(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range 9 {
		tc.submit(tc.agents[i%3], structs.JobSpec{Command: []string{"true"}})
	}
	testutil.WaitFor(t, 30*time.Second, func() error {
		for _, a := range tc.agents {
			if g := a.secure.KeyringGeneration(); g != 4 {
				return fmt.Errorf("%s installed keyring %d, want 4", a.Name(), g)
			}
		}
		return nil
	})
	cancel()
	select {
	case name := <-failed:
		t.Errorf("gossip lost %s during the rotation", name)
	default:
	}
	for _, a := range tc.agents {
		primary, others, err := a.secure.GossipKeys()
		if err != nil || len(others) != 0 || primary == nil {
			t.Errorf("%s: keyring %d others, %v", a.Name(), len(others), err)
		}
	}
	tc.checkInvariants()
}

func TestSecure_RestartKeepsTheIdentityAndRenewalSwapsTheCertificate(t *testing.T) {
	t.Parallel()
	tc := startSecureCluster(t, 3)
	ld := tc.leader()
	i := (ld + 1) % 3
	a := tc.agents[i]
	serial := a.secure.Identity().Leaf().SerialNumber
	if err := a.secure.RenewNow(context.Background()); err != nil {
		t.Fatal(err)
	}
	if a.secure.Identity().Leaf().SerialNumber.Cmp(serial) == 0 {
		t.Fatal("renewal kept the old certificate")
	}
	// The renewed certificate works for the node's own reports.
	if code := post(t, nodeClient(a), tc.agents[ld].HTTPAddr()+"/v1/internal/heartbeat", api.HeartbeatRequest{NodeID: a.nodeID}, nil); code != http.StatusOK {
		t.Errorf("heartbeat with the renewed certificate: %d", code)
	}
	renewed := a.secure.Identity().Leaf().SerialNumber
	dir, name := a.DataDir(), a.Name()
	tc.kill(i)
	cfg := clusterConfig(t, name, tc.net)
	cfg.Security = SecurityTLS
	cfg.DataDir = dir
	cfg.Join = []string{tc.agents[ld].raft.GossipAddr()}
	b, err := New(cfg) // no join token: it holds a certificate
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Shutdown)
	tc.agents[i] = b
	if b.secure.Identity().Leaf().SerialNumber.Cmp(renewed) != 0 {
		t.Error("the restarted node does not use its stored certificate")
	}
	tc.waitReady(3)
	tc.checkInvariants()
}

func TestSecure_FounderFiles_AreTheUsersWayIn(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, t.TempDir())
	cfg.Security = SecurityTLS
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Shutdown)
	tok, err := os.ReadFile(filepath.Join(a.DataDir(), "api-token"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"api-token", "tls/ca.key", "tls/node.key"} {
		st, err := os.Stat(filepath.Join(a.DataDir(), f))
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, mode %v, want 0600", f, err, st.Mode().Perm())
		}
	}
	bundle, err := os.ReadFile(a.secure.CACertPath())
	if err != nil {
		t.Fatal(err)
	}
	conf, err := api.ClusterTLS(bundle)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := api.NewClient(a.HTTPAddr(), strings.TrimSpace(string(tok)))
	testutil.WaitFor(t, 10*time.Second, func() error {
		_, err := c.WithTLS(conf).Status(context.Background())
		return err
	})
	var apiErr *api.Error
	plain, _ := api.NewClient(strings.Replace(a.HTTPAddr(), "https", "http", 1), strings.TrimSpace(string(tok)))
	if _, err := plain.Status(context.Background()); err == nil || errors.As(err, &apiErr) {
		t.Errorf("plaintext HTTP to a TLS agent: %v, want a transport error", err)
	}
}

func TestSecure_ExpiredJoinToken_IsRefused(t *testing.T) {
	t.Parallel()
	tc := startSecureCluster(t, 1)
	tok := tc.joinToken(api.JoinTokenCreateRequest{TTL: structs.Duration(time.Second)})
	testutil.WaitFor(t, 10*time.Second, func() error {
		tokens, err := tc.client(tc.agents[0]).JoinTokens(context.Background())
		if err != nil {
			return err
		}
		if len(tokens) != 1 || tokens[0].State != "expired" {
			return fmt.Errorf("tokens %+v, want one expired", tokens)
		}
		return nil
	})
	before := tc.stateHash()
	cfg := clusterConfig(t, "late", tc.net)
	cfg.Security = SecurityTLS
	cfg.Join = []string{tc.agents[0].HTTPAddr()}
	cfg.JoinToken = tok
	if a, err := New(cfg); err == nil {
		a.Shutdown()
		t.Fatal("an expired join token admitted a node")
	} else if !strings.Contains(err.Error(), "expired") {
		t.Errorf("error %q does not say the token expired", err)
	}
	if after := tc.stateHash(); after != before {
		t.Error("a refused join changed the state")
	}
}

func TestSecure_RevokedJoinToken_IsRefused(t *testing.T) {
	t.Parallel()
	tc := startSecureCluster(t, 1)
	token := tc.joinToken(api.JoinTokenCreateRequest{Uses: 5})
	tok, err := trust.ParseJoinToken(token)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tc.client(tc.agents[0]).RevokeJoinToken(context.Background(), tok.ID); err != nil {
		t.Fatal(err)
	}
	before := tc.stateHash()
	cfg := clusterConfig(t, "late", tc.net)
	cfg.Security = SecurityTLS
	cfg.Join = []string{tc.agents[0].HTTPAddr()}
	cfg.JoinToken = token
	if a, err := New(cfg); err == nil {
		a.Shutdown()
		t.Fatal("a revoked join token admitted a node")
	} else if !strings.Contains(err.Error(), "join token revoked") {
		t.Errorf("error %q does not say the token was revoked", err)
	}
	if after := tc.stateHash(); after != before {
		t.Error("a refused join changed the state")
	}
}

func TestSecure_PlaintextGossipMember_NeverJoins(t *testing.T) {
	t.Parallel()
	tc := startSecureCluster(t, 1)
	leader := tc.agents[0]
	// A plaintext agent (loopback, no --tls) pointed at the secure one.
	cfg := clusterConfig(t, "plain", tc.net)
	cfg.Join = []string{leader.raft.GossipAddr()}
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Shutdown)
	// It keeps trying; for three seconds neither gossip nor Raft may take it.
	testutil.Holds(t, 3*time.Second, func() error {
		if n := len(leader.raft.Members()); n != 1 {
			return fmt.Errorf("the secure node sees %d gossip members", n)
		}
		servers, err := leader.raft.Servers()
		if err != nil {
			return err
		}
		if len(servers) != 1 {
			return fmt.Errorf("raft has %d servers", len(servers))
		}
		return nil
	})
}

// expiredTLS presents a certificate for nodeID signed by the cluster CA
// that a holds, which expired a while ago (trust's own configurations
// refuse to carry one, so this is a bare one).
func expiredTLS(t *testing.T, a *Agent, nodeID string) *tls.Config {
	t.Helper()
	store := mustStore(t, a)
	bundle, err := store.LoadCABundle()
	if err != nil {
		t.Fatal(err)
	}
	caKey, err := store.LoadCAKey()
	if err != nil {
		t.Fatal(err)
	}
	ca, err := trust.ParseCA(bundle, caKey)
	if err != nil {
		t.Fatal(err)
	}
	key, keyPEM, err := trust.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	csr, err := trust.NewCSR(key, nodeID, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Signed 50 minutes ago for one minute (the CA is valid from an hour
	// before it was made).
	certPEM, err := ca.SignNode(csr, nodeID, time.Minute, time.Now().Add(-50*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, InsecureSkipVerify: true, MinVersion: tls.VersionTLS13}
}

func TestSecure_ACertificateTwoThirdsThroughItsLifeIsRenewedByItself(t *testing.T) {
	t.Parallel()
	tc := startSecureCluster(t, 1)
	cfg := clusterConfig(t, "ageing", tc.net)
	cfg.Security = SecurityTLS
	cfg.Join = []string{tc.agents[0].HTTPAddr(), tc.agents[0].raft.GossipAddr()}
	cfg.JoinToken = tc.joinToken(api.JoinTokenCreateRequest{})
	// Its clock says 21 of the certificate's 30 days have passed.
	cfg.CertClock = func() time.Time { return time.Now().Add(21 * 24 * time.Hour) }
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Shutdown)
	first := a.secure.Identity().Leaf().SerialNumber
	testutil.WaitFor(t, 15*time.Second, func() error {
		if a.secure.Identity().Leaf().SerialNumber.Cmp(first) == 0 {
			return fmt.Errorf("still the certificate it was admitted with")
		}
		return nil
	})
	// The renewed certificate is on disk for the next start.
	certPEM, _, err := mustStore(t, a).LoadNode()
	if err != nil {
		t.Fatal(err)
	}
	certs, err := trust.ParseCerts(certPEM)
	if err != nil || len(certs) != 1 || certs[0].SerialNumber.Cmp(a.secure.Identity().Leaf().SerialNumber) != 0 {
		t.Fatalf("the stored certificate is not the renewed one: %v", err)
	}
}

func mustStore(t *testing.T, a *Agent) *trust.Store {
	t.Helper()
	store, err := trust.NewStore(filepath.Join(a.DataDir(), "tls"))
	if err != nil {
		t.Fatal(err)
	}
	return store
}

// TestSecure_RestartedFounder_IsReadyAndGetsWorkAgain: the founder of a
// secure cluster, started without --join, is killed (while it leads, as
// it usually does) and restarted on its data dir as it was first started.
// It must find its peers again, be marked ready by the new leader, and
// take work again: the container demo's restarted skein-a once stayed
// "node unresponsive" to the new leader for good, its return changing no
// state that would wake the scheduler.
func TestSecure_RestartedFounder_IsReadyAndGetsWorkAgain(t *testing.T) {
	t.Parallel()
	tc := startSecureCluster(t, 3)
	founder := tc.agents[0]
	if ld := tc.leader(); ld != 0 {
		t.Logf("the founder does not lead (%s does); restarting it all the same", tc.agents[ld].Name())
	}
	fID, fDir, fName := founder.nodeID, founder.DataDir(), founder.Name()
	caCerts, serial := founder.secure.CA().CACerts, founder.secure.Identity().Leaf().SerialNumber
	// A real node comes back on its ports; the others know it by them.
	httpPort, raftPort, gossipPort := port(t, founder.listener.Addr().String()), port(t, founder.raft.Addr()), port(t, founder.raft.GossipAddr())
	tc.kill(0)
	leader := tc.agents[tc.leader()]
	testutil.WaitFor(t, 20*time.Second, func() error {
		if n, ok := leader.fsm.Node(fID); !ok || n.Status != structs.NodeDown {
			return fmt.Errorf("the killed founder is not down yet")
		}
		return nil
	})
	// The two others' GPUs are taken, so the next job can run only on the
	// founder once it is back.
	gpus := len(leader.fsm.Nodes()[0].GPUs)
	for i := 1; i < 3; i++ {
		job := tc.submit(tc.agents[i], structs.JobSpec{Command: []string{"sleep", "600"}, GPUs: gpus})
		waitJob(t, leader, job.ID, runningAlloc)
	}
	waiting := tc.submit(tc.agents[1], structs.JobSpec{Command: []string{"sleep", "600"}, GPUs: gpus})
	waitJob(t, leader, waiting.ID, jobState(structs.JobQueued))

	cfg := clusterConfig(t, fName, tc.net)
	cfg.Security = SecurityTLS
	cfg.DataDir = fDir // no --join, no join token: as it was first started
	cfg.HTTPPort, cfg.RaftPort, cfg.GossipPort = httpPort, raftPort, gossipPort
	a, err := New(cfg)
	if err != nil {
		t.Fatalf("restart the founder: %v", err)
	}
	t.Cleanup(a.Shutdown)
	tc.agents[0] = a
	if !slices.Equal(a.secure.CA().CACerts, caCerts) || a.secure.Identity().Leaf().SerialNumber.Cmp(serial) != 0 || !a.secure.CanVote() {
		t.Error("the restarted founder does not hold the cluster's CA, its key and its own certificate from its data dir")
	}
	tc.waitReady(3)
	waitJob(t, leader, waiting.ID, func(j *structs.Job, allocs []*structs.Allocation) error {
		if err := runningAlloc(j, allocs); err != nil {
			return err
		}
		for _, al := range allocs {
			if al.Attempt == j.Attempts && al.NodeID != fID {
				return fmt.Errorf("the waiting job runs on %s, want the founder", structs.ShortID(al.NodeID))
			}
		}
		return nil
	})
	// Gossip takes it back too (a member just back may be refuted as
	// failed for a moment, so this is waited for).
	testutil.WaitFor(t, 10*time.Second, func() error {
		for _, m := range leader.peers.Members() {
			if m.ID == fID {
				if m.Status != "alive" {
					return fmt.Errorf("the leader's gossip sees the founder %s", m.Status)
				}
				return nil
			}
		}
		return fmt.Errorf("the leader's gossip does not know the founder")
	})
	tc.checkInvariants()
}

// port is the port of the address hostport.
func port(t *testing.T, hostport string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(hostport)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestSecure_StartLogs_SayHowToUseAndAddNodesAndWarnOfAnInsecureCluster:
// a founder's log says how to point the CLI at it and how to add a node;
// an agent told --insecure-cluster warns that anyone may join.
func TestSecure_StartLogs_SayHowToUseAndAddNodesAndWarnOfAnInsecureCluster(t *testing.T) {
	t.Parallel()
	var founderLog logBuffer
	cfg := testConfig(t, t.TempDir())
	cfg.Security = SecurityTLS
	cfg.Logger = hclog.New(&hclog.LoggerOptions{Name: t.Name(), Level: hclog.Info, Output: &founderLog})
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Shutdown)
	for _, want := range []string{
		"to use the CLI: export SKEIN_ADDR=" + a.HTTPAddr() + " SKEIN_CACERT=" + a.secure.CACertPath() + " SKEIN_TOKEN_FILE=" + filepath.Join(a.DataDir(), "api-token"),
		"to add a node: skein join-token create > token, then on that node: skein agent --tls --data-dir DIR --join 127.0.0.1 --join-token-file token",
		"to give users tokens of their own: skein acl bootstrap",
	} {
		if !strings.Contains(founderLog.String(), want) {
			t.Errorf("the founder's log lacks %q:\n%s", want, founderLog.String())
		}
	}

	var insecureLog logBuffer
	cfg = testConfig(t, t.TempDir())
	cfg.Security = SecurityInsecure
	cfg.Token = clusterToken
	cfg.Logger = hclog.New(&hclog.LoggerOptions{Name: t.Name(), Level: hclog.Warn, Output: &insecureLog})
	b, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Shutdown)
	if b.secure != nil || strings.HasPrefix(b.HTTPAddr(), "https://") {
		t.Errorf("an --insecure-cluster agent serves %s with TLS", b.HTTPAddr())
	}
	if !strings.Contains(insecureLog.String(), "[WARN]  "+t.Name()+": INSECURE CLUSTER (--insecure-cluster): no TLS, no node admission") {
		t.Errorf("an --insecure-cluster agent's log does not warn of it:\n%s", insecureLog.String())
	}
}

// memberStatus is what agent a's gossip says of node id: its status, or
// "absent".
func memberStatus(a *Agent, id string) string {
	for _, m := range a.raft.Members() {
		if m.ID == id {
			return m.Status.String()
		}
	}
	return "absent"
}

// A revoked node is cut off everywhere: by the time skein node revoke
// answers it is out of Raft, the keyring has been rotated without it (no
// key of the rotation ever reached it), no member holds it alive in
// gossip, and its connections are closed; restarted, it gets nothing. A
// revoked leader too, which would start the rotation itself, and so hold
// its new key, if it did not wait to be out of Raft.
func TestSecure_RevokedNode_IsCutOffEverywhere_AndARestartGetsItNothing(t *testing.T) {
	t.Parallel()
	for _, leader := range []bool{false, true} {
		name := "a follower"
		if leader {
			name = "the leader"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel() // each its own cluster
			revokeAndCheckCutOff(t, leader)
		})
	}
}

func revokeAndCheckCutOff(t *testing.T, leader bool) {
	tc := startSecureCluster(t, 3)
	victim := tc.leader()
	if !leader {
		victim = (victim + 1) % 3
	}
	asked := (victim + 1) % 3 // a node that is not revoked answers the revocation
	v := tc.agents[victim]
	vID, vDir := v.nodeID, v.DataDir()
	before, _ := tc.agents[asked].fsm.Trust()
	if got := v.secure.KeyringGeneration(); got != before.Keyring.Generation {
		t.Fatalf("the victim holds keyring generation %d, the cluster %d", got, before.Keyring.Generation)
	}
	if !leader {
		// The victim holds connections to the leader's API (its heartbeats).
		testutil.WaitFor(t, 10*time.Second, func() error {
			if n := tc.agents[tc.leader()].conns.Tagged(vID); n == 0 {
				return errors.New("the leader holds no connection of the victim's yet")
			}
			return nil
		})
	}
	res, err := tc.client(tc.agents[asked]).RevokeNode(context.Background(), vID, api.NodeRevokeRequest{Reason: "stolen"})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Done || !res.OutOfRaft || !res.Refused || res.KeyringGeneration < before.Keyring.Generation+3 {
		t.Fatalf("skein node revoke answered %+v, want it done: out of Raft, refused in gossip, the keyring rotated past generation %d",
			res, before.Keyring.Generation)
	}
	// As the answer said, at once: no waiting here.
	servers, err := tc.agents[asked].raft.Servers()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range servers {
		if s.ID == vID {
			t.Errorf("%s still has the revoked node in Raft", tc.agents[asked].Name())
		}
	}
	if st := memberStatus(tc.agents[asked], vID); st == "alive" {
		t.Errorf("%s's gossip holds the revoked node %s", tc.agents[asked].Name(), st)
	}
	if tr, _ := tc.agents[asked].fsm.Trust(); tr.Keyring.Rotating() || tr.KeyringDue {
		t.Errorf("the keyring rotation after the revocation is not over: %+v", tr.Keyring)
	}
	// No key of the rotation reached it, by Raft or by its view (it does
	// not install one it gets, but a node run by whoever stole it would).
	for what, f := range map[string]*fsm.FSM{"state": v.fsm, "view": v.view} {
		if tr, _ := f.Trust(); tr.Keyring.Generation != before.Keyring.Generation {
			t.Errorf("the revoked node's %s holds keyring generation %d of the rotation meant to cut it off (it held %d)",
				what, tr.Keyring.Generation, before.Keyring.Generation)
		}
	}
	if got := v.secure.KeyringGeneration(); got != before.Keyring.Generation {
		t.Errorf("the revoked node installed keyring generation %d (it held %d)", got, before.Keyring.Generation)
	}
	for i, a := range tc.agents {
		if i == victim {
			continue
		}
		testutil.WaitFor(t, 10*time.Second, func() error {
			if st := memberStatus(a, vID); st == "alive" {
				return fmt.Errorf("%s's gossip holds the revoked node alive", a.Name())
			}
			if n := a.conns.Tagged(vID); n != 0 {
				return fmt.Errorf("%s still holds %d connections of the revoked node", a.Name(), n)
			}
			return nil
		})
	}

	// Restarted with its certificate and its keyring, it gets nothing.
	tc.kill(victim)
	cfg := clusterConfig(t, "revoked", tc.net)
	cfg.Security = SecurityTLS
	cfg.DataDir = vDir
	cfg.Join = []string{tc.agents[asked].raft.GossipAddr()}
	a, err := New(cfg)
	if err != nil {
		t.Logf("the revoked node does not start: %v", err)
		return
	}
	t.Cleanup(a.Shutdown)
	testutil.Holds(t, 5*time.Second, func() error {
		for i, o := range tc.agents {
			if i == victim {
				continue
			}
			if st := memberStatus(o, vID); st == "alive" {
				return fmt.Errorf("%s's gossip took the restarted revoked node back: %s", o.Name(), st)
			}
		}
		for _, m := range a.raft.Members() {
			if m.ID != vID && m.Status.String() == "alive" {
				return fmt.Errorf("the restarted revoked node gossips with %s", m.ID)
			}
		}
		if got := a.secure.KeyringGeneration(); got != before.Keyring.Generation {
			return fmt.Errorf("the restarted revoked node came by keyring generation %d", got)
		}
		return nil
	})
}
