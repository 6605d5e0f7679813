package cli

import (
	"fmt"
	"slices"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/structs"
)

func scancelCommand() *ucli.Command {
	return &ucli.Command{
		Name:      "scancel",
		Usage:     "cancel jobs as Slurm's scancel does",
		ArgsUsage: "[ID...]",
		Description: "Cancels the jobs named by ID (any unique prefix; an array's ID cancels all its tasks,\n" +
			"ID-INDEX one task), or every job still going that -u, -t and -n select. Filters combine: a job\n" +
			"must match all of them, and with IDs they narrow those IDs; without -u, a user who may cancel\n" +
			"only their own jobs selects among those. Each job cancelled is named on stdout. Exit 1 when a\n" +
			"job could not be cancelled, 2 on bad usage.",
		Flags: []ucli.Flag{
			&ucli.StringFlag{Name: "user", Aliases: []string{"u"}, Usage: "only the jobs of `USER`"},
			&ucli.StringFlag{Name: "state", Aliases: []string{"t"}, Usage: "only jobs in `STATE` (PENDING/PD, RUNNING/R, ...)"},
			&ucli.StringFlag{Name: "name", Aliases: []string{"n"}, Usage: "only the jobs called `NAME`"},
			&ucli.BoolFlag{Name: "me", Usage: "only your token's user's jobs"},
			&ucli.StringFlag{Name: "signal", Aliases: []string{"s"}, Usage: "`SIGNAL`: TERM, KILL, INT or HUP stop the job as a cancel does (SIGTERM, then SIGKILL after the grace); skein cannot send a job other signals"},
			&ucli.BoolFlag{Name: "interactive", Aliases: []string{"i"}, Usage: "ask before cancelling each job (y/n on stdin)"},
		},
		Action: scancelAction,
	}
}

func scancelAction(c *ucli.Context) error {
	cl, err := newClient(c)
	if err != nil {
		return err
	}
	ids := c.Args().Slice()
	user, name := c.String("user"), c.String("name")
	if c.IsSet("signal") {
		switch strings.TrimPrefix(strings.ToUpper(c.String("signal")), "SIG") {
		case "TERM", "15", "KILL", "9", "INT", "2", "HUP", "1":
		default:
			return usagef(c, "--signal=%s: skein cannot send a job a signal other than the stop of a cancel (TERM, KILL, INT, HUP); a job's --signal=SIG@SECONDS is sent before its time limit", c.String("signal"))
		}
	}
	if c.Bool("me") {
		if c.IsSet("user") {
			return usagef(c, "--me and -u: give one")
		}
		who, err := cl.WhoAmI(c.Context)
		if err != nil {
			return err
		}
		user = who.User
	}
	if c.IsSet("user") {
		if err := checkFlag(c, "user", structs.ValidateUserName(user)); err != nil {
			return err
		}
	}
	var states []slurmState
	if c.IsSet("state") {
		if states, err = parseSlurmStates(c.String("state")); err != nil {
			return usagef(c, "-t: %v", err)
		}
	}
	filtered := c.IsSet("user") || c.IsSet("state") || c.IsSet("name") || c.Bool("me")
	if len(ids) == 0 && !filtered {
		return usagef(c, "no job given: name IDs, or select jobs with -u, --me, -t or -n")
	}
	if !filtered && !c.Bool("interactive") {
		// IDs alone: the agent resolves each prefix, and an array's
		// ID cancels all its tasks in one request.
		failed := false
		for _, id := range ids {
			jobs, err := cl.Cancel(c.Context, id)
			if err != nil {
				fmt.Fprintf(c.App.ErrWriter, "scancel: error: %v\n", err)
				failed = true
				continue
			}
			for i := range jobs {
				if err := sayCancelled(c, &jobs[i], jobs[i].SlurmID()); err != nil {
					return err
				}
			}
		}
		if failed {
			return exitStatus(exitError)
		}
		return nil
	}
	if !c.IsSet("user") && !c.Bool("me") {
		// A user who may cancel only their own jobs selects among them,
		// not among every user's, which would fail one by one.
		who, err := cl.WhoAmI(c.Context)
		if err != nil {
			return err
		}
		if who.ACL && !slices.Contains(who.Permissions, structs.PermAnyJob) {
			user = who.User
		}
	}
	jobs, err := cl.JobsAll(c.Context, api.JobsQuery{Owner: user})
	if err != nil {
		return err
	}
	named := idMatcher(jobs, ids)
	failed := false
	for _, id := range ids {
		if one := idMatcher(jobs, []string{id}); !slices.ContainsFunc(jobs, func(j structs.Job) bool { return stateOf(&j).active() && one(&j) }) {
			fmt.Fprintf(c.App.ErrWriter, "scancel: error: job %s: no such job still going\n", id)
			failed = true
		}
	}
	for _, j := range jobs {
		s := stateOf(&j)
		switch {
		case !s.active():
		case user != "" && j.Owner != user:
		case c.IsSet("state") && !slices.Contains(states, s):
		case c.IsSet("name") && j.Spec.Name != name:
		case len(ids) > 0 && !named(&j):
		default:
			if c.Bool("interactive") && !confirm(c, fmt.Sprintf("Cancel job_id=%s name=%s partition=%s [y/n]? ", j.SlurmID(), jobName(&j), jobPartition(&j))) {
				continue
			}
			job, err := cl.CancelJob(c.Context, j.ID)
			if err != nil {
				fmt.Fprintf(c.App.ErrWriter, "scancel: error: %v\n", err)
				failed = true
				continue
			}
			if err := sayCancelled(c, job, job.SlurmID()); err != nil {
				return err
			}
		}
	}
	if failed {
		return exitStatus(exitError)
	}
	return nil
}

// confirm asks a yes/no question on stdout and reads the answer from
// stdin: yes only for y or yes.
func confirm(c *ucli.Context, question string) bool {
	fmt.Fprint(c.App.Writer, question)
	var answer string
	if _, err := fmt.Fscanln(c.App.Reader, &answer); err != nil {
		return false
	}
	answer = strings.ToLower(strings.TrimSpace(answer))
	return answer == "y" || answer == "yes"
}
