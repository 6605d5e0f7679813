package cli

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/structs"
)

// infoWidth is the widest the INFO column of `skein jobs` gets without
// --wide.
const infoWidth = 50

func jobsCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "jobs",
		Usage: "list jobs",
		Description: "The table alone goes to stdout, a header and a row per job; how many jobs it lists by state,\n" +
			"the command that lists the next page and, with --all, how far back it reaches go to stderr.",
		Flags: []ucli.Flag{
			&ucli.BoolFlag{Name: "all", Usage: "include every finished job the cluster still keeps (see --job-retention)"},
			&ucli.IntFlag{Name: "limit", Usage: fmt.Sprintf("list at most this many jobs (default %d, at most %d)", api.DefaultJobsPage, api.MaxJobsPage)},
			&ucli.StringFlag{Name: "after", Usage: "list the jobs after this cursor (a longer list ends by saying which)"},
			&ucli.BoolFlag{Name: "mine", Usage: "only the jobs of your token's user"},
			&ucli.StringFlag{Name: "owner", Usage: "only the jobs of this `USER`"},
			&ucli.BoolFlag{Name: "wide", Usage: "also the nodes and GPU UUIDs of running jobs, and INFO uncut"},
			&ucli.BoolFlag{Name: "json", Usage: "print JSON"},
		},
		Action: jobsAction,
	}
}

func jobsAction(c *ucli.Context) error {
	_, cl, err := commandClient(c)
	if err != nil {
		return err
	}
	if n := c.Int("limit"); c.IsSet("limit") && (n < 1 || n > api.MaxJobsPage) {
		return usagef(c, "--limit %d: want 1 to %d", n, api.MaxJobsPage)
	}
	owner := c.String("owner")
	if c.IsSet("owner") {
		if c.Bool("mine") {
			return usagef(c, "--mine and --owner: give one")
		}
		if err := checkFlag(c, "owner", structs.ValidateUserName(owner)); err != nil {
			return err
		}
	}
	page, err := cl.JobsPage(c.Context, api.JobsQuery{
		All: c.Bool("all"), Limit: c.Int("limit"), After: c.String("after"), Mine: c.Bool("mine"), Owner: owner,
	})
	if err != nil {
		return err
	}
	jobs := page.Jobs
	if c.Bool("json") {
		if jobs == nil {
			jobs = []structs.Job{}
		}
		if err := printJSON(c.App.Writer, jobs); err != nil {
			return err
		}
		return printMore(c, c.App.ErrWriter, page.Next)
	}
	// The table alone goes to stdout, so that `skein jobs | grep ...`
	// sees only jobs; what is said about it goes to stderr.
	now := time.Now()
	if len(jobs) == 0 {
		_, err = fmt.Fprintln(c.App.Writer, "No jobs.")
	} else if err = printJobs(c, cl, jobs, now); err == nil {
		_, err = fmt.Fprintln(c.App.ErrWriter, jobsSummary(jobs))
	}
	if err == nil {
		err = printMore(c, c.App.ErrWriter, page.Next)
	}
	if err != nil || !c.Bool("all") {
		return err
	}
	st, err := cl.Status(c.Context)
	if err != nil {
		return err
	}
	return printRetention(c, jobs, st.JobRetention, now)
}

// jobsSummary is the line after the jobs table: "30 jobs: 22 queued, 8 running".
func jobsSummary(jobs []structs.Job) string {
	noun := "jobs"
	if len(jobs) == 1 {
		noun = "job"
	}
	return fmt.Sprintf("%d %s: %s", len(jobs), noun, stateCounts(jobs))
}

// stateCounts counts jobs by state, in the order of structs.JobStates,
// leaving out the states none is in: "22 queued, 8 running".
func stateCounts(jobs []structs.Job) string {
	n := map[structs.JobState]int{}
	for _, j := range jobs {
		n[j.State]++
	}
	var parts []string
	for _, st := range structs.JobStates {
		if n[st] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n[st], st))
		}
	}
	return strings.Join(parts, ", ")
}

// printMore says how to list the jobs after this page, if there are any.
func printMore(c *ucli.Context, w io.Writer, next string) error {
	if next == "" {
		return nil
	}
	cmd := "skein jobs"
	if c.Bool("all") {
		cmd += " --all"
	}
	if c.Bool("mine") {
		cmd += " --mine"
	}
	if c.IsSet("owner") {
		cmd += " --owner " + c.String("owner")
	}
	if c.IsSet("limit") {
		cmd += fmt.Sprintf(" --limit %d", c.Int("limit"))
	}
	_, err := fmt.Fprintf(w, "More jobs follow: %s --after %s\n", cmd, next)
	return err
}

