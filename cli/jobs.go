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
			&ucli.BoolFlag{Name: "all", Usage: "include every finished job"},
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
	if len(jobs) == 0 {
		_, err := fmt.Fprintln(c.App.Writer, "No jobs.")
		return err
	}
	now := time.Now()
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
