package cli

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"strings"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/skein-dev/skein/slurm"
	"github.com/skein-dev/skein/structs"
)

// The flags that describe what a job runs and what it needs, shared by
// `skein submit` (a job) and `skein serve` (each replica of a service):
// jobSpecFlags declares them, and jobSpecFromFlags sets a spec from them.

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
	"pids_max":           "--pids-max",
	"priority":           "--priority",
	"restarts":           "--restarts",
	"time_limit":         "--time-limit",
	"preempt_grace":      "--preempt-grace",
	"signal":             "--signal",
	"constraints":        "--constraint",
	"singleton":          "--singleton",
	"image":              "--image",
	"image_pull":         "--image-pull",
	"mounts":             "--mount",
	"shm_size_mib":       "--shm-size",
	"caps":               "--allow-cap",
	"request_id":         "--request-id",
	"account":            "--account",
	"qos":                "--qos",
}

// jobSpecFlags are the flags jobSpecFromFlags reads. In their help, what
// names what runs ("the job", "each replica"), and show is the command
// that shows secret values.
func jobSpecFlags(what, show string) []ucli.Flag {
	return []ucli.Flag{
		&ucli.IntFlag{Name: "gpus", Usage: "GPUs per node"},
		&ucli.StringFlag{Name: "gpu-model", Usage: "only GPUs of this model"},
		&ucli.StringFlag{Name: "gpu-mem", Usage: "least memory per GPU (SIZE: 512M, 80G)"},
		&ucli.IntFlag{Name: "cpus", Usage: "CPUs per node"},
		&ucli.StringFlag{Name: "mem", Usage: "memory per node (SIZE: 512M, 80G), swap included: a hard limit, " + what + " is killed beyond it"},
		&ucli.IntFlag{Name: "pids-max", Usage: "most processes and threads " + what + " may hold per node (`N`, at most the node's --job-pids-max, its default)"},
		&ucli.IntFlag{Name: "priority", Usage: "higher runs first (-1000..1000); with fair share, it orders only your own jobs"},
		&ucli.StringFlag{Name: "account", Usage: "charge " + what + "'s use to this account, one of yours (default: your first account)"},
		&ucli.StringFlag{Name: "qos", Usage: "run " + what + " under this QoS: its priority, limits and preemptions (skein qos list)"},
		&ucli.GenericFlag{Name: "env", Usage: "set K=V in " + what + "'s environment, or copy K from yours (repeatable)", Value: &listValue{}},
		&ucli.GenericFlag{Name: "secret-env", Usage: "like --env, for a secret: " + what + " gets it, but its value is returned only to its owner and operators " +
			"(" + show + " --show-secrets) and never logged; prefer --secret-env K, which copies it from your environment, to K=V on a command line others can see (repeatable)", Value: &listValue{}},
		&ucli.GenericFlag{Name: "constraint", Usage: "only nodes with label K=V (repeatable)", Value: &listValue{}},
		&ucli.StringFlag{Name: "partition", Usage: "only nodes of this `PARTITION` (skein agent --partition; default: any node)"},
		&ucli.StringFlag{Name: "nodelist", Usage: "exactly these `NODES`, by name (comma-separated, or a host list: gpu[01-04]); --nodes defaults to their number"},
		&ucli.StringFlag{Name: "exclude", Usage: "never these `NODES` (comma-separated, or a host list)"},
		&ucli.BoolFlag{Name: "hold", Usage: "submit held: it waits until released (scontrol release)"},
		&ucli.StringFlag{Name: "mail-type", Usage: "mail for these `EVENTS` (BEGIN,END,FAIL,REQUEUE,TIME_LIMIT,INVALID_DEPEND,ARRAY_TASKS,ALL), sent by the agents' --mail-prog"},
		&ucli.StringFlag{Name: "mail-user", Usage: "whom the mail goes to (`ADDRESS`; default: your user)"},
		&ucli.StringFlag{Name: "begin", Usage: "start no earlier than `TIME` (2030-01-02T03:04, 16:00, now+1hours, tomorrow, as sbatch --begin)"},
		&ucli.StringFlag{Name: "deadline", Usage: "cancel the job while it waits once it could no longer end by `TIME` (its time limit counted)"},
		&ucli.BoolFlag{Name: "spread", Usage: "place on the emptiest nodes instead of packing the fullest"},
		&ucli.BoolFlag{Name: "exclusive", Usage: "have the nodes to itself: only on nodes that run no other job, and none joins them while it runs"},
		&ucli.BoolFlag{Name: "preemptible", Usage: "may be stopped (SIGTERM, grace, SIGKILL) and requeued for higher-priority work"},
		&ucli.StringFlag{Name: "preempt-grace", Usage: "time between SIGTERM and SIGKILL when preempted (default 30s, at most 10m)"},
		&ucli.StringFlag{Name: "image", Usage: "run " + what + " in a container of this `IMAGE` on the node's container engine; CMD is the container's command"},
		&ucli.StringFlag{Name: "image-pull", Usage: "when the node pulls the image: if-not-present (the default), always or never"},
		&ucli.GenericFlag{Name: "mount", Usage: "bind-mount the node's directory SRC at DST in the container, read-only with :ro; " +
			"SRC must lie under a directory the node allows (skein agent --allow-mount) (`SRC:DST[:ro]`, repeatable)", Value: &listValue{}},
		&ucli.StringFlag{Name: "shm-size", Usage: "size of the container's /dev/shm (SIZE: 512M, 64G; default: the node's, sized from its memory)"},
		&ucli.GenericFlag{Name: "allow-cap", Usage: "give the container the Linux capability `NAME` (NET_BIND_SERVICE, with or without CAP_), " +
			"which it otherwise lacks like every other; only nodes that allow it run " + what + " (skein agent --allow-cap) (repeatable)", Value: &listValue{}},
		&ucli.StringFlag{Name: "workdir", Usage: "directory to run in (default: the current directory; with --image, the image's)"},
	}
}

