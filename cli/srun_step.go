package cli

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	ucli "github.com/urfave/cli/v2"

	"github.com/skein-dev/skein/api"
)

// srunNoEffect are the srun options a step in an allocation accepts and
// ignores, as the job's own srun does: each task has its node's share of
// the job.
var srunNoEffect = map[string]bool{
	"-G": true, "--gpus": true, "--gpus-per-node": true, "--gpus-per-task": true, "--gres": true,
	"-c": true, "--cpus-per-task": true, "--mem": true, "--mem-per-cpu": true, "--mem-per-gpu": true,
	"-J": true, "--job-name": true, "--cpu-bind": true, "--export": true, "--mpi": true,
}

// srunNoEffectFlags are the srun flags (without a value) a step accepts
// and ignores.
var srunNoEffectFlags = map[string]bool{
	"--exclusive": true, "--overlap": true, "-u": true, "--unbuffered": true,
	"-K": true, "--kill-on-bad-exit": true, "-Q": true, "--quiet": true, "-v": true, "--verbose": true,
}

// srunStep is srun inside an allocation (salloc's shell, $SLURM_JOB_ID
// set, or --jobid): it runs the command on the allocation's first K
// nodes (-N; all by default), one task on each, through skein exec,
// with SLURM_PROCID, SLURM_LOCALID, SLURM_NTASKS and SLURM_STEP_NUM_NODES
// set, and prints each task's output (its end: exec's) in task order once
// all have ended, each line after its task ID with -l. It exits with the
// highest exit code among them, as Slurm's srun does.
func srunStep(c *ucli.Context, jobID string, args []string) error {
	nodes, label := 0, false
	var command []string
	for i := 0; i < len(args); i++ {
		o := args[i]
		if o == "--" {
			command = args[i+1:]
			break
		}
		if !strings.HasPrefix(o, "-") || o == "-" {
			command = args[i:]
			break
		}
		opt, val, has := strings.Cut(o, "=")
		if !has && len(o) > 2 && !strings.HasPrefix(o, "--") {
			opt, val, has = o[:2], o[2:], true
		}
		takesValue := srunNoEffect[opt] || opt == "-N" || opt == "--nodes" || opt == "-n" || opt == "--ntasks" || opt == "--jobid"
		if takesValue && !has {
			if i+1 >= len(args) {
				return usagef(c, "%s needs a value", opt)
			}
			i++
			val = args[i]
		}
		switch {
		case opt == "-N" || opt == "--nodes" || opt == "-n" || opt == "--ntasks":
			n, err := strconv.Atoi(val)
			if err != nil || n < 1 {
				return usagef(c, "%s %s: want a whole number above 0", opt, val)
			}
			if nodes != 0 && n != nodes {
				return usagef(c, "%s %s: a step in an allocation runs one task on each of its nodes; -N and -n must agree", opt, val)
			}
			nodes = n
		case opt == "--jobid":
			jobID = val
		case opt == "-l" || opt == "--label":
			label = true
		case srunNoEffect[opt]:
			if opt == "--mpi" && val != "none" {
				return usagef(c, "--mpi=%s: skein's srun starts no MPI wire-up (PMI); start MPI programs with mpirun, or give --mpi=none", val)
			}
		case srunNoEffectFlags[opt] && !has:
		default:
			return usagef(c, "%s is not supported by srun in an allocation, which runs one task on each of its nodes through skein exec (see docs/slurm.md, Interactive work)", opt)
		}
	}
	if len(command) == 0 {
		return usagef(c, "missing the command: srun [OPTIONS] COMMAND [ARGS...]")
	}
	cl, err := newClient(c)
	if err != nil {
		return err
	}
	d, err := cl.Job(c.Context, jobID)
	if err != nil {
		return err
	}
	if nodes == 0 {
		nodes = d.Job.Spec.Nodes
	}
	if nodes > d.Job.Spec.Nodes {
		return usagef(c, "-N %d: job allocation %s has %d nodes", nodes, d.Job.SlurmID(), d.Job.Spec.Nodes)
	}
	type task struct {
		res *api.ExecResult
		err error
	}
	tasks := make([]task, nodes)
	var wg sync.WaitGroup
	for r := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			env := []string{"env", "SLURM_PROCID=" + strconv.Itoa(r), "SLURM_LOCALID=0", "SLURM_NTASKS=" + strconv.Itoa(nodes),
				"SLURM_NPROCS=" + strconv.Itoa(nodes), "SLURM_STEP_NUM_TASKS=" + strconv.Itoa(nodes),
				"SLURM_STEP_NUM_NODES=" + strconv.Itoa(nodes), "SLURM_NTASKS_PER_NODE=1"}
			res, err := cl.Exec(c.Context, d.Job.ID, api.ExecRequest{Rank: r, Command: append(env, command...)})
			tasks[r] = task{res, err}
		}()
	}
	wg.Wait()
	code := 0
	for r, t := range tasks {
		if t.err != nil {
			fmt.Fprintf(c.App.ErrWriter, "srun: error: task %d: %v\n", r, t.err)
			code = max(code, exitError)
			continue
		}
		if err := writeTaskOutput(c, r, t.res.Output, label); err != nil {
			return err
		}
		code = max(code, t.res.ExitCode)
	}
	if code != 0 {
		return exitStatus(code)
	}
	return nil
}

// writeTaskOutput writes a task's output to stdout, each line after the
// task's ID with label.
func writeTaskOutput(c *ucli.Context, task int, out string, label bool) error {
	if !label {
		_, err := fmt.Fprint(c.App.Writer, out)
		return err
	}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		if _, err := fmt.Fprintf(c.App.Writer, "%d: %s\n", task, sc.Text()); err != nil {
			return err
		}
	}
	return nil
}

// allocationJob is the job of the allocation srun runs in: $SLURM_JOB_ID,
// as salloc sets it, or "" outside one.
func allocationJob() string { return os.Getenv("SLURM_JOB_ID") }
