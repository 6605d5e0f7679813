package cli

import (
	"fmt"
	"strconv"
	"time"

	ucli "github.com/urfave/cli/v2"

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
	jobs, err := cl.Jobs(c.Context, c.Bool("all"))
	if err != nil {
		return err
	}
	if c.Bool("json") {
		if jobs == nil {
			jobs = []structs.Job{}
		}
		return printJSON(c.App.Writer, jobs)
	}
	now := time.Now()
	if len(jobs) == 0 {
		_, err = fmt.Fprintln(c.App.Writer, "No jobs.")
	} else {
		err = printJobs(c, jobs, now)
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
			string(j.State),
			gpuShape(j.Spec),
			age(now, j.SubmittedAt),
			truncate(jobInfo(j), infoWidth),
		})
	}
	return printTable(c.App.Writer, []string{"ID", "NAME", "STATE", "GPUS", "AGE", "INFO"}, rows)
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
