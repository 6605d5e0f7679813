package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

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
	// gpu's settings: a default time limit, and a maximum sbatch -t may
	// not pass.
	if r := runCLI(t, "partition", "set", "gpu", "--max-time", "2:00:00", "--default-time", "10"); r.code != exitOK ||
		r.stdout != "partition gpu: max time 2:00:00, default time 10:00\n" {
		t.Fatalf("partition set: %d %q %q", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, "sbatch", "--parsable", "-p", "gpu", "-H", "--wrap", "true")
	if r.code != exitOK {
		t.Fatalf("sbatch -p gpu: %d %q %q", r.code, r.stdout, r.stderr)
	}
	if r := runCLI(t, "squeue", "-h", "-j", strings.TrimSpace(r.stdout), "-o", "%l"); r.stdout != "10:00\n" {
		t.Fatalf("a gpu job without -t: time limit %q %q, want the partition's default 10:00", r.stdout, r.stderr)
	}
	if r := runCLI(t, "sbatch", "-p", "gpu", "-t", "3:00:00", "--wrap", "true"); r.code == exitOK || !strings.Contains(r.stderr, "time_limit: 3h0m0s is above partition gpu's max_time 2h0m0s") {
		t.Fatalf("sbatch -p gpu -t 3:00:00: %d %q %q; want it refused, naming max_time", r.code, r.stdout, r.stderr)
	}
	if r := runCLI(t, "sinfo", "-h", "-o", "%P %l"); r.stdout != "gpu 2:00:00\n" {
		t.Fatalf("sinfo with gpu's max time: %q %q", r.stdout, r.stderr)
	}
	if r := runCLI(t, "sbatch", "-p", "gpu", "-H", "--mail-type=END", "--wrap", "true"); r.code != exitOK ||
		strings.Count(r.stderr, "warning: --mail-type: the cluster's agents have no mail program") != 1 {
		t.Fatalf("sbatch --mail-type without a mail program: %d %q %q; want one warning", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, "sbatch", "-p", "debug", "--wrap", "true")
	if r.code != exitUsage && r.code != exitError || !strings.Contains(r.stderr, "no partition debug; the cluster's: gpu") {
		t.Fatalf("sbatch -p debug: %d %q %q; want it refused, naming gpu", r.code, r.stdout, r.stderr)
	}
}

// TestSbatch_MailGoesThroughTheAgentsMailProgram: --mail-type=BEGIN,END
// runs the agent's --mail-prog (a script here) at the job's start and
// end, as Slurm runs its MailProg: -s SUBJECT USER, the body on stdin;
// without a mail program sbatch warns once.
func TestSbatch_MailGoesThroughTheAgentsMailProgram(t *testing.T) {
	dir := testutil.SharedDir(t)
	mails := filepath.Join(dir, "mails")
	prog := filepath.Join(dir, "mailprog")
	writeTestFile(t, prog, "#!/bin/sh\necho \"$1|$2|$3|$(cat)\" >>"+mails+"\n")
	if err := os.Chmod(prog, 0o755); err != nil {
		t.Fatal(err)
	}
	startRealAgent(t, func(c *agent.Config) { c.MailProg = prog })
	t.Chdir(dir)
	r := runCLI(t, "sbatch", "--parsable", "-J", "mailed", "--mail-type=BEGIN,END", "--mail-user=alice@example.com", "--wrap", "true")
	id := strings.TrimSpace(r.stdout)
	if r.code != exitOK || strings.Contains(r.stderr, "warning") {
		t.Fatalf("sbatch --mail-type: %d %q %q", r.code, r.stdout, r.stderr)
	}
	waitJobState(t, id, structs.JobSucceeded)
	testutil.WaitFor(t, 15*time.Second, func() error {
		got, _ := os.ReadFile(mails)
		lines := strings.Split(strings.TrimSpace(string(got)), "\n")
		if len(lines) != 2 || !strings.HasPrefix(lines[0], "-s|skein Job_id="+id+" Name=mailed Began|alice@example.com|job "+id+" (") ||
			!strings.HasPrefix(lines[1], "-s|skein Job_id="+id+" Name=mailed Ended, Run time ") || !strings.Contains(lines[1], ", succeeded, ExitCode 0|alice@example.com|") {
			return fmt.Errorf("mails %q, want Began then Ended, each -s SUBJECT USER", lines)
		}
		return nil
	})
}

// TestExec_RunsACommandBesideARunningJob: skein exec runs a command in
// a running job's environment, as its account, and exits as the command
// did; a job that is not running, an empty command and a rank the job
// lacks are refused.
func TestExec_RunsACommandBesideARunningJob(t *testing.T) {
	startRealAgent(t)
	dir := testutil.SharedDir(t)
	t.Chdir(dir)
	writeTestFile(t, filepath.Join(dir, "hold.sh"), "#!/bin/sh\nwhile [ ! -e go ]; do sleep 0.05; done\n")
	r := runCLI(t, "sbatch", "--parsable", "--export=ALL,MARK", "hold.sh")
	id := strings.TrimSpace(r.stdout)
	if r.code != exitOK {
		t.Fatalf("sbatch: %d %q %q", r.code, r.stdout, r.stderr)
	}
	waitJobState(t, id, structs.JobRunning)
	testutil.WaitFor(t, 15*time.Second, func() error {
		r := runCLI(t, "exec", id, "--", "sh", "-c", `echo "$SLURM_JOB_ID in $(pwd) as $(id -u)"; exit 3`)
		if r.code != 3 || !strings.HasPrefix(r.stdout, id+" in "+dir+" as ") {
			return fmt.Errorf("exec: %d %q %q; want exit 3 and the job's number and directory", r.code, r.stdout, r.stderr)
		}
		return nil
	})
	// Another user may not run a command as the job's owner.
	mallory := filepath.Join(t.TempDir(), "mallory.token")
	writeTestFile(t, mallory, runCLI(t, "acl", "token", "create", "--user", "mallory", "--role", "submitter").stdout)
	if r := runCLI(t, "--token-file", mallory, "exec", id, "--", "touch", filepath.Join(dir, "pwned")); r.code == exitOK ||
		!strings.Contains(r.stderr, "permission denied") {
		t.Fatalf("another user's exec: %d %q %q; want it refused", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "pwned")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("another user's command ran: %v", err)
	}
	if r := runCLI(t, "exec", "--rank", "1", id, "--", "true"); r.code == exitOK || !strings.Contains(r.stderr, "rank: 1: job "+id+" has ranks 0..0") {
		t.Fatalf("exec on a rank the job lacks: %d %q %q", r.code, r.stdout, r.stderr)
	}
	if r := runCLI(t, "exec", id); r.code != exitUsage {
		t.Fatalf("exec without a command: %d %q %q", r.code, r.stdout, r.stderr)
	}
	writeTestFile(t, filepath.Join(dir, "go"), "")
	waitJobState(t, id, structs.JobSucceeded)
	if r := runCLI(t, "exec", id, "--", "true"); r.code == exitOK || !strings.Contains(r.stderr, "commands run only beside a running job") {
		t.Fatalf("exec beside a finished job: %d %q %q", r.code, r.stdout, r.stderr)
	}
}

// TestSalloc_HoldsNodesWhileItsCommandRunsThenLetsThemGo: salloc submits
// a job holding what its options ask for, runs its command here with the
// allocation's variables once the job runs (skein exec reaches it), and
// cancels the job when the command ends, exiting as the command did.
func TestSalloc_HoldsNodesWhileItsCommandRunsThenLetsThemGo(t *testing.T) {
	startRealAgent(t)
	t.Chdir(testutil.SharedDir(t))
	r := runCLI(t, "salloc", "-N", "1", "--gres=gpu:1", "--", "sh", "-c",
		`echo "job $SLURM_JOB_ID on $SLURM_JOB_NODELIST ($SLURM_NNODES)"; exit 4`)
	if r.code != 4 || r.stdout != "job 1 on e2e (1)\n" {
		t.Fatalf("salloc: exit %d, stdout %q, stderr %q; want 4 and the allocation's variables", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"salloc: Granted job allocation 1\n", "salloc: Nodes e2e are ready for job\n", "salloc: Relinquishing job allocation 1\n"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("salloc's stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	d := waitJobState(t, "1", structs.JobCancelled)
	if d.Job.Spec.GPUs != 1 || d.Job.Spec.Name != "sh" {
		t.Errorf("the allocation's job: %d GPUs, name %q; want 1 and the command's name", d.Job.Spec.GPUs, d.Job.Spec.Name)
	}
}