// printRetention says how far back `skein jobs --all` reaches: finished
// jobs are removed after the retention, and the oldest one listed.
func printRetention(c *ucli.Context, jobs []structs.Job, retention structs.Duration, now time.Time) error {
	if retention == 0 {
		return nil // an agent that does not say
	}
	line := fmt.Sprintf("Finished jobs are kept for %s (--job-retention)", shortDuration(time.Duration(retention)))
	var oldest time.Time
	for _, j := range jobs {
		if j.State.Terminal() && (oldest.IsZero() || j.FinishedAt.Before(oldest)) {
			oldest = j.FinishedAt
		}
	}
	if !oldest.IsZero() {
		line += fmt.Sprintf("; the oldest here finished %s ago", age(now, oldest))
	}
	_, err := fmt.Fprintln(c.App.ErrWriter, line+".")
	return err
}

// printJobs prints the jobs table; with --wide, the nodes and GPU UUIDs
// of the running jobs too, and INFO uncut.
func printJobs(c *ucli.Context, cl *api.Client, jobs []structs.Job, now time.Time) error {
	wide := c.Bool("wide")
	var places map[string][]placement
	if wide {
		var err error
		if places, err = runningPlacements(c.Context, cl, jobs); err != nil {
			return err
		}
	}
	rows := make([][]string, 0, len(jobs))
	for _, j := range jobs {
		row := []string{
			structs.ShortID(j.ID),
			orDash(j.Spec.Name),
			orDash(j.Owner),
			string(j.State),
			gpuShape(j.Spec),
			age(now, j.SubmittedAt),
		}
		if !wide {
			rows = append(rows, append(row, truncate(jobInfo(j), infoWidth)))
			continue
		}
		var nodes, uuids []string
		for _, p := range places[j.ID] {
			nodes = append(nodes, p.node)
			uuids = append(uuids, p.gpus...)
		}
		rows = append(rows, append(row, orDash(strings.Join(nodes, ",")), orDash(strings.Join(uuids, ",")), jobInfo(j)))
	}
	header := []string{"ID", "NAME", "OWNER", "STATE", "GPUS", "AGE", "INFO"}
	if wide {
		header = []string{"ID", "NAME", "OWNER", "STATE", "GPUS", "AGE", "NODES", "GPU UUIDS", "INFO"}
	}
	return printTable(c.App.Writer, header, rows)
}

// gpuShape renders a job's GPUs: the count, or NODESxGPUS for a multi-node job.
func gpuShape(s structs.JobSpec) string {
	if s.Nodes > 1 {
		return fmt.Sprintf("%dx%d", s.Nodes, s.GPUs)
	}
	return strconv.Itoa(s.GPUs)
}

// jobInfo is the most useful line about a job: why it waits, failed or was
// cancelled, else what it runs.
func jobInfo(j structs.Job) string {
	switch j.State {
	case structs.JobQueued, structs.JobFailed, structs.JobCancelled, structs.JobTimedOut:
		if j.Reason != "" {
			return j.Reason
		}
	}
	return commandText(j.Spec.Command)
}

// placement is where a running job runs on one node: the node's name and
// the UUIDs of the GPUs it holds there, in index order.
type placement struct {
	node string
	gpus []string
}

// runningPlacements maps each running job among jobs to its placements,
// by node name: from the nodes' GPUs in use for GPU jobs (one request),
// from the job itself for the others (one request each).
func runningPlacements(ctx context.Context, cl *api.Client, jobs []structs.Job) (map[string][]placement, error) {
	out := map[string][]placement{}
	var gpuless []string
	needNodes := false
	for _, j := range jobs {
		if j.State != structs.JobRunning {
			continue
		}
		if j.Spec.GPUs > 0 {
			needNodes = true
		} else {
			gpuless = append(gpuless, j.ID)
		}
	}
	if needNodes {
		nodes, err := cl.Nodes(ctx)
		if err != nil {
			return nil, err
		}
		for _, n := range nodes {
			here := map[string]int{} // job to its placement's place in out[job]
			for _, g := range slices.SortedFunc(slices.Values(n.GPUs), func(a, b structs.GPU) int { return cmp.Compare(a.Index, b.Index) }) {
				job, ok := n.GPUJobs[g.UUID]
				if !ok {
					continue
				}
				i, seen := here[job]
				if !seen {
					i = len(out[job])
					here[job] = i
					out[job] = append(out[job], placement{node: n.Name})
				}
				out[job][i].gpus = append(out[job][i].gpus, g.UUID)
			}
		}
	}
	for _, id := range gpuless {
		d, err := cl.Job(ctx, id)
		if api.IsNotFound(err) {
			continue // gone since the list
		}
		if err != nil {
			return nil, err
		}
		seen := map[string]bool{}
		for _, a := range d.Allocations {
			if name := d.Nodes[a.NodeID]; a.Live() && name != "" && !seen[name] {
				seen[name] = true
				out[id] = append(out[id], placement{node: name})
			}
		}
	}
	for _, ps := range out {
		slices.SortFunc(ps, func(a, b placement) int { return cmp.Compare(a.node, b.node) })
	}
	return out, nil
}
