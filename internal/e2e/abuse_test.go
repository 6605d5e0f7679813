package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

// The abuse the API is bounded against (agent/DESIGN.md, "Bounded API"):
// 10,000 connections that a client without a token
// opens and never uses (half of them idle from the start, half idle after
// one request), and slowloris clients sending headers a byte at a time,
// all at the leader, where every node renews its lease. They come from
// ten addresses, each dialed again soon after the agent closes it.
const (
	abuseIdle      = 5000
	abuseKeepAlive = 5000
	abuseSlowloris = 50
	abuseRedial    = 2 * time.Second
	// abuseToken is the cluster's API token, which the attacker lacks;
	// once the ACLs are on only the nodes use it, and the real client
	// holds the admin token.
	abuseToken = "the-abuse-test-token"
	// realClient is the address the real client comes from: a user, not
	// one of the cluster's nodes.
	realClient = "127.0.0.90"
	// agentFDs is the agents' file-descriptor limit: below the attack's
	// connections, so that an agent that accepted them all would run out
	// of descriptors, as it did in the finding.
	agentFDs = 8192
)

// abuseCluster is a real-process cluster of three agents with an API
// token, and a real client of its leader.
type abuseCluster struct {
	nodes  []*node
	lead   *node
	client *api.Client
	// release ends the jobs that hold the cluster's GPUs.
	release string
}

// startAbuseCluster starts three agents on ips, with the API token and
// agentFDs file descriptors, and fills every GPU with a job (4 per node)
// that runs until release exists.
func startAbuseCluster(t testing.TB, ips ...string) *abuseCluster {
	t.Helper()
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(abuseToken), 0o600); err != nil {
		t.Fatal(err)
	}
	nodes := newNodes(t, ips...)
	for i, n := range nodes {
		extra := []string{"--gossip-port", fmt.Sprint(n.gossipPort), "--token-file", tokenFile}
		if i > 0 {
			extra = append(extra, "--join", nodes[i-1].gossip())
		}
		cmd := exec.Command("sh", append([]string{"-c", fmt.Sprintf(`ulimit -n %d && exec "$@"`, agentFDs), "sh", skeinBin},
			agentArgs(n.ip, n.dataDir, n.http, n.raft, extra...)...)...)
		n.proc = runAgent(t, cmd, fmt.Sprintf("http://%s:%d", n.ip, n.http), []string{"SKEIN_TOKEN_FILE=" + tokenFile})
	}
	for _, n := range nodes {
		if got := openFilesLimit(t, n.proc.cmd.Process.Pid); got != fmt.Sprint(agentFDs) {
			t.Fatalf("agent %s runs with %s file descriptors, want %d", n.ip, got, agentFDs)
		}
	}
	want := map[string]structs.NodeStatus{}
	for _, ip := range ips {
		want["node-"+ip] = structs.NodeReady
	}
	waitNodes(t, nodes[0].proc, want)
	ac := &abuseCluster{nodes: nodes, lead: leaderOf(t, nodes), release: filepath.Join(testutil.JobDir(t), "release")}
	ac.client = clientFrom(t, ac.lead, realClient)
	t.Cleanup(func() { _ = os.WriteFile(ac.release, nil, 0o600) })
	holder := fmt.Sprintf("while [ ! -e %s ]; do sleep 0.2; done", ac.release)
	for range nodes {
		submitJob(t, ac.lead.proc, "--gpus", "4", "--", "sh", "-c", holder)
	}
	return ac
}

// openFilesLimit is the soft file-descriptor limit of process pid.
func openFilesLimit(t testing.TB, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "Max open files"); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				return f[0]
			}
		}
	}
	t.Fatalf("no open files limit in /proc/%d/limits:\n%s", pid, b)
	return ""
}

// clientFrom is an API client of n, with the admin token, that connects
// from the loopback address from.
func clientFrom(t testing.TB, n *node, from string) *api.Client {
	t.Helper()
	c, err := api.NewClient(n.proc.addr, adminToken(t))
	if err != nil {
		t.Fatal(err)
	}
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 10 * time.Second}
	return c.WithHTTPClient(&http.Client{Transport: &http.Transport{DialContext: d.DialContext}})
}

// holders returns the jobs that hold the GPUs once each has a running
// allocation.
func (ac *abuseCluster) holders(t testing.TB) []*api.JobDetail {
	t.Helper()
	var out []*api.JobDetail
	testutil.WaitFor(t, 20*time.Second, func() error {
		out = out[:0]
		jobs, err := ac.client.Jobs(context.Background(), false)
		if err != nil {
			return err
		}
		for _, j := range jobs {
			if j.Spec.GPUs != 4 {
				continue
			}
			d, err := ac.client.Job(context.Background(), j.ID)
			if err != nil {
				return err
			}
			if err := allocRunning(*d); err != nil {
				return err
			}
			out = append(out, d)
		}
		if len(out) != len(ac.nodes) {
			return fmt.Errorf("%d GPU-holding jobs running, want %d", len(out), len(ac.nodes))
		}
		return nil
	})
	return out
}

