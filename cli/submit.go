package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/structs"
)

const (
	// submitRetries is how many times submit repeats, with the same request
	// ID, a request that got no answer from the agent.
	submitRetries = 3
	// submitBackoff is the pause before the first repeat; it doubles after.
	submitBackoff = 100 * time.Millisecond
)

func submitCommand() *ucli.Command {
	flags := []ucli.Flag{
		&ucli.StringFlag{Name: "name", Usage: "job name"},
		&ucli.IntFlag{Name: "nodes", Usage: "nodes to run on (one rank per node)", Value: 1},
	}
	flags = append(flags, jobSpecFlags("the job", "skein job")...)
	flags = append(flags,
		&ucli.IntFlag{Name: "restarts", Usage: "times to restart the job when it fails"},
		&ucli.StringFlag{Name: "time-limit", Usage: "stop the job after this long (90m, 2h); it ends timed_out"},
		&ucli.StringFlag{Name: "signal", Usage: "send `SIG[@TIME]` to the job TIME (default 60s) before its time limit, like USR1@90s"},
		&ucli.StringFlag{Name: "file", Aliases: []string{"f"}, Usage: "read the job from a YAML `FILE` (- for stdin); flags override it"},
		&ucli.GenericFlag{Name: "after", Usage: "start only after job `ID[:ok|any|notok]` has succeeded (ok, the default), ended (any) or ended otherwise than succeeded (notok) (repeatable)", Value: &listValue{}},
		&ucli.BoolFlag{Name: "singleton", Usage: "start only while no other job of yours with this --name runs or was submitted before it and waits"},
		&ucli.StringFlag{Name: "array", Usage: "a job array: one task per index of `START-END[%MAX]`, at most MAX running at once"},
		&ucli.StringFlag{Name: "request-id", Usage: "idempotency key: repeating it returns the same job (default: random)"},
		&ucli.BoolFlag{Name: "wait", Usage: "wait for the job to end, saying on stderr how it gets on, and exit with its exit status"},
		&ucli.BoolFlag{Name: "follow", Usage: "wait as --wait does, printing the job's output (rank 0's) as it runs"},
		&ucli.BoolFlag{Name: "json", Usage: "print the created job as JSON"},
	)
	return &ucli.Command{
		Name:      "submit",
		Usage:     "run a job on the cluster",
		ArgsUsage: "[--] CMD [ARGS...]",
		Description: "Submits CMD with ARGS as a job and prints its ID. Flags go before CMD;\n" +
			"everything from CMD on is passed to the job unchanged. Use -- before CMD\n" +
			"when it starts with a dash.\n\n" +
			"--wait waits for the job to end and says on stderr each time its state changes,\n" +
			"each attempt where it ran, however short (\"job 3f2a1b0c queued: ...\", \"job 3f2a1b0c\n" +
			"running on gpu-01 (attempt 1)\", \"job 3f2a1b0c failed: exited with code 7\"); --follow\n" +
			"does the same and prints the job's output as skein logs -f does, its stdout on stdout\n" +
			"and its stderr on stderr. Both exit with the job's exit status: 0 succeeded, its exit\n" +
			"code when it failed with one (128+N for signal N), 124 timed out, 143 cancelled, 125\n" +
			"failed without an exit code (lost with its node, never started). Errors of skein\n" +
			"itself exit 1, usage errors 2.",
		Flags:  flags,
		Action: submitAction,
	}
}

func submitAction(c *ucli.Context) error {
	req, err := submitRequest(c)
	if err != nil {
		return err
	}
	cl, err := newClient(c)
	if err != nil {
		return err
	}
	job, err := submitJob(c.Context, cl, req)
	if err != nil {
		return err
	}
	switch {
	case c.Bool("follow"):
		// The ID goes on stderr, with what is said of the job: stdout
		// is the job's own.
		_, err = fmt.Fprintf(c.App.ErrWriter, "job %s submitted\n", job.ID)
	case c.Bool("json"):
		hideSecrets(&job.Spec)
		err = printJSON(c.App.Writer, job)
	case job.ArrayID != "":
		_, err = fmt.Fprintln(c.App.Writer, job.ArrayID) // cancel takes it; tasks are ID-INDEX
	default:
		_, err = fmt.Fprintln(c.App.Writer, job.ID)
	}
	switch {
	case err != nil:
		return err
	case c.Bool("follow"):
		return followJob(c, cl, job.ID)
	case c.Bool("wait"):
		return waitJob(c, cl, job.ID)
	}
	return nil
}

