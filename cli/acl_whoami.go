package cli

import (
	"fmt"
	"strings"

	ucli "github.com/urfave/cli/v2"
)

func aclWhoAmICommand() *ucli.Command {
	return &ucli.Command{
		Name:  "whoami",
		Usage: "show the user, role and permissions of the token in use",
		Flags: []ucli.Flag{
			&ucli.BoolFlag{Name: "json", Usage: "print JSON"},
		},
		Action: aclWhoAmIAction,
	}
}

func aclWhoAmIAction(c *ucli.Context) error {
	_, cl, err := commandClient(c)
	if err != nil {
		return err
	}
	who, err := cl.WhoAmI(c.Context)
	if err != nil {
		return err
	}
	if c.Bool("json") {
		return printJSON(c.App.Writer, who)
	}
	perms := make([]string, len(who.Permissions))
	for i, p := range who.Permissions {
		perms[i] = string(p)
	}
	if !who.ACL {
		_, err := fmt.Fprintf(c.App.Writer,
			"ACLs are off (no bootstrap yet): whoever holds the cluster's API token may do everything (%s).\n"+
				"skein acl bootstrap turns them on and prints the first admin token.\n",
			orDash(strings.Join(perms, ", ")))
		return err
	}
	return printFields(c.App.Writer, "", []field{
		{"User", who.User},
		{"Role", string(who.Role)},
		{"Token", orDash(who.TokenID)},
		{"Permissions", orDash(strings.Join(perms, ", "))},
	})
}
