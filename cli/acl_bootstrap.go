package cli

import (
	"fmt"

	ucli "github.com/urfave/cli/v2"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/structs"
)

func aclBootstrapCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "bootstrap",
		Usage: "turn ACLs on and make the first admin token (once per cluster); it is printed alone on stdout, once",
		Description: "Save it to a file only you can read, and use it from there:\n" +
			"  (umask 077; skein acl bootstrap > admin.token)\n" +
			"  export SKEIN_TOKEN_FILE=$PWD/admin.token",
		Flags: []ucli.Flag{
			&ucli.StringFlag{Name: "user", Value: api.DefaultBootstrapUser, Usage: "the first admin's user name"},
			&ucli.BoolFlag{Name: "json", Usage: "print the token and its record as JSON"},
		},
		Action: aclBootstrapAction,
	}
}

func aclBootstrapAction(c *ucli.Context) error {
	_, cl, err := commandClient(c)
	if err != nil {
		return err
	}
	user := c.String("user")
	if err := checkFlag(c, "user", structs.ValidateUserName(user)); err != nil {
		return err
	}
	created, err := cl.ACLBootstrap(c.Context, api.ACLBootstrapRequest{User: user})
	if err != nil {
		return err
	}
	if err := printCreatedToken(c, created); err != nil {
		return err
	}
	_, err = fmt.Fprintf(c.App.ErrWriter,
		"ACLs are on. This is the admin token of user %s (ID %s), shown this once: the cluster keeps only its hash.\n"+
			"Keep it in a file only you can read and use it: export SKEIN_TOKEN_FILE=FILE\n"+
			"Give each user a token of their own: skein acl token create --user NAME --role submitter\n",
		created.Info.User, created.Info.ID)
	return err
}

// printCreatedToken prints a new token alone on stdout, so that `> FILE`
// keeps it, or with --json the token and its record.
func printCreatedToken(c *ucli.Context, created *api.ACLTokenCreated) error {
	if c.Bool("json") {
		return printJSON(c.App.Writer, created)
	}
	_, err := fmt.Fprintln(c.App.Writer, created.Token)
	return err
}
