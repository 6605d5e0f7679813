package e2e

import (
	"bufio"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/skein-dev/skein/sched"
	"github.com/skein-dev/skein/structs"
)

// foreignProgram starts a program skein does not run, python3, holding
// each port on every address until the test ends.
func foreignProgram(t *testing.T, ports ...int) {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed: it plays the program that holds the ports")
	}
	var list []string
	for _, p := range ports {
		list = append(list, strconv.Itoa(p))
	}
	cmd := exec.Command(py, append([]string{"-c", `import socket, sys, time
held = []
for p in sys.argv[1:]:
    s = socket.socket()
    s.bind(("", int(p)))
    s.listen()
    held.append(s)
print("ready", flush=True)
time.sleep(3600)`}, list...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("the foreign program did not hold ports %v: %q %v", ports, line, err)
	}
}

// rangeOf is the MASTER_PORT range of the agent on ip.
func rangeOf(t *testing.T, ip string) structs.PortRange {
	t.Helper()
	r, err := structs.ParsePortRange(masterPorts(ip))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestProcess_AForeignProgramHoldsThePortSkeinWouldPick: on two real
// agents, a program skein does not run holds the MASTER_PORT the leader
// picks first for a 2-node gang (on either node, wherever rank 0 goes):
// the gang is not failed, both ranks start with the next port of the
// range, and the job succeeds. With every port of both ranges held, a job
// of one node (the issue's `true`) runs all the same.
func TestProcess_AForeignProgramHoldsThePortSkeinWouldPick(t *testing.T) {
	t.Parallel()
	nodes := newNodes(t, "127.0.0.91", "127.0.0.92")
	nodes[0].start(t)
	nodes[1].start(t, nodes[0].gossip())
	waitNodes(t, nodes[0].proc, map[string]structs.NodeStatus{"node-127.0.0.91": "ready", "node-127.0.0.92": "ready"})
	p := nodes[0].proc

	// A job holding every GPU of both nodes keeps the gang queued, so
	// that its ID, and so the port the leader will pick, is known first.
	blocker := submitJob(t, p, "--gpus", "4", "--nodes", "2", "--", "sleep", "600")
	p.waitJob(t, blocker, jobIs(structs.JobRunning))
	gang := submitJob(t, p, "--gpus", "4", "--nodes", "2", "--", "sh", "-c", `echo "$MASTER_PORT"`)
	var held, want []int
	for _, n := range nodes {
		r := rangeOf(t, n.ip)
		// sched.pickPort starts at the job's hash; LegacyMasterPort
		// spreads the same hash over 10,000 ports, which 16 divides.
		first := r.Min + (sched.LegacyMasterPort(gang, 1)-29500)%r.Len()
		held = append(held, first)
		want = append(want, r.Min+(first-r.Min+1)%r.Len())
	}
	foreignProgram(t, held...)
	if _, err := p.skein(t, "cancel", blocker); err != nil {
		t.Fatal(err)
	}
	d := p.waitJob(t, gang, jobIs(structs.JobSucceeded))
	rank0 := 0 // the node of rank 0
	for _, a := range d.Allocations {
		if a.Rank == 0 && d.Nodes[a.NodeID] == "node-"+nodes[1].ip {
			rank0 = 1
		}
	}
	for _, a := range d.Allocations {
		if a.MasterPort != want[rank0] || a.Attempt != 1 {
			t.Fatalf("rank %d ran attempt %d on port %d, want attempt 1 on %d (the port after the held %d)", a.Rank, a.Attempt, a.MasterPort, want[rank0], held[rank0])
		}
	}
	for rank := range 2 {
		out, err := p.skein(t, "logs", "--rank", strconv.Itoa(rank), gang)
		if err != nil || out != fmt.Sprintf("%d\n", want[rank0]) {
			t.Fatalf("rank %d printed MASTER_PORT %q (%v), want %d", rank, out, err, want[rank0])
		}
	}
	events, err := p.skein(t, "events", "--job", gang)
	if err != nil || !strings.Contains(events, string(structs.EventJobPortMoved)) {
		t.Fatalf("the gang's events say nothing of the port moved (%v):\n%s", err, events)
	}

	// Every port of both ranges held: a job of one node needs none.
	var all []int
	for _, n := range nodes {
		r := rangeOf(t, n.ip)
		for port := r.Min; port <= r.Max; port++ {
			if port != held[0] && port != held[1] {
				all = append(all, port)
			}
		}
	}
	foreignProgram(t, all...)
	one := submitJob(t, p, "--", "true")
	if d := p.waitJob(t, one, jobIs(structs.JobSucceeded)); d.Allocations[0].MasterPort != 0 {
		t.Fatalf("a job of one node was given port %d", d.Allocations[0].MasterPort)
	}
}
