package cli

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"strings"
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
	// waitInterval is how often `submit --wait` polls the job.
	waitInterval = 250 * time.Millisecond
)

// specFlags maps the JobSpec fields that Validate names to the flags that
// set them.
var specFlags = map[string]string{
	"name":               "--name",
	"env":                "--env",
	"secret_env":         "--secret-env",
	"nodes":              "--nodes",
	"gpus":               "--gpus",
	"gpu_memory_min_mib": "--gpu-mem",
	"cpus":               "--cpus",
	"memory_mib":         "--mem",
	"priority":           "--priority",
	"restarts":           "--restarts",
	"time_limit":         "--time-limit",
	"preempt_grace":      "--preempt-grace",
	"signal":             "--signal",
	"constraints":        "--constraint",
	"image":              "--image",
	"image_pull":         "--image-pull",
	"mounts":             "--mount",
	"shm_size_mib":       "--shm-size",
	"request_id":         "--request-id",
}

func submitCommand() *ucli.Command {
	return &ucli.Command{
		Name:      "submit",
		Usage:     "run a job on the cluster",
		ArgsUsage: "[--] CMD [ARGS...]",
		Description: "Submits CMD with ARGS as a job and prints its ID. Flags go before CMD;\n" +
			"everything from CMD on is passed to the job unchanged. Use -- before CMD\n" +
			"when it starts with a dash.",
		Flags: []ucli.Flag{
			&ucli.StringFlag{Name: "name", Usage: "job name"},
			&ucli.IntFlag{Name: "gpus", Usage: "GPUs per node"},
			&ucli.IntFlag{Name: "nodes", Usage: "nodes to run on (one rank per node)", Value: 1},
			&ucli.StringFlag{Name: "gpu-model", Usage: "only GPUs of this model"},
			&ucli.StringFlag{Name: "gpu-mem", Usage: "least memory per GPU (SIZE: 512M, 80G)"},
			&ucli.IntFlag{Name: "cpus", Usage: "CPUs per node"},
			&ucli.StringFlag{Name: "mem", Usage: "memory per node (SIZE: 512M, 80G)"},
			&ucli.IntFlag{Name: "priority", Usage: "higher runs first (-1000..1000)"},
			&ucli.IntFlag{Name: "restarts", Usage: "times to restart the job when it fails"},
			&ucli.StringFlag{Name: "time-limit", Usage: "stop the job after this long (90m, 2h); it ends timed_out"},
			&ucli.StringFlag{Name: "signal", Usage: "send `SIG[@TIME]` to the job TIME (default 60s) before its time limit, like USR1@90s"},
			&ucli.GenericFlag{Name: "env", Usage: "set K=V in the job's environment, or copy K from yours (repeatable)", Value: &listValue{}},
			&ucli.GenericFlag{Name: "secret-env", Usage: "like --env, for a secret: the job gets it, but its value is returned only to the job's owner and operators " +
				"(skein job --show-secrets) and never logged; prefer --secret-env K, which copies it from your environment, to K=V on a command line others can see (repeatable)", Value: &listValue{}},
			&ucli.GenericFlag{Name: "constraint", Usage: "only nodes with label K=V (repeatable)", Value: &listValue{}},
			&ucli.StringFlag{Name: "file", Aliases: []string{"f"}, Usage: "read the job from a YAML `FILE` (- for stdin); flags override it"},
			&ucli.GenericFlag{Name: "after", Usage: "start only after job `ID[:ok|any]` has succeeded (ok, the default) or ended (any) (repeatable)", Value: &listValue{}},
			&ucli.StringFlag{Name: "array", Usage: "a job array: one task per index of `START-END[%MAX]`, at most MAX running at once"},
			&ucli.BoolFlag{Name: "spread", Usage: "place on the emptiest nodes instead of packing the fullest"},
			&ucli.BoolFlag{Name: "preemptible", Usage: "may be stopped (SIGTERM, grace, SIGKILL) and requeued for higher-priority work"},
			&ucli.StringFlag{Name: "preempt-grace", Usage: "time between SIGTERM and SIGKILL when preempted (default 30s, at most 10m)"},
			&ucli.StringFlag{Name: "image", Usage: "run the job in a container of this `IMAGE` on the node's container engine; CMD is the container's command"},
			&ucli.StringFlag{Name: "image-pull", Usage: "when the node pulls the image: if-not-present (the default), always or never"},
			&ucli.GenericFlag{Name: "mount", Usage: "bind-mount the node's directory SRC at DST in the container, read-only with :ro; " +
				"SRC must lie under a directory the node allows (skein agent --allow-mount) (`SRC:DST[:ro]`, repeatable)", Value: &listValue{}},
			&ucli.StringFlag{Name: "shm-size", Usage: "size of the container's /dev/shm (SIZE: 512M, 64G; default: the node's, sized from its memory)"},
			&ucli.StringFlag{Name: "workdir", Usage: "directory to run in (default: the current directory; with --image, the image's)"},
			&ucli.StringFlag{Name: "request-id", Usage: "idempotency key: repeating it returns the same job (default: random)"},
			&ucli.BoolFlag{Name: "wait", Usage: "wait for the job to end; exit 0 only if it succeeded"},
			&ucli.BoolFlag{Name: "json", Usage: "print the created job as JSON"},
		},
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
	case c.Bool("json"):
		hideSecrets(&job.Spec)
		err = printJSON(c.App.Writer, job)
	case job.ArrayID != "":
		_, err = fmt.Fprintln(c.App.Writer, job.ArrayID) // cancel takes it; tasks are ID-INDEX
	default:
		_, err = fmt.Fprintln(c.App.Writer, job.ID)
	}
	if err != nil || !c.Bool("wait") {
		return err
	}
	return waitJob(c, cl, job.ID)
}

