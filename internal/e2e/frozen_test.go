package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

// cliDeadline bounds each CLI call of these tests: a call that hangs, as
// the did for 11 minutes, fails the test instead.
const cliDeadline = 20 * time.Second

// startThree starts three agents on ips, each joining the one before, and
// waits until all are ready and voters.
func startThree(t testing.TB, ips ...string) []*node {
	t.Helper()
	nodes := startNodes(t, nil, ips...)
	waitVoters(t, nodes[0].proc, 3)
	return nodes
}

// startNodes starts agents on ips with flags, each joining the one
// before and labelled host=IP (for --constraint), and waits until all
// are ready.
func startNodes(t testing.TB, flags []string, ips ...string) []*node {
	t.Helper()
	nodes := newNodes(t, ips...)
	want := map[string]structs.NodeStatus{}
	for i, n := range nodes {
		own := append(slices.Clip(flags), "--label", "host="+n.ip)
		if i == 0 {
			n.startWith(t, own)
		} else {
			n.startWith(t, own, nodes[i-1].gossip())
		}
		want["node-"+n.ip] = "ready"
	}
	waitNodes(t, nodes[0].proc, want)
	return nodes
}

// addrsOf is SKEIN_ADDR naming every node, in order.
func addrsOf(nodes []*node) string {
	var addrs []string
	for _, n := range nodes {
		addrs = append(addrs, n.proc.addr)
	}
	return strings.Join(addrs, ",")
}

// cli runs the CLI with SKEIN_ADDR addrs (and the test's token), bounded by
// cliDeadline, and returns its stdout, its stderr and its error.
func cli(t testing.TB, via *agentProc, addrs string, args ...string) (string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cliDeadline)
	defer cancel()
	cmd := exec.CommandContext(ctx, skeinBin, args...)
	cmd.Env = append(append(os.Environ(), via.env...), "SKEIN_ADDR="+addrs)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("skein %s hung for %s: %s", strings.Join(args, " "), cliDeadline, errb.String())
	} else if err != nil {
		err = fmt.Errorf("skein %s: %w: %s", strings.Join(args, " "), err, errb.String())
	}
	return out.String(), errb.String(), err
}

// freeze stops a node's agent as a hung machine stops: its kernel still
// takes connections, and nothing answers them. The node is thawed when
// the test ends.
func freeze(t testing.TB, n *node) {
	t.Helper()
	if err := n.proc.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.proc.cmd.Process.Signal(syscall.SIGCONT) })
}

// TestProcess_FrozenFirstAddress_CLIAnswersThroughTheNext: with SKEIN_ADDR
// naming three real agents and the first frozen (SIGSTOP), the CLI's
// reads, a submission and a cancel are answered through the others, and
// the job submitted runs, once.
func TestProcess_FrozenFirstAddress_CLIAnswersThroughTheNext(t *testing.T) {
	t.Parallel()
	nodes := startThree(t, "127.0.0.81", "127.0.0.82", "127.0.0.83")
	addrs := addrsOf(nodes)
	// The frozen node is not the leader, so that the cluster goes on
	// writing without an election the test would wait out.
	frozen := nodes[0]
	if leaderOf(t, nodes) == frozen {
		frozen = nodes[1]
		addrs = strings.Join([]string{nodes[1].proc.addr, nodes[0].proc.addr, nodes[2].proc.addr}, ",")
	}
	live := nodes[2].proc
	freeze(t, frozen)
	for _, args := range [][]string{{"status"}, {"jobs"}, {"nodes"}} {
		if _, _, err := cli(t, live, addrs, args...); err != nil {
			t.Fatal(err)
		}
	}
	out, _, err := cli(t, live, addrs, "submit", "--", "sh", "-c", "sleep 600")
	if err != nil {
		t.Fatal(err)
	}
	id := strings.TrimSpace(out)
	if _, _, err := cli(t, live, addrs, "job", id); err != nil {
		t.Fatal(err)
	}
	if _, _, err := cli(t, live, addrs, "cancel", id); err != nil {
		t.Fatal(err)
	}
	live.waitJob(t, id, jobIs(structs.JobCancelled))
	jobs, _, err := cli(t, live, addrs, "jobs", "--json")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(jobs, `"id":`); n != 1 {
		t.Fatalf("%d jobs after one submission through a frozen first address, want 1:\n%s", n, jobs)
	}
}

