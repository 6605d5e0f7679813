package cli

import (
	"fmt"
	"strconv"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/structs"
)

func nodesCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "nodes",
		Usage: "list the cluster's nodes and their GPUs",
		Flags: []ucli.Flag{
			&ucli.BoolFlag{Name: "json", Usage: "print JSON"},
		},
		Action: nodesAction,
	}
}

func nodesAction(c *ucli.Context) error {
	_, cl, err := commandClient(c)
	if err != nil {
		return err
	}
	nodes, err := cl.Nodes(c.Context)
	if err != nil {
		return err
	}
	if c.Bool("json") {
		if nodes == nil {
			nodes = []api.NodeInfo{}
		}
		return printJSON(c.App.Writer, nodes)
	}
	if len(nodes) == 0 {
		_, err := fmt.Fprintln(c.App.Writer, "No nodes.")
		return err
	}
	rows := make([][]string, 0, len(nodes))
	for _, n := range nodes {
		gpus := fmt.Sprintf("%d/%d", n.GPUsFree, n.GPUsTotal)
		if n.GPUsUnhealthy > 0 {
			gpus += fmt.Sprintf(", %d unhealthy", n.GPUsUnhealthy)
		}
		if n.GPUsHeldBack > 0 {
			gpus += fmt.Sprintf(", %d held back", n.GPUsHeldBack)
		}
		model, gpuMem := "-", "-"
		if len(n.GPUs) > 0 {
			model, gpuMem = n.GPUs[0].Model, structs.FormatMiB(n.GPUs[0].MemoryMiB)
			if n.GPUSource == "simulated" {
				model += " (simulated)"
			}
		}
		version := orDash(n.Version)
		if n.Protocol.Release != "" {
			version = fmt.Sprintf("%s (log %d)", n.Protocol.Release, n.Protocol.AppliesLog())
		}
		rows = append(rows, []string{
			n.Name,
			n.StatusText(),
			orDash(string(n.Role)),
			version,
			gpus,
			model,
			gpuMem,
			strconv.Itoa(n.CPUs),
			structs.FormatMiB(n.MemoryMiB),
			confinedCell(n.Node),
			engineCell(n.Containers),
			orDash(n.Addresses.HTTP),
		})
	}
	return printTable(c.App.Writer, []string{"NAME", "STATUS", "ROLE", "VERSION", "GPUS", "GPU MODEL", "GPU MEM", "CPUS", "MEMORY", "CONFINED", "ENGINE", "ADDRESS"}, rows)
}

// confinedCell says how a node holds jobs to their limits: "cgroup v2" or
// "cgroup v1"; "NO: takes no jobs" where it cannot and was not allowed to
// run them unconfined; "NO (--allow-unconfined)" where it runs them
// unconfined; "-" for a node from before jobs were confined.
func confinedCell(n structs.Node) string {
	switch {
	case n.JobsRefused != "":
		return "NO: takes no jobs"
	case n.Confinement == "":
		return "-"
	case strings.HasPrefix(n.Confinement, "none"):
		return "NO (--allow-unconfined)"
	}
	return n.Confinement
}

// engineCell renders a node's container engine: what it is and whether it
// hands out GPUs, "unreachable" when it did not answer, "-" when the node
// probes none.
func engineCell(e *structs.ContainerEngine) string {
	switch {
	case e == nil:
		return "-"
	case e.Error != "":
		return "unreachable"
	}
	gpus := "no GPU runtime"
	if e.GPUs {
		gpus = "NVIDIA GPUs"
	}
	return fmt.Sprintf("%s (API %s), %s", e.Engine, e.APIVersion, gpus)
}