// submitRequest builds and checks the request from the job file, if any,
// then the flags and arguments, which override it.
func submitRequest(c *ucli.Context) (api.SubmitRequest, error) {
	var req api.SubmitRequest
	var spec structs.JobSpec
	var err error
	if path := c.String("file"); path != "" {
		if spec, err = readJobFile(path, c.App.Reader); err != nil {
			return req, err
		}
	}
	if c.NArg() > 0 {
		spec.Command = c.Args().Slice()
	}
	if len(spec.Command) == 0 {
		return req, usagef(c, "missing command: give the program and its arguments after the flags")
	}
	for name, dst := range map[string]*string{"name": &spec.Name, "workdir": &spec.Workdir, "gpu-model": &spec.GPUModel,
		"image": &spec.Image} {
		if c.IsSet(name) {
			*dst = c.String(name)
		}
	}
	if c.IsSet("image-pull") {
		spec.ImagePull = structs.PullPolicy(c.String("image-pull"))
	}
	for name, dst := range map[string]*int{"nodes": &spec.Nodes, "gpus": &spec.GPUs, "cpus": &spec.CPUs,
		"priority": &spec.Priority, "restarts": &spec.Restarts} {
		if c.IsSet(name) {
			*dst = c.Int(name)
		}
	}
	for _, err := range []error{
		decodeFlag(c, "gpu-mem", &spec.GPUMemoryMinMiB, structs.ParseSizeMiB),
		decodeFlag(c, "mem", &spec.MemoryMiB, structs.ParseSizeMiB),
		decodeFlag(c, "time-limit", &spec.TimeLimit, structs.ParseDuration),
		decodeFlag(c, "signal", &spec.Signal, structs.ParseTimeSignal),
		decodeFlag(c, "preempt-grace", &spec.PreemptGrace, structs.ParseDuration),
		decodeFlag(c, "array", &spec.Array, structs.ParseArraySpec),
		decodeFlag(c, "shm-size", &spec.ShmSizeMiB, structs.ParseSizeMiB),
	} {
		if err != nil {
			return req, err
		}
	}
	if c.IsSet("array") && c.Bool("wait") {
		return req, usagef(c, "--wait waits for one job; it cannot be used with --array")
	}
	env, err := envFlag(c, "env")
	if err != nil {
		return req, err
	}
	spec.Env = merged(spec.Env, env)
	secretEnv, err := envFlag(c, "secret-env")
	if err != nil {
		return req, err
	}
	spec.SecretEnv = merged(spec.SecretEnv, secretEnv)
	for name, dst := range map[string]*bool{"spread": &spec.Spread, "preemptible": &spec.Preemptible} {
		if c.IsSet(name) {
			*dst = c.Bool(name)
		}
	}
	after, err := afterFlag(c)
	if err != nil {
		return req, err
	}
	spec.After = append(spec.After, after...)
	constraints, err := constraintFlag(c)
	if err != nil {
		return req, err
	}
	spec.Constraints = merged(spec.Constraints, constraints)
	mounts, err := mountFlag(c)
	if err != nil {
		return req, err
	}
	spec.Mounts = append(spec.Mounts, mounts...)
	// A container starts in its image's working directory: the caller's
	// is a path on another machine.
	if spec.Workdir == "" && spec.Image == "" {
		if spec.Workdir, err = os.Getwd(); err != nil {
			return req, fmt.Errorf("find the current directory for --workdir: %w", err)
		}
	}
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

// merged returns base with over's entries added, over winning.
func merged(base, over map[string]string) map[string]string {
	if len(over) == 0 {
		return base
	}
	if base == nil {
		base = make(map[string]string, len(over))
	}
	maps.Copy(base, over)
	return base
}

// flagError renames the field of a *structs.FieldError to the flag that sets it.
func flagError(err error) error {
	var fe *structs.FieldError
	if errors.As(err, &fe) {
		if name, ok := specFlags[fe.Field]; ok {
			return &structs.FieldError{Field: name, Msg: fe.Msg}
		}
	}
	return err
}

// envFlag collects --env K=V, and --env K copied from the caller, or the
// same of --secret-env: the flag called name.
func envFlag(c *ucli.Context, name string) (map[string]string, error) {
	list := c.Generic(name).(*listValue)
	if len(*list) == 0 {
		return nil, nil
	}
	env := make(map[string]string, len(*list))
	for _, kv := range *list {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			if v, ok = os.LookupEnv(k); !ok {
				return nil, fmt.Errorf("--%s %s: not set in your environment; give a value with --%s %s=VALUE", name, k, name, k)
			}
		}
		env[k] = v
	}
	return env, nil
}

