package cli

import (
	"strconv"

	ucli "github.com/urfave/cli/v2"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/structs"
)

func raftCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "raft",
		Usage: "inspect the Raft group",
		Subcommands: []*ucli.Command{{
			Name:  "peers",
			Usage: "list the servers of the Raft configuration",
			Flags: []ucli.Flag{
				&ucli.BoolFlag{Name: "json", Usage: "print JSON"},
			},
			Action: raftPeersAction,
		}},
	}
}

func raftPeersAction(c *ucli.Context) error {
	_, cl, err := commandClient(c)
	if err != nil {
		return err
	}
	peers, err := cl.RaftPeers(c.Context)
	if err != nil {
		return err
	}
	if c.Bool("json") {
		if peers == nil {
			peers = []api.RaftPeer{}
		}
		return printJSON(c.App.Writer, peers)
	}
	rows := make([][]string, 0, len(peers))
	for _, p := range peers {
		suffrage := "nonvoter"
		if p.Voter {
			suffrage = "voter"
		}
		rows = append(rows, []string{orDash(p.Name), structs.ShortID(p.ID), p.Address, suffrage, strconv.FormatBool(p.Leader)})
	}
	return printTable(c.App.Writer, []string{"NAME", "ID", "ADDRESS", "SUFFRAGE", "LEADER"}, rows)
}
