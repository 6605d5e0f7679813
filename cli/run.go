package cli

import (
	"cmp"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	ucli "github.com/urfave/cli/v2"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/slurm"
)

func runCommand() *ucli.Command {
	return &ucli.Command{
		Name:      "run",
		Usage:     "run a command interactively under a terminal on a node held for it (-it), as Slurm's srun --pty",
		ArgsUsage: "-it [SBATCH OPTIONS] [--] [COMMAND [ARGS...]]",
		Description: "Submits a one-node job that holds what sbatch's options ask for, waits until it runs, then\n" +
			"runs COMMAND (default: $SHELL) there under a terminal, as skein exec -it does: your\n" +
			"terminal in raw mode, its resizes and keys (Ctrl-C included) go to it. When COMMAND ends,\n" +
			"or the session breaks, the job is cancelled, and skein exits as COMMAND did. Only -it is\n" +
			"supported: a batch job is skein submit's or sbatch's.",
		SkipFlagParsing: true, // sbatch's options, parsed by package slurm
		Action: func(c *ucli.Context) error {
			args := c.Args().Slice()
			if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
				return ucli.ShowCommandHelp(c, c.Command.Name)
			}
			if len(args) == 0 || !slices.Contains([]string{"-it", "-ti", "--tty", "-t"}, args[0]) {
				return usagef(c, "want -it first: skein run runs interactive sessions only (batch jobs: skein submit, sbatch)")
			}
			return interactiveJob(c, "run", args[1:])
		},
	}
}

func srunCommand() *ucli.Command {
	return &ucli.Command{
		Name:      "srun",
		Usage:     "srun --pty runs a command interactively on a node held for it; in an allocation (salloc), srun runs a command on its nodes, as Slurm's",
		ArgsUsage: "--pty [SBATCH OPTIONS] [--] [COMMAND [ARGS...]] | [-N K] [-l] [--jobid ID] COMMAND [ARGS...]",
		Description: "skein run -it under Slurm's name: srun --pty bash. In an allocation ($SLURM_JOB_ID set, as\n" +
			"salloc sets it, or --jobid), srun CMD runs CMD on each of the allocation's nodes (the first K\n" +
			"with -N), one task each, through skein exec, prints each task's output once all have ended\n" +
			"(prefixed with its task ID with -l) and exits with the highest exit code. Inside a job's\n" +
			"script, srun is the job's own (docs/slurm.md).",
		SkipFlagParsing: true,
		Action: func(c *ucli.Context) error {
			args := c.Args().Slice()
			if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
				return ucli.ShowCommandHelp(c, c.Command.Name)
			}
			i := slices.Index(args, "--pty")
			if i < 0 || slices.Contains(args[:i], "--") {
				if job := allocationJob(); job != "" || slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--jobid") }) {
					return srunStep(c, job, args)
				}
				return usagef(c, "want --pty: outside a job and an allocation, srun runs interactive sessions only (batch jobs: sbatch; an allocation: salloc)")
			}
			return interactiveJob(c, "srun", slices.Delete(slices.Clone(args), i, i+1))
		},
	}
}

// interactiveJob holds a node with sbatch's options in args and runs the
// command that follows them there under a terminal, connected to the
// local one; who names the command in what it says.
func interactiveJob(c *ucli.Context, who string, args []string) error {
	opts, command, err := slurm.SplitAllocArgs(args)
	if err != nil {
		return usagef(c, "%v", err)
	}
	if len(command) == 0 {
		command = []string{cmp.Or(os.Getenv("SHELL"), "/bin/sh")}
	}
	// Ctrl-C while the job waits (the terminal is not raw yet), or a
	// kill, ends the wait or the session, and the job is let go.
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	c.Context = ctx
	al, release, err := holdNodes(c, who, filepath.Base(command[0]), append([]string{"--nodes=1"}, opts...))
	if err != nil {
		return err
	}
	defer release()
	return execTTY(c, al.cl, al.detail.Job.ID, api.ExecRequest{Command: command})
}
