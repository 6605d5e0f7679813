package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

// node is one agent of a real-process cluster: its own loopback address,
// ports and data dir, so it can be killed and started again.
type node struct {
	ip                     string
	dataDir                string
	http, raft, gossipPort int
	proc                   *agentProc
}

func (n *node) gossip() string { return fmt.Sprintf("%s:%d", n.ip, n.gossipPort) }

func (n *node) start(t testing.TB, join ...string) {
	t.Helper()
	n.startWith(t, nil, join...)
}

// startWith is start with more agent flags.
func (n *node) startWith(t testing.TB, flags []string, join ...string) {
	t.Helper()
	extra := append([]string{"--gossip-port", fmt.Sprint(n.gossipPort)}, flags...)
	for _, j := range join {
		extra = append(extra, "--join", j)
	}
	n.proc = startAgent(t, n.ip, n.dataDir, n.http, n.raft, extra...)
}

func newNodes(t testing.TB, ips ...string) []*node {
	var nodes []*node
	for _, ip := range ips {
		nodes = append(nodes, &node{ip: ip, dataDir: agentDir(t), http: freePort(t, ip), raft: freePort(t, ip), gossipPort: freePort(t, ip)})
	}
	return nodes
}

// nodesView is `skein nodes --json` through one agent.
func nodesView(t testing.TB, p *agentProc) []api.NodeInfo {
	t.Helper()
	ns, err := tryNodesView(t, p)
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

// tryNodesView is nodesView that returns its error, for a wait to try
// again: a node that has just joined answers that it cannot tell yet.
func tryNodesView(t testing.TB, p *agentProc) ([]api.NodeInfo, error) {
	t.Helper()
	out, err := p.skein(t, "nodes", "--json")
	if err != nil {
		return nil, err
	}
	var ns []api.NodeInfo
	if err := json.Unmarshal([]byte(out), &ns); err != nil {
		return nil, fmt.Errorf("nodes --json: %v\n%s", err, out)
	}
	return ns, nil
}

func waitNodes(t testing.TB, p *agentProc, want map[string]structs.NodeStatus) {
	t.Helper()
	testutil.WaitFor(t, 30*time.Second, func() error {
		ns, err := tryNodesView(t, p)
		if err != nil {
			return err
		}
		got := map[string]structs.NodeStatus{}
		for _, n := range ns {
			got[n.Name] = n.Status
		}
		for name, st := range want {
			if got[name] != st {
				return fmt.Errorf("nodes seen by %s: %v, want %v", p.addr, got, want)
			}
		}
		return nil
	})
}

// waitEngines waits until every node p sees has registered an answer of
// its container engine. A node registers before its engine's first probe
// answers, and image jobs are kept off it until then: a service placed
// meanwhile would put every replica on the nodes that answered first.
func waitEngines(t testing.TB, p *agentProc, nodes int) {
	t.Helper()
	testutil.WaitFor(t, 30*time.Second, func() error {
		var missing []string
		ns, err := tryNodesView(t, p)
		if err != nil {
			return err
		}
		for _, n := range ns {
			if n.Containers == nil || n.Containers.Error != "" {
				missing = append(missing, n.Name)
			}
		}
		if len(ns) != nodes || len(missing) > 0 {
			return fmt.Errorf("%d nodes seen by %s, want %d; no engine registered by %v", len(ns), p.addr, nodes, missing)
		}
		return nil
	})
}

// waitVoters waits until the Raft group, as p sees it, has n voters.
func waitVoters(t testing.TB, p *agentProc, n int) {
	t.Helper()
	testutil.WaitFor(t, 30*time.Second, func() error {
		out, err := p.skein(t, "raft", "peers", "--json")
		if err != nil {
			return err
		}
		var peers []api.RaftPeer
		_ = json.Unmarshal([]byte(out), &peers)
		voters := 0
		for _, p := range peers {
			if p.Voter {
				voters++
			}
		}
		if voters != n {
			return fmt.Errorf("%d voters of %d peers, want %d", voters, len(peers), n)
		}
		return nil
	})
}

func leaderOf(t testing.TB, nodes []*node) *node {
	t.Helper()
	var lead *node
	testutil.WaitFor(t, 15*time.Second, func() error {
		for _, n := range nodes {
			if n.proc == nil || n.proc.cmd.ProcessState != nil {
				continue
			}
			out, err := n.proc.skein(t, "status", "--json")
			if err != nil {
				continue
			}
			var s api.Status
			if json.Unmarshal([]byte(out), &s) == nil && s.Leader == "node-"+n.ip {
				lead = n
				return nil
			}
		}
		return fmt.Errorf("no node says it leads")
	})
	return lead
}

func submitJob(t testing.TB, p *agentProc, args ...string) string {
	t.Helper()
	out, err := p.skein(t, append([]string{"submit"}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(out)
}

// TestProcess_ThreeNodes_LeaderKilledWorkerFrozenNodeRestarted runs three
// real agents on 127.0.0.21-23 with their default liveness timings and
// checks what a user would: the cluster forms through a non-leader, a
// SIGKILLed leader is replaced and writes go on, a frozen worker's job runs
// elsewhere and its own copy stops by itself, and a restarted node rejoins
// with its data.
func TestProcess_ThreeNodes_LeaderKilledWorkerFrozenNodeRestarted(t *testing.T) {
	t.Parallel()
	nodes := newNodes(t, "127.0.0.21", "127.0.0.22", "127.0.0.23")
	nodes[0].start(t)
	nodes[1].start(t, nodes[0].gossip())
	nodes[2].start(t, nodes[1].gossip()) // through a non-leader
	all := map[string]structs.NodeStatus{"node-127.0.0.21": "ready", "node-127.0.0.22": "ready", "node-127.0.0.23": "ready"}
	waitNodes(t, nodes[2].proc, all)
	waitVoters(t, nodes[0].proc, 3)

	// SIGKILL the leader: another takes over and takes writes.
	lead := leaderOf(t, nodes)
	if err := lead.proc.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = lead.proc.cmd.Wait()
	var survivors []*node
	for _, n := range nodes {
		if n != lead {
			survivors = append(survivors, n)
		}
	}
	id := submitJob(t, survivors[0].proc, "--", "true")
	survivors[1].proc.waitJob(t, id, jobIs(structs.JobSucceeded))

	// Restart the killed node on its data dir: it rejoins as itself.
	lead.start(t, survivors[0].gossip())
	waitNodes(t, survivors[1].proc, all)

	// Freeze the agent running a job past down-after: the job runs elsewhere,
	// and the frozen node's own copy stops by itself (its lease ran out).
	beats := filepath.Join(testutil.SharedDir(t), "beats")
	id = submitJob(t, survivors[0].proc, "--restarts", "1", "--", "sh", "-c",
		fmt.Sprintf(`while :; do echo "$SKEIN_ALLOC_ID" >> %s; sleep 0.05; done`, beats))
	d := survivors[0].proc.waitJob(t, id, allocRunning)
	first := d.Allocations[0]
	var frozen *node
	for _, n := range nodes {
		if d.Nodes[first.NodeID] == "node-"+n.ip {
			frozen = n
		}
	}
	if frozen == nil {
		t.Fatalf("no node named %q", d.Nodes[first.NodeID])
	}
	var watcher *node
	for _, n := range nodes {
		if n != frozen {
			watcher = n
			break
		}
	}
	if err := frozen.proc.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	d = watcher.proc.waitJob(t, id, func(d api.JobDetail) error {
		if d.Job.Attempts != 2 {
			return fmt.Errorf("attempts %d (%s)", d.Job.Attempts, d.Job.Reason)
		}
		return allocRunning(d)
	})
	if d.Allocations[0].State != structs.AllocLost {
		t.Fatalf("the frozen node's allocation is %s, want lost", d.Allocations[0].State)
	}
	second := d.Allocations[1].ID
	// Only the replacement still writes beats.
	testutil.WaitFor(t, 10*time.Second, func() error {
		before := lastBeats(t, beats, 40)
		if strings.Contains(before, first.ID) {
			return fmt.Errorf("the frozen node's copy still runs")
		}
		if !strings.Contains(before, second) {
			return fmt.Errorf("the replacement does not run")
		}
		return nil
	})
	if err := frozen.proc.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	waitNodes(t, watcher.proc, all)
	if d := watcher.proc.job(t, id); d.Job.Attempts != 2 || d.Allocations[0].State != structs.AllocLost {
		t.Fatalf("after the frozen node came back: attempts %d, first allocation %s", d.Job.Attempts, d.Allocations[0].State)
	}
	if _, err := watcher.proc.skein(t, "cancel", id); err != nil {
		t.Fatal(err)
	}
	watcher.proc.waitJob(t, id, jobIs(structs.JobCancelled))
}

// lastBeats returns the last n lines of the beats file.
func lastBeats(t testing.TB, path string, n int) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
