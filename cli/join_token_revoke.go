package cli

import (
	"fmt"

	ucli "github.com/urfave/cli/v2"
)

func joinTokenRevokeCommand() *ucli.Command {
	return &ucli.Command{
		Name:      "revoke",
		Usage:     "stop a join token from admitting nodes (nodes it admitted stay)",
		ArgsUsage: "ID",
		Flags: []ucli.Flag{
			&ucli.BoolFlag{Name: "json", Usage: "print the revoked token as JSON"},
		},
		Action: joinTokenRevokeAction,
	}
}

func joinTokenRevokeAction(c *ucli.Context) error {
	args, cl, err := commandClient(c, "ID")
	if err != nil {
		return err
	}
	t, err := cl.RevokeJoinToken(c.Context, args[0])
	if err != nil {
		return err
	}
	if c.Bool("json") {
		return printJSON(c.App.Writer, t)
	}
	_, err = fmt.Fprintf(c.App.Writer, "revoked join token %s (it admitted %d node(s))\n", t.ID, t.Uses)
	return err
}
