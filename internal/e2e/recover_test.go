package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

// beatingJob submits through p a job that appends "JOB ALLOC" to beats
// every 50 ms, spread over the nodes, with restarts.
func beatingJob(t *testing.T, p *agentProc, beats string) string {
	t.Helper()
	return submitJob(t, p, "--spread", "--gpus", "1", "--restarts", "3", "--", "sh", "-c",
		fmt.Sprintf(`while :; do echo "$SKEIN_JOB_ID $SKEIN_ALLOC_ID" >> %s; sleep 0.05; done`, beats))
}

// beatingNow returns, per job, the allocations that wrote a beat in the
// last window.
func beatingNow(t *testing.T, beats string, window time.Duration) map[string]map[string]bool {
	t.Helper()
	before := map[string]int{}
	count := func() map[string]int {
		b, err := os.ReadFile(beats)
		if err != nil {
			t.Fatal(err)
		}
		n := map[string]int{}
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			n[l]++
		}
		return n
	}
	before = count()
	time.Sleep(window)
	out := map[string]map[string]bool{}
	for line, n := range count() {
		if n > before[line] {
			job, alloc, _ := strings.Cut(line, " ")
			if out[job] == nil {
				out[job] = map[string]bool{}
			}
			out[job][alloc] = true
		}
	}
	return out
}

// Two of three voters are killed for good. The survivor, restarted with
// --recover, leads a cluster of one: it takes submissions, the jobs of
// the dead nodes run again on it, each once (never two copies at a time),
// a new node joins, and the dead ones are removed. Started with --recover
// again once the cluster has grown, it refuses.
func TestProcess_QuorumLost_RecoverOnASurvivor(t *testing.T) {
	t.Parallel()
	nodes := newNodes(t, "127.0.0.141", "127.0.0.142", "127.0.0.143")
	nodes[0].start(t)
	nodes[1].start(t, nodes[0].gossip())
	nodes[2].start(t, nodes[0].gossip())
	waitNodes(t, nodes[0].proc, map[string]structs.NodeStatus{"node-127.0.0.141": "ready", "node-127.0.0.142": "ready", "node-127.0.0.143": "ready"})
	waitVoters(t, nodes[0].proc, 3)

	beats := filepath.Join(testutil.SharedDir(t), "beats")
	var jobs []string
	for range 3 {
		id := beatingJob(t, nodes[0].proc, beats)
		nodes[0].proc.waitJob(t, id, allocRunning)
		jobs = append(jobs, id)
	}
	survivor, dead := nodes[0], nodes[1:]
	for _, n := range dead {
		if err := n.proc.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		_ = n.proc.cmd.Wait()
	}
	if err := survivor.proc.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	_ = survivor.proc.cmd.Wait()
	survivor.startWith(t, []string{"--recover"})
	waitVoters(t, survivor.proc, 1)

	id := submitJob(t, survivor.proc, "--", "true")
	survivor.proc.waitJob(t, id, jobIs(structs.JobSucceeded))
	// Every job runs again, on the survivor, and as one copy.
	for _, j := range jobs {
		d := survivor.proc.waitJob(t, j, func(d api.JobDetail) error {
			if err := allocRunning(d); err != nil {
				return err
			}
			if last := d.Allocations[len(d.Allocations)-1]; d.Nodes[last.NodeID] != "node-127.0.0.141" {
				return fmt.Errorf("job %s runs on %s", structs.ShortID(j), d.Nodes[last.NodeID])
			}
			return nil
		})
		lost := 0
		for _, a := range d.Allocations {
			if a.State == structs.AllocLost {
				lost++
			}
		}
		if lost > 1 {
			t.Errorf("job %s lost %d allocations: replaced more than once", structs.ShortID(j), lost)
		}
	}
	testutil.WaitFor(t, 20*time.Second, func() error {
		now := beatingNow(t, beats, time.Second)
		for _, j := range jobs {
			if len(now[j]) != 1 {
				return fmt.Errorf("job %s has %d copies writing beats", structs.ShortID(j), len(now[j]))
			}
		}
		return nil
	})

	// A new node joins the rebuilt cluster; the dead ones are removed.
	fresh := newNodes(t, "127.0.0.144")[0]
	fresh.start(t, survivor.gossip())
	waitNodes(t, survivor.proc, map[string]structs.NodeStatus{"node-127.0.0.141": "ready", "node-127.0.0.144": "ready"})
	for _, n := range dead {
		if out, err := survivor.proc.skein(t, "node", "remove", "node-"+n.ip); err != nil || !strings.Contains(out, "removed node") {
			t.Fatalf("node remove: %q, %v", out, err)
		}
	}
	for _, n := range nodesView(t, survivor.proc) {
		if n.Name == "node-127.0.0.142" || n.Name == "node-127.0.0.143" {
			t.Errorf("removed node %s still listed (%s)", n.Name, n.Status)
		}
	}
	waitVoters(t, survivor.proc, 1) // two servers: one voter until a third
	peers, err := survivor.proc.skein(t, "raft", "peers")
	if err != nil || strings.Contains(peers, "127.0.0.142") || strings.Contains(peers, "127.0.0.143") {
		t.Fatalf("raft peers after the removals: %v\n%s", err, peers)
	}

	// --recover again, now that the cluster has grown: refused.
	if err := survivor.proc.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	_ = survivor.proc.cmd.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	again := exec.CommandContext(ctx, skeinBin, agentArgs(survivor.ip, survivor.dataDir, survivor.http, survivor.raft,
		"--gossip-port", fmt.Sprint(survivor.gossipPort), "--recover")...)
	out, err := again.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "already recovered the cluster") {
		t.Fatalf("a second --recover: %v\n%s", err, lastLines(string(out), 5))
	}
	survivor.start(t)
	id = submitJob(t, fresh.proc, "--", "true")
	fresh.proc.waitJob(t, id, jobIs(structs.JobSucceeded))
}

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
