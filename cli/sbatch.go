package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"

	ucli "github.com/urfave/cli/v2"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/slurm"
	"github.com/skein-dev/skein/structs"
)

func sbatchCommand() *ucli.Command {
	return &ucli.Command{
		Name:      "sbatch",
		Usage:     "run a Slurm batch script as a job, its #SBATCH directives as its spec",
		ArgsUsage: "[SBATCH OPTIONS] SCRIPT [ARGS...]",
		Description: "Reads the #SBATCH directives at the top of SCRIPT and the sbatch options\n" +
			"before it, which override them, and submits a job that runs SCRIPT with\n" +
			"ARGS on every node (one task per node), with its #! interpreter; an srun\n" +
			"in it starts its command on each node, as that node's tasks. Rank 0\n" +
			"also writes its output where -o and -e say (default slurm-%j.out in the\n" +
			"working directory). Options skein has no equivalent for are refused,\n" +
			"all listed, and nothing is submitted; --ignore-unknown leaves them out\n" +
			"with a warning. Prints 'Submitted batch job ID' (--parsable: the ID).\n\n" +
			"Unlike sbatch, whose default is --export=ALL, the job gets none of your\n" +
			"environment but the variables --export names. An explicit --export=ALL\n" +
			"passes it as the job's secret env, less your account's, session's and\n" +
			"host's variables (HOME, USER, PWD, TMPDIR, SSH_*, ...), skein's and\n" +
			"Slurm's (SKEIN_*, SLURM_*, ...) and names that look like secrets\n" +
			"(*TOKEN*, *_KEY, ...), which a warning lists.\n\n" +
			"See docs/slurm.md, \"Slurm scripts\", for every option and how it maps.",
		SkipFlagParsing: true, // sbatch's own options, parsed by package slurm
		Action:          sbatchAction,
	}
}

func sbatchAction(c *ucli.Context) error {
	args := c.Args().Slice()
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
		return ucli.ShowCommandHelp(c, c.Command.Name)
	}
	opts, path, scriptArgs, err := slurm.SplitArgs(args)
	if err != nil {
		return usagef(c, "%v", err)
	}
	in := slurm.Input{Path: path, Options: opts, Args: scriptArgs, LookupEnv: os.LookupEnv, Environ: os.Environ}
	if path != "" {
		if in.Script, err = readScript(path); err != nil {
			return err
		}
	}
	if in.SubmitDir, err = os.Getwd(); err != nil {
		return fmt.Errorf("find the current directory, the job's working directory: %w", err)
	}
	in.SubmitHost, _ = os.Hostname() // SLURM_SUBMIT_HOST only
	batch, err := slurm.Parse(in)
	if errors.Is(err, slurm.ErrTooLarge) {
		return err
	}
	if err != nil {
		return usagef(c, "%v", err)
	}
	if batch.Wait && batch.Spec.Array != nil {
		return usagef(c, "--wait waits for one job; it cannot be used with --array")
	}
	for _, w := range batch.Warnings {
		fmt.Fprintf(c.App.ErrWriter, "skein sbatch: warning: %s\n", printable(w))
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
	if len(spec.MailType) > 0 {
		// One warning when no mail will go: the node asked has no mail
		// program (the leader's sends, and nodes are set up alike).
		if st, err := cl.Status(c.Context); err == nil && !st.Mail {
			fmt.Fprintln(c.App.ErrWriter, "skein sbatch: warning: --mail-type: the cluster's agents have no mail program (skein agent --mail-prog): no mail will be sent")
		}
	}
	job, err := submitJob(c.Context, cl, api.SubmitRequest{RequestID: structs.NewID(), Spec: spec})
	if err != nil {
		return err
	}
	// The job's number; an array's is its first task's, which names
	// the array (%A) and every task as NUMBER_INDEX.
	id := strconv.FormatUint(job.Number, 10)
	if job.Number == 0 {
		id = job.ID // an agent that gives no numbers
		if job.ArrayID != "" {
			id = job.ArrayID
		}
	}
	if batch.Parsable {
		_, err = fmt.Fprintln(c.App.Writer, id)
	} else {
		_, err = fmt.Fprintf(c.App.Writer, "Submitted batch job %s\n", id)
	}
	if err != nil || !batch.Wait {
		return err
	}
	return waitJob(c, cl, job.ID)
}

// readScript reads a batch script, refusing one over slurm.MaxScriptBytes.
func readScript(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, slurm.MaxScriptBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(b) > slurm.MaxScriptBytes {
		return nil, fmt.Errorf("%s: %w: more than the limit of %d bytes", path, slurm.ErrTooLarge, slurm.MaxScriptBytes)
	}
	return b, nil
}
