package cli

import (
	"fmt"
	"io"
	"strconv"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/structs"
)

// infoWidth is the widest the INFO column of `skein jobs` gets.
const infoWidth = 50

func jobsCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "jobs",
		Usage: "list jobs",
		Flags: []ucli.Flag{
			&ucli.BoolFlag{Name: "all", Usage: "include every finished job the cluster still keeps (see --job-retention)"},
			&ucli.IntFlag{Name: "limit", Usage: fmt.Sprintf("list at most this many jobs (default %d, at most %d)", api.DefaultJobsPage, api.MaxJobsPage)},
			&ucli.StringFlag{Name: "after", Usage: "list the jobs after this cursor (a longer list ends by saying which)"},
			&ucli.BoolFlag{Name: "mine", Usage: "only the jobs of your token's user"},
			&ucli.StringFlag{Name: "owner", Usage: "only the jobs of this `USER`"},
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
	now := time.Now()
	if len(jobs) == 0 {
		_, err = fmt.Fprintln(c.App.Writer, "No jobs.")
	} else {
		err = printJobs(c, jobs, now)
	}
	if err == nil {
		err = printMore(c, c.App.Writer, page.Next)
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
	_, err := fmt.Fprintln(c.App.Writer, line+".")
	return err
}

// printJobs prints the jobs table.
func printJobs(c *ucli.Context, jobs []structs.Job, now time.Time) error {
	rows := make([][]string, 0, len(jobs))
	for _, j := range jobs {
		rows = append(rows, []string{
			structs.ShortID(j.ID),
			orDash(j.Spec.Name),
			orDash(j.Owner),
			string(j.State),
			gpuShape(j.Spec),
			age(now, j.SubmittedAt),
			truncate(jobInfo(j), infoWidth),
		})
	}
	return printTable(c.App.Writer, []string{"ID", "NAME", "OWNER", "STATE", "GPUS", "AGE", "INFO"}, rows)
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
	return shellJoin(j.Spec.Command)
}
