package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

// startSecure starts n as a secure agent (--tls on loopback); the CLI
// through it uses the founder's CA certificate and API token.
func (n *node) startSecure(t testing.TB, founder *node, tokenFile string, join ...string) {
	t.Helper()
	extra := []string{"--tls", "--gossip-port", fmt.Sprint(n.gossipPort)}
	for _, j := range join {
		extra = append(extra, "--join", j)
	}
	if tokenFile != "" {
		extra = append(extra, "--join-token-file", tokenFile)
	}
	env := []string{"SKEIN_CACERT=" + filepath.Join(founder.dataDir, "tls", "ca.crt"),
		"SKEIN_TOKEN_FILE=" + filepath.Join(founder.dataDir, "api-token")}
	n.proc = startAgentWith(t, n.ip, n.dataDir, n.http, n.raft, "https", env, extra...)
}

func (n *node) apiURL() string { return fmt.Sprintf("https://%s:%d", n.ip, n.http) }

// TestProcess_SecureCluster_AsTheREADMEShowsIt runs the README's secure
// path with real processes: the first agent creates the CA and the API
// token, `skein join-token create` makes a token, two agents are admitted
// with it from a file, one through a node that does not lead, and a job
// runs; a restarted node comes back with its stored certificate and no
// token; a third admission with the two-use token is refused.
func TestProcess_SecureCluster_AsTheREADMEShowsIt(t *testing.T) {
	t.Parallel()
	withoutACL(t) // the README's path: the API token first, then the ACL bootstrap, below
	nodes := newNodes(t, "127.0.0.131", "127.0.0.132", "127.0.0.133", "127.0.0.134")
	a := nodes[0]
	a.startSecure(t, a, "")
	out, err := a.proc.skein(t, "join-token", "create", "--uses", "2")
	if err != nil {
		t.Fatal(err)
	}
	tokenFile := filepath.Join(t.TempDir(), "join")
	if err := os.WriteFile(tokenFile, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	nodes[1].startSecure(t, a, tokenFile, a.apiURL(), a.gossip())
	// Through a node that does not lead.
	nodes[2].startSecure(t, a, tokenFile, nodes[1].apiURL(), nodes[1].gossip())
	all := map[string]structs.NodeStatus{"node-127.0.0.131": "ready", "node-127.0.0.132": "ready", "node-127.0.0.133": "ready"}
	waitNodes(t, nodes[2].proc, all)
	id := submitJob(t, nodes[2].proc, "--", "true")
	nodes[0].proc.waitJob(t, id, jobIs(structs.JobSucceeded))

	// The token admitted two nodes; a third is refused and never starts.
	extra := []string{"agent", "--tls", "--name", "node-127.0.0.134", "--data-dir", nodes[3].dataDir, "--bind", nodes[3].ip,
		"--http-port", fmt.Sprint(nodes[3].http), "--raft-port", fmt.Sprint(nodes[3].raft), "--gossip-port", fmt.Sprint(nodes[3].gossipPort),
		"--join", a.apiURL(), "--join-token-file", tokenFile}
	if out, err := runSkein(extra...); err == nil || !strings.Contains(out, "used up") {
		t.Fatalf("a third node with a two-use token: %v\n%s", err, out)
	}

	// A restarted node uses its certificate: no token needed.
	b := nodes[1]
	if err := b.proc.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = b.proc.cmd.Wait()
	b.startSecure(t, a, "", a.gossip())
	id = submitJob(t, b.proc, "--", "true") // through the restarted node, which forwards to the leader
	b.proc.waitJob(t, id, jobIs(structs.JobSucceeded))
	waitNodes(t, b.proc, all)

	// ACLs, as the README goes on: bootstrap, a user's token, and a job
	// that runs as the user's account.
	alice := testutil.LocalUser(t)
	dir := t.TempDir()
	adminFile, aliceFile := filepath.Join(dir, "admin"), filepath.Join(dir, "alice")
	out, err = nodes[2].proc.skein(t, "acl", "bootstrap")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(adminFile, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := a.proc.skein(t, "status"); err == nil || !strings.Contains(err.Error(), "this cluster has ACLs") {
		t.Fatalf("the API token after the ACL bootstrap: %v", err)
	}
	admin := withToken(nodes[2].proc, a, adminFile)
	out, err = admin.skein(t, "acl", "token", "create", "--user", alice.Name, "--role", "submitter")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(aliceFile, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	asAlice := withToken(b.proc, a, aliceFile)
	id = submitJob(t, asAlice, "--workdir", "/tmp", "--", "id", "-u")
	asAlice.waitJob(t, id, jobIs(structs.JobSucceeded))
	if got, err := asAlice.skein(t, "logs", id); err != nil || strings.TrimSpace(got) != fmt.Sprint(alice.UID) {
		t.Fatalf("the job's id -u printed %q (%v), want %d, alice's uid", got, err, alice.UID)
	}
	if out, err := asAlice.skein(t, "jobs", "--mine"); err != nil || !strings.Contains(out, alice.Name) {
		t.Fatalf("skein jobs --mine: %v\n%s", err, out)
	}
}

// withToken is p with the CLI's token read from file instead of the
// founder's API token.
func withToken(p *agentProc, founder *node, file string) *agentProc {
	c := *p
	c.env = []string{"SKEIN_CACERT=" + filepath.Join(founder.dataDir, "tls", "ca.crt"), "SKEIN_TOKEN_FILE=" + file}
	return &c
}

// runSkein runs the skein binary to the end and returns its output.
func runSkein(args ...string) (string, error) {
	out, err := exec.Command(skeinBin, args...).CombinedOutput()
	return string(out), err
}
