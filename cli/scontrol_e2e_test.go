package cli

import (
	"regexp"
	"strings"
	"testing"

	"github.com/skein-dev/skein/agent"
	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

// TestScontrol_ShowHoldReleaseAndUpdateOnARealAgent: scontrol shows a
// job, its node and its partition, holds a queued job (squeue says
// JobHeldUser), changes its name, time limit and priority, and releases
// it, after which it runs; a partition no node is in is refused at
// submit, naming those that exist.
func TestScontrol_ShowHoldReleaseAndUpdateOnARealAgent(t *testing.T) {
	startRealAgent(t, func(c *agent.Config) { c.Partitions = []string{"gpu"} })
	t.Chdir(testutil.SharedDir(t)) // where the job's user may write its output
	r := runCLI(t, "sbatch", "--parsable", "-p", "gpu", "-H", "-J", "first", "--wrap", "true")
	id := strings.TrimSpace(r.stdout)
	if r.code != exitOK || id == "" {
		t.Fatalf("sbatch -H: %d %q %q", r.code, r.stdout, r.stderr)
	}
	if r := runCLI(t, "squeue", "-h", "-o", "%i %P %j %t %r"); r.code != exitOK || r.stdout != id+" gpu first PD JobHeldUser\n" {
		t.Fatalf("squeue of a held job: %d %q %q", r.code, r.stdout, r.stderr)
	}
	if r := runCLI(t, "scontrol", "update", "JobId="+id, "JobName=renamed", "TimeLimit=1:30:00", "Priority=7"); r.code != exitOK {
		t.Fatalf("scontrol update: %d %q %q", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, "scontrol", "show", "job", id)
	for _, want := range []string{"JobId=" + id + " JobName=renamed", "Priority=7", "JobState=PENDING Reason=JobHeldUser",
		"TimeLimit=1:30:00", "Partition=gpu Held=1"} {
		if r.code != exitOK || !strings.Contains(r.stdout, want) {
			t.Fatalf("scontrol show job: %d, want %q in\n%s%s", r.code, want, r.stdout, r.stderr)
		}
	}
	if r := runCLI(t, "scontrol", "release", id); r.code != exitOK {
		t.Fatalf("scontrol release: %d %q %q", r.code, r.stdout, r.stderr)
	}
	waitJobState(t, id, structs.JobSucceeded)
	if r := runCLI(t, "scontrol", "hold", id); r.code != exitError || !strings.Contains(r.stderr, "only a job waiting in the queue") {
		t.Fatalf("scontrol hold of a finished job: %d %q %q", r.code, r.stdout, r.stderr)
	}
	if r := runCLI(t, "scontrol", "-o", "show", "node", "e2e"); r.code != exitOK ||
		!regexp.MustCompile(`^NodeName=e2e CPUTot=\d+ RealMemory=\d+ Gres=gpu:a100:2 GresUsed=gpu:0 State=IDLE Partitions=gpu Reason=\(null\)\n$`).MatchString(r.stdout) {
		t.Fatalf("scontrol show node: %d %q %q", r.code, r.stdout, r.stderr)
	}
	if r := runCLI(t, "scontrol", "-o", "show", "partition"); r.code != exitOK || !strings.HasPrefix(r.stdout, "PartitionName=gpu Default=NO State=UP") {
		t.Fatalf("scontrol show partition: %d %q %q", r.code, r.stdout, r.stderr)
	}
	if r := runCLI(t, "scontrol", "show", "hostnames", "e2e,n[1-2]"); r.code != exitOK || r.stdout != "e2e\nn1\nn2\n" {
		t.Fatalf("scontrol show hostnames: %d %q %q", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, "sbatch", "-p", "debug", "--wrap", "true")
	if r.code != exitUsage && r.code != exitError || !strings.Contains(r.stderr, "no partition debug; the cluster's: gpu") {
		t.Fatalf("sbatch -p debug: %d %q %q; want it refused, naming gpu", r.code, r.stdout, r.stderr)
	}
}
