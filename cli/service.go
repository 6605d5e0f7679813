package cli

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/structs"
)

func serviceCommand() *ucli.Command {
	return &ucli.Command{
		Name:      "service",
		Usage:     "show one service, its replicas and where it answers; delete it",
		ArgsUsage: "NAME",
		Flags: []ucli.Flag{
			&ucli.BoolFlag{Name: "show-secrets", Usage: "show the values of the replicas' secret_env (the service's owner and operators only)"},
			&ucli.BoolFlag{Name: "json", Usage: "print JSON"},
		},
		Subcommands: []*ucli.Command{
			serviceDeleteCommand(),
			serviceAutoscaleCommand(),
			serviceUpdateCommand(),
		},
		Action: serviceAction,
	}
}

func serviceAction(c *ucli.Context) error {
	args, cl, err := commandClient(c, "NAME")
	if err != nil {
		return err
	}
	get := cl.Service
	if c.Bool("show-secrets") {
		get = cl.ServiceWithSecrets
	}
	d, err := get(c.Context, args[0])
	if err != nil {
		return err
	}
	if !c.Bool("show-secrets") {
		hideSecrets(&d.Service.Spec.Job)
	}
	if c.Bool("json") {
		return printJSON(c.App.Writer, d)
	}
	if err := printServiceDetail(c, d, time.Now()); err != nil {
		return err
	}
	return printCrashLogs(c, cl, d)
}

// crashLogLines is how many of a crash-looping replica's last lines of
// stderr `skein service NAME` shows.
const crashLogLines = 5

// printCrashLogs shows, for each crash-looping replica, the last lines
// its latest attempt wrote to stderr: why it exits, without a skein logs.
// A log that cannot be read (its node is gone) says so and is no error.
func printCrashLogs(c *ucli.Context, cl *api.Client, d *api.ServiceDetail) error {
	w := c.App.Writer
	for _, r := range d.Replicas {
		if r.Status != api.ReplicaCrashLooping {
			continue
		}
		var out strings.Builder
		err := cl.Logs(c.Context, r.JobID, api.LogOptions{Stream: api.StreamStderr, Lines: crashLogLines}, &out)
		fmt.Fprintf(w, "\nLast lines of r%d's stderr (skein logs %s):\n", r.Index, r.JobID)
		switch text := strings.TrimRight(out.String(), "\n"); {
		case err != nil:
			fmt.Fprintf(w, "  (not read: %v)\n", err)
		case text == "":
			fmt.Fprintln(w, "  (none)")
		default:
			for _, line := range strings.Split(text, "\n") {
				fmt.Fprintln(w, "  "+printable(line))
			}
		}
	}
	return nil
}

func printServiceDetail(c *ucli.Context, d *api.ServiceDetail, now time.Time) error {
	w := c.App.Writer
	svc := d.Service
	replicas := strconv.Itoa(svc.Replicas) + " wanted"
	if svc.Reason != "" {
		replicas += " (" + svc.Reason + ")"
	}
	public := "no: the ingress asks for a token when the cluster has ACLs"
	if svc.Spec.Public {
		public = "yes: the ingress serves it without a token"
	}
	fields := []field{
		{"Name", svc.Name},
		{"ID", svc.ID},
		{"Owner", orDash(svc.Owner)},
		{"State", d.State},
		{"Replicas", replicas},
		{"Autoscale", autoscaleDetail(d, now)},
		{"Version", versionSummary(svc)},
		{"Created", timeWithAge(now, svc.CreatedAt)},
		{"Port env", svc.Spec.PortEnv},
		{"Health", healthSummary(svc.Spec.Health)},
		{"Drain timeout", shortDuration(time.Duration(cmp.Or(svc.Spec.DrainTimeout, structs.DefaultDrainTimeout)))},
		{"Drain delay", shortDuration(time.Duration(cmp.Or(svc.Spec.DrainDelay, structs.DefaultDrainDelay)))},
		{"Rollouts", rolloutBounds(svc.Spec)},
		{"Public", public},
	}
	if err := printFields(w, "", fields); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nEndpoints (on any node's ingress):")
	if len(d.Endpoints) == 0 {
		fmt.Fprintln(w, "  none: no ready node serves an ingress")
	}
	for _, e := range d.Endpoints {
		fmt.Fprintln(w, "  "+printable(e))
	}
	fmt.Fprintln(w, "\nEach replica:")
	if err := printFields(w, "  ", replicaSpecFields(svc.Spec.Job)); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nReplicas:")
	if len(d.Replicas) == 0 {
		_, err := fmt.Fprintln(w, "  none")
		return err
	}
	rows := make([][]string, 0, len(d.Replicas))
	for _, r := range d.Replicas {
		state, port := string(r.State), "-"
		if a := r.Alloc; a != nil && a.Live() {
			state = string(a.State)
			if pulling(a) {
				state = pullState(a.Pull)
			}
		}
		if r.Port > 0 {
			port = strconv.Itoa(r.Port)
		}
		restarts := strconv.Itoa(r.Restarts)
		switch {
		case r.Crashes == 1:
			restarts += " (1 crash)"
		case r.Crashes > 1:
			restarts += fmt.Sprintf(" (%d crashes in a row)", r.Crashes)
		}
		rows = append(rows, []string{
			"r" + strconv.Itoa(r.Index),
			strconv.Itoa(r.Version),
			r.JobID,
			orDash(r.Node),
			port,
			state,
			string(r.Status),
			restarts,
			lastExit(r.LastExit, now),
			orDash(r.Reason),
		})
	}
	return printTable(w, []string{"REPLICA", "VERSION", "JOB", "NODE", "PORT", "STATE", "HEALTH", "RESTARTS", "LAST EXIT", "REASON"}, rows)
}

// rolloutBounds says when a rollout to the spec rolls back: "roll back
// on a new replica unhealthy for 30s after its grace, or no progress in
// 10m".
func rolloutBounds(s structs.ServiceSpec) string {
	return fmt.Sprintf("roll back on a new replica unhealthy for %s after its grace, or no progress in %s",
		shortDuration(s.RolloutUnhealthyTimeout()), shortDuration(s.RolloutProgressDeadline()))
}

// healthSummary describes a service's health check with the timings it
// runs with.
func healthSummary(h *structs.HealthCheck) string {
	if h == nil {
		return "none: a running replica is healthy"
	}
	short := func(d structs.Duration) string { return shortDuration(time.Duration(d)) }
	s := fmt.Sprintf("%s every %s, timeout %s, unhealthy after %d failures in a row", h,
		short(cmp.Or(h.Interval, structs.DefaultHealthInterval)), short(cmp.Or(h.Timeout, structs.DefaultHealthTimeout)),
		cmp.Or(h.Failures, structs.DefaultHealthFailures))
	if h.Grace > 0 {
		s += fmt.Sprintf(", none counted for %s after a start", short(h.Grace))
	}
	return s
}

// replicaSpecFields lists what each replica runs: a job spec's fields
// but those a replica has no use for.
func replicaSpecFields(s structs.JobSpec) []field {
	var out []field
	for _, f := range specFields(s) {
		switch f.key {
		case "Nodes", "Restarts", "Time limit":
			continue
		}
		out = append(out, f)
	}
	return out
}

// lastExit says how a replica's latest ended allocation ended, and when.
func lastExit(e *api.ReplicaExit, now time.Time) string {
	if e == nil {
		return "-"
	}
	how := string(e.State)
	if e.State != structs.AllocLost {
		how = "exit " + strconv.Itoa(e.ExitCode)
	}
	return how + ", " + age(now, e.At) + " ago"
}
