package cli

import (
	"fmt"
	"strconv"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/structs"
)

func gpusCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "gpus",
		Usage: "list every GPU of the cluster with its health and the job using it",
		Flags: []ucli.Flag{
			&ucli.BoolFlag{Name: "json", Usage: "print JSON"},
		},
		Action: gpusAction,
	}
}

func gpusAction(c *ucli.Context) error {
	_, cl, err := commandClient(c)
	if err != nil {
		return err
	}
	gpus, err := cl.GPUs(c.Context)
	if err != nil {
		return err
	}
	if c.Bool("json") {
		if gpus == nil {
			gpus = []api.GPUInfo{}
		}
		return printJSON(c.App.Writer, gpus)
	}
	if len(gpus) == 0 {
		_, err := fmt.Fprintln(c.App.Writer, "No GPUs.")
		return err
	}
	rows := make([][]string, 0, len(gpus))
	for _, g := range gpus {
		model := g.Model
		if g.Simulated {
			model += " (simulated)"
		}
		job := "-"
		if g.Job != "" {
			job = structs.ShortID(g.Job)
		}
		rows = append(rows, []string{g.Node, strconv.Itoa(g.Index), model, structs.FormatMiB(g.MemoryMiB), g.Health, orDash(gpuReason(&g.GPU)), job})
	}
	return printTable(c.App.Writer, []string{"NODE", "IDX", "MODEL", "MEM", "HEALTH", "REASON", "JOB"}, rows)
}

// gpuReason says why a GPU is in its health state, with any warning.
func gpuReason(g *structs.GPU) string {
	_, why := g.Placeable()
	why = strings.TrimPrefix(strings.TrimPrefix(why, structs.GPUUnhealthy+": "), structs.GPUCordoned+": ")
	if g.Warning == "" {
		return why
	}
	if why == "" {
		return "warning: " + g.Warning
	}
	return why + "; warning: " + g.Warning
}
