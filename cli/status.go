package cli

import (
	"fmt"
	"strconv"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/skein-dev/skein/structs"
)

func statusCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "status",
		Usage: "show the cluster at a glance",
		Flags: []ucli.Flag{
			&ucli.BoolFlag{Name: "json", Usage: "print JSON"},
		},
		Action: statusAction,
	}
}

func statusAction(c *ucli.Context) error {
	_, cl, err := commandClient(c)
	if err != nil {
		return err
	}
	s, err := cl.Status(c.Context)
	if err != nil {
		return err
	}
	if c.Bool("json") {
		return printJSON(c.App.Writer, s)
	}
	gpus := fmt.Sprintf("%d/%d free", s.GPUsFree, s.GPUsTotal)
	if s.GPUsSimulated {
		gpus += " (simulated)"
	}
	states := structs.JobStates
	jobs := make([]string, len(states))
	for i, st := range states {
		jobs[i] = fmt.Sprintf("%d %s", s.Jobs[st], st)
	}
	leader := s.Leader
	if leader == "" {
		leader = "none (no leader elected)"
	}
	return printFields(c.App.Writer, "", []field{
		{"node", s.Node},
		{"leader", leader},
		{"nodes", fmt.Sprintf("%d/%d ready", s.NodesReady, s.Nodes)},
		{"GPUs", gpus},
		{"jobs", strings.Join(jobs, ", ")},
		{"raft index", strconv.FormatUint(s.RaftIndex, 10)},
		{"version", s.Version},
	})
}