// TestProcess_SubmitThenFollowLogs_TwentyTimesOnThreeNodes is the issue's
// `id=$(skein submit ...); skein logs -f $id`, 20 times in a row on three
// nodes, each time through the next: each job lands where the leader
// puts it, often on another node than the one asked, and each time the
// output and the exit status are the job's.
func TestProcess_SubmitThenFollowLogs_TwentyTimesOnThreeNodes(t *testing.T) {
	t.Parallel()
	// One server, two workers: a worker's view of the state, which says
	// what runs there, comes from watching the server.
	nodes := startNodes(t, []string{"--voters", "1", "--standbys", "0"}, "127.0.0.84", "127.0.0.85", "127.0.0.86")
	elsewhere := 0
	for i := range 20 {
		asked := nodes[i%len(nodes)]
		via := asked.proc
		out, _, err := cli(t, via, via.addr, "submit", "--", "sh", "-c", fmt.Sprintf("echo line-%d; echo err-%d >&2; exit 3", i, i))
		if err != nil {
			t.Fatal(err)
		}
		id := strings.TrimSpace(out)
		stdout, stderr, err := cli(t, via, via.addr, "logs", "-f", id)
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 3 {
			t.Fatalf("try %d: logs -f %s: %v, want exit status 3\nstderr: %s", i, id, err, stderr)
		}
		if stdout != fmt.Sprintf("line-%d\n", i) || !strings.Contains(stderr, fmt.Sprintf("err-%d\n", i)) {
			t.Fatalf("try %d: logs -f %s printed %q on stdout and %q on stderr", i, id, stdout, stderr)
		}
		d := via.job(t, id)
		if d.Nodes[d.Allocations[0].NodeID] != "node-"+asked.ip {
			elsewhere++
		}
	}
	if elsewhere == 0 {
		t.Fatal("no job of 20 ran on another node than the one asked: the test proved nothing")
	}
}

// TestProcess_FollowedLogsGoOnThroughAnotherNodeWhenTheirsFreezes: `skein
// logs -f` of a job on one node, read through another (the first of
// SKEIN_ADDR), which is then frozen: the CLI resumes the stream through
// the third node, and every line the job printed comes once, in order.
func TestProcess_FollowedLogsGoOnThroughAnotherNodeWhenTheirsFreezes(t *testing.T) {
	t.Parallel()
	nodes := startThree(t, "127.0.0.87", "127.0.0.88", "127.0.0.89")
	lead := leaderOf(t, nodes)
	// The job runs on a node that is not the leader, and the stream is
	// read through the other one that is not, which is then frozen.
	var others []*node
	for _, n := range nodes {
		if n != lead {
			others = append(others, n)
		}
	}
	runner, reader := others[0], others[1]
	gate := testutil.SharedDir(t) + "/gate"
	out, _, err := cli(t, lead.proc, lead.proc.addr, "submit", "--constraint", "host="+runner.ip, "--", "sh", "-c",
		fmt.Sprintf(`i=0; while [ $i -lt 400 ]; do echo line-$i; i=$((i+1)); if [ $i = 100 ]; then until [ -e %s ]; do sleep 0.05; done; fi; sleep 0.01; done`, gate))
	if err != nil {
		t.Fatal(err)
	}
	id := strings.TrimSpace(out)
	lead.proc.waitJob(t, id, allocRunning)
	addrs := strings.Join([]string{reader.proc.addr, runner.proc.addr, lead.proc.addr}, ",")
	// The job's 400 lines fork 400 sleeps: on a busy machine that alone
	// has taken most of a minute, so a hang is what outlasts three.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, skeinBin, "logs", "-f", id)
	cmd.Env = append(append(os.Environ(), reader.proc.env...), "SKEIN_ADDR="+addrs)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(stdout)
	var got []string
	for len(got) < 100 && lines.Scan() {
		got = append(got, lines.Text())
	}
	// The job waits at its 100th line: freeze the node streaming it, then
	// let the job go on.
	freeze(t, reader)
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for lines.Scan() {
		got = append(got, lines.Text())
	}
	err = cmd.Wait()
	if ctx.Err() != nil {
		t.Fatalf("logs -f hung once the node streaming it froze; it printed %d lines; stderr:\n%s", len(got), stderr.String())
	}
	if err != nil {
		t.Fatalf("logs -f: %v\nstderr:\n%s", err, stderr.String())
	}
	if len(got) != 400 {
		t.Fatalf("logs -f printed %d lines, want 400; stderr:\n%s", len(got), stderr.String())
	}
	for i, line := range got {
		if line != fmt.Sprintf("line-%d", i) {
			t.Fatalf("line %d is %q: output lost or printed twice; stderr:\n%s", i, line, stderr.String())
		}
	}
}
