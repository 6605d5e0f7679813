package structs

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Limits on what a job may ask for. They bound what a client can make the
// cluster store and do, not what hardware can offer.
const (
	MaxNameLen      = 128
	MaxArgs         = 4096
	MaxCommandBytes = 256 << 10
	MaxEnvVars      = 1024
	MaxNodes        = 1024
	MaxGPUsPerNode  = 64
	MaxCPUs         = 4096
	MaxMemoryMiB    = 64 << 20 // 64 TiB
	// MinPidsMax and MaxPidsMax bound a process limit, a job's or a
	// node's: a job needs a few processes of its own, and the kernel
	// counts no more than 2^22.
	MinPidsMax      = 8
	MaxPidsMax      = 1 << 22
	MaxPriority     = 1000
	MaxRestarts     = 1000
	MaxRequestIDLen = 128
	MaxLabels       = 64
	MaxDependencies = 64
	MaxArrayTasks   = 10000
	MaxNodeNames    = 1024 // in a nodelist or an exclude list
	// MaxPreemptGrace bounds a preemptible job's warning time: the
	// preempting job waits this long at most for its GPUs.
	MaxPreemptGrace = Duration(10 * time.Minute)
)

// DefaultPreemptGrace is the PreemptGrace of a preemptible job that gives none.
const DefaultPreemptGrace = Duration(30 * time.Second)

// FieldError names the field of a request that is wrong and why.
type FieldError struct {
	Field string
	Msg   string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Msg }

