package runner

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/skein-dev/skein/structs"
)

// secretEnv are the variables that hold the agent's secrets (the API
// token, a join token, the gossip key); they never reach a job or a
// supervisor.
var secretEnv = []string{"SKEIN_TOKEN", "SKEIN_JOIN_TOKEN", "SKEIN_ENCRYPT"}

// ownEnv are the variables skein sets for every job. Inherited or requested
// copies are dropped so that skein's values are the only ones.
var ownEnv = append([]string{
	"CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "SKEIN_JOB_ID", "SKEIN_ALLOC_ID",
	"SKEIN_NODE", "SKEIN_RANK", "SKEIN_ATTEMPT", "SKEIN_JOB_NAME",
	"SKEIN_ARRAY_ID", "SKEIN_ARRAY_INDEX", "SKEIN_TIME_LIMIT", "SKEIN_TIME_SIGNAL", "SKEIN_HEAD_NODE", SimGPUUtilEnv,
}, structs.LaunchEnv...)

// SimGPUUtilEnv names the file a process job on simulated GPUs may write
// what it does with them to, for the node's telemetry (gpu.SimTelemetry
// says the format: "UTIL [MEM_MIB]", like "75" or "75 40960"). Only such a
// job gets it.
const SimGPUUtilEnv = "SKEIN_SIM_GPU_UTIL_FILE"

// BuildEnv returns the complete environment of a task's job: base (the
// job's minimal environment, jobBaseEnv or containerBaseEnv), then the
// job spec's env and secret_env (each sorted by name), then skein's own
// variables, which always win. Each name appears once; the agent's secrets (secretEnv)
// never appear.
//
// skein sets CUDA_VISIBLE_DEVICES to the allocated GPU UUIDs joined by commas
// ("" for a job without GPUs), CUDA_DEVICE_ORDER=PCI_BUS_ID, SKEIN_JOB_ID,
// SKEIN_ALLOC_ID, SKEIN_NODE, SKEIN_HEAD_NODE (rank 0's node), SKEIN_RANK, SKEIN_ATTEMPT and, when the job has
// a name, SKEIN_JOB_NAME. A job with a time limit sees it in whole seconds
// in SKEIN_TIME_LIMIT, and its --signal as SKEIN_TIME_SIGNAL (USR1@1m0s).
// With the task's peers known it also sets the torchrun variables, and
// always the Slurm ones (setSlurmEnv; both are structs.LaunchEnv); a service replica's task gets its
// port in the variable Task.PortEnv names. A process task on simulated
// GPUs gets SimGPUUtilEnv.
func BuildEnv(t Task, base []string) []string {
	env := newEnvList(len(base) + len(t.Job.Spec.Env) + len(ownEnv))
	for _, kv := range base {
		k, v, ok := strings.Cut(kv, "=")
		if ok && k != "" && !skeinOwned(k) {
			env.set(k, v)
		}
	}
	for _, vars := range []map[string]string{t.Job.Spec.Env, t.Job.Spec.SecretEnv} {
		for _, k := range slices.Sorted(maps.Keys(vars)) {
			if k != "" && !strings.Contains(k, "=") && !skeinOwned(k) {
				env.set(k, vars[k])
			}
		}
	}
	jobID := t.Alloc.JobID
	if jobID == "" {
		jobID = t.Job.ID
	}
	env.set("CUDA_VISIBLE_DEVICES", strings.Join(t.Alloc.GPUs, ","))
	env.set("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
	env.set("SKEIN_JOB_ID", jobID)
	env.set("SKEIN_ALLOC_ID", t.Alloc.ID)
	env.set("SKEIN_NODE", t.NodeName)
	head := t.NodeName
	if len(t.Peers) > 0 {
		head = t.Peers[0].Node
	}
	env.set("SKEIN_HEAD_NODE", head)
	env.set("SKEIN_RANK", strconv.Itoa(t.Alloc.Rank))
	env.set("SKEIN_ATTEMPT", strconv.Itoa(t.Alloc.Attempt))
	if t.Job.Spec.Name != "" {
		env.set("SKEIN_JOB_NAME", t.Job.Spec.Name)
	}
	if limit := t.Job.Spec.TimeLimit; limit > 0 {
		env.set("SKEIN_TIME_LIMIT", strconv.FormatInt(int64(time.Duration(limit).Seconds()), 10))
		if sig := t.Job.Spec.Signal; sig != nil {
			env.set("SKEIN_TIME_SIGNAL", sig.String())
		}
	}
	if len(t.Peers) > 0 {
		setLaunchEnv(env, t)
	}
	if t.PortEnv != "" && !skeinOwned(t.PortEnv) {
		env.set(t.PortEnv, strconv.Itoa(t.MasterPort))
	}
	if t.SimGPUUtilFile != "" {
		env.set(SimGPUUtilEnv, t.SimGPUUtilFile)
	}
	if t.Job.ArrayID != "" {
		env.set("SKEIN_ARRAY_ID", t.Job.ArrayID)
		env.set("SKEIN_ARRAY_INDEX", strconv.Itoa(t.Job.ArrayIndex))
	}
	setSlurmEnv(env, t)
	return env.list
}

// setLaunchEnv sets what torchrun needs without glue: rank 0's node as
// the rendezvous host, one task per node.
func setLaunchEnv(env *envList, t Task) {
	spec := t.Job.Spec
	perNode := max(spec.GPUs, 1)
	nodes := strconv.Itoa(len(t.Peers))
	env.set("MASTER_ADDR", t.Peers[0].Addr)
	env.set("MASTER_PORT", strconv.Itoa(t.MasterPort))
	env.set("NNODES", nodes)
	env.set("NODE_RANK", strconv.Itoa(t.Alloc.Rank))
	env.set("GPUS_PER_NODE", strconv.Itoa(spec.GPUs))
	env.set("WORLD_SIZE", strconv.Itoa(len(t.Peers)*perNode))
}

func skeinOwned(name string) bool {
	return slices.Contains(secretEnv, name) || slices.Contains(ownEnv, name)
}

// withoutSecrets returns env without the agent's secrets.
func withoutSecrets(env []string) []string {
	return slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		return slices.Contains(secretEnv, name)
	})
}

