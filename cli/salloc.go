package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/slurm"
	"github.com/skein-dev/skein/structs"
)

// sallocHold is what an allocation's job runs on its nodes while
// salloc's command runs here: nothing, until it is cancelled.
const sallocHold = "while :; do sleep 3600; done"

func sallocCommand() *ucli.Command {
	return &ucli.Command{
		Name:      "salloc",
		Usage:     "allocate nodes, run a command here (your shell) while they are held, then let them go, as Slurm's salloc",
		ArgsUsage: "[SBATCH OPTIONS] [--] [COMMAND [ARGS...]]",
		Description: "Submits a job that holds the nodes, GPUs, CPUs and memory sbatch's options ask for, waits\n" +
			"until it runs, then runs COMMAND (default: $SHELL) on this machine with SLURM_JOB_ID,\n" +
			"SLURM_JOB_NODELIST and SLURM_NNODES set: skein exec $SLURM_JOB_ID -- CMD runs CMD on the\n" +
			"allocation. When COMMAND ends, the job is cancelled, and salloc exits as COMMAND did.",
		SkipFlagParsing: true, // sbatch's options, parsed by package slurm
		Action:          sallocAction,
	}
}

func sallocAction(c *ucli.Context) error {
	args := c.Args().Slice()
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
		return ucli.ShowCommandHelp(c, c.Command.Name)
	}
	opts, command, err := slurm.SplitAllocArgs(args)
	if err != nil {
		return usagef(c, "%v", err)
	}
	if len(command) == 0 {
		command = []string{cmp.Or(os.Getenv("SHELL"), "/bin/sh")}
	}
	al, release, err := holdNodes(c, "salloc", filepath.Base(command[0]), opts)
	if err != nil {
		return err
	}
	defer release()
	id, nodes, names, d := al.id, al.nodes, al.names, al.detail
	cmd := exec.CommandContext(c.Context, command[0], command[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = c.App.Reader, c.App.Writer, c.App.ErrWriter
	cmd.Env = append(os.Environ(), "SLURM_JOB_ID="+id, "SLURM_JOBID="+id, "SLURM_JOB_NODELIST="+nodes, "SLURM_NODELIST="+nodes,
		"SLURM_NNODES="+strconv.Itoa(len(names)), "SLURM_JOB_NUM_NODES="+strconv.Itoa(len(names)),
		"SLURM_JOB_NAME="+d.Job.Spec.Name, "SLURM_JOB_PARTITION="+jobPartition(&d.Job))
	err = cmd.Run()
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		if code := ee.ExitCode(); code > 0 {
			return exitStatus(code)
		}
		return exitStatus(exitError) // killed by a signal
	}
	if err != nil {
		return fmt.Errorf("run %s: %w", command[0], err)
	}
	return nil
}

// allocation is a job that holds nodes while a command uses them
// (salloc, skein run -it), once it runs.
type allocation struct {
	cl     *api.Client
	detail *api.JobDetail
	// id is the job's number as Slurm shows it; names its nodes' names
	// and nodes those as a Slurm host list.
	id    string
	names []string
	nodes string
}

// holdNodes submits a job named name that holds what sbatch's options
// opts ask for, running sallocHold, and waits until it runs; release
// cancels it. who prefixes what it says on the app's error writer, as
// Slurm's salloc and srun do.
func holdNodes(c *ucli.Context, who, name string, opts []string) (al *allocation, release func(), err error) {
	// The job runs sallocHold; its output goes nowhere.
	in := slurm.Input{Options: append([]string{"--output=/dev/null", "--job-name=" + name}, append(opts, "--wrap", sallocHold)...),
		LookupEnv: os.LookupEnv, Environ: os.Environ}
	if in.SubmitDir, err = os.Getwd(); err != nil {
		return nil, nil, fmt.Errorf("find the current directory: %w", err)
	}
	in.SubmitHost, _ = os.Hostname()
	batch, err := slurm.Parse(in)
	if err != nil {
		return nil, nil, usagef(c, "%v", err)
	}
	for _, w := range batch.Warnings {
		fmt.Fprintf(c.App.ErrWriter, "%s: warning: %s\n", who, printable(w))
	}
	spec := batch.Spec
	spec.Normalize()
	if err := spec.Validate(); err != nil {
		return nil, nil, usagef(c, "%v", err)
	}
	cl, err := newClient(c)
	if err != nil {
		return nil, nil, err
	}
	job, err := submitJob(c.Context, cl, api.SubmitRequest{RequestID: structs.NewID(), Spec: spec})
	if err != nil {
		return nil, nil, err
	}
	id := job.SlurmID()
	fmt.Fprintf(c.App.ErrWriter, "%s: Granted job allocation %s\n", who, id)
	release = func() {
		// Let the nodes go, whatever happened here.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := cl.CancelJob(ctx, job.ID); err != nil {
			fmt.Fprintf(c.App.ErrWriter, "%s: error: relinquish job allocation %s: %v\n", who, id, err)
			return
		}
		fmt.Fprintf(c.App.ErrWriter, "%s: Relinquishing job allocation %s\n", who, id)
	}
	fmt.Fprintf(c.App.ErrWriter, "%s: Waiting for resource configuration\n", who)
	jw := newJobWatch(cl, job.ID, c.App.ErrWriter)
	d, err := jw.until(c.Context, func(d *api.JobDetail) bool {
		return d.Job.State == structs.JobRunning && allocsRunning(d) || d.Job.State.Terminal()
	})
	if err != nil {
		release()
		return nil, nil, err
	}
	if d.Job.State != structs.JobRunning {
		release()
		return nil, nil, fmt.Errorf("job allocation %s ended before it could be used: %s", id, printable(endLine(&d.Job)))
	}
	al = &allocation{cl: cl, detail: d, id: id}
	for _, a := range d.Allocations {
		if a.Attempt == d.Job.Attempts {
			al.names = append(al.names, cmp.Or(d.Nodes[a.NodeID], a.NodeID))
		}
	}
	al.nodes = structs.HostList(al.names)
	fmt.Fprintf(c.App.ErrWriter, "%s: Nodes %s are ready for job\n", who, al.nodes)
	return al, release, nil
}

// allocsRunning reports whether every allocation of the job's current
// attempt runs: the job may run, as the leader sees it, before each node
// has started its share, and a command beside it (skein exec) needs it
// started.
func allocsRunning(d *api.JobDetail) bool {
	n := 0
	for _, a := range d.Allocations {
		if a.Attempt != d.Job.Attempts {
			continue
		}
		if a.State != structs.AllocRunning {
			return false
		}
		n++
	}
	return n > 0
}
