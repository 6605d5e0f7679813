package e2e

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/skein-dev/skein/structs"
)

// TestProcess_SallocTwoNodes_SrunRunsOnBothThroughANodeThatRunsNone: salloc
// -N 2 through a node it leaves out (-x) holds the other two, and srun in
// its command runs one task on each of them, through that node; the
// allocation is let go when the command ends.
func TestProcess_SallocTwoNodes_SrunRunsOnBothThroughANodeThatRunsNone(t *testing.T) {
	// Three voters: a node asked before it holds the state it answers
	// for (a server just added, still applying the log) may not know the
	// allocation yet, which is not what this test is about.
	nodes := startThree(t, "127.0.0.141", "127.0.0.142", "127.0.0.143")
	via := nodes[2]
	out, errOut, err := cli(t, via.proc, via.proc.addr, "salloc", "-N", "2", "-x", "node-"+via.ip, "--gres=gpu:1", "--",
		skeinBin, "srun", "-l", "sh", "-c", `echo "task $SLURM_PROCID of $SLURM_NTASKS on $SKEIN_NODE"`)
	if err != nil {
		t.Fatalf("salloc: %v\n%s%s", err, out, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	re := regexp.MustCompile(`^(\d): task (\d) of 2 on (node-[0-9.]+)$`)
	var on []string
	for i, l := range lines {
		m := re.FindStringSubmatch(l)
		if m == nil || m[1] != m[2] || m[1] != string(rune('0'+i)) {
			t.Fatalf("srun's output %q, want task 0 then task 1, each labelled", out)
		}
		on = append(on, m[3])
	}
	if len(on) != 2 || on[0] == on[1] || slices.Contains(on, "node-"+via.ip) {
		t.Fatalf("srun's tasks ran on %v, want the allocation's two nodes, not %s", on, via.ip)
	}
	id := regexp.MustCompile(`salloc: Granted job allocation (\d+)`).FindStringSubmatch(errOut)
	if id == nil || !strings.Contains(errOut, "salloc: Relinquishing job allocation "+id[1]) {
		t.Fatalf("salloc said %q, want the allocation granted and relinquished", errOut)
	}
	via.proc.waitJob(t, id[1], jobIs(structs.JobCancelled))
}
