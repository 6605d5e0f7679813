package cli

import (
	"fmt"
	"os"

	ucli "github.com/urfave/cli/v2"

	"github.com/skein-dev/skein/api"
)

func execCommand() *ucli.Command {
	return &ucli.Command{
		Name:      "exec",
		Usage:     "run a command beside a running job, as the job's user, in its environment",
		ArgsUsage: "JOB -- COMMAND [ARGS...]",
		Description: "Runs COMMAND on the node that runs the job's rank (--rank, default 0), as the job's account,\n" +
			"with its environment, in its working directory (a container job's: in its container), and\n" +
			"waits for it: prints the end of its output (stdout and stderr, at most 4 KiB) and exits with its\n" +
			"exit code. JOB is the job's number (an array task's NUMBER_INDEX) or ID. Only the job's owner,\n" +
			"or an operator, may.\n\n" +
			"With -it (--interactive --tty) it is interactive: COMMAND runs under a terminal of the\n" +
			"size of yours, which is put in raw mode until it ends; your keys, resizes and Ctrl-C go to\n" +
			"it, through whichever node --addr names, and skein exits with its exit code.",
		Flags: []ucli.Flag{
			&ucli.IntFlag{Name: "rank", Usage: "the job's rank to run it beside (`R`)"},
			&ucli.BoolFlag{Name: "interactive", Aliases: []string{"i"}, Usage: "send your input to it (with --tty)"},
			&ucli.BoolFlag{Name: "tty", Aliases: []string{"t"}, Usage: "run it under a terminal, interactively"},
		},
		UseShortOptionHandling: true,
		Action:                 execAction,
	}
}

func execAction(c *ucli.Context) error {
	args := c.Args().Slice()
	if len(args) > 1 && args[1] == "--" {
		args = append(args[:1], args[2:]...)
	}
	if len(args) < 2 {
		return usagef(c, "want JOB -- COMMAND [ARGS...]")
	}
	cl, err := newClient(c)
	if err != nil {
		return err
	}
	req := api.ExecRequest{Rank: c.Int("rank"), Command: args[1:]}
	if c.Bool("tty") || c.Bool("interactive") {
		return execTTY(c, cl, args[0], req)
	}
	res, err := cl.Exec(c.Context, args[0], req)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprint(c.App.Writer, res.Output); err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return exitStatus(res.ExitCode)
	}
	return nil
}

// execTTY runs req under a terminal beside job and connects the local
// terminal (the app's input and output) to it.
func execTTY(c *ucli.Context, cl *api.Client, job string, req api.ExecRequest) error {
	in, _ := c.App.Reader.(*os.File)
	req.Rows, req.Cols = defaultRows, defaultCols
	if rows, cols, ok := terminalSize(in); ok {
		req.Rows, req.Cols = rows, cols
	}
	req.Term = os.Getenv("TERM")
	s, err := cl.ExecPTY(c.Context, job, req)
	if err != nil {
		return err
	}
	code, err := interact(c.Context, s, c.App.Reader, c.App.Writer)
	if err != nil {
		return err
	}
	if code != 0 {
		return exitStatus(code)
	}
	return nil
}