// attack starts the abuse at the leader.
func (ac *abuseCluster) attack() *testutil.Abuse {
	var from []string
	for i := range 10 {
		from = append(from, fmt.Sprintf("127.0.0.%d", 100+i))
	}
	return testutil.StartAbuse(testutil.AbuseConfig{
		Addr:      strings.TrimPrefix(ac.lead.proc.addr, "http://"),
		From:      from,
		Idle:      abuseIdle,
		KeepAlive: abuseKeepAlive,
		Slowloris: abuseSlowloris,
		Redial:    abuseRedial,
	})
}

// waitHeld waits until the attack is in full force: it has made 5,000
// connections, held, refused, or closed by the agent to make room for
// others' (an agent over its limit closes an idle connection of the
// address holding the most, and the attack dials again).
func waitHeld(t testing.TB, abuse *testutil.Abuse) {
	t.Helper()
	testutil.WaitFor(t, 30*time.Second, func() error {
		if s := abuse.Stats(); s.Connected+s.Refused < 5000 {
			return fmt.Errorf("the attack made %d connections (%d open) and was refused %d times so far", s.Connected, s.Open, s.Refused)
		}
		return nil
	})
}

// submitOne submits a one-GPU job, which waits in the queue (every GPU is
// held), and returns how long the submit took.
func (ac *abuseCluster) submitOne(t testing.TB) time.Duration {
	t.Helper()
	t0 := time.Now()
	_, err := ac.client.SubmitJob(context.Background(), api.SubmitRequest{RequestID: structs.NewID(),
		Spec: structs.JobSpec{Command: []string{"true"}, GPUs: 1}})
	if err != nil {
		t.Fatalf("a real client's submit: %v", err)
	}
	return time.Since(t0)
}

// stopAll stops every agent, so that their logs can be read.
func (ac *abuseCluster) stopAll() {
	for _, n := range ac.nodes {
		if n.proc.cmd.ProcessState == nil {
			_ = n.proc.cmd.Process.Signal(syscall.SIGTERM)
			_ = n.proc.cmd.Wait()
		}
	}
}

// TestProcess_AbuseAtTheLeader_RealClientServedAndNoLeaseLapses runs the
// abuse at the leader of a real 3-node cluster while a real client
// submits through it with the right token, and checks that every submit
// succeeds, that no node is ever seen down and no job is stopped by its
// lease, and that no agent runs out of file descriptors.
func TestProcess_AbuseAtTheLeader_RealClientServedAndNoLeaseLapses(t *testing.T) {
	t.Parallel()
	ac := startAbuseCluster(t, "127.0.0.41", "127.0.0.42", "127.0.0.43")
	before := ac.holders(t)

	abuse := ac.attack()
	t.Cleanup(abuse.Stop)
	waitHeld(t, abuse)

	// Watch the nodes through the real client while it submits.
	var watchErr error
	var mu sync.Mutex
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			nodes, err := ac.client.Nodes(context.Background())
			for _, n := range nodes {
				if err == nil && n.Status != structs.NodeReady {
					err = fmt.Errorf("node %s is %s under the abuse", n.Name, n.Status)
				}
			}
			if err != nil {
				mu.Lock()
				watchErr = err
				mu.Unlock()
			}
			select {
			case <-done:
				return
			case <-time.After(250 * time.Millisecond):
			}
		}
	}()
	// Several lease periods (2.5 s) and a few read-header timeouts, so
	// that the attack's connections are closed and dialed again.
	submits := 0
	pace := time.NewTicker(20 * time.Millisecond)
	defer pace.Stop()
	for end := time.Now().Add(12 * time.Second); time.Now().Before(end); submits++ {
		ac.submitOne(t)
		<-pace.C
	}
	close(done)
	wg.Wait()
	stats := abuse.Stats()
	if watchErr != nil {
		t.Fatal(watchErr)
	}
	first := map[string]string{} // job ID -> its allocation before the abuse
	for _, d := range before {
		first[d.Job.ID] = d.Allocations[0].ID
	}
	for _, d := range ac.holders(t) {
		if d.Job.Attempts != 1 || len(d.Allocations) != 1 || d.Allocations[0].ID != first[d.Job.ID] {
			t.Fatalf("job %s: %d attempts, %d allocations after the abuse, want the one it had",
				structs.ShortID(d.Job.ID), d.Job.Attempts, len(d.Allocations))
		}
	}
	abuse.Stop()
	ac.stopAll()
	for _, n := range ac.nodes {
		log := n.proc.log.String()
		for _, bad := range []string{"too many open files", "lost contact with the leader", "node silent past down-after"} {
			if strings.Contains(log, bad) {
				t.Errorf("agent %s logged %q:\n%s", n.ip, bad, log)
			}
		}
	}
	if !strings.Contains(ac.lead.proc.log.String(), "connections over a limit") {
		t.Errorf("the leader never closed or refused a connection over a limit: the abuse did not reach its limits")
	}
	t.Logf("%d submits; the attack made %d connections, was refused %d times and answered %d",
		submits, stats.Connected, stats.Refused, stats.Answered)
}
