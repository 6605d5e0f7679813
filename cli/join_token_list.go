package cli

import (
	"fmt"
	"strconv"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/skein-dev/skein/api"
)

func joinTokenListCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "list",
		Usage: "list the join tokens (never their secrets)",
		Flags: []ucli.Flag{
			&ucli.BoolFlag{Name: "json", Usage: "print JSON"},
		},
		Action: joinTokenListAction,
	}
}

func joinTokenListAction(c *ucli.Context) error {
	_, cl, err := commandClient(c)
	if err != nil {
		return err
	}
	tokens, err := cl.JoinTokens(c.Context)
	if err != nil {
		return err
	}
	if c.Bool("json") {
		if tokens == nil {
			tokens = []api.JoinToken{}
		}
		return printJSON(c.App.Writer, tokens)
	}
	if len(tokens) == 0 {
		_, err := fmt.Fprintln(c.App.Writer, "No join tokens.")
		return err
	}
	now := time.Now()
	rows := make([][]string, 0, len(tokens))
	for _, t := range tokens {
		uses := strconv.Itoa(t.Uses) + "/-"
		if t.MaxUses > 0 {
			uses = fmt.Sprintf("%d/%d", t.Uses, t.MaxUses)
		}
		rows = append(rows, []string{t.ID, orDash(t.State), uses, expiresIn(now, t.ExpiresAt), orDash(truncate(t.Description, 40))})
	}
	return printTable(c.App.Writer, []string{"ID", "STATE", "USES", "EXPIRES", "DESCRIPTION"}, rows)
}

// expiresIn renders when t is relative to now, in age's units: "in 3h",
// or "2d ago" once passed.
func expiresIn(now, t time.Time) string {
	switch {
	case t.IsZero():
		return "-"
	case t.After(now):
		return "in " + age(t, now)
	}
	return age(now, t) + " ago"
}
