package e2e

import (
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

// workloadImage builds the busybox test image with skein-workload in it.
func workloadImage(t *testing.T) string {
	t.Helper()
	testutil.RequireEngine(t)
	return testutil.ImageWith(t, testutil.Workload(t))
}

// containerOf says what the engine holds of an allocation's container:
// "" when there is none, else its state ("running", "exited").
func containerOf(t testing.TB, allocID string) string {
	t.Helper()
	out, err := exec.Command("docker", "ps", "-a", "--filter", "label=skein.alloc="+allocID, "--format", "{{.State}}").CombinedOutput()
	if err != nil {
		t.Fatalf("docker ps: %v\n%s", err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestProcess_ImageJobs_GangFencingAndAdoption runs three real agents on
// 127.0.0.31-33 that share this machine's container engine, and runs image
// jobs through them as a user would: a 2-node gang of containers with the
// launch variables and a shared mount; a container job whose agent is
// frozen (SIGSTOP) past down-after, which its supervisor stops when the
// node's lease runs out while the job runs again elsewhere, with
// skein-workload's locks on the shared mount proving it never ran twice at
// once; and a container job whose agent is SIGKILLed and restarted, which
// is adopted and reports its own exit code.
func TestProcess_ImageJobs_GangFencingAndAdoption(t *testing.T) {
	t.Parallel()
	image := workloadImage(t)
	shared := testutil.SharedDir(t)
	mount := shared + ":/shared"
	nodes := newNodes(t, "127.0.0.31", "127.0.0.32", "127.0.0.33")
	flags := func(n *node) []string { return []string{"--allow-mount=" + shared, "--label", "host=" + n.ip} }
	nodes[0].startWith(t, flags(nodes[0]))
	for _, n := range nodes[1:] {
		n.startWith(t, flags(n), nodes[0].gossip())
	}
	all := map[string]structs.NodeStatus{"node-127.0.0.31": "ready", "node-127.0.0.32": "ready", "node-127.0.0.33": "ready"}
	waitNodes(t, nodes[0].proc, all)
	// Any one node may be frozen or killed below: the other two must
	// keep a quorum.
	waitVoters(t, nodes[0].proc, 3)
	p := nodes[0].proc

	// A gang of two containers, one per node, each with its rank.
	gang := submitJob(t, p, "--image", image, "--nodes", "2", "--gpus", "1", "--mount", mount, "--",
		"sh", "-c", `echo "rank $NODE_RANK of $NNODES at $MASTER_ADDR:$MASTER_PORT gpus $CUDA_VISIBLE_DEVICES uid $(id -u)"; ls /shared >/dev/null`)
	d := p.waitJob(t, gang, jobIs(structs.JobSucceeded))
	if len(d.Allocations) != 2 || d.Allocations[0].NodeID == d.Allocations[1].NodeID {
		t.Fatalf("gang ran as %d allocations on nodes %v, want 2 on different nodes", len(d.Allocations), d.Nodes)
	}
	for rank := range 2 {
		out, err := p.skein(t, "logs", "--rank", fmt.Sprint(rank), gang)
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("rank %d of 2 at ", rank)
		// The owner has no account on the node: a uid of its own.
		var runAs string
		for _, a := range d.Allocations {
			if a.Rank == rank {
				runAs = a.RunAs
			}
		}
		_, uid, _ := strings.Cut(strings.TrimSuffix(runAs, ")"), "(uid ")
		if !strings.Contains(out, want) || !strings.Contains(out, "gpus GPU-") || uid == "" || !strings.Contains(out, "uid "+uid+"\n") {
			t.Errorf("rank %d logged %q, want %q, its GPUs and the uid it runs as (%s)", rank, out, want, runAs)
		}
	}
	for _, a := range d.Allocations {
		testutil.WaitFor(t, 10*time.Second, func() error {
			if st := containerOf(t, a.ID); st != "" {
				return fmt.Errorf("the finished allocation %s still has a container (%s)", structs.ShortID(a.ID), st)
			}
			return nil
		})
	}

	// Freeze the agent of a running container job past down-after.
	id := submitJob(t, p, "--image", image, "--gpus", "1", "--restarts", "1", "--mount", mount, "--",
		"skein-workload", "--dir", "/shared")
	d = p.waitJob(t, id, allocRunning)
	first := d.Allocations[0]
	var frozen, watcher *node
	for _, n := range nodes {
		if d.Nodes[first.NodeID] == "node-"+n.ip {
			frozen = n
		} else if watcher == nil {
			watcher = n
		}
	}
	if frozen == nil {
		t.Fatalf("no node named %q", d.Nodes[first.NodeID])
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
	// The frozen node's supervisor stopped its container by itself.
	testutil.WaitFor(t, 10*time.Second, func() error {
		if st := containerOf(t, first.ID); st == "running" {
			return fmt.Errorf("the frozen node's container still runs")
		}
		return nil
	})
	if err := frozen.proc.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	waitNodes(t, watcher.proc, all)
	if _, err := watcher.proc.skein(t, "cancel", id); err != nil {
		t.Fatal(err)
	}
	watcher.proc.waitJob(t, id, jobIs(structs.JobCancelled))
	events, err := os.ReadFile(filepath.Join(shared, "events.log"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(events), "violation") || strings.Count(string(events), `"start"`) != 2 {
		t.Fatalf("workload events, want two starts and no violation:\n%s", events)
	}

	// SIGKILL the agent of a running container job and start it again.
	marker := filepath.Join(shared, "release")
	id = submitJob(t, p, "--image", image, "--mount", mount, "--constraint", "host=127.0.0.32", "--",
		"sh", "-c", `while [ ! -e /shared/release ]; do sleep 0.05; done; echo released; exit 9`)
	p.waitJob(t, id, allocRunning)
	killed := nodes[1]
	if err := killed.proc.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = killed.proc.cmd.Wait()
	killed.startWith(t, flags(killed), nodes[0].gossip())
	if err := os.WriteFile(marker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	d = p.waitJob(t, id, jobIs(structs.JobFailed))
	if d.Job.ExitCode != 9 || d.Job.Attempts != 1 {
		t.Fatalf("adopted container job: exit code %d after %d attempts (%s), want 9 after 1", d.Job.ExitCode, d.Job.Attempts, d.Job.Reason)
	}
	if out, err := p.skein(t, "logs", id); err != nil || strings.TrimSpace(out) != "released" {
		t.Fatalf("adopted container job's logs: %q, %v", out, err)
	}
}