func fieldErr(field, format string, args ...any) error {
	return &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// ValidEnvName reports whether s may name an environment variable: a
// letter or '_', then letters, digits and '_'. Every check of a name a
// job, a script or the agent's allow-list gives uses it.
func ValidEnvName(s string) bool {
	for i, c := range s {
		ok := c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || i > 0 && c >= '0' && c <= '9'
		if !ok {
			return false
		}
	}
	return s != ""
}

// reservedEnv are variables skein sets for every job; a spec may not set them.
var reservedEnv = map[string]bool{
	"CUDA_VISIBLE_DEVICES": true,
	"CUDA_DEVICE_ORDER":    true,
}

// LaunchEnv are the torchrun and Slurm variables skein sets for every job
// so multi-node frameworks need no glue; a spec may not set them either.
var LaunchEnv = []string{
	"MASTER_ADDR", "MASTER_PORT", "NNODES", "NODE_RANK", "GPUS_PER_NODE", "WORLD_SIZE",
	"SLURM_JOB_ID", "SLURM_JOBID", "SLURM_JOB_NAME", "SLURM_NNODES", "SLURM_JOB_NUM_NODES", "SLURM_NODEID",
	"SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS", "SLURM_NPROCS", "SLURM_NTASKS_PER_NODE",
	"SLURM_TASKS_PER_NODE", "SLURM_JOB_NODELIST", "SLURM_NODELIST", "SLURMD_NODENAME",
	"SLURM_TOPOLOGY_ADDR", "SLURM_TOPOLOGY_ADDR_PATTERN", "SLURM_JOB_PARTITION",
	"SLURM_GPUS_ON_NODE", "SLURM_GPUS_PER_NODE", "SLURM_GPUS", "SLURM_JOB_GPUS",
	"SLURM_CPUS_ON_NODE", "SLURM_JOB_CPUS_PER_NODE", "SLURM_MEM_PER_NODE", "SLURM_JOB_USER",
	"SLURM_RESTART_COUNT", "SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_MIN",
	"SLURM_ARRAY_TASK_MAX", "SLURM_ARRAY_TASK_COUNT", "SLURM_ARRAY_TASK_STEP",
}

// ReservedEnv reports whether a job spec may not set the variable.
func ReservedEnv(name string) bool {
	return reservedEnv[name] || strings.HasPrefix(name, "SKEIN_") || slices.Contains(LaunchEnv, name)
}

// Normalize fills defaults a user may leave out and spells a signal name
// and capabilities the one way Validate accepts ("sigusr1" becomes
// "USR1", "cap_net_raw" "NET_RAW").
func (s *JobSpec) Normalize() {
	if s.Nodes == 0 {
		s.Nodes = 1
	}
	if s.Preemptible && s.PreemptGrace == 0 {
		s.PreemptGrace = DefaultPreemptGrace
	}
	if s.Signal != nil {
		s.Signal.Name = strings.TrimPrefix(strings.ToUpper(s.Signal.Name), "SIG")
	}
	normalizeCaps(s.Caps)
}

// Validate checks a normalized spec against the limits above. The error is a
// *FieldError naming the first wrong field.
func (s *JobSpec) Validate() error {
	if len(s.Name) > MaxNameLen {
		return fieldErr("name", "longer than %d characters", MaxNameLen)
	}
	if len(s.Command) == 0 || s.Command[0] == "" {
		return fieldErr("command", "empty: give the program and its arguments after --")
	}
	if err := validateCommand("command", s.Command); err != nil {
		return err
	}
	if n := len(s.Env) + len(s.SecretEnv); n > MaxEnvVars {
		return fieldErr("env", "%d variables with secret_env, more than the limit of %d", n, MaxEnvVars)
	}
	if err := validateEnv("env", s.Env); err != nil {
		return err
	}
	if err := validateEnv("secret_env", s.SecretEnv); err != nil {
		return err
	}
	for k := range s.SecretEnv {
		if _, ok := s.Env[k]; ok {
			return fieldErr("secret_env", "%s is in env too; give it once", k)
		}
	}
	if s.Nodes < 1 || s.Nodes > MaxNodes {
		return fieldErr("nodes", "%d is out of range 1..%d", s.Nodes, MaxNodes)
	}
	if s.GPUs < 0 || s.GPUs > MaxGPUsPerNode {
		return fieldErr("gpus", "%d is out of range 0..%d", s.GPUs, MaxGPUsPerNode)
	}
	if s.GPUMemoryMinMiB < 0 || s.GPUMemoryMinMiB > MaxMemoryMiB {
		return fieldErr("gpu_memory_min_mib", "%d is out of range 0..%d", s.GPUMemoryMinMiB, MaxMemoryMiB)
	}
	if (s.GPUModel != "" || s.GPUMemoryMinMiB > 0) && s.GPUs == 0 {
		return fieldErr("gpus", "0, but a GPU model or memory was asked for")
	}
	if s.CPUs < 0 || s.CPUs > MaxCPUs {
		return fieldErr("cpus", "%d is out of range 0..%d", s.CPUs, MaxCPUs)
	}
	if s.MemoryMiB < 0 || s.MemoryMiB > MaxMemoryMiB {
		return fieldErr("memory_mib", "%d is out of range 0..%d", s.MemoryMiB, MaxMemoryMiB)
	}
	if s.PidsMax != 0 && (s.PidsMax < MinPidsMax || s.PidsMax > MaxPidsMax) {
		return fieldErr("pids_max", "%d is out of range %d..%d", s.PidsMax, MinPidsMax, MaxPidsMax)
	}
	if s.Priority < -MaxPriority || s.Priority > MaxPriority {
		return fieldErr("priority", "%d is out of range -%d..%d", s.Priority, MaxPriority, MaxPriority)
	}
	if s.Restarts < 0 || s.Restarts > MaxRestarts {
		return fieldErr("restarts", "%d is out of range 0..%d", s.Restarts, MaxRestarts)
	}
	if s.Account != "" {
		if err := ValidateAccountName("account", s.Account); err != nil {
			return err
		}
	}
	if s.QoS != "" {
		if err := ValidateAccountName("qos", s.QoS); err != nil {
			return err
		}
	}
	if s.TimeLimit < 0 {
		return fieldErr("time_limit", "must not be negative")
	}
	if s.PreemptGrace < 0 || s.PreemptGrace > MaxPreemptGrace {
		return fieldErr("preempt_grace", "%s is out of range 0s..%s", s.PreemptGrace, MaxPreemptGrace)
	}
	if s.PreemptGrace > 0 && !s.Preemptible {
		return fieldErr("preempt_grace", "set, but the job is not preemptible")
	}
	if err := s.validateSignal(); err != nil {
		return err
	}
	if err := s.validateContainer(); err != nil {
		return err
	}
	if len(s.Constraints) > MaxLabels {
		return fieldErr("constraints", "%d constraints, more than the limit of %d", len(s.Constraints), MaxLabels)
	}
	for k := range s.Constraints {
		if k == "" {
			return fieldErr("constraints", "empty label name")
		}
	}
	for _, f := range []struct {
		name  string
		nodes []string
	}{{"nodelist", s.NodeList}, {"exclude", s.ExcludeNodes}} {
		if len(f.nodes) > MaxNodeNames {
			return fieldErr(f.name, "%d nodes, more than the limit of %d", len(f.nodes), MaxNodeNames)
		}
		if slices.Contains(f.nodes, "") {
			return fieldErr(f.name, "empty node name")
		}
	}
	if len(s.NodeList) > 0 && s.Nodes != len(s.NodeList) {
		return fieldErr("nodelist", "%d nodes named for a job of %d: a job runs on exactly the nodes its nodelist names", len(s.NodeList), s.Nodes)
	}
	if err := s.validateMail(); err != nil {
		return err
	}
	if !s.Deadline.IsZero() && s.Deadline.Before(s.Begin) {
		return fieldErr("deadline", "%s is before the begin time %s", s.Deadline.Format(time.RFC3339), s.Begin.Format(time.RFC3339))
	}
	if s.Partition != "" {
		if err := ValidatePartitionName(s.Partition); err != nil {
			return fieldErr("partition", "%v", err)
		}
	}
	if len(s.After) > MaxDependencies {
		return fieldErr("after", "%d dependencies, more than the limit of %d", len(s.After), MaxDependencies)
	}
	if a := s.Array; a != nil {
		if a.Start < 0 || a.End < a.Start {
			return fieldErr("array", "%d-%d: want START-END with 0 <= START <= END", a.Start, a.End)
		}
		if a.Len() > MaxArrayTasks {
			return fieldErr("array", "%d tasks, more than the limit of %d", a.Len(), MaxArrayTasks)
		}
		if a.MaxRunning < 0 {
			return fieldErr("array", "at most %d running: must not be negative", a.MaxRunning)
		}
	}
	for _, d := range s.After {
		if d.JobID == "" {
			return fieldErr("after", "empty job ID")
		}
		if !slices.Contains(DependencyConditions, d.Condition) {
			return fieldErr("after", "condition %q for job %s: want ok, any or notok", d.Condition, ShortID(d.JobID))
		}
	}
	if s.Singleton && s.Name == "" {
		return fieldErr("singleton", "set, but the job has no name: singleton jobs of one name and owner run one at a time")
	}
	return nil
}

// ValidateRequestID checks a client's idempotency key.
func ValidateRequestID(id string) error {
	if len(id) > MaxRequestIDLen {
		return fieldErr("request_id", "longer than %d characters", MaxRequestIDLen)
	}
	return nil
}

// validateCommand checks a command's size against MaxArgs and
// MaxCommandBytes, and that no argument holds a NUL byte.
func validateCommand(field string, cmd []string) error {
	if len(cmd) > MaxArgs {
		return fieldErr(field, "%d arguments, more than the limit of %d", len(cmd), MaxArgs)
	}
	n := 0
	for _, a := range cmd {
		n += len(a)
		if strings.IndexByte(a, 0) >= 0 {
			return fieldErr(field, "argument contains a NUL byte")
		}
	}
	if n > MaxCommandBytes {
		return fieldErr(field, "%d bytes, more than the limit of %d", n, MaxCommandBytes)
	}
	return nil
}

// validateEnv checks the names and values of one environment map.
func validateEnv(field string, env map[string]string) error {
	for k, v := range env {
		if !ValidEnvName(k) {
			return fieldErr(field, "invalid variable name %q", k)
		}
		if ReservedEnv(k) {
			return fieldErr(field, "%s is set by skein and cannot be overridden", k)
		}
		if strings.IndexByte(v, 0) >= 0 {
			return fieldErr(field, "value of %s contains a NUL byte", k)
		}
	}
	return nil
}
