package cli

import (
	"fmt"

	ucli "github.com/urfave/cli/v2"
)

func leaveCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "leave",
		Usage: "make the agent leave the cluster gracefully and exit",
		Description: "The agent stops its jobs (their jobs are handled by their restart policy),\n" +
			"hands leadership over if it leads, leaves gossip and Raft, and exits.",
		Action: leaveAction,
	}
}

func leaveAction(c *ucli.Context) error {
	_, cl, err := commandClient(c)
	if err != nil {
		return err
	}
	resp, err := cl.Leave(c.Context)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(c.App.Writer, "node %s is leaving the cluster\n", resp.Node)
	return err
}
