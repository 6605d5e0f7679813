package cli

import (
	"fmt"
	"io"

	ucli "github.com/urfave/cli/v2"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/structs"
)

func aclUserCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "user",
		Usage: "what admins allow each user beyond its tokens' roles",
		Subcommands: []*ucli.Command{
			aclUserSetCommand(),
			aclUserListCommand(),
		},
	}
}

func aclUserSetCommand() *ucli.Command {
	return &ucli.Command{
		Name:      "set",
		Usage:     "allow or forbid a user's jobs to run as root (where the user's local account is root)",
		ArgsUsage: "NAME",
		Flags: []ucli.Flag{
			&ucli.BoolFlag{Name: "allow-root", Usage: "let the user's jobs run as root"},
			&ucli.BoolFlag{Name: "no-allow-root", Usage: "never run the user's jobs as root (the default for every user)"},
			&ucli.BoolFlag{Name: "json", Usage: "print the user as JSON"},
		},
		Action: aclUserSetAction,
	}
}

func aclUserSetAction(c *ucli.Context) error {
	args, err := cmdArgs(c, "NAME")
	if err != nil {
		return err
	}
	if err := structs.ValidateUserName(args[0]); err != nil {
		return usagef(c, "%v", err)
	}
	allow, forbid := c.Bool("allow-root"), c.Bool("no-allow-root")
	if allow == forbid {
		return usagef(c, "give one of --allow-root or --no-allow-root")
	}
	cl, err := newClient(c)
	if err != nil {
		return err
	}
	u, err := cl.SetACLUser(c.Context, api.ACLUserSetRequest{User: args[0], AllowRoot: allow})
	if err != nil {
		return err
	}
	if c.Bool("json") {
		return printJSON(c.App.Writer, u)
	}
	return printACLUser(c.App.Writer, u)
}

// printACLUser says what a user is allowed.
func printACLUser(w io.Writer, u *structs.ACLUser) error {
	if u.AllowRoot {
		_, err := fmt.Fprintf(w, "user %s: jobs may run as root where the local account %s is root\n", u.Name, u.Name)
		return err
	}
	_, err := fmt.Fprintf(w, "user %s: jobs never run as root\n", u.Name)
	return err
}
