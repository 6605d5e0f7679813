package e2e

import (
	"context"
	"fmt"
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

// upgradeFrom is the commit of the release before, built from this
// repository's history: main before nodes announced their versions.
// SKEIN_UPGRADE_FROM names another.
const upgradeFrom = "81e541f373ff5b32f2c4b9bda77fc26d9f4fa86a"

var (
	previousOnce sync.Once
	previousBin  string
	previousSkip string
)

// previousBinary builds skein at upgradeFrom, once per test binary, and
// returns its path; it skips the test, saying why, where that cannot be
// done (not a git checkout, the commit absent, the build failing, as
// without the modules it needs).
func previousBinary(t *testing.T) string {
	t.Helper()
	previousOnce.Do(func() {
		commit := upgradeFrom
		if c := os.Getenv("SKEIN_UPGRADE_FROM"); c != "" {
			commit = c
		}
		top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
		if err != nil {
			previousSkip = "not a git checkout: the release before cannot be built from history"
			return
		}
		root := strings.TrimSpace(string(top))
		if err := exec.Command("git", "-C", root, "cat-file", "-e", commit+"^{commit}").Run(); err != nil {
			previousSkip = fmt.Sprintf("commit %.12s (the release before) is not in this repository's history", commit)
			return
		}
		dir := filepath.Join(filepath.Dir(skeinBin), "previous")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			previousSkip = err.Error()
			return
		}
		archive := exec.Command("sh", "-c", fmt.Sprintf("git -C %s archive %s | tar -x -C %s", root, commit, dir))
		if out, err := archive.CombinedOutput(); err != nil {
			previousSkip = fmt.Sprintf("extract commit %.12s: %v: %s", commit, err, lastLines(string(out), 3))
			return
		}
		bin := filepath.Join(dir, "skein-previous")
		build := exec.Command("go", "build", "-o", bin, ".")
		build.Dir = dir
		build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-mod=mod -buildvcs=false")
		if out, err := build.CombinedOutput(); err != nil {
			previousSkip = fmt.Sprintf("build commit %.12s: %v: %s", commit, err, lastLines(string(out), 3))
			return
		}
		previousBin = bin
	})
	if previousSkip != "" {
		t.Skip(previousSkip)
	}
	return previousBin
}

// startAs starts node n's agent from binary bin on its data dir,
// joining join.
func (n *node) startAs(t *testing.T, bin string, join ...string) {
	t.Helper()
	// A node's restart (stop, start, rejoin, its first heartbeat) must
	// fit in --stop-after, or its jobs' supervisors stop them: on a
	// machine busy with other suites, 10 s was too short once.
	extra := []string{"--gossip-port", fmt.Sprint(n.gossipPort), "--stop-after", "40s", "--down-after", "50s"}
	for _, j := range join {
		extra = append(extra, "--join", j)
	}
	n.proc = runAgent(t, exec.Command(bin, agentArgs(n.ip, n.dataDir, n.http, n.raft, extra...)...),
		fmt.Sprintf("http://%s:%d", n.ip, n.http), nil)
}

// stop stops node n's agent as systemd would (SIGTERM): its jobs keep
// running under their supervisors.
func (n *node) stop(t *testing.T) {
	t.Helper()
	if err := n.proc.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	_ = n.proc.cmd.Wait()
}

// newRelease reports whether node name, as p sees it, speaks this
// release's protocol (a node of the release before announces none).
func newRelease(t *testing.T, p *agentProc, name string) bool {
	for _, n := range nodesView(t, p) {
		if n.Name == name {
			return n.Status == structs.NodeReady && n.Protocol.API != 0
		}
	}
	return false
}

