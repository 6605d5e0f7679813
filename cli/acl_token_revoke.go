package cli

import (
	"fmt"

	ucli "github.com/urfave/cli/v2"
)

func aclTokenRevokeCommand() *ucli.Command {
	return &ucli.Command{
		Name:      "revoke",
		Usage:     "stop a token from working, on every node (ID or a unique prefix of it)",
		ArgsUsage: "ID",
		Flags: []ucli.Flag{
			&ucli.BoolFlag{Name: "json", Usage: "print the revoked token as JSON"},
		},
		Action: aclTokenRevokeAction,
	}
}

func aclTokenRevokeAction(c *ucli.Context) error {
	args, cl, err := commandClient(c, "ID")
	if err != nil {
		return err
	}
	t, err := cl.RevokeACLToken(c.Context, args[0])
	if err != nil {
		return err
	}
	if c.Bool("json") {
		return printJSON(c.App.Writer, t)
	}
	_, err = fmt.Fprintf(c.App.Writer, "revoked token %s of user %s (role %s)\n", t.ID, t.User, t.Role)
	return err
}
