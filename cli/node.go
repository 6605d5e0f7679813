package cli

import (
	"context"
	"fmt"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/skein-dev/skein/api"
)

func nodeCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "node",
		Usage: "act on one node",
		Subcommands: []*ucli.Command{{
			Name:  "revoke",
			Usage: "revoke a node's admission: it is cut off everywhere, and its ID is never admitted again",
			Description: "NODE is a node name, or its ID or a unique prefix of it. Every node refuses its\n" +
				"certificate and closes its connections; the leader takes it out of Raft, then\n" +
				"rotates the gossip keyring without it, and gossip refuses it. The command says\n" +
				"when all that is done, or what is still under way after half a minute. To bring\n" +
				"the machine back, empty its data directory (it then starts as a new node) and\n" +
				"admit it with a new join token.",
			ArgsUsage: "NODE",
			Flags: []ucli.Flag{
				&ucli.StringFlag{Name: "reason", Usage: "why, kept with the revocation"},
			},
			Action: nodeRevokeAction,
		}, {
			Name:  "drain",
			Usage: "move the work off a node and place nothing new on it",
			Description: "NODE is a node name, or its ID or a unique prefix of it. Nothing new is placed\n" +
				"on the node. Each replica of a service there gets a replacement elsewhere and\n" +
				"stops once that one is healthy. A job with a restart left, or preemptible, is\n" +
				"stopped with its --signal (else SIGTERM) and its grace, and runs again elsewhere\n" +
				"without using a restart. Other jobs run out, or are stopped at --deadline.\n" +
				"--force stops everything at once. skein nodes shows the node draining, then\n" +
				"drained; skein events -f says what moved. skein node undrain ends it.",
			ArgsUsage: "NODE",
			Flags: []ucli.Flag{
				&ucli.StringFlag{Name: "deadline", Usage: "stop the jobs that cannot move once this long has passed (like 30m; default: none, they run out)"},
				&ucli.BoolFlag{Name: "force", Usage: "stop everything on the node now, without waiting for replacements"},
				&ucli.StringFlag{Name: "reason", Usage: "why, kept with the drain"},
			},
			Action: nodeDrainAction,
		}, {
			Name:        "undrain",
			Usage:       "let a drained or draining node take work again",
			Description: "NODE is a node name, or its ID or a unique prefix of it. Work already moved stays\nwhere it went.",
			ArgsUsage:   "NODE",
			Flags: []ucli.Flag{
				&ucli.StringFlag{Name: "reason", Usage: "why"},
			},
			Action: nodeUndrainAction,
		}, {
			Name:  "remove",
			Usage: "forget a node that is down or has left for good",
			Description: "NODE is a node name, or its ID or a unique prefix of it. The node leaves the\n" +
				"list of nodes, and Raft if it was a server; its finished work stays in its jobs'\n" +
				"history. A node still running something (not yet declared lost) is refused.\n" +
				"The leader does this by itself for nodes down or left past --node-gc.",
			ArgsUsage: "NODE",
			Flags: []ucli.Flag{
				&ucli.StringFlag{Name: "reason", Usage: "why"},
			},
			Action: nodeRemoveAction,
		}},
	}
}

func nodeRevokeAction(c *ucli.Context) error {
	args, cl, err := commandClient(c, "NODE")
	if err != nil {
		return err
	}
	id, name, err := resolveNode(c.Context, cl, args[0])
	if err != nil {
		return err
	}
	res, err := cl.RevokeNode(c.Context, id, api.NodeRevokeRequest{Reason: c.String("reason")})
	if err != nil {
		return err
	}
	if res.Done {
		_, err = fmt.Fprintf(c.App.Writer, "revoked %s (%s): out of Raft, the gossip keyring rotated without it (generation %d), refused in gossip\n",
			name, id, res.KeyringGeneration)
		return err
	}
	_, err = fmt.Fprintf(c.App.Writer, "revoked %s (%s); still under way: %s (see skein keyring status and skein members)\n",
		name, id, printable(res.Waiting))
	return err
}

// resolveNode turns a node name, ID or unique ID prefix into the node's ID
// and name, through the registered nodes. An argument that matches none is
// taken as an ID as it stands: a node may be admitted and not registered,
// and the agent says whether it knows it.
func resolveNode(ctx context.Context, cl *api.Client, arg string) (id, name string, err error) {
	nodes, err := cl.Nodes(ctx)
	if err != nil {
		return "", "", err
	}
	var byName, byPrefix []api.NodeInfo
	for _, n := range nodes {
		switch {
		case n.ID == arg:
			return n.ID, n.Name, nil
		case n.Name == arg:
			byName = append(byName, n)
		case strings.HasPrefix(n.ID, arg):
			byPrefix = append(byPrefix, n)
		}
	}
	for _, match := range [][]api.NodeInfo{byName, byPrefix} {
		switch len(match) {
		case 0:
			continue
		case 1:
			return match[0].ID, match[0].Name, nil
		}
		names := make([]string, len(match))
		for i, n := range match {
			names[i] = fmt.Sprintf("%s (%s)", n.Name, n.ID)
		}
		return "", "", fmt.Errorf("node %q is ambiguous: it matches %s; give the full ID", arg, strings.Join(names, ", "))
	}
	return arg, arg, nil
}
