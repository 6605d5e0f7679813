package cli

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/structs"
)

func limitsCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "limits",
		Usage: "show and set how much of the cluster each user may claim",
		Description: "Each user may have at most --max-queued queued jobs, arrays of at most --max-array tasks,\n" +
			"and running jobs holding at most --max-gpus GPUs; the cluster at most --max-queued queued jobs.\n" +
			"A user without values of its own has the defaults. Setting them takes an admin token.",
		Subcommands: []*ucli.Command{
			limitsShowCommand(),
			limitsSetCommand(),
			limitsUnsetCommand(),
		},
	}
}

func limitsShowCommand() *ucli.Command {
	return &ucli.Command{
		Name:      "show",
		Usage:     "show the limits and what users hold against them; with USER, that user's",
		ArgsUsage: "[USER]",
		Flags:     []ucli.Flag{&ucli.BoolFlag{Name: "json", Usage: "print JSON"}},
		Action:    limitsShowAction,
	}
}

// scopeFlags choose what limits set and unset change, besides a USER.
func scopeFlags() []ucli.Flag {
	return []ucli.Flag{
		&ucli.BoolFlag{Name: "default", Usage: "change the defaults of every user without values of its own"},
		&ucli.BoolFlag{Name: "cluster", Usage: "change the cluster-wide limit (only --max-queued)"},
		&ucli.BoolFlag{Name: "json", Usage: "print the limits as JSON"},
	}
}

func limitsSetCommand() *ucli.Command {
	return &ucli.Command{
		Name:      "set",
		Usage:     "set limits of a user, the defaults (--default) or the cluster (--cluster); values not given stay",
		ArgsUsage: "[USER]",
		Description: "  skein limits set alice --max-gpus 64 --max-queued 500 --max-array 1000\n" +
			"  skein limits set --default --max-queued 10000\n" +
			"  skein limits set --cluster --max-queued 50000\n" +
			"A value is a count or 'unlimited'.",
		Flags: append(scopeFlags(),
			&ucli.StringFlag{Name: "max-queued", Usage: "most jobs in state queued"},
			&ucli.StringFlag{Name: "max-gpus", Usage: "most GPUs the user's running jobs hold"},
			&ucli.StringFlag{Name: "max-array", Usage: "most tasks in one job array"},
		),
		Action: limitsSetAction,
	}
}

func limitsUnsetCommand() *ucli.Command {
	return &ucli.Command{
		Name:      "unset",
		Usage:     "drop a user's own limits (the defaults apply again), or return the defaults or the cluster's to the built-in ones",
		ArgsUsage: "[USER]",
		Flags:     scopeFlags(),
		Action:    limitsUnsetAction,
	}
}

// hasPositional reports whether the command line of c holds an argument
// that is not a flag.
func hasPositional(c *ucli.Context) bool {
	for _, a := range c.Args().Slice() {
		if !strings.HasPrefix(a, "-") {
			return true
		}
	}
	return false
}

// limitsScope reads the USER, --default or --cluster of set and unset.
func limitsScope(c *ucli.Context) (structs.LimitsSetRequest, error) {
	var want []string
	if hasPositional(c) {
		want = []string{"USER"}
	}
	args, err := cmdArgs(c, want...)
	if err != nil {
		return structs.LimitsSetRequest{}, err
	}
	req := structs.LimitsSetRequest{Default: c.Bool("default"), Cluster: c.Bool("cluster")}
	if len(args) == 1 {
		req.User = args[0]
	}
	n := 0
	for _, b := range []bool{req.User != "", req.Default, req.Cluster} {
		if b {
			n++
		}
	}
	if n != 1 {
		return req, usagef(c, "give exactly one of a USER, --default or --cluster")
	}
	return req, nil
}

// limitFlag reads a limit flag: a count or "unlimited"; nil when not given.
func limitFlag(c *ucli.Context, name string) (*int, error) {
	if !c.IsSet(name) {
		return nil, nil
	}
	v := c.String(name)
	if v == "unlimited" {
		n := structs.Unlimited
		return &n, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > structs.MaxLimitValue {
		return nil, usagef(c, "--%s %q: want a count from 0 to %d, or unlimited", name, v, structs.MaxLimitValue)
	}
	return &n, nil
}

func limitsSetAction(c *ucli.Context) error {
	req, err := limitsScope(c)
	if err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		dst  **int
	}{{"max-queued", &req.Limits.MaxQueued}, {"max-gpus", &req.Limits.MaxGPUs}, {"max-array", &req.Limits.MaxArray}} {
		if *f.dst, err = limitFlag(c, f.name); err != nil {
			return err
		}
	}
	if req.Limits.Empty() {
		return usagef(c, "nothing to set: give --max-queued, --max-gpus or --max-array")
	}
	if req.Cluster && (req.Limits.MaxGPUs != nil || req.Limits.MaxArray != nil) {
		return usagef(c, "--cluster takes only --max-queued")
	}
	return sendLimits(c, req)
}

