package cli

import (
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/skein-dev/skein/structs"
)

func qosCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "qos",
		Usage: "named qualities of service: a priority, limits and preemptions (changes take an admin token)",
		Description: "  skein qos set high --priority 500 --max-gpus-per-user 16 --preempt low\n" +
			"  skein qos set low --max-wall 4h\n" +
			"  skein submit --qos high --gpus 8 -- python train.py",
		Subcommands: []*ucli.Command{
			{Name: "list", Usage: "show the QoS", Flags: []ucli.Flag{jsonFlag()}, Action: qosListAction},
			{Name: "set", Usage: "create a QoS or replace one with what the flags say", ArgsUsage: "NAME", Flags: []ucli.Flag{
				&ucli.IntFlag{Name: "priority", Usage: "its jobs' QoS factor, 0..1000"},
				&ucli.StringFlag{Name: "max-gpus-per-user", Usage: "most GPUs one user's running jobs of this QoS hold"},
				&ucli.StringFlag{Name: "max-gpus-per-account", Usage: "most GPUs one account's running jobs of this QoS hold"},
				&ucli.StringFlag{Name: "max-jobs-per-user", Usage: "most running jobs of this QoS per user"},
				&ucli.StringFlag{Name: "max-wall", Usage: "longest time limit of its jobs, and the limit of those without one"},
				&ucli.StringSliceFlag{Name: "preempt", Usage: "QoS whose running jobs its jobs may stop (repeatable)"},
				jsonFlag(),
			}, Action: qosSetAction},
			{Name: "delete", Usage: "delete a QoS", ArgsUsage: "NAME", Flags: []ucli.Flag{jsonFlag()}, Action: qosDeleteAction},
		},
	}
}

func qosSetAction(c *ucli.Context) error {
	args, err := cmdArgs(c, "NAME")
	if err != nil {
		return err
	}
	q := structs.QoS{Name: args[0], Priority: c.Int("priority"), Preempt: c.StringSlice("preempt")}
	for name, dst := range map[string]**int{"max-gpus-per-user": &q.MaxGPUsPerUser,
		"max-gpus-per-account": &q.MaxGPUsPerAccount, "max-jobs-per-user": &q.MaxJobsPerUser} {
		if *dst, err = limitFlag(c, name); err != nil {
			return err
		}
		if *dst != nil && **dst == structs.Unlimited {
			*dst = nil
		}
	}
	if err := decodeFlag(c, "max-wall", &q.MaxWall, structs.ParseDuration); err != nil {
		return err
	}
	return sendQoS(c, structs.QoSRequest{Op: structs.QoSSet, QoS: q})
}

func qosDeleteAction(c *ucli.Context) error {
	args, err := cmdArgs(c, "NAME")
	if err != nil {
		return err
	}
	return sendQoS(c, structs.QoSRequest{Op: structs.QoSDelete, QoS: structs.QoS{Name: args[0]}})
}

func sendQoS(c *ucli.Context, req structs.QoSRequest) error {
	cl, err := newClient(c)
	if err != nil {
		return err
	}
	tab, err := cl.SetQoS(c.Context, req)
	if err != nil {
		return err
	}
	if c.Bool("json") {
		return printJSON(c.App.Writer, tab.QoS)
	}
	return printQoS(c.App.Writer, tab)
}

func qosListAction(c *ucli.Context) error {
	_, cl, err := commandClient(c)
	if err != nil {
		return err
	}
	tab, err := cl.Accounts(c.Context)
	if err != nil {
		return err
	}
	if c.Bool("json") {
		return printJSON(c.App.Writer, tab.QoS)
	}
	return printQoS(c.App.Writer, tab)
}

func printQoS(w io.Writer, tab *structs.AccountTable) error {
	var rows [][]string
	for _, name := range slices.Sorted(maps.Keys(tab.QoS)) {
		q := tab.QoS[name]
		wall := "-"
		if q.MaxWall > 0 {
			wall = time.Duration(q.MaxWall).String()
		}
		rows = append(rows, []string{name, strconv.Itoa(q.Priority), limitOf(q.MaxGPUsPerUser), limitOf(q.MaxGPUsPerAccount),
			limitOf(q.MaxJobsPerUser), wall, dashIfEmpty(strings.Join(q.Preempt, ","))})
	}
	return printTable(w, []string{"QOS", "PRIORITY", "GPUS/USER", "GPUS/ACCOUNT", "JOBS/USER", "MAX WALL", "PREEMPTS"}, rows)
}