// submitRequest builds and checks the request from the job file, if any,
// then the flags and arguments, which override it.
func submitRequest(c *ucli.Context) (api.SubmitRequest, error) {
	var req api.SubmitRequest
	var spec structs.JobSpec
	var err error
	if path := c.String("file"); path != "" {
		f, err := readJobFile(path, c.App.Reader)
		if err != nil {
			return req, err
		}
		if spec, err = f.jobSpec(); err != nil {
			return req, err
		}
	}
	if err := jobSpecFromFlags(c, &spec); err != nil {
		return req, err
	}
	if c.IsSet("name") {
		spec.Name = c.String("name")
	}
	for name, dst := range map[string]*int{"nodes": &spec.Nodes, "restarts": &spec.Restarts} {
		if c.IsSet(name) {
			*dst = c.Int(name)
		}
	}
	for _, err := range []error{
		decodeFlag(c, "time-limit", &spec.TimeLimit, structs.ParseDuration),
		decodeFlag(c, "signal", &spec.Signal, structs.ParseTimeSignal),
		decodeFlag(c, "array", &spec.Array, structs.ParseArraySpec),
	} {
		if err != nil {
			return req, err
		}
	}
	for _, name := range []string{"wait", "follow"} {
		if c.IsSet("array") && c.Bool(name) {
			return req, usagef(c, "--%s waits for one job; it cannot be used with --array", name)
		}
	}
	if c.Bool("follow") && c.Bool("json") {
		return req, usagef(c, "--follow prints the job's output; it cannot be used with --json")
	}
	after, err := afterFlag(c)
	if err != nil {
		return req, err
	}
	spec.After = append(spec.After, after...)
	req.RequestID = c.String("request-id")
	if req.RequestID == "" {
		req.RequestID = structs.NewID()
	}
	spec.Normalize()
	if err := spec.Validate(); err != nil {
		return req, flagError(err)
	}
	if err := structs.ValidateRequestID(req.RequestID); err != nil {
		return req, flagError(err)
	}
	req.Spec = spec
	return req, nil
}

// afterFlag collects --after ID[:ok|any].
func afterFlag(c *ucli.Context) ([]structs.Dependency, error) {
	var deps []structs.Dependency
	for _, v := range *c.Generic("after").(*listValue) {
		d, err := structs.ParseDependency(v)
		if err != nil {
			return nil, usagef(c, "--after: %v", err)
		}
		deps = append(deps, d)
	}
	return deps, nil
}

// submitJob submits req, repeating it with the same request ID when the
// agent could not be reached; an answer from the agent is never repeated.
func submitJob(ctx context.Context, cl *api.Client, req api.SubmitRequest) (*structs.Job, error) {
	backoff := submitBackoff
	for attempt := 0; ; attempt++ {
		job, err := cl.SubmitJob(ctx, req)
		var apiErr *api.Error
		if err == nil || errors.As(err, &apiErr) || attempt == submitRetries {
			return job, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(backoff):
		}
		backoff *= 2
	}
}

// waitJob waits for a job to end, saying on ErrWriter each time its state
// changes and, while its allocations pull their image, how far they got.
// It ends with how the job ended, and the exit status error that says so.
func waitJob(c *ucli.Context, cl *api.Client, id string) error {
	jw := newJobWatch(cl, id, c.App.ErrWriter)
	jw.everyAttempt = true
	d, err := jw.until(c.Context, func(d *api.JobDetail) bool { return d.Job.State.Terminal() })
	if err != nil {
		return err
	}
	jw.sayAttempts(d) // those it made since the last poll
	fmt.Fprintln(c.App.ErrWriter, printable(endLine(&d.Job)))
	return statusError(endStatus(string(d.Job.State), d.Job.ExitCode))
}

// followJob waits for a job as waitJob does and prints the output of
// every attempt of its rank 0 as skein logs -f does.
func followJob(c *ucli.Context, cl *api.Client, id string) error {
	p := &logPrinter{cl: cl, req: logsRequest{id: id, follow: true}, out: newTextLogs(c.App.Writer, c.App.ErrWriter), states: true}
	return p.follow(c.Context, newJobWatch(cl, id, c.App.ErrWriter), 1, false, 0)
}
