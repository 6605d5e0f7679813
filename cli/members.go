package cli

import (
	"fmt"
	"strconv"

	ucli "github.com/urfave/cli/v2"

	"github.com/skein-dev/skein/api"
)

func membersCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "members",
		Usage: "list the nodes gossip knows, with their liveness",
		Flags: []ucli.Flag{
			&ucli.BoolFlag{Name: "json", Usage: "print JSON"},
		},
		Action: membersAction,
	}
}

func membersAction(c *ucli.Context) error {
	_, cl, err := commandClient(c)
	if err != nil {
		return err
	}
	members, err := cl.Members(c.Context)
	if err != nil {
		return err
	}
	if c.Bool("json") {
		if members == nil {
			members = []api.Member{}
		}
		return printJSON(c.App.Writer, members)
	}
	if len(members) == 0 {
		_, err := fmt.Fprintln(c.App.Writer, "No members.")
		return err
	}
	rows := make([][]string, 0, len(members))
	for _, m := range members {
		name := orDash(m.Name)
		if m.IsThisNode {
			name += " *"
		}
		rows = append(rows, []string{
			name,
			m.Addr,
			m.Status,
			orDash(m.Role),
			strconv.Itoa(m.GPUsFree) + "/" + strconv.Itoa(m.GPUsTotal),
			orDash(m.Version),
		})
	}
	return printTable(c.App.Writer, []string{"NAME", "GOSSIP ADDRESS", "STATUS", "ROLE", "GPUS FREE", "VERSION"}, rows)
}
