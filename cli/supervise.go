package cli

import (
	ucli "github.com/urfave/cli/v2"

	"github.com/skein-dev/skein/agent/runner"
)

// superviseCommand is started by the agent's runner, never by people: it
// watches over one allocation's process so the job outlives agent restarts.
func superviseCommand() *ucli.Command {
	return &ucli.Command{
		Name:      "supervise",
		Hidden:    true,
		ArgsUsage: "ALLOC_DIR",
		Action: func(c *ucli.Context) error {
			if c.NArg() != 1 {
				return usagef(c, "supervise takes one allocation directory")
			}
			if code := runner.Supervise(c.Args().First()); code != 0 {
				return exitStatus(code)
			}
			return nil
		},
	}
}
