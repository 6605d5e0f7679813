package cli

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/structs"
)

func jobCommand() *ucli.Command {
	return &ucli.Command{
		Name:      "job",
		Usage:     "show one job and its allocations",
		ArgsUsage: "ID",
		Flags: []ucli.Flag{
			&ucli.BoolFlag{Name: "show-secrets", Usage: "show the values of the job's secret_env (its owner and operators only)"},
			&ucli.BoolFlag{Name: "json", Usage: "print JSON"},
		},
		Action: jobAction,
	}
}

func jobAction(c *ucli.Context) error {
	args, cl, err := commandClient(c, "ID")
	if err != nil {
		return err
	}
	get := cl.Job
	if c.Bool("show-secrets") {
		get = cl.JobWithSecrets
	}
	d, err := get(c.Context, args[0])
	if err != nil {
		return err
	}
	if !c.Bool("show-secrets") {
		hideSecrets(&d.Job.Spec)
	}
	if c.Bool("json") {
		return printJSON(c.App.Writer, d)
	}
	return printJobDetail(c, d, time.Now())
}

func printJobDetail(c *ucli.Context, d *api.JobDetail, now time.Time) error {
	w := c.App.Writer
	j := d.Job
	fields := []field{
		{"ID", j.ID},
		{"Name", orDash(j.Spec.Name)},
		{"Owner", owner(j)},
		{"State", string(j.State)},
	}
	switch {
	case j.State == structs.JobQueued:
		fields = append(fields, field{"Waiting", orDash(j.Reason)})
	case j.Reason != "":
		fields = append(fields, field{"Reason", j.Reason})
	}
	if j.StopRequested && !j.State.Terminal() {
		fields = append(fields, field{"Stopping", "cancel requested, allocations are being stopped"})
	}
	if j.State.Terminal() && j.Attempts > 0 {
		fields = append(fields, field{"Exit code", strconv.Itoa(j.ExitCode)})
	}
	fields = append(fields,
		field{"Submitted", timeWithAge(now, j.SubmittedAt)},
		field{"Started", timeWithAge(now, j.StartedAt)},
		field{"Finished", timeWithAge(now, j.FinishedAt)},
		field{"Attempts", strconv.Itoa(j.Attempts)},
	)
	if j.GPUFaults > 0 {
		fields = append(fields, field{"GPU faults", strconv.Itoa(j.GPUFaults) + " (restarted without using a restart)"})
	}
	if j.Preemptions > 0 {
		fields = append(fields, field{"Preemptions", fmt.Sprintf("%d, last %s", j.Preemptions, j.PreemptReason)})
	}
	if err := printFields(w, "", fields); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nSpec:")
	if err := printFields(w, "  ", specFields(j.Spec)); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nAllocations:")
	if len(d.Allocations) == 0 {
		_, err := fmt.Fprintln(w, "  none")
		return err
	}
	rows := make([][]string, 0, len(d.Allocations))
	for _, a := range d.Allocations {
		node := d.Nodes[a.NodeID]
		if node == "" {
			node = structs.ShortID(a.NodeID)
		}
		exit := "-"
		if a.State == structs.AllocSucceeded || a.State == structs.AllocFailed || a.State == structs.AllocKilled || a.State == structs.AllocTimedOut {
			exit = strconv.Itoa(a.ExitCode)
		}
		state := string(a.State)
		if pulling(&a) {
			state = pullState(a.Pull)
		}
		rows = append(rows, []string{
			structs.ShortID(a.ID),
			strconv.Itoa(a.Rank),
			strconv.Itoa(a.Attempt),
			node,
			orDash(a.RunAs),
			state,
			exit,
			orDash(strings.Join(a.GPUs, ",")),
			orDash(a.Reason),
		})
	}
	return printTable(w, []string{"ALLOC", "RANK", "ATTEMPT", "NODE", "RUNS AS", "STATE", "EXIT", "GPUS", "REASON"}, rows)
}

// specFields lists a job spec for people.
func specFields(s structs.JobSpec) []field {
	cpus, gpuMem, mem, limit := "-", "-", "-", "none"
	if s.CPUs > 0 {
		cpus = strconv.Itoa(s.CPUs)
	}
	if s.GPUMemoryMinMiB > 0 {
		gpuMem = structs.FormatMiB(int64(s.GPUMemoryMinMiB))
	}
	if s.MemoryMiB > 0 {
		mem = structs.FormatMiB(int64(s.MemoryMiB))
	}
	if s.TimeLimit > 0 {
		limit = s.TimeLimit.String()
		if s.Signal != nil {
			limit += fmt.Sprintf(" (SIG%s %s before)", s.Signal.Name, s.Signal.Before)
		}
	}
	model := s.GPUModel
	if model == "" {
		model = "any"
	}
	constraints := pairs(s.Constraints)
	fields := []field{{"Command", shellJoin(s.Command)}}
	fields = append(fields, containerFields(s)...)
	return append(fields, []field{
		{"GPUs", strconv.Itoa(s.GPUs) + " per node"},
		{"Nodes", strconv.Itoa(s.Nodes)},
		{"GPU model", model},
		{"GPU memory", gpuMem},
		{"CPUs", cpus},
		{"Memory", mem},
		{"Priority", strconv.Itoa(s.Priority)},
		{"Restarts", strconv.Itoa(s.Restarts)},
		{"Time limit", limit},
		{"Preemptible", preemptible(s)},
		{"Env", envText(s.Env)},
		{"Secret env", envText(s.SecretEnv)},
		{"Constraints", orDash(strings.Join(constraints, ", "))},
		{"Workdir", orDash(s.Workdir)},
	}...)
}

// containerFields lists the container a job with an image runs in: the
// image and its pull policy, and the mounts and /dev/shm size when set.
func containerFields(s structs.JobSpec) []field {
	if s.Image == "" {
		return nil
	}
	policy := string(s.ImagePull)
	if policy == "" {
		policy = string(structs.PullIfNotPresent) + " (default)"
	}
	fields := []field{{"Image", s.Image}, {"Image pull", policy}}
	if len(s.Mounts) > 0 {
		mounts := make([]string, len(s.Mounts))
		for i, m := range s.Mounts {
			mounts[i] = m.String()
		}
		fields = append(fields, field{"Mounts", strings.Join(mounts, ", ")})
	}
	if s.ShmSizeMiB > 0 {
		fields = append(fields, field{"Shm size", structs.FormatMiB(int64(s.ShmSizeMiB))})
	}
	return fields
}

// hideSecrets replaces the values of a spec's secret_env with
// api.HiddenValue, whatever the agent answered: they are shown only when
// asked for.
func hideSecrets(s *structs.JobSpec) {
	for k := range s.SecretEnv {
		s.SecretEnv[k] = api.HiddenValue
	}
}

// owner names a job's owner, and whether it may run as root.
func owner(j structs.Job) string {
	o := orDash(j.Owner)
	if j.AllowRoot {
		o += " (may run as root)"
	}
	return o
}

// pairs renders a map as K=V items, sorted by key.
func pairs(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, k+"="+m[k])
	}
	return out
}

// envText renders a job's environment as the agent answered it: values
// the caller may not see come as api.HiddenValue.
func envText(env map[string]string) string {
	return orDash(strings.Join(pairs(env), ", "))
}

// preemptible says whether a job may be preempted, and with what warning.
func preemptible(s structs.JobSpec) string {
	if !s.Preemptible {
		return "no"
	}
	return "yes, " + s.PreemptGrace.String() + " between SIGTERM and SIGKILL"
}
