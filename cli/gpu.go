package cli

import (
	"fmt"
	"strconv"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/structs"
)

func gpuCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "gpu",
		Usage: "take a GPU out of service, return it, or simulate a fault",
		Subcommands: []*ucli.Command{
			{
				Name:      "cordon",
				Usage:     "keep new jobs off a GPU; jobs already on it keep running",
				ArgsUsage: "NODE/INDEX",
				Flags: []ucli.Flag{
					&ucli.StringFlag{Name: "reason", Usage: "why, shown in skein gpus"},
					&ucli.BoolFlag{Name: "json", Usage: "print JSON"},
				},
				Action: func(c *ucli.Context) error { return gpuCordonAction(c, true) },
			},
			{
				Name:      "uncordon",
				Usage:     "return a GPU to service, ending a cordon or a fault quarantine",
				ArgsUsage: "NODE/INDEX",
				Flags: []ucli.Flag{
					&ucli.BoolFlag{Name: "json", Usage: "print JSON"},
				},
				Action: func(c *ucli.Context) error { return gpuCordonAction(c, false) },
			},
			gpuFaultCommand(),
		},
	}
}

func gpuCordonAction(c *ucli.Context, cordon bool) error {
	args, cl, err := commandClient(c, "NODE/INDEX")
	if err != nil {
		return err
	}
	node, index, err := parseGPUArg(c, args[0])
	if err != nil {
		return err
	}
	req := api.GPURequest{Node: node, Index: index}
	if cordon {
		req.Reason = c.String("reason")
	}
	g, err := cl.CordonGPU(c.Context, req, cordon)
	if err != nil {
		return err
	}
	if c.Bool("json") {
		return printJSON(c.App.Writer, g)
	}
	what := "returned to service"
	if cordon {
		what = "cordoned"
		if g.Job != "" {
			what += fmt.Sprintf("; job %s keeps running on it", structs.ShortID(g.Job))
		}
	}
	_, err = fmt.Fprintf(c.App.Writer, "GPU %d on node %s %s (now %s)\n", g.Index, g.Node, what, g.Health)
	return err
}

// parseGPUArg splits NODE/INDEX. NODE is a node name or ID (prefix).
func parseGPUArg(c *ucli.Context, s string) (string, int, error) {
	slash := strings.LastIndexByte(s, '/')
	node, idx := s[:max(slash, 0)], s[slash+1:]
	if slash < 0 || node == "" {
		return "", 0, usagef(c, "NODE/INDEX %q: want a node name or ID, a slash and a GPU index, like gpu-01/3", s)
	}
	i, err := strconv.Atoi(idx)
	if err != nil || i < 0 || i >= structs.MaxGPUsPerNode {
		return "", 0, usagef(c, "NODE/INDEX %q: the GPU index must be a number from 0 to %d", s, structs.MaxGPUsPerNode-1)
	}
	return node, i, nil
}
