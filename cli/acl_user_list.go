package cli

import (
	"fmt"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/skein-dev/skein/structs"
)

func aclUserListCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "list",
		Usage: "list the users an admin has set something for (any other user has the defaults: no root)",
		Flags: []ucli.Flag{
			&ucli.BoolFlag{Name: "json", Usage: "print JSON"},
		},
		Action: aclUserListAction,
	}
}

func aclUserListAction(c *ucli.Context) error {
	_, cl, err := commandClient(c)
	if err != nil {
		return err
	}
	users, err := cl.ACLUsers(c.Context)
	if err != nil {
		return err
	}
	if c.Bool("json") {
		if users == nil {
			users = []structs.ACLUser{}
		}
		return printJSON(c.App.Writer, users)
	}
	if len(users) == 0 {
		_, err := fmt.Fprintln(c.App.Writer, "No users set: every user has the defaults (jobs never run as root).")
		return err
	}
	now := time.Now()
	rows := make([][]string, 0, len(users))
	for _, u := range users {
		root := "no"
		if u.AllowRoot {
			root = "yes"
		}
		rows = append(rows, []string{u.Name, root, expiresIn(now, u.UpdatedAt), orDash(u.UpdatedBy)})
	}
	return printTable(c.App.Writer, []string{"USER", "ALLOW ROOT", "UPDATED", "UPDATED BY"}, rows)
}
