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
	// The job runs sallocHold; its output goes nowhere.
	in := slurm.Input{Options: append([]string{"--output=/dev/null", "--job-name=" + filepath.Base(command[0])}, append(opts, "--wrap", sallocHold)...),
		LookupEnv: os.LookupEnv, Environ: os.Environ}
	if in.SubmitDir, err = os.Getwd(); err != nil {
		return fmt.Errorf("find the current directory: %w", err)
	}
	in.SubmitHost, _ = os.Hostname()
	batch, err := slurm.Parse(in)
	if err != nil {
		return usagef(c, "%v", err)
	}
	for _, w := range batch.Warnings {
		fmt.Fprintf(c.App.ErrWriter, "salloc: warning: %s\n", printable(w))
	}
	spec := batch.Spec
	spec.Normalize()
	if err := spec.Validate(); err != nil {
		return usagef(c, "%v", err)
	}
	cl, err := newClient(c)
	if err != nil {
		return err
	}
	job, err := submitJob(c.Context, cl, api.SubmitRequest{RequestID: structs.NewID(), Spec: spec})
	if err != nil {
		return err
	}
	id := job.SlurmID()
	fmt.Fprintf(c.App.ErrWriter, "salloc: Granted job allocation %s\n", id)
	defer func() {
		// Let the nodes go, whatever happened here.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := cl.CancelJob(ctx, job.ID); err != nil {
			fmt.Fprintf(c.App.ErrWriter, "salloc: error: relinquish job allocation %s: %v\n", id, err)
			return
		}
		fmt.Fprintf(c.App.ErrWriter, "salloc: Relinquishing job allocation %s\n", id)
	}()
	fmt.Fprintln(c.App.ErrWriter, "salloc: Waiting for resource configuration")
	jw := newJobWatch(cl, job.ID, c.App.ErrWriter)
	d, err := jw.until(c.Context, func(d *api.JobDetail) bool {
		return d.Job.State == structs.JobRunning && len(d.Allocations) > 0 || d.Job.State.Terminal()
	})
	if err != nil {
		return err
	}
	if d.Job.State != structs.JobRunning {
		return fmt.Errorf("job allocation %s ended before it could be used: %s", id, printable(endLine(&d.Job)))
	}
	var names []string
	for _, a := range d.Allocations {
		if a.Attempt == d.Job.Attempts {
			names = append(names, cmp.Or(d.Nodes[a.NodeID], a.NodeID))
		}
	}
	nodes := structs.HostList(names)
	fmt.Fprintf(c.App.ErrWriter, "salloc: Nodes %s are ready for job\n", nodes)

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