func limitsUnsetAction(c *ucli.Context) error {
	req, err := limitsScope(c)
	if err != nil {
		return err
	}
	req.Unset = true
	return sendLimits(c, req)
}

// sendLimits commits a change and prints what it changed.
func sendLimits(c *ucli.Context, req structs.LimitsSetRequest) error {
	cl, err := newClient(c)
	if err != nil {
		return err
	}
	info, err := cl.SetLimits(c.Context, req)
	if err != nil {
		return err
	}
	if c.Bool("json") {
		return printJSON(c.App.Writer, info)
	}
	w := c.App.Writer
	switch {
	case req.Cluster:
		return printClusterLimits(w, info.Cluster)
	case req.Default:
		return printDefaultLimits(w, info)
	}
	for _, u := range info.Users {
		if u.User == req.User {
			return printUserLimits(w, u)
		}
	}
	// Unset, and the user holds nothing: it has the defaults.
	return printUserLimits(w, api.UserLimitsInfo{User: req.User, Limits: info.Default})
}

func limitsShowAction(c *ucli.Context) error {
	var want []string
	if hasPositional(c) {
		want = []string{"USER"}
	}
	args, cl, err := commandClient(c, want...)
	if err != nil {
		return err
	}
	w := c.App.Writer
	if len(args) == 1 {
		u, err := cl.UserLimits(c.Context, args[0])
		if err != nil {
			return err
		}
		if c.Bool("json") {
			return printJSON(w, u)
		}
		return printUserLimits(w, *u)
	}
	info, err := cl.Limits(c.Context)
	if err != nil {
		return err
	}
	if c.Bool("json") {
		return printJSON(w, info)
	}
	if err := printClusterLimits(w, info.Cluster); err != nil {
		return err
	}
	if err := printDefaultLimits(w, info); err != nil {
		return err
	}
	if len(info.Users) == 0 {
		return nil
	}
	rows := make([][]string, 0, len(info.Users))
	for _, u := range info.Users {
		rows = append(rows, []string{
			userLabel(u.User),
			ownOrDefault(u.Limits.MaxQueued, u.Set.MaxQueued),
			ownOrDefault(u.Limits.MaxGPUs, u.Set.MaxGPUs),
			ownOrDefault(u.Limits.MaxArray, u.Set.MaxArray),
			strconv.Itoa(u.Queued),
			strconv.Itoa(u.GPUs),
		})
	}
	if _, err := fmt.Fprintln(w); err != nil {
		return err
	}
	if err := printTable(w, []string{"USER", "MAX QUEUED", "MAX GPUS", "MAX ARRAY", "QUEUED", "GPUS"}, rows); err != nil {
		return err
	}
	_, err = fmt.Fprintln(w, "(* set for that user; the other values are the defaults)")
	return err
}

func printClusterLimits(w io.Writer, cl api.ClusterLimitsInfo) error {
	_, err := fmt.Fprintf(w, "Cluster: at most %s queued jobs (%d queued now)\n", structs.LimitText(cl.MaxQueued), cl.Queued)
	return err
}

func printDefaultLimits(w io.Writer, info *api.LimitsInfo) error {
	d := info.Default
	_, err := fmt.Fprintf(w, "Default per user: at most %s queued jobs, %s GPUs in use, %s tasks per array\n",
		structs.LimitText(d.MaxQueued), structs.LimitText(d.MaxGPUs), structs.LimitText(d.MaxArray))
	return err
}

func printUserLimits(w io.Writer, u api.UserLimitsInfo) error {
	rows := [][]string{
		{"max queued", source(u.Limits.MaxQueued, u.Set.MaxQueued), fmt.Sprintf("%d queued now", u.Queued)},
		{"max GPUs", source(u.Limits.MaxGPUs, u.Set.MaxGPUs), fmt.Sprintf("%d in use now", u.GPUs)},
		{"max array", source(u.Limits.MaxArray, u.Set.MaxArray), ""},
	}
	if _, err := fmt.Fprintf(w, "User %s\n", userLabel(u.User)); err != nil {
		return err
	}
	return printTable(w, []string{"LIMIT", "VALUE", "NOW"}, rows)
}

// source renders a limit in force and whether it was set for the user.
func source(v int, own *int) string {
	if own != nil {
		return structs.LimitText(v) + " (set for this user)"
	}
	return structs.LimitText(v) + " (default)"
}

// ownOrDefault renders a limit in force, marked when set for the user.
func ownOrDefault(v int, own *int) string {
	if own != nil {
		return structs.LimitText(v) + "*"
	}
	return structs.LimitText(v)
}

// userLabel names a user; "" owns the jobs submitted before ACLs existed.
func userLabel(u string) string {
	if u == "" {
		return `""`
	}
	return u
}
