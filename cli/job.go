package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/slurm"
	"github.com/skein-dev/skein/structs"
)

func jobCommand() *ucli.Command {
	return &ucli.Command{
		Name:      "job",
		Usage:     "show one job and its allocations, or a job array and its tasks",
		ArgsUsage: "ID",
		Description: "ID is a job's number (as sbatch and squeue show it; an array task's is NUMBER_INDEX), or its\n" +
			"ID or any unique prefix of it; an array task's is ARRAY-INDEX, ARRAY any unique\n" +
			"prefix of the array's ID. An array's ID (or a prefix) without -INDEX shows the array: its tasks\n" +
			"counted by state, and each task's state, node, exit code and reason.",
		Flags: []ucli.Flag{
			&ucli.BoolFlag{Name: "show-secrets", Usage: "show the values of the job's secret_env (its owner and operators only)"},
			&ucli.BoolFlag{Name: "wide", Usage: "show each allocation's GPUs by UUID, not by index"},
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
	tasks, isArray, aerr := arrayNamed(c.Context, cl, args[0], d, err)
	if aerr != nil {
		return aerr
	}
	if isArray {
		if c.Bool("show-secrets") {
			return usagef(c, "--show-secrets shows one job's secrets: name a task of array %s as %s-INDEX", structs.ShortID(tasks[0].ArrayID), structs.ShortID(tasks[0].ArrayID))
		}
		return showArray(c, cl, tasks)
	}
	if !c.Bool("show-secrets") {
		hideSecrets(&d.Job.Spec)
	}
	if c.Bool("json") {
		return printJSON(c.App.Writer, d)
	}
	index := map[string]int{}
	if !c.Bool("wide") && slices.ContainsFunc(d.Allocations, func(a structs.Allocation) bool { return len(a.GPUs) > 0 }) {
		if index, err = gpuIndexes(c.Context, cl); err != nil {
			return err
		}
	}
	return printJobDetail(c, d, index, time.Now())
}

// gpuIndexes maps the UUID of every GPU of the cluster to its index on
// its node.
func gpuIndexes(ctx context.Context, cl *api.Client) (map[string]int, error) {
	nodes, err := cl.Nodes(ctx)
	if err != nil {
		return nil, err
	}
	index := map[string]int{}
	for _, n := range nodes {
		for _, g := range n.GPUs {
			index[g.UUID] = g.Index
		}
	}
	return index, nil
}

// printJobDetail prints one job; index maps GPU UUIDs to their indexes,
// nil with --wide (UUIDs shown whole).
func printJobDetail(c *ucli.Context, d *api.JobDetail, index map[string]int, now time.Time) error {
	w := c.App.Writer
	j := d.Job
	fields := []field{
		{"ID", j.ID},
		{"Job ID", j.SlurmID()},
		{"Name", orDash(j.Spec.Name)},
		{"Owner", owner(j)},
		{"State", string(j.State)},
	}
	switch {
	case j.State == structs.JobQueued:
		fields = append(fields, field{"Waiting", orDash(j.Reason)})
		if d.Queue != nil {
			fields = append(fields, queueFields(d.Queue)...)
		}
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
		gpus := orDash(strings.Join(a.GPUs, ","))
		if !c.Bool("wide") {
			gpus = gpuList(a.GPUs, index)
		}
		rows = append(rows, []string{
			structs.ShortID(a.ID),
			strconv.Itoa(a.Rank),
			strconv.Itoa(a.Attempt),
			node,
			orDash(a.RunAs),
			state,
			exit,
			gpus,
			orDash(a.Reason),
		})
	}
	if err := printTable(w, []string{"ALLOC", "RANK", "ATTEMPT", "NODE", "RUNS AS", "STATE", "EXIT", "GPUS", "REASON"}, rows); err != nil {
		return err
	}
	return printUsage(w, d.Allocations)
}

// printUsage writes what each allocation that ended used, as its node's
// cgroup counted: the most memory it held and its limit, its CPU time
// and how long its quota throttled it, and the processes the kernel
// killed for its memory limit.
func printUsage(w io.Writer, allocs []structs.Allocation) error {
	var rows [][]string
	for _, a := range allocs {
		u := a.Usage
		if u == nil {
			continue
		}
		limit := "none"
		if u.MemoryLimitBytes > 0 {
			limit = structs.FormatBytes(u.MemoryLimitBytes)
		}
		throttled := "-"
		if u.ThrottledPeriods > 0 {
			throttled = fmt.Sprintf("%s in %d periods", time.Duration(u.CPUThrottled).Round(time.Millisecond), u.ThrottledPeriods)
		}
		rows = append(rows, []string{structs.ShortID(a.ID), structs.FormatBytes(u.MemoryPeakBytes), limit,
			time.Duration(u.CPUTime).Round(time.Millisecond).String(), throttled, strconv.FormatInt(u.OOMKills, 10)})
	}
	if len(rows) == 0 {
		return nil
	}
	fmt.Fprintln(w, "\nUsage:")
	return printTable(w, []string{"ALLOC", "MAX MEMORY", "MEM LIMIT", "CPU TIME", "THROTTLED", "OOM KILLS"}, rows)
}

// arrayNamed decides whether id, answered by GET /v1/jobs/ID with d or
// err, names a job array rather than one job: a prefix of an array's ID
// without -INDEX, which the agent finds ambiguous (it matches every task),
// or which matches the only task of an array of one. It returns the
// array's tasks in index order, or the agent's error where id names no
// job and no array alone.
func arrayNamed(ctx context.Context, cl *api.Client, id string, d *api.JobDetail, err error) ([]structs.Job, bool, error) {
	if err == nil {
		if arr := d.Job.ArrayID; arr == "" || !strings.HasPrefix(arr, id) {
			return nil, false, nil
		}
	} else if e := (*api.Error)(nil); !errors.As(err, &e) || e.StatusCode != http.StatusBadRequest {
		return nil, false, err // not ambiguous: no such job, or no answer
	}
	jobs, lerr := cl.JobsAll(ctx, api.JobsQuery{All: true})
	if lerr != nil {
		return nil, false, lerr
	}
	var tasks []structs.Job
	if n, index, ok := structs.ParseJobNumber(id); ok && index < 0 {
		for _, j := range jobs {
			if j.ArrayNumber == n {
				tasks = append(tasks, j)
			}
		}
		if len(tasks) > 0 {
			slices.SortFunc(tasks, func(a, b structs.Job) int { return cmp.Compare(a.ArrayIndex, b.ArrayIndex) })
			return tasks, true, nil
		}
		// No array has the number: a prefix of an ID, then.
	}
	for _, j := range jobs {
		if !strings.HasPrefix(j.ID, id) {
			continue
		}
		if j.ArrayID == "" || !strings.HasPrefix(j.ArrayID, id) || len(tasks) > 0 && tasks[0].ArrayID != j.ArrayID {
			// Another job or array shares the prefix: what the agent said.
			return nil, false, cmp.Or(err, fmt.Errorf("job %s: ambiguous id: it names a job array and other jobs", id))
		}
		tasks = append(tasks, j)
	}
	if len(tasks) == 0 {
		return nil, false, cmp.Or(err, fmt.Errorf("job array %s: not found", id))
	}
	slices.SortFunc(tasks, func(a, b structs.Job) int { return cmp.Compare(a.ArrayIndex, b.ArrayIndex) })
	return tasks, true, nil
}

// arrayDetail is `skein job ARRAY --json`: the array's tasks in index
// order, how many are in each state, and the nodes of the running ones.
type arrayDetail struct {
	ArrayID string                   `json:"array_id"`
	States  map[structs.JobState]int `json:"states"`
	Nodes   map[string][]string      `json:"nodes"`
	Tasks   []structs.Job            `json:"tasks"`
}

// showArray prints a job array: what its tasks share, their count by
// state, and a row per task.
func showArray(c *ucli.Context, cl *api.Client, tasks []structs.Job) error {
	nodes, err := runningNodes(c.Context, cl, tasks)
	if err != nil {
		return err
	}
	first := tasks[0]
	if c.Bool("json") {
		a := arrayDetail{ArrayID: first.ArrayID, States: map[structs.JobState]int{}, Nodes: map[string][]string{}, Tasks: tasks}
		for i, t := range tasks {
			a.States[t.State]++
			if ns := nodes[t.ID]; len(ns) > 0 {
				a.Nodes[t.ID] = ns
			}
			hideSecrets(&a.Tasks[i].Spec)
		}
		return printJSON(c.App.Writer, a)
	}
	indexes := make([]int, len(tasks))
	for i, t := range tasks {
		indexes[i] = t.ArrayIndex
	}
	count := fmt.Sprintf("%d, indexes %s", len(tasks), structs.NumberRanges(indexes, 0))
	if a := first.Spec.Array; a != nil && a.MaxRunning > 0 {
		count += fmt.Sprintf(", at most %d running at once", a.MaxRunning)
	}
	w := c.App.Writer
	if err := printFields(w, "", []field{
		{"Array", first.ArrayID},
		{"Array ID", strconv.FormatUint(first.ArrayNumber, 10)},
		{"Name", orDash(first.Spec.Name)},
		{"Owner", owner(first)},
		{"Command", commandText(first.Spec.Command)},
		{"GPUs", strconv.Itoa(first.Spec.GPUs) + " per node"},
		{"Nodes", strconv.Itoa(first.Spec.Nodes) + " per task"},
		{"Submitted", timeWithAge(time.Now(), first.SubmittedAt)},
		{"Tasks", count},
		{"States", stateCounts(tasks)},
	}); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nEach task (skein job %s-INDEX shows one):\n", structs.ShortID(first.ArrayID))
	rows := make([][]string, 0, len(tasks))
	for _, t := range tasks {
		exit := "-"
		if t.State.Terminal() && t.Attempts > 0 {
			exit = strconv.Itoa(t.ExitCode)
		}
		rows = append(rows, []string{strconv.Itoa(t.ArrayIndex), string(t.State), orDash(strings.Join(nodes[t.ID], ",")), exit, orDash(t.Reason)})
	}
	return printTable(w, []string{"INDEX", "STATE", "NODE", "EXIT", "REASON"}, rows)
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
	fields := []field{{"Command", commandText(s.Command)}}
	fields = append(fields, containerFields(s)...)
	if s.Account != "" {
		fields = append(fields, field{"Account", s.Account})
	}
	if s.QoS != "" {
		fields = append(fields, field{"QoS", s.QoS})
	}
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
// image and its pull policy, and the mounts, /dev/shm size and
// capabilities when set.
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
	if len(s.Caps) > 0 {
		fields = append(fields, field{"Capabilities", strings.Join(s.Caps, ", ")})
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

// commandText is a job's command as skein job shows it: a batch script
// sbatch runs as what it is (skein job --json has the wrapper whole),
// any other command as a shell would read it.
func commandText(command []string) string {
	return cmp.Or(slurm.Describe(command), shellJoin(command))
}
