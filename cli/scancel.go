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
			"only their own jobs selects among those. Each job cancelled is named on stdout. With -s, the\n" +
			"jobs are sent the signal instead, on every node they run on, and are not cancelled. Exit 1 when\n" +
			"a job could not be cancelled (or signalled), 2 on bad usage.",
		Flags: []ucli.Flag{
			&ucli.StringFlag{Name: "user", Aliases: []string{"u"}, Usage: "only the jobs of `USER`"},
			&ucli.StringFlag{Name: "state", Aliases: []string{"t"}, Usage: "only jobs in `STATE` (PENDING/PD, RUNNING/R, ...)"},
			&ucli.StringFlag{Name: "name", Aliases: []string{"n"}, Usage: "only the jobs called `NAME`"},
			&ucli.BoolFlag{Name: "me", Usage: "only your token's user's jobs"},
			&ucli.StringFlag{Name: "signal", Aliases: []string{"s"}, Usage: "send `SIGNAL` (USR1, TERM, 10, ...) to the running jobs' processes on every node instead of cancelling them; they go on unless it ends them"},
			&ucli.BoolFlag{Name: "batch", Aliases: []string{"b"}, Usage: "accepted: --signal reaches the script and what it started (skein's jobs have no separate batch step)"},
			&ucli.BoolFlag{Name: "full", Aliases: []string{"f"}, Usage: "accepted: --signal reaches the script and what it started, as it always does"},
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
	act := scancelJobs
	if c.IsSet("signal") {
		sig, err := structs.ParseJobSignal(c.String("signal"))
		if err != nil {
			return usagef(c, "--signal=%s: %v", c.String("signal"), err)
		}
		act = signalJobs(sig)
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
			ok, err := act(c, cl, id)
			if err != nil {
				return err
			}
			failed = failed || !ok
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
		case c.IsSet("signal") && j.State != structs.JobRunning && len(ids) == 0:
			// Filters signal the jobs that run; a job named is said to
			// have no processes when it has none.
		default:
			verb := "Cancel"
			if c.IsSet("signal") {
				verb = "Signal"
			}
			if c.Bool("interactive") && !confirm(c, fmt.Sprintf("%s job_id=%s name=%s partition=%s [y/n]? ", verb, j.SlurmID(), jobName(&j), jobPartition(&j))) {
				continue
			}
			ok, err := act(c, cl, j.ID)
			if err != nil {
				return err
			}
			failed = failed || !ok
		}
	}
	if failed {
		return exitStatus(exitError)
	}
	return nil
}

// scancelJobs cancels the job (or every task of the array) id names and
// says what it did: false when it could not, said on stderr; an error
// only when stdout cannot be written.
func scancelJobs(c *ucli.Context, cl *api.Client, id string) (bool, error) {
	jobs, err := cl.Cancel(c.Context, id)
	if err != nil {
		fmt.Fprintf(c.App.ErrWriter, "scancel: error: %v\n", err)
		return false, nil
	}
	for i := range jobs {
		if err := sayCancelled(c, &jobs[i], jobs[i].SlurmID()); err != nil {
			return false, err
		}
	}
	return true, nil
}

// signalJobs sends sig to the running job (or each running task of the
// array) id names, on every node, as scancelJobs cancels it: each job
// signalled is named on stdout once.
func signalJobs(sig string) func(*ucli.Context, *api.Client, string) (bool, error) {
	return func(c *ucli.Context, cl *api.Client, id string) (bool, error) {
		res, err := cl.SignalJob(c.Context, id, sig)
		if err != nil {
			fmt.Fprintf(c.App.ErrWriter, "scancel: error: job %s: %v\n", id, err)
			return false, nil
		}
		var said []string
		for _, a := range res.Signalled {
			name := a.SlurmID
			if name == "" {
				name = structs.ShortID(a.JobID)
			}
			if slices.Contains(said, name) {
				continue
			}
			said = append(said, name)
			if _, err := fmt.Fprintf(c.App.Writer, "signalled %s with SIG%s\n", name, res.Signal); err != nil {
				return false, err
			}
		}
		return true, nil
	}
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
