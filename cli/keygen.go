package cli

import (
	"fmt"

	ucli "github.com/urfave/cli/v2"

	"github.com/skein-dev/skein/agent"
)

func keygenCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "keygen",
		Usage: "print a new gossip encryption key for `skein agent --encrypt`",
		Action: func(c *ucli.Context) error {
			if _, err := cmdArgs(c); err != nil {
				return err
			}
			key, err := agent.GenerateKey()
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(c.App.Writer, key)
			return err
		},
	}
}
