package cli

import (
	"fmt"

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
			"or an operator, may. It is not interactive: no terminal, no input.",
		Flags: []ucli.Flag{
			&ucli.IntFlag{Name: "rank", Usage: "the job's rank to run it beside (`R`)"},
		},
		Action: execAction,
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
	res, err := cl.Exec(c.Context, args[0], api.ExecRequest{Rank: c.Int("rank"), Command: args[1:]})
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
