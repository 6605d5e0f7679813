package cli

import (
	"fmt"

	ucli "github.com/urfave/cli/v2"

	"github.com/skein-dev/skein/api"
)

func gpuFaultCommand() *ucli.Command {
	return &ucli.Command{
		Name:      "fault",
		Usage:     "report a health event on a simulated GPU, as if the GPU had (for tests and demos; real GPUs refuse)",
		ArgsUsage: "NODE/INDEX",
		Flags: []ucli.Flag{
			&ucli.StringFlag{Name: "kind", Value: "fatal", Usage: "fatal (takes the GPU out of service), warning, or processes (processes skein did not start)"},
			&ucli.StringFlag{Name: "reason", Usage: `what happened, like "XID 79: GPU has fallen off the bus"`},
			&ucli.UintSliceFlag{Name: "pid", Usage: "a process on the GPU, with --kind processes (repeatable; none: the GPU is idle)"},
		},
		Action: gpuFaultAction,
	}
}

func gpuFaultAction(c *ucli.Context) error {
	args, cl, err := commandClient(c, "NODE/INDEX")
	if err != nil {
		return err
	}
	node, index, err := parseGPUArg(c, args[0])
	if err != nil {
		return err
	}
	req := api.GPUFaultRequest{Node: node, Index: index, Kind: c.String("kind"), Reason: c.String("reason")}
	for _, p := range c.UintSlice("pid") {
		if p == 0 || uint64(p) > 1<<32-1 {
			return usagef(c, "--pid %d: want a process ID from 1 to %d", p, uint32(1<<32-1))
		}
		req.PIDs = append(req.PIDs, uint32(p))
	}
	if err := cl.InjectGPUFault(c.Context, req); err != nil {
		return err
	}
	_, err = fmt.Fprintf(c.App.Writer, "%s event sent to GPU %d on node %s\n", req.Kind, index, node)
	return err
}
