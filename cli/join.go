package cli

import (
	"fmt"

	ucli "github.com/urfave/cli/v2"
)

func joinCommand() *ucli.Command {
	return &ucli.Command{
		Name:      "join",
		Usage:     "ask the agent to join the cluster of another node",
		ArgsUsage: "HOST[:PORT]...",
		Description: "Joins the agent at --addr to the cluster of any of the given members, by their\n" +
			"gossip address (port 7472 unless given).",
		Action: joinAction,
	}
}

func joinAction(c *ucli.Context) error {
	if c.NArg() == 0 {
		return usagef(c, "give the gossip address of at least one member")
	}
	cl, err := newClient(c)
	if err != nil {
		return err
	}
	resp, err := cl.Join(c.Context, c.Args().Slice())
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(c.App.Writer, "joined through %d of %d address(es)\n", resp.Joined, c.NArg())
	return err
}