// JobPath is the PATH a job starts with; its --env may set another.
const JobPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// DefaultJobEnvAllow are the variables of the agent's environment a job
// gets unless --job-env-allow says otherwise: the locale and the time zone.
var DefaultJobEnvAllow = []string{"LANG", "LANGUAGE", "LC_*", "TZ"}

// CheckEnvAllow checks an allow-list of the agent's variables for jobs:
// each entry is a variable name (letters, digits and '_', not starting
// with a digit) or such a name's prefix followed by '*', like LC_*.
func CheckEnvAllow(allow []string) error {
	for _, pat := range allow {
		name, prefix := strings.CutSuffix(pat, "*")
		if !structs.ValidEnvName(name) {
			if prefix && name == "" {
				return fmt.Errorf("%w %q: a bare * would pass the agent's whole environment; name the variables or their prefix, like LC_*", ErrEnvAllow, pat)
			}
			return fmt.Errorf("%w %q: want a variable name or a prefix ending in *, like LC_*", ErrEnvAllow, pat)
		}
	}
	return nil
}

// allowed reports whether the allow-list passes name.
func allowed(allow []string, name string) bool {
	for _, pat := range allow {
		if prefix, ok := strings.CutSuffix(pat, "*"); ok && strings.HasPrefix(name, prefix) || pat == name {
			return true
		}
	}
	return false
}

// jobBaseEnv is the environment a process job of account a starts from,
// never the agent's own: PATH (JobPath), HOME, USER, LOGNAME and SHELL of
// the account, then the variables of agentEnv the allow-list passes (the
// agent's secrets never).
func jobBaseEnv(a Account, allow, agentEnv []string) []string {
	env := []string{"PATH=" + JobPath, "HOME=" + a.Home, "USER=" + a.Name, "LOGNAME=" + a.Name, "SHELL=" + a.Shell}
	return appendAllowed(env, allow, agentEnv)
}

// containerBaseEnv is the environment a container job of account a
// starts from: the account's USER and LOGNAME (a uid the image has no
// account for still has a name, for tools that ask), then what the
// allow-list passes of agentEnv. The host's PATH, HOME and SHELL mean
// nothing in the image: the image's own stay.
func containerBaseEnv(a Account, allow, agentEnv []string) []string {
	return appendAllowed([]string{"USER=" + a.Name, "LOGNAME=" + a.Name}, allow, agentEnv)
}

// appendAllowed appends the variables of agentEnv the allow-list passes
// to env; the agent's secrets never pass.
func appendAllowed(env, allow, agentEnv []string) []string {
	for _, kv := range withoutSecrets(agentEnv) {
		if name, _, ok := strings.Cut(kv, "="); ok && allowed(allow, name) {
			env = append(env, kv)
		}
	}
	return env
}

// envList is an ordered environment in which a later value replaces an
// earlier one in place.
type envList struct {
	list []string
	at   map[string]int
}

func newEnvList(n int) *envList {
	return &envList{list: make([]string, 0, n), at: make(map[string]int, n)}
}

func (e *envList) set(k, v string) {
	if i, ok := e.at[k]; ok {
		e.list[i] = k + "=" + v
		return
	}
	e.at[k] = len(e.list)
	e.list = append(e.list, k+"="+v)
}
