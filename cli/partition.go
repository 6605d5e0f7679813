package cli

import (
	"fmt"
	"strconv"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/slurm"
	"github.com/skein-dev/skein/structs"
)

func partitionCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "partition",
		Usage: "list partitions, and set their limits and default time limit",
		Description: "A partition is the nodes that declare it (skein agent --partition NAME); the nodes that declare\n" +
			"none are the default partition, " + structs.DefaultPartition + ". Its settings apply to the jobs that name it\n" +
			"(sbatch -p, submit --partition), and the default partition's to the jobs that name none: a job\n" +
			"without a time limit gets --default-time (else --max-time), and one asking for more time than\n" +
			"--max-time or more nodes than --max-nodes is refused at submit. Setting them takes an operator.",
		Subcommands: []*ucli.Command{
			{
				Name:   "list",
				Usage:  "list the partitions, their nodes and settings",
				Flags:  []ucli.Flag{&ucli.BoolFlag{Name: "json", Usage: "print JSON"}},
				Action: partitionListAction,
			},
			{
				Name:      "set",
				Usage:     "set a partition's limits (those not given are none)",
				ArgsUsage: "NAME",
				Flags: []ucli.Flag{
					&ucli.StringFlag{Name: "max-time", Usage: "the longest time limit a job may have (`TIME`: 24h, 1-00:00:00, 90)"},
					&ucli.StringFlag{Name: "default-time", Usage: "the time limit of a job that gives none (`TIME`)"},
					&ucli.IntFlag{Name: "max-nodes", Usage: "the most nodes one job may ask for (`N`)"},
				},
				Action: partitionSetAction,
			},
			{
				Name:      "unset",
				Usage:     "drop a partition's settings: no limits, no default time limit",
				ArgsUsage: "NAME",
				Action:    partitionUnsetAction,
			},
		},
	}
}

// partitionTime reads a time as sbatch's --time takes it, or as a Go
// duration (24h, 90m).
func partitionTime(c *ucli.Context, flag string) (structs.Duration, error) {
	if !c.IsSet(flag) {
		return 0, nil
	}
	v := c.String(flag)
	if d, err := structs.ParseDuration(v); err == nil {
		return d, nil
	}
	d, err := slurm.ParseTime(v)
	if err != nil {
		return 0, usagef(c, "--%s: %v", flag, err)
	}
	return d, nil
}

func partitionSetAction(c *ucli.Context) error {
	args, cl, err := commandClient(c, "NAME")
	if err != nil {
		return err
	}
	p := structs.Partition{Name: args[0], MaxNodes: c.Int("max-nodes")}
	if p.MaxTime, err = partitionTime(c, "max-time"); err != nil {
		return err
	}
	if p.DefaultTime, err = partitionTime(c, "default-time"); err != nil {
		return err
	}
	if err := p.Validate(); err != nil {
		return usagef(c, "%v", err)
	}
	got, err := cl.SetPartition(c.Context, structs.PartitionSetRequest{Partition: p})
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(c.App.Writer, "partition %s: %s\n", got.Name, partitionSettings(*got))
	return err
}

func partitionUnsetAction(c *ucli.Context) error {
	args, cl, err := commandClient(c, "NAME")
	if err != nil {
		return err
	}
	if _, err := cl.SetPartition(c.Context, structs.PartitionSetRequest{Partition: structs.Partition{Name: args[0]}, Delete: true}); err != nil {
		return err
	}
	_, err = fmt.Fprintf(c.App.Writer, "partition %s: no limits\n", args[0])
	return err
}

// partitionSettings says a partition's settings in words.
func partitionSettings(p structs.Partition) string {
	var parts []string
	if p.MaxTime > 0 {
		parts = append(parts, "max time "+slurmTimeLimit(p.MaxTime))
	}
	if p.DefaultTime > 0 {
		parts = append(parts, "default time "+slurmTimeLimit(p.DefaultTime))
	}
	if p.MaxNodes > 0 {
		parts = append(parts, fmt.Sprintf("at most %d nodes a job", p.MaxNodes))
	}
	if len(parts) == 0 {
		return "no limits"
	}
	return strings.Join(parts, ", ")
}

func partitionListAction(c *ucli.Context) error {
	_, cl, err := commandClient(c)
	if err != nil {
		return err
	}
	parts, err := cl.Partitions(c.Context)
	if err != nil {
		return err
	}
	if c.Bool("json") {
		if parts == nil {
			parts = []api.PartitionInfo{}
		}
		return printJSON(c.App.Writer, parts)
	}
	var rows [][]string
	for _, p := range parts {
		name := p.Name
		if p.Default {
			name += "*"
		}
		maxNodes, defTime := "-", "-"
		if p.MaxNodes > 0 {
			maxNodes = strconv.Itoa(p.MaxNodes)
		}
		if p.DefaultTime > 0 {
			defTime = slurmTimeLimit(p.DefaultTime)
		}
		rows = append(rows, []string{name, strconv.Itoa(len(p.Nodes)), slurmTimeLimit(p.MaxTime), defTime, maxNodes,
			orDash(structs.HostList(p.Nodes))})
	}
	return printTable(c.App.Writer, []string{"PARTITION", "NODES", "MAX TIME", "DEFAULT TIME", "MAX NODES", "NODELIST"}, rows)
}
