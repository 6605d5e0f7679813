package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/skein-dev/skein/agent"
	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

// startTwoNodes runs two in-process agents, the second joining the first
// by gossip, with 2 simulated GPUs each, points the CLI at the first and
// waits until both are ready.
func startTwoNodes(t *testing.T) {
	t.Helper()
	first := startRealAgent(t, func(c *agent.Config) { c.Name = "n0" })
	token, err := os.ReadFile(adminTokenFile(t)) // the admin token startRealAgent bootstrapped
	if err != nil {
		t.Fatal(err)
	}
	cl, err := api.NewClient(first, string(token))
	if err != nil {
		t.Fatal(err)
	}
	var gossip string
	testutil.WaitFor(t, 20*time.Second, func() error {
		nodes, err := cl.Nodes(context.Background())
		if err != nil || len(nodes) != 1 || nodes[0].Addresses.Gossip == "" {
			return fmt.Errorf("n0 registered: %v %v", nodes, err)
		}
		gossip = nodes[0].Addresses.Gossip
		return nil
	})
	second, err := agent.New(agent.Config{
		Name: "n1", DataDir: testutil.JobDir(t), BindAddr: "127.0.0.1",
		HTTPPort: -1, RaftPort: -1, GossipPort: -1, GPUs: "sim:2xA100-40",
		KillGrace: time.Second, SupervisorCmd: []string{"/usr/bin/env", superviseEnv + "=1", os.Args[0]}, Logger: hclog.NewNullLogger(),
		Join: []string{gossip}, CgroupParent: testutil.AgentCgroupParent(), AllowUnconfined: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(second.Shutdown)
	testutil.WaitFor(t, 30*time.Second, func() error {
		nodes, err := cl.Nodes(context.Background())
		if err != nil {
			return err
		}
		ready := 0
		for _, n := range nodes {
			if n.Status == structs.NodeReady {
				ready++
			}
		}
		if ready != 2 {
			return fmt.Errorf("%d of %d nodes ready", ready, len(nodes))
		}
		return nil
	})
}

// TestSbatch_MultiNodeScriptRunsOnTwoNodesAndRankZeroWritesItsOutputFile
// runs a two-node script unchanged on a real two-node cluster: each rank
// runs the script with the Slurm variables, and the -o file, named by
// its patterns on rank 0's node, holds rank 0's output and is its
// user's.
func TestSbatch_MultiNodeScriptRunsOnTwoNodesAndRankZeroWritesItsOutputFile(t *testing.T) {
	startTwoNodes(t)
	dir := testutil.SharedDir(t) // the job runs as another user and writes here
	t.Chdir(dir)
	writeTestFile(t, filepath.Join(dir, "two.sh"), `#!/bin/sh
#SBATCH --job-name=two
#SBATCH --nodes=2
#SBATCH --gpus-per-node=1
#SBATCH --time=5:00
#SBATCH --output=%x-%j-%N.out
echo "rank $SLURM_PROCID of $SLURM_NNODES on $SLURMD_NODENAME in $(pwd) args $*"
echo "warn $SLURM_NODEID" >&2
`)
	r := runCLI(t, "sbatch", "two.sh", "x", "y")
	id, ok := strings.CutPrefix(strings.TrimSpace(r.stdout), "Submitted batch job ")
	if r.code != exitOK || !ok {
		t.Fatalf("sbatch: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	d := waitJobState(t, id, structs.JobSucceeded)
	if len(d.Allocations) != 2 {
		t.Fatalf("allocations %+v, want 2", d.Allocations)
	}
	rankNode := map[int]string{}
	for _, a := range d.Allocations {
		rankNode[a.Rank] = d.Nodes[a.NodeID]
	}
	if rankNode[0] == rankNode[1] || rankNode[0] == "" {
		t.Fatalf("ranks on %v, want two nodes", rankNode)
	}
	want := fmt.Sprintf("rank 0 of 2 on %s in %s args x y\nwarn 0\n", rankNode[0], dir)
	file := filepath.Join(dir, fmt.Sprintf("two-%s-%s.out", id, rankNode[0]))
	got, err := os.ReadFile(file)
	if err != nil || len(got) != len(want) || !strings.Contains(string(got), "rank 0 of 2 on "+rankNode[0]+" in "+dir+" args x y\n") || !strings.Contains(string(got), "warn 0\n") {
		entries, _ := os.ReadDir(dir)
		t.Fatalf("%s: %q, %v; want %q (the directory has %v)", file, got, err, want, entries)
	}
	if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("two-%s-%s.out", id, rankNode[1]))); !os.IsNotExist(err) {
		t.Errorf("rank 1 wrote an output file too: %v", err)
	}
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	// The job runs as its owner's account: here, an owner without a local
	// account, a uid of its own when the agent is root, else the agent's
	// own user.
	owner := fmt.Sprint(os.Geteuid())
	if owner == "0" {
		for _, a := range d.Allocations {
			if a.Rank == 0 {
				_, owner, _ = strings.Cut(strings.TrimSuffix(a.RunAs, ")"), "(uid ")
			}
		}
	}
	if uid := fmt.Sprint(fi.Sys().(*syscall.Stat_t).Uid); uid != owner {
		t.Errorf("the output file belongs to uid %s, want %s: the job creates it as its user", uid, owner)
	}
	// Both ranks' output is in skein logs as well.
	for rank := range 2 {
		r := runCLI(t, "logs", "--rank", fmt.Sprint(rank), id)
		if wantLine := fmt.Sprintf("rank %d of 2 on %s", rank, rankNode[rank]); r.code != exitOK || !strings.Contains(r.stdout, wantLine) || r.stderr != fmt.Sprintf("warn %d\n", rank) {
			t.Errorf("logs --rank %d: exit %d, stdout %q, stderr %q; want %q", rank, r.code, r.stdout, r.stderr, wantLine)
		}
	}
}

// TestSbatch_ArrayTasksWriteTheirOwnFiles: %A and %a name each task's
// file, and the script sees its index.
func TestSbatch_ArrayTasksWriteTheirOwnFiles(t *testing.T) {
	startRealAgent(t)
	dir := testutil.SharedDir(t)
	t.Chdir(dir)
	writeTestFile(t, filepath.Join(dir, "arr.sh"), "#!/bin/sh\n#SBATCH --array=0-1\n#SBATCH -o arr-%A_%a.out\necho \"task $SLURM_ARRAY_TASK_ID of $SLURM_ARRAY_TASK_COUNT\"\n")
	r := runCLI(t, "sbatch", "--parsable", "arr.sh")
	array := strings.TrimSpace(r.stdout)
	if r.code != exitOK || array == "" {
		t.Fatalf("sbatch: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	for i := range 2 {
		waitJobState(t, fmt.Sprintf("%s_%d", array, i), structs.JobSucceeded)
		file := filepath.Join(dir, fmt.Sprintf("arr-%s_%d.out", array, i))
		if got, err := os.ReadFile(file); err != nil || string(got) != fmt.Sprintf("task %d of 2\n", i) {
			t.Errorf("%s: %q, %v", file, got, err)
		}
	}
}

// TestSbatch_SrunRunsEachStepOnEveryNode: srun in a two-node script, on
// a real two-node cluster, runs its command as each node's share of the
// step, from the variables the agent gives the job: two tasks per node
// make four, labelled; a one-node step runs on rank 0's node only.
func TestSbatch_SrunRunsEachStepOnEveryNode(t *testing.T) {
	startTwoNodes(t)
	dir := testutil.SharedDir(t)
	t.Chdir(dir)
	writeTestFile(t, filepath.Join(dir, "steps.sh"), `#!/bin/sh
#SBATCH --nodes=2
#SBATCH --gpus-per-node=1
srun --ntasks-per-node=2 -l sh -c 'echo "task $SLURM_PROCID of $SLURM_NTASKS, local $SLURM_LOCALID, node $SLURM_NODEID"'
srun -N1 sh -c 'echo "first node only: $SLURMD_NODENAME"'
`)
	r := runCLI(t, "sbatch", "--parsable", "steps.sh")
	id := strings.TrimSpace(r.stdout)
	if r.code != exitOK || id == "" {
		t.Fatalf("sbatch: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	d := waitJobState(t, id, structs.JobSucceeded)
	rankNode := map[int]string{}
	for _, a := range d.Allocations {
		rankNode[a.Rank] = d.Nodes[a.NodeID]
	}
	for rank := range 2 {
		r := runCLI(t, "logs", "--rank", fmt.Sprint(rank), id)
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		want := []string{
			fmt.Sprintf("%d: task %d of 4, local 0, node %d", 2*rank, 2*rank, rank),
			fmt.Sprintf("%d: task %d of 4, local 1, node %d", 2*rank+1, 2*rank+1, rank),
		}
		if rank == 0 {
			want = append(want, "first node only: "+rankNode[0])
		}
		// The two tasks of a node print at once, in either order.
		if len(lines) == len(want) && lines[0] > lines[1] {
			lines[0], lines[1] = lines[1], lines[0]
		}
		if r.code != exitOK || strings.Join(lines, "\n") != strings.Join(want, "\n") {
			t.Errorf("logs --rank %d: exit %d, stdout %q, stderr %q; want %q", rank, r.code, r.stdout, r.stderr, want)
		}
	}
	// The .out file holds every task's output, rank 1's too, as Slurm's.
	out, err := os.ReadFile(filepath.Join(dir, "slurm-"+id+".out"))
	if err != nil {
		t.Fatal(err)
	}
	for task := range 4 {
		if want := fmt.Sprintf("%d: task %d of 4, local %d, node %d\n", task, task, task%2, task/2); !strings.Contains(string(out), want) {
			t.Errorf("slurm-%s.out lacks %q:\n%s", id, want, out)
		}
	}
}

// TestSbatch_ExclusiveSingletonAndAfternotokOnARealAgent runs the Slurm
// scheduling options through a real agent (one node, 2 GPUs): a job
// waits beside an --exclusive one, a singleton for the job of its name,
// and afternotok runs after a failure that cancels an afterok dependent.
func TestSbatch_ExclusiveSingletonAndAfternotokOnARealAgent(t *testing.T) {
	startRealAgent(t)
	dir := testutil.SharedDir(t)
	t.Chdir(dir)
	// Each job holds its node until the test creates the file it names.
	hold := "#!/bin/sh\nwhile [ ! -e \"$1\" ]; do sleep 0.05; done\n"
	writeTestFile(t, filepath.Join(dir, "hold.sh"), hold)
	writeTestFile(t, filepath.Join(dir, "fail.sh"), "#!/bin/sh\nexit 3\n")
	sbatch := func(args ...string) string {
		t.Helper()
		r := runCLI(t, append([]string{"sbatch", "--parsable"}, args...)...)
		id := strings.TrimSpace(r.stdout)
		if r.code != exitOK || id == "" {
			t.Fatalf("sbatch %q: exit %d, stdout %q, stderr %q", args, r.code, r.stdout, r.stderr)
		}
		return id
	}
	waitReason := func(id, want string) {
		t.Helper()
		testutil.WaitFor(t, 15*time.Second, func() error {
			var d api.JobDetail
			r := runCLI(t, "job", "--json", id)
			mustDecode(t, r.stdout, &d)
			if d.Job.State != structs.JobQueued || d.Job.Reason != want {
				return fmt.Errorf("job %s is %s (%q), want queued with %q", id, d.Job.State, d.Job.Reason, want)
			}
			return nil
		})
	}
	release := func(name string) { writeTestFile(t, filepath.Join(dir, name), "") }

	ex := sbatch("--exclusive", "--gres=gpu:1", "hold.sh", "ex.go")
	waitJobState(t, ex, structs.JobRunning)
	plain := sbatch("--gres=gpu:1", "hold.sh", "plain.go")
	waitReason(plain, "first in line: 1 GPU on 1 node reserved for when running jobs without a time limit end; 1 node: held by an exclusive job")
	release("ex.go")
	waitJobState(t, ex, structs.JobSucceeded)
	waitJobState(t, plain, structs.JobRunning)
	release("plain.go")
	waitJobState(t, plain, structs.JobSucceeded)

	first := sbatch("-J", "nightly", "-d", "singleton", "hold.sh", "first.go")
	waitJobState(t, first, structs.JobRunning)
	second := sbatch("-J", "nightly", "-d", "singleton", "hold.sh", "second.go")
	waitReason(second, "waiting for job "+hexIDOf(t, first)+" (running): singleton, of the same name nightly and user")
	release("first.go")
	release("second.go")
	waitJobState(t, first, structs.JobSucceeded)
	waitJobState(t, second, structs.JobSucceeded)

	failed := sbatch("fail.sh")
	notok := sbatch("-d", "afternotok:"+failed, "hold.sh", "hold.sh")
	ok := sbatch("-d", "afterok:"+failed, "hold.sh", "hold.sh")
	waitJobState(t, failed, structs.JobFailed)
	waitJobState(t, notok, structs.JobSucceeded)
	if d := waitJobState(t, ok, structs.JobCancelled); d.Job.Reason != "dependency "+hexIDOf(t, failed)+" failed: never satisfied (afterok)" {
		t.Errorf("afterok on a failed job: cancelled with %q", d.Job.Reason)
	}
}

// TestSbatch_WaitExitsWithTheJobsExitCode: -W on the command line or
// --wait as a directive waits for the job, saying how it gets on on
// stderr as submit --wait does (TestSubmit_WaitSaysEachState...), and
// exits as the job did, as sbatch --wait does.
func TestSbatch_WaitExitsWithTheJobsExitCode(t *testing.T) {
	startRealAgent(t)
	dir := testutil.SharedDir(t)
	t.Chdir(dir)
	for _, tc := range []struct {
		name, script string
		args         []string
		code         int
		end          string
	}{
		{"-W, failing", "#!/bin/sh\necho hi\nexit 4\n", []string{"-W"}, 4, "failed: exited with code 4"},
		{"#SBATCH --wait, succeeding", "#!/bin/sh\n#SBATCH --wait\necho hi\n", nil, exitOK, "succeeded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			script := filepath.Join(dir, "wait.sh")
			writeTestFile(t, script, tc.script)
			r := runCLI(t, append(append([]string{"sbatch"}, tc.args...), "wait.sh")...)
			id, ok := strings.CutPrefix(strings.TrimSpace(r.stdout), "Submitted batch job ")
			if _, err := strconv.ParseUint(id, 10, 64); !ok || err != nil {
				t.Fatalf("sbatch: exit %d, stdout %q, stderr %q; want the job's number", r.code, r.stdout, r.stderr)
			}
			short := hexIDOf(t, id)
			if want := "job " + short + " " + tc.end + "\n"; r.code != tc.code || !strings.HasPrefix(r.stderr, "job "+short+" ") || !strings.HasSuffix(r.stderr, want) {
				t.Errorf("sbatch --wait: exit %d, stderr %q; want %d, and %q last", r.code, r.stderr, tc.code, want)
			}
			if got, err := os.ReadFile(filepath.Join(dir, "slurm-"+id+".out")); err != nil || string(got) != "hi\n" {
				t.Errorf("slurm-%s.out: %q, %v; want the script's output, written before sbatch returned", id, got, err)
			}
		})
	}
}

// TestSbatch_ExportAllPassesTheSubmittersEnvironmentOnlyWhenAskedFor: a
// script sees a variable of the submitter's environment with an explicit
// --export=ALL, not without it, and never one that looks like a secret
// unless named; skein job hides the values it passed.
func TestSbatch_ExportAllPassesTheSubmittersEnvironmentOnlyWhenAskedFor(t *testing.T) {
	startRealAgent(t)
	dir := testutil.SharedDir(t)
	t.Chdir(dir)
	t.Setenv("RUN_NOTE", "from-login")
	t.Setenv("RUN_API_TOKEN", "s3cret")
	writeTestFile(t, filepath.Join(dir, "env.sh"), "#!/bin/sh\necho \"note=$RUN_NOTE token=$RUN_API_TOKEN\"\n")
	for _, tc := range []struct {
		name, export, want, warning string
	}{
		{"no --export", "", "note= token=\n", ""},
		{"--export=ALL", "--export=ALL", "note=from-login token=\n", "left out what looks like a secret: "},
		{"--export=ALL naming the secret", "--export=ALL,RUN_API_TOKEN", "note=from-login token=s3cret\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"sbatch", "--parsable", "--wait"}
			if tc.export != "" {
				args = append(args, tc.export)
			}
			r := runCLI(t, append(args, "env.sh")...)
			id, _, _ := strings.Cut(r.stdout, "\n")
			if _, err := strconv.ParseUint(id, 10, 64); r.code != exitOK || err != nil {
				t.Fatalf("sbatch %s: exit %d, stdout %q, stderr %q", tc.export, r.code, r.stdout, r.stderr)
			}
			if got, err := os.ReadFile(filepath.Join(dir, "slurm-"+id+".out")); err != nil || string(got) != tc.want {
				t.Errorf("the script printed %q (%v), want %q", got, err, tc.want)
			}
			if warned := strings.Contains(r.stderr, "RUN_API_TOKEN"); warned != (tc.warning != "") || !strings.Contains(r.stderr, tc.warning) {
				t.Errorf("stderr %q; want a warning naming RUN_API_TOKEN: %v", r.stderr, tc.warning != "")
			}
			if tc.export != "" {
				if job := runCLI(t, "job", id); !strings.Contains(job.stdout, "RUN_NOTE=(hidden)") || strings.Contains(job.stdout, "from-login") {
					t.Errorf("skein job shows the passed environment's values:\n%s", job.stdout)
				}
			}
		})
	}
}

// TestSbatch_OneNumericJobIDEverywhere: sbatch prints the job's number,
// the job sees it as SLURM_JOB_ID and %j, and skein job, squeue -j,
// sacct -j, a dependency and scancel take it; an array's tasks are
// NUMBER_INDEX, and the array's number names them all.
func TestSbatch_OneNumericJobIDEverywhere(t *testing.T) {
	startRealAgent(t)
	dir := testutil.SharedDir(t)
	t.Chdir(dir)
	writeTestFile(t, filepath.Join(dir, "id.sh"), "#!/bin/sh\n#SBATCH -o id-%j.out\necho \"id $SLURM_JOB_ID\"\n")
	r := runCLI(t, "sbatch", "--wait", "id.sh")
	out, _, _ := strings.Cut(r.stdout, "\n")
	id, ok := strings.CutPrefix(out, "Submitted batch job ")
	if n, err := strconv.ParseUint(id, 10, 64); r.code != exitOK || !ok || err != nil || n == 0 {
		t.Fatalf("sbatch: exit %d, stdout %q, stderr %q; want Submitted batch job NUMBER", r.code, r.stdout, r.stderr)
	}
	if got, err := os.ReadFile(filepath.Join(dir, "id-"+id+".out")); err != nil || string(got) != "id "+id+"\n" {
		t.Fatalf("id-%s.out: %q, %v; want the number as SLURM_JOB_ID", id, got, err)
	}
	if r := runCLI(t, "job", id); r.code != exitOK || !regexp.MustCompile(`(?m)^Job ID: +`+id+`$`).MatchString(r.stdout) {
		t.Fatalf("skein job %s: %d %q %q", id, r.code, r.stdout, r.stderr)
	}
	if r := runCLI(t, "logs", id); r.code != exitOK || r.stdout != "id "+id+"\n" {
		t.Fatalf("skein logs %s: %d %q %q", id, r.code, r.stdout, r.stderr)
	}
	if r := runCLI(t, "sacct", "-j", id, "-n", "-P", "-o", "JobID,State"); r.code != exitOK || r.stdout != id+"|COMPLETED\n" {
		t.Fatalf("sacct -j %s: %d %q %q", id, r.code, r.stdout, r.stderr)
	}

	writeTestFile(t, filepath.Join(dir, "hold.sh"), "#!/bin/sh\n#SBATCH --array=1-2\nwhile [ ! -e go ]; do sleep 0.05; done\n")
	r = runCLI(t, "sbatch", "--parsable", "hold.sh")
	arr := strings.TrimSpace(r.stdout)
	if r.code != exitOK || arr == "" {
		t.Fatalf("sbatch --array: %d %q %q", r.code, r.stdout, r.stderr)
	}
	waitJobState(t, arr+"_1", structs.JobRunning)
	r = runCLI(t, "sbatch", "--parsable", "-d", "afterok:"+arr+"_2", "--wrap", "true")
	after := strings.TrimSpace(r.stdout)
	if r.code != exitOK {
		t.Fatalf("sbatch -d afterok:%s_2: %d %q %q", arr, r.code, r.stdout, r.stderr)
	}
	if r := runCLI(t, "squeue", "-h", "-j", arr, "-o", "%i"); r.code != exitOK || r.stdout != arr+"_1\n"+arr+"_2\n" {
		t.Fatalf("squeue -j %s: %d %q %q; want both tasks", arr, r.code, r.stdout, r.stderr)
	}
	if r := runCLI(t, "scancel", arr+"_2"); r.code != exitOK {
		t.Fatalf("scancel %s_2: %d %q %q", arr, r.code, r.stdout, r.stderr)
	}
	waitJobState(t, arr+"_2", structs.JobCancelled)
	waitJobState(t, after, structs.JobCancelled) // its dependency can no longer succeed
	writeTestFile(t, filepath.Join(dir, "go"), "")
	waitJobState(t, arr+"_1", structs.JobSucceeded)
}
