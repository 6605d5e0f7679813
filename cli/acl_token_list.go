package cli

import (
	"fmt"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/skein-dev/skein/api"
)

func aclTokenListCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "list",
		Usage: "list the users' tokens (never their secrets)",
		Flags: []ucli.Flag{
			&ucli.BoolFlag{Name: "json", Usage: "print JSON"},
		},
		Action: aclTokenListAction,
	}
}

func aclTokenListAction(c *ucli.Context) error {
	_, cl, err := commandClient(c)
	if err != nil {
		return err
	}
	tokens, err := cl.ACLTokens(c.Context)
	if err != nil {
		return err
	}
	if c.Bool("json") {
		if tokens == nil {
			tokens = []api.ACLTokenInfo{}
		}
		return printJSON(c.App.Writer, tokens)
	}
	if len(tokens) == 0 {
		_, err := fmt.Fprintln(c.App.Writer, "No ACL tokens.")
		return err
	}
	now := time.Now()
	rows := make([][]string, 0, len(tokens))
	for _, t := range tokens {
		expires := "never"
		if !t.ExpiresAt.IsZero() {
			expires = expiresIn(now, t.ExpiresAt)
		}
		rows = append(rows, []string{
			t.ID, t.User, string(t.Role), orDash(t.State), expiresIn(now, t.CreatedAt), expires,
			orDash(t.CreatedBy), orDash(truncate(t.Description, 40)),
		})
	}
	return printTable(c.App.Writer, []string{"ID", "USER", "ROLE", "STATE", "CREATED", "EXPIRES", "CREATED BY", "DESCRIPTION"}, rows)
}
