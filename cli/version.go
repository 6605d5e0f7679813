package cli

import (
	"context"
	"fmt"
	"runtime"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/skein-dev/skein/agent"
	"github.com/skein-dev/skein/structs"
)

// versionWait bounds how long skein version waits for an agent to say
// what each node runs.
const versionWait = 3 * time.Second

func versionCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "version",
		Usage: "print skein's version, and each node's when an agent answers",
		Description: "The first line is this binary's release and what it speaks: the API version, the\n" +
			"newest Raft log entry it applies and the newest snapshot format it reads. Then,\n" +
			"when an agent answers (--addr), the same for every node of its cluster, as gossip\n" +
			"says: a cluster mid-upgrade shows two releases.",
		Action: versionAction,
	}
}

func versionAction(c *ucli.Context) error {
	if _, err := cmdArgs(c); err != nil {
		return err
	}
	self := structs.Protocol{Release: structs.Version, API: structs.APIVersion, Log: structs.LogVersion(), Snapshot: agent.SnapshotVersion}
	if _, err := fmt.Fprintf(c.App.Writer, "skein %s\n%s %s/%s\n", self, runtime.Version(), runtime.GOOS, runtime.GOARCH); err != nil {
		return err
	}
	_, cl, err := commandClient(c)
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(c.Context, versionWait)
	defer cancel()
	nodes, err := cl.Nodes(ctx)
	if err != nil {
		fmt.Fprintf(c.App.ErrWriter, "the nodes' versions: no answer: %v\n", err)
		return nil
	}
	rows := make([][]string, 0, len(nodes))
	for _, n := range nodes {
		v := n.Protocol.String()
		if n.Protocol.Release == "" {
			v = orDash(n.Version) + " (not in gossip now)"
		}
		rows = append(rows, []string{n.Name, n.StatusText(), v})
	}
	return printTable(c.App.Writer, []string{"NODE", "STATUS", "VERSION"}, rows)
}