// A 3-node cluster of the release before runs jobs and a service; it is
// rolled to this release node by node, the leader last or first, each
// agent stopped and started again on its data dir. Throughout, every job
// runs as one copy; at the end none was lost or started again, the
// service serves, and a drain (an entry the release before does not
// know) is refused mid-upgrade and taken once all are upgraded.
func TestProcess_RollingUpgradeFromTheReleaseBefore(t *testing.T) {
	t.Parallel()
	old := previousBinary(t)
	for _, order := range []string{"leader last", "leader first"} {
		t.Run(order, func(t *testing.T) {
			ips := []string{"127.0.0.161", "127.0.0.162", "127.0.0.163"}
			if order == "leader first" {
				ips = []string{"127.0.0.164", "127.0.0.165", "127.0.0.166"}
			}
			nodes := newNodes(t, ips...)
			nodes[0].startAs(t, old)
			nodes[1].startAs(t, old, nodes[0].gossip())
			nodes[2].startAs(t, old, nodes[0].gossip())
			waitVoters(t, nodes[0].proc, 3)

			shared := testutil.SharedDir(t)
			beats := filepath.Join(shared, "beats")
			var jobs []string
			for range 3 {
				id := beatingJob(t, nodes[0].proc, beats)
				nodes[0].proc.waitJob(t, id, allocRunning)
				jobs = append(jobs, id)
			}
			bin := testutil.Workload(t)
			if out, err := nodes[0].proc.skein(t, "serve", "--name", "web", "--replicas", "2", "--health", "http:/health",
				"--health-interval", "200ms", "--health-timeout", "200ms", "--", bin, "--dir", shared, "--serve-port-env", "PORT"); err != nil {
				t.Fatalf("serve: %v\n%s", err, out)
			}
			waitServing(t, nodes[0].proc, "web", 2)

			lead := leaderOf(t, nodes)
			rolled := []*node{}
			for _, n := range nodes {
				if n != lead {
					rolled = append(rolled, n)
				}
			}
			if order == "leader first" {
				rolled = append([]*node{lead}, rolled...)
			} else {
				rolled = append(rolled, lead)
			}
			for step, n := range rolled {
				n.stop(t)
				var watcher *node
				for _, o := range nodes {
					if o != n {
						watcher = o
					}
				}
				n.startAs(t, skeinBin, watcher.gossip())
				testutil.WaitFor(t, 30*time.Second, func() error {
					if !newRelease(t, n.proc, "node-"+n.ip) {
						return fmt.Errorf("node-%s is not back with the new release", n.ip)
					}
					return nil
				})
				if step == 0 {
					// Mid-upgrade a drain is refused, changing nothing: by
					// a leader of the new release (servers of the release
					// before would not apply it), or by one of the release
					// before, which knows no drain.
					out, err := n.proc.skein(t, "node", "drain", "node-"+watcher.ip)
					if err == nil || !strings.Contains(err.Error(), "upgrade every node first") && !strings.Contains(err.Error(), "no such endpoint") {
						t.Fatalf("a drain mid-upgrade: %v\n%s", err, out)
					}
					t.Logf("a drain mid-upgrade (%s): %v", order, err)
				}
				if step == 1 && order == "leader first" {
					// Two servers run the new release, one the release
					// before: with a leader of the new release (the old
					// one, restarted as it was, hands its lead over), a
					// drain is refused as one the old server would not
					// apply.
					last := rolled[2]
					if leaderOf(t, nodes) == last {
						last.stop(t)
						last.startAs(t, old, n.gossip())
						waitVoters(t, n.proc, 3)
					}
					out, err := n.proc.skein(t, "node", "drain", "node-"+last.ip)
					if err == nil || !strings.Contains(err.Error(), "upgrade every node first") {
						t.Fatalf("a drain with a leader of the new release and a server of the release before: %v\n%s", err, out)
					}
					t.Logf("a drain with a server of the release before: %v", err)
				}
				checkOneCopyEach(t, beats, jobs)
			}
			waitVoters(t, nodes[0].proc, 3)
			for _, j := range jobs {
				d := nodes[0].proc.job(t, j)
				if d.Job.State != structs.JobRunning || d.Job.Attempts != 1 {
					var history []string
					for _, a := range d.Allocations {
						history = append(history, fmt.Sprintf("attempt %d on %s: %s, exit %d (%s)", a.Attempt, d.Nodes[a.NodeID], a.State, a.ExitCode, a.Reason))
					}
					t.Errorf("job %s after the upgrade: %s, attempt %d (%s); its allocations: %s",
						structs.ShortID(j), d.Job.State, d.Job.Attempts, d.Job.Reason, strings.Join(history, "; "))
				}
			}
			waitServing(t, nodes[0].proc, "web", 2)
			// Every server runs the new release: a drain is taken, once
			// gossip has carried the last one's announcement.
			testutil.WaitFor(t, 20*time.Second, func() error {
				_, err := nodes[1].proc.skein(t, "node", "drain", "node-"+nodes[2].ip)
				return err
			})
			if out, err := nodes[1].proc.skein(t, "node", "undrain", "node-"+nodes[2].ip); err != nil {
				t.Fatalf("undrain: %v\n%s", err, out)
			}
			// With every node on the new release, the writes above turned
			// job numbers on: the jobs made before the upgrade have one
			// each, the same through every node, whatever snapshot each
			// node restarted from.
			testutil.WaitFor(t, 20*time.Second, func() error {
				seen := map[uint64]string{}
				for _, j := range jobs {
					var number uint64
					for _, n := range nodes {
						d, err := n.proc.tryJob(t, j)
						if err != nil {
							return err
						}
						if d.Job.Number == 0 || number != 0 && d.Job.Number != number {
							return fmt.Errorf("job %s: number %d through node-%s, %d through another", structs.ShortID(j), d.Job.Number, n.ip, number)
						}
						number = d.Job.Number
					}
					if other, ok := seen[number]; ok {
						return fmt.Errorf("jobs %s and %s both have number %d", structs.ShortID(other), structs.ShortID(j), number)
					}
					seen[number] = j
				}
				return nil
			})
		})
	}
}

// checkOneCopyEach fails the test unless each job has exactly one
// allocation writing beats, within a while.
func checkOneCopyEach(t *testing.T, beats string, jobs []string) {
	t.Helper()
	testutil.WaitFor(t, 20*time.Second, func() error {
		now := beatingNow(t, beats, time.Second)
		for _, j := range jobs {
			if len(now[j]) != 1 {
				return fmt.Errorf("job %s has %d copies writing beats", structs.ShortID(j), len(now[j]))
			}
		}
		return nil
	})
}

// waitServing waits until service name has want healthy replicas, as p
// sees it.
func waitServing(t *testing.T, p *agentProc, name string, want int) {
	t.Helper()
	c, err := api.NewClient(p.addr, adminToken(t))
	if err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 60*time.Second, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		d, err := c.Service(ctx, name)
		if err != nil {
			return err
		}
		healthy := 0
		for _, r := range d.Replicas {
			if r.Status == api.ReplicaHealthy {
				healthy++
			}
		}
		if healthy != want {
			return fmt.Errorf("%d of %d replicas healthy", healthy, len(d.Replicas))
		}
		return nil
	})
}