// constraintFlag collects --constraint K=V.
func constraintFlag(c *ucli.Context) (map[string]string, error) {
	list := c.Generic("constraint").(*listValue)
	if len(*list) == 0 {
		return nil, nil
	}
	m := make(map[string]string, len(*list))
	for _, kv := range *list {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, usagef(c, "--constraint %q: want KEY=VALUE", kv)
		}
		m[k] = v
	}
	return m, nil
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

// mountFlag collects --mount SRC:DST[:ro].
func mountFlag(c *ucli.Context) ([]structs.Mount, error) {
	var mounts []structs.Mount
	for _, v := range *c.Generic("mount").(*listValue) {
		m, err := structs.ParseMount(v)
		if err != nil {
			return nil, usagef(c, "--mount: %v", err)
		}
		mounts = append(mounts, m)
	}
	return mounts, nil
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

// waitJob polls a job until it ends and says how it ended on ErrWriter,
// and, while its allocations pull their image, how far they got. It fails
// unless the job succeeded.
func waitJob(c *ucli.Context, cl *api.Client, id string) error {
	tick := time.NewTicker(waitInterval)
	defer tick.Stop()
	pulls := newPullReporter(c.App.ErrWriter)
	for {
		d, err := cl.Job(c.Context, id)
		if err != nil {
			return err
		}
		pulls.report(d, time.Now())
		if j := d.Job; j.State.Terminal() {
			line := fmt.Sprintf("job %s %s", structs.ShortID(j.ID), j.State)
			if j.Reason != "" {
				line += ": " + j.Reason
			}
			fmt.Fprintln(c.App.ErrWriter, printable(line))
			if j.State == structs.JobSucceeded {
				return nil
			}
			return exitStatus(exitError)
		}
		select {
		case <-c.Context.Done():
			return c.Context.Err()
		case <-tick.C:
		}
	}
}

// listValue is a repeatable flag that keeps every value as given: no
// splitting on commas, no trimming.
type listValue []string

func (l *listValue) Set(s string) error {
	*l = append(*l, s)
	return nil
}

func (l *listValue) String() string { return strings.Join(*l, " ") }