// jobSpecFromFlags sets spec, read from a file or empty, from the
// arguments (the command) and the flags of jobSpecFlags, which override
// it; a spec without an image and a workdir gets the current directory.
func jobSpecFromFlags(c *ucli.Context, spec *structs.JobSpec) error {
	if c.NArg() > 0 {
		spec.Command = c.Args().Slice()
	}
	if len(spec.Command) == 0 {
		return usagef(c, "missing command: give the program and its arguments after the flags")
	}
	for name, dst := range map[string]*string{"workdir": &spec.Workdir, "gpu-model": &spec.GPUModel, "image": &spec.Image,
		"account": &spec.Account, "qos": &spec.QoS,
		"partition": &spec.Partition, "mail-user": &spec.MailUser} {
		if c.IsSet(name) {
			*dst = c.String(name)
		}
	}
	if c.IsSet("image-pull") {
		spec.ImagePull = structs.PullPolicy(c.String("image-pull"))
	}
	for name, dst := range map[string]*int{"gpus": &spec.GPUs, "cpus": &spec.CPUs, "priority": &spec.Priority} {
		if c.IsSet(name) {
			*dst = c.Int(name)
		}
	}
	if c.IsSet("pids-max") {
		spec.PidsMax = int64(c.Int("pids-max"))
	}
	for _, err := range []error{
		decodeFlag(c, "gpu-mem", &spec.GPUMemoryMinMiB, structs.ParseSizeMiB),
		decodeFlag(c, "mem", &spec.MemoryMiB, structs.ParseSizeMiB),
		memNotZero(c, spec.MemoryMiB),
		decodeFlag(c, "preempt-grace", &spec.PreemptGrace, structs.ParseDuration),
		decodeFlag(c, "shm-size", &spec.ShmSizeMiB, structs.ParseSizeMiB),
	} {
		if err != nil {
			return err
		}
	}
	env, err := envFlag(c, "env")
	if err != nil {
		return err
	}
	spec.Env = merged(spec.Env, env)
	secretEnv, err := envFlag(c, "secret-env")
	if err != nil {
		return err
	}
	spec.SecretEnv = merged(spec.SecretEnv, secretEnv)
	for name, dst := range map[string]*[]string{"nodelist": &spec.NodeList, "exclude": &spec.ExcludeNodes} {
		if c.IsSet(name) {
			names, err := structs.ExpandHostList(c.String(name))
			if err != nil {
				return usagef(c, "--%s: %v", name, err)
			}
			*dst = names
		}
	}
	for name, dst := range map[string]*time.Time{"begin": &spec.Begin, "deadline": &spec.Deadline} {
		if c.IsSet(name) {
			t, err := slurm.ParseDate(c.String(name), time.Now())
			if err != nil {
				return usagef(c, "--%s: %v", name, err)
			}
			*dst = t.UTC()
		}
	}
	if c.IsSet("mail-type") {
		spec.MailType = splitList(strings.ToUpper(c.String("mail-type")))
	}
	if c.IsSet("nodelist") && !c.IsSet("nodes") && spec.Nodes == 0 {
		spec.Nodes = len(spec.NodeList)
	}
	// singleton is submit's flag only: a replica waits for no job.
	for name, dst := range map[string]*bool{"spread": &spec.Spread, "preemptible": &spec.Preemptible,
		"exclusive": &spec.Exclusive, "singleton": &spec.Singleton, "hold": &spec.Hold} {
		if c.IsSet(name) {
			*dst = c.Bool(name)
		}
	}
	constraints, err := constraintFlag(c)
	if err != nil {
		return err
	}
	spec.Constraints = merged(spec.Constraints, constraints)
	mounts, err := mountFlag(c)
	if err != nil {
		return err
	}
	spec.Mounts = append(spec.Mounts, mounts...)
	caps, err := capFlag(c)
	if err != nil {
		return err
	}
	spec.Caps = append(spec.Caps, caps...)
	// A container starts in its image's working directory: the caller's
	// is a path on another machine.
	if spec.Workdir == "" && spec.Image == "" {
		if spec.Workdir, err = os.Getwd(); err != nil {
			return fmt.Errorf("find the current directory for --workdir: %w", err)
		}
	}
	return nil
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

// flagAdvice tells which flags set a request's field that an agent's
// answer names (api.Error.Field: a field that does not validate there,
// or that no node could ever give); "" where the CLI knows none.
func flagAdvice(field string) string {
	switch field {
	case "mounts":
		return "a job asks with --mount; a node allows directories with skein agent --allow-mount"
	case "caps":
		return "a job asks with --allow-cap; a node allows capabilities with skein agent --allow-cap"
	}
	if name, ok := serviceFlags[field]; ok {
		return "set with " + name
	}
	if name, ok := specFlags[strings.TrimPrefix(field, "job.")]; ok {
		return "set with " + name
	}
	return ""
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

// capFlag collects --allow-cap NAME, each spelled as the API spells it.
func capFlag(c *ucli.Context) ([]string, error) {
	var caps []string
	for _, v := range *c.Generic("allow-cap").(*listValue) {
		name, err := structs.ParseCap(v)
		if err != nil {
			return nil, usagef(c, "--allow-cap: %v", err)
		}
		caps = append(caps, name)
	}
	return caps, nil
}

// listValue is a repeatable flag that keeps every value as given: no
// splitting on commas, no trimming.
type listValue []string

func (l *listValue) Set(s string) error {
	*l = append(*l, s)
	return nil
}

func (l *listValue) String() string { return strings.Join(*l, " ") }

// memNotZero refuses --mem 0: a limit of no memory kills the job at its
// first page. Without --mem a job has no limit of its own.
func memNotZero(c *ucli.Context, mem structs.SizeMiB) error {
	if c.IsSet("mem") && mem == 0 {
		return usagef(c, "--mem %s: below the minimum 1M (leave --mem out for no limit of the job's own)", c.String("mem"))
	}
	return nil
}
