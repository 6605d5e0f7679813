package structs

import (
	"fmt"
	"strings"
	"time"
)

// NodeStatus is the scheduling status of a node.
type NodeStatus string

// Node statuses.
const (
	NodeReady    NodeStatus = "ready"
	NodeDown     NodeStatus = "down"
	NodeDraining NodeStatus = "draining"
	NodeLeft     NodeStatus = "left"
)

// NodeRole is a node's place in the Raft group. It is not stored in the FSM;
// the serving agent fills it in from the Raft configuration when it answers.
type NodeRole string

// Node roles: the leader, the other voters and the non-voters (standbys)
// are servers, in the Raft configuration and holding the state; a worker
// is outside it and learns its work by watching a server.
const (
	RoleLeader   NodeRole = "leader"
	RoleVoter    NodeRole = "voter"
	RoleNonvoter NodeRole = "nonvoter"
	RoleWorker   NodeRole = "worker"
)

// Addresses are the host:port pairs other nodes and clients use to reach a node.
type Addresses struct {
	HTTP   string `json:"http"`
	Raft   string `json:"raft"`
	Gossip string `json:"gossip,omitempty"`
}

// Node is one machine running a skein agent, as registered through Raft.
type Node struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Addresses Addresses `json:"addresses"`
	// Partitions are the partitions the node is in (skein agent
	// --partition); a node that declares none is in DefaultPartition.
	Partitions []string          `json:"partitions,omitempty"`
	Labels     map[string]string `json:"labels,omitempty"`
	CPUs       int               `json:"cpus"`
	MemoryMiB  int64             `json:"memory_mib"`
	GPUs       []GPU             `json:"gpus"`
	// GPUSource says where the GPU inventory came from: "nvml", "simulated"
	// or "none". Simulated GPUs are labelled as such everywhere they are shown.
	GPUSource string `json:"gpu_source"`
	// GPUDriver and CUDAVersion are what NVML reports ("550.54.15",
	// "12.4"); empty for other sources.
	GPUDriver   string `json:"gpu_driver,omitempty"`
	CUDAVersion string `json:"cuda_version,omitempty"`
	// LinkMbps is the speed of the network link the node is reached on
	// (0: unknown); rank 0 of a gang goes to the fastest (sched/rank.go).
	// MasterPorts is the range the leader picks a gang's MASTER_PORT from
	// when rank 0 runs here (zero: DefaultMasterPorts).
	LinkMbps    int       `json:"link_mbps,omitempty"`
	MasterPorts PortRange `json:"master_ports,omitzero"`
	// Containers is what the node's container engine answered, and what
	// the node lets containers mount; nil when the agent probes no engine
	// (--container-socket none).
	Containers *ContainerEngine `json:"containers,omitempty"`
	// Confinement says how the node holds jobs to their limits: "cgroup
	// v2" or "cgroup v1", each allocation in a control group of its own
	// (CPU, memory, processes, GPU devices), or "none" with why. A node
	// that cannot confine runs jobs only when its operator allowed it
	// (--allow-unconfined); else JobsRefused says why it takes none, and
	// placement passes it by. "" is a node from before jobs were confined.
	Confinement string `json:"confinement,omitempty"`
	JobsRefused string `json:"jobs_refused,omitempty"`
	// JobPidsMax is the most processes and threads one job may hold on
	// the node (--job-pids-max); a job may ask for fewer (JobSpec.PidsMax).
	JobPidsMax   int64      `json:"job_pids_max,omitempty"`
	Status       NodeStatus `json:"status"`
	StatusReason string     `json:"status_reason,omitempty"`
	// Drain, while set, keeps new work off the node and has the leader
	// move what runs there elsewhere (NodeDrain). It is apart from
	// Status, which says whether the node answers: a draining node that
	// dies is down and still draining.
	Drain        *NodeDrain `json:"drain,omitempty"`
	StatusAt     time.Time  `json:"status_at,omitzero"`
	Role         NodeRole   `json:"role,omitempty"`
	Version      string     `json:"version"`
	RegisteredAt time.Time  `json:"registered_at"`
	ModifyIndex  uint64     `json:"modify_index"`
}

// ContainerEngine is what a node found of its container engine, and the
// directories it lets jobs' containers mount.
type ContainerEngine struct {
	// Engine names the engine and its version ("docker 20.10.21"), and
	// APIVersion is the API version the agent speaks with it ("1.41").
	Engine     string `json:"engine,omitempty"`
	APIVersion string `json:"api_version,omitempty"`
	// GPUs is true when the engine can hand out NVIDIA GPUs: an "nvidia"
	// runtime is configured, or CDI is enabled.
	GPUs bool `json:"gpus"`
	// Images are references of images the engine holds (repo:tag), at most
	// MaxEngineImages; placement prefers a node that holds a job's image.
	Images []string `json:"images,omitempty"`
	// AllowMounts are the host directories under which jobs' mounts may
	// lie (--allow-mount); none: jobs on this node may mount nothing.
	AllowMounts []string `json:"allow_mounts,omitempty"`
	// AllowCaps are the capabilities jobs' containers may be given here
	// (--allow-cap), spelled as Capabilities spells them; none: no job
	// here gets one.
	AllowCaps []string `json:"allow_caps,omitempty"`
	// Error says, in words, why the engine did not answer; the other
	// fields are then empty.
	Error string `json:"error,omitempty"`
}

// MaxEngineFieldLen bounds a ContainerEngine's Engine and APIVersion, and
// MaxEngineErrorLen its Error.
const (
	MaxEngineFieldLen = 64
	MaxEngineErrorLen = 512
	// MaxConfinementLen bounds a node's Confinement and JobsRefused.
	MaxConfinementLen = 512
)

// MaxEngineImages bounds ContainerEngine.Images and MaxImageRefLen each
// of its references and a job's Image; MaxMounts bounds a job's and a
// node's mounts, MaxMountPathLen each path in them.
const (
	MaxEngineImages = 64
	MaxImageRefLen  = 255
	MaxMounts       = 32
	MaxMountPathLen = 1024
)

// GPU is one device of a node.
type GPU struct {
	Index       int    `json:"index"`
	UUID        string `json:"uuid"`
	Model       string `json:"model"`
	MemoryMiB   int64  `json:"memory_mib"`
	PCIBusID    string `json:"pci_bus_id"`
	Healthy     bool   `json:"healthy"`
	Reason      string `json:"reason,omitempty"`
	NVLinkPeers []int  `json:"nvlink_peers,omitempty"`
	// Discovery details: what the GPU is and where it sits in the node.
	// NVSwitch is set when the GPU has an active NVLink to an NVSwitch;
	// all such GPUs of a node reach one another at full NVLink bandwidth.
	// NUMANode is the CPU socket's memory node, -1 when unknown. PCIeSwitch
	// is an opaque label shared by the GPUs behind one PCIe switch, ""
	// when unknown. ComputeCapability reads "9.0"; MIGMode is "enabled",
	// "disabled" or "" where MIG is not supported.
	NVSwitch          bool   `json:"nvswitch,omitempty"`
	NUMANode          int    `json:"numa_node"`
	PCIeSwitch        string `json:"pcie_switch,omitempty"`
	ComputeCapability string `json:"compute_capability,omitempty"`
	MIGMode           string `json:"mig_mode,omitempty"`
	Simulated         bool   `json:"simulated,omitempty"`

	// Health. Healthy=false means a fault took the GPU out of service
	// (Reason says which); Cordoned means a person did; ForeignProcesses
	// counts processes on it that skein did not start. Any of the three
	// keeps new work off the GPU (see Placeable); only a fault stops the
	// work already on it. The node's agent reports faults, warnings and
	// foreign processes (NodeGPUHealth); cordons come from people
	// (GPUCordon). Registration never overwrites these fields of a GPU the
	// state already knows.
	Cordoned     bool      `json:"cordoned,omitempty"`
	CordonReason string    `json:"cordon_reason,omitempty"`
	CordonedAt   time.Time `json:"cordoned_at,omitzero"`
	// UnhealthySince is when the current fault episode began; LastFaultAt
	// is the newest fatal event the agent has committed. ClearedAt is when
	// a person last returned the GPU to service (uncordon): faults seen
	// before it no longer count.
	UnhealthySince time.Time `json:"unhealthy_since,omitzero"`
	LastFaultAt    time.Time `json:"last_fault_at,omitzero"`
	ClearedAt      time.Time `json:"cleared_at,omitzero"`
	// Warning is a condition worth showing that leaves the GPU in service.
	Warning          string `json:"warning,omitempty"`
	ForeignProcesses int    `json:"foreign_processes,omitempty"`
	// ForeignAllowed says the node's agent runs with
	// --allow-foreign-gpu-use: foreign processes are shown, not avoided.
	ForeignAllowed bool `json:"foreign_allowed,omitempty"`
}

// GPU health states, as `skein gpus` shows them.
const (
	GPUHealthy   = "healthy"
	GPUUnhealthy = "unhealthy"
	GPUCordoned  = "cordoned"
	GPUForeign   = "foreign"
)

// MaxHealthReasonLen bounds a GPU health or cordon reason.
const MaxHealthReasonLen = 512

// HealthState names the first thing that keeps new work off the GPU
// (unhealthy, then cordoned, then foreign processes), else healthy.
func (g *GPU) HealthState() string {
	switch {
	case !g.Healthy:
		return GPUUnhealthy
	case g.Cordoned:
		return GPUCordoned
	case g.ForeignProcesses > 0 && !g.ForeignAllowed:
		return GPUForeign
	}
	return GPUHealthy
}

// Placeable reports whether new work may be placed on the GPU, and if not,
// why, in words: "unhealthy: XID 79 ...", "cordoned: bad fan",
// "in use by 2 processes skein did not start".
func (g *GPU) Placeable() (bool, string) {
	switch g.HealthState() {
	case GPUUnhealthy:
		if g.Reason == "" {
			return false, "unhealthy"
		}
		return false, "unhealthy: " + g.Reason
	case GPUCordoned:
		if g.CordonReason == "" {
			return false, "cordoned"
		}
		return false, "cordoned: " + g.CordonReason
	case GPUForeign:
		n := "1 process"
		if g.ForeignProcesses != 1 {
			n = fmt.Sprintf("%d processes", g.ForeignProcesses)
		}
		return false, "in use by " + n + " skein did not start"
	}
	return true, ""
}

// JobState is where a job is in its life.
type JobState string

// Job states. Succeeded, failed, cancelled and timed out are terminal.
const (
	JobQueued    JobState = "queued"
	JobRunning   JobState = "running"
	JobSucceeded JobState = "succeeded"
	JobFailed    JobState = "failed"
	JobCancelled JobState = "cancelled"
	// JobTimedOut: the job ran past its time limit and was stopped. It is
	// not restarted: another attempt would run out of time again.
	JobTimedOut JobState = "timed_out"
)

// JobStates lists every job state, in the order status counts show them.
var JobStates = []JobState{JobQueued, JobRunning, JobSucceeded, JobFailed, JobCancelled, JobTimedOut}

// Terminal reports whether a job in this state will never run again.
func (s JobState) Terminal() bool {
	return s == JobSucceeded || s == JobFailed || s == JobCancelled || s == JobTimedOut
}

// JobSpec is what a user asks for. Sizes are in MiB, durations as Duration.
// The yaml names are the keys of a job file (`skein submit --file`), which
// decodes straight into a JobSpec: a field added here with both tags is in
// the API and in job files at once.
type JobSpec struct {
	Name    string            `json:"name,omitempty" yaml:"name"`
	Command []string          `json:"command" yaml:"command"`
	Env     map[string]string `json:"env,omitempty" yaml:"env"`
	// SecretEnv reaches the job like Env, but its values are returned
	// only to the job's owner and operators, and only when asked for
	// (`skein job --show-secrets`); they are never logged.
	SecretEnv       map[string]string `json:"secret_env,omitempty" yaml:"secret_env"`
	Workdir         string            `json:"workdir,omitempty" yaml:"workdir"`
	Nodes           int               `json:"nodes" yaml:"nodes"`
	GPUs            int               `json:"gpus" yaml:"gpus"`
	GPUModel        string            `json:"gpu_model,omitempty" yaml:"gpu_model"`
	GPUMemoryMinMiB SizeMiB           `json:"gpu_memory_min_mib,omitempty" yaml:"gpu_mem"`
	CPUs            int               `json:"cpus,omitempty" yaml:"cpus"`
	MemoryMiB       SizeMiB           `json:"memory_mib,omitempty" yaml:"mem"`
	// PidsMax, when set, is the most processes and threads the job may
	// hold on each node, below its node's own limit (Node.JobPidsMax).
	PidsMax   int64    `json:"pids_max,omitempty" yaml:"pids_max"`
	Priority  int      `json:"priority,omitempty" yaml:"priority"`
	Restarts  int      `json:"restarts,omitempty" yaml:"restarts"`
	TimeLimit Duration `json:"time_limit,omitempty" yaml:"time_limit"`
	// Signal, with a time limit, is sent to the job's process group that
	// long before the limit (Slurm's --signal), so it can checkpoint.
	Signal      *TimeSignal       `json:"signal,omitempty" yaml:"signal"`
	Constraints map[string]string `json:"constraints,omitempty" yaml:"constraints"`
	// Partition, when set, places the job only on nodes of that
	// partition (Node.Partitions; DefaultPartition is the nodes that
	// declare none). A job without one may run on any node.
	Partition string `json:"partition,omitempty" yaml:"partition"`
	// NodeList, when set, places the job only on these nodes, by name,
	// and ExcludeNodes never on those (Slurm's --nodelist, --exclude).
	NodeList     []string `json:"nodelist,omitempty" yaml:"nodelist"`
	ExcludeNodes []string `json:"exclude,omitempty" yaml:"exclude"`
	// Hold submits the job held: it waits, whatever else it waits for,
	// until released (Job.Held; Slurm's --hold, scontrol release).
	Hold bool `json:"hold,omitempty" yaml:"hold"`
	// Begin, when set, keeps the job from starting before then (Job's
	// NotBefore; Slurm's --begin). Deadline, when set, cancels the job
	// while it waits once it could no longer end by then, its time
	// limit counted (Slurm's --deadline).
	Begin    time.Time `json:"begin,omitzero" yaml:"begin"`
	Deadline time.Time `json:"deadline,omitzero" yaml:"deadline"`
	// MailType names the events of the job a mail is sent for (MailTypes;
	// Slurm's --mail-type), to MailUser (its owner when empty), by the
	// program the agents' --mail-prog names.
	MailType []string `json:"mail_type,omitempty" yaml:"mail_type"`
	MailUser string   `json:"mail_user,omitempty" yaml:"mail_user"`
	// Spread places ranks on the emptiest fitting nodes instead of
	// packing them onto the fullest (the default, binpack).
	Spread bool `json:"spread,omitempty" yaml:"spread"`
	// After lists jobs that must end first (Slurm's --dependency).
	After []Dependency `json:"after,omitempty" yaml:"after"`
	// Singleton lets the job start only while no other job of its owner
	// with its name runs, nor waits in the queue ahead of it (Slurm's
	// --dependency=singleton): such jobs run one at a time, in the order
	// they were submitted. It needs a name.
	Singleton bool `json:"singleton,omitempty" yaml:"singleton"`
	// Exclusive gives the job its nodes to itself (Slurm's --exclusive):
	// it is placed only on nodes that run no other job, and no other job
	// is placed on them while it runs.
	Exclusive bool `json:"exclusive,omitempty" yaml:"exclusive"`
	// Array, when set, makes the submission a job array: one job (task)
	// per index, each seeing its index in SKEIN_ARRAY_INDEX.
	Array *ArraySpec `json:"array,omitempty" yaml:"array"`
	// Preemptible lets the job be stopped for queued work of strictly
	// higher priority; it goes back to the queue without using a restart.
	Preemptible bool `json:"preemptible,omitempty" yaml:"preemptible"`
	// PreemptGrace is the time between the warning signal (SIGTERM) and
	// SIGKILL when the job is preempted; Normalize sets
	// DefaultPreemptGrace for a preemptible job that gives none.
	PreemptGrace Duration `json:"preempt_grace,omitempty" yaml:"preempt_grace"`
	// Image, when set, runs the job in this container image on the node's
	// container engine instead of as a host process: Command is the
	// container's command (the image's entrypoint, if any, runs it).
	Image string `json:"image,omitempty" yaml:"image"`
	// ImagePull is when the node pulls Image (PullIfNotPresent when "").
	ImagePull PullPolicy `json:"image_pull,omitempty" yaml:"image_pull"`
	// Mounts are host directories bind-mounted into the container; each
	// source must lie under a directory its node allows (--allow-mount).
	Mounts []Mount `json:"mounts,omitempty" yaml:"mounts"`
	// ShmSizeMiB is the size of the container's /dev/shm; 0 means the
	// node's default, sized from its memory.
	ShmSizeMiB SizeMiB `json:"shm_size_mib,omitempty" yaml:"shm_size"`
	// Caps are the Linux capabilities the container is given (as
	// Capabilities spells them; --allow-cap): it has none but these, and
	// is placed only on nodes that allow them all.
	Caps []string `json:"caps,omitempty" yaml:"caps"`
	// Account is the account the job's use is charged to (--account);
	// "" is its owner's default account. The state stamps the account
	// it resolved to.
	Account string `json:"account,omitempty" yaml:"account"`
	// QoS names the job's quality of service (--qos): its priority,
	// limits and what it may preempt.
	QoS string `json:"qos,omitempty" yaml:"qos"`
}

// PullPolicy says when a node pulls a job's image.
type PullPolicy string

// Pull policies.
const (
	PullIfNotPresent PullPolicy = "if-not-present" // pull when the node does not hold the image
	PullAlways       PullPolicy = "always"         // pull before every start
	PullNever        PullPolicy = "never"          // never pull: the node must hold the image
)

// Mount is a host directory bind-mounted into a job's container; as text
// it is SRC:DST[:ro] (ParseMount).
type Mount struct {
	Source   string `json:"source"`
	Target   string `json:"target"`
	ReadOnly bool   `json:"read_only,omitempty"`
}

// PullProgress is how far a node got pulling an allocation's image.
type PullProgress struct {
	Image string `json:"image"`
	// Bytes of Total are downloaded; Total is 0 while the engine has not
	// said how big the image is.
	Bytes int64     `json:"bytes"`
	Total int64     `json:"total"`
	At    time.Time `json:"at"`
}

// TimeSignal is a signal sent Before the time limit. Name is a signal name
// without the SIG prefix (USR1, TERM; see TimeSignals).
type TimeSignal struct {
	Name   string   `json:"name"`
	Before Duration `json:"before"`
}

// PortRange is an inclusive range of TCP ports.
type PortRange struct {
	Min int `json:"min"`
	Max int `json:"max"`
}

// ArraySpec is a job array's index range, Start to End inclusive, and the
// most tasks that may run at once (0: no cap).
type ArraySpec struct {
	Start      int `json:"start"`
	End        int `json:"end"`
	MaxRunning int `json:"max_running,omitempty"`
}

// Len is the number of tasks.
func (a ArraySpec) Len() int { return a.End - a.Start + 1 }

// ArrayTaskID is the job ID of one task of the array submitted as arrayID.
func ArrayTaskID(arrayID string, index int) string {
	return fmt.Sprintf("%s-%d", arrayID, index)
}

// ArrayOf returns the array a job ID belongs to, or "" for a plain job.
func ArrayOf(jobID string) string {
	if i := strings.LastIndexByte(jobID, '-'); i > 0 {
		return jobID[:i]
	}
	return ""
}

// Dependency conditions. A dependent whose condition can no longer be met
// (Slurm's DependencyNeverSatisfied) is cancelled, with why.
const (
	AfterOK  = "ok"  // the job must succeed (Slurm's afterok)
	AfterAny = "any" // the job must end, however it ends (afterany)
	// AfterNotOK: the job must end without succeeding: failed, cancelled
	// or timed out (Slurm's afternotok, which a cancel meets too).
	AfterNotOK = "notok"
)

// DependencyConditions are the conditions, in the order errors name them.
var DependencyConditions = []string{AfterOK, AfterAny, AfterNotOK}

// Dependency is one job another waits for.
type Dependency struct {
	JobID     string `json:"job_id"`
	Condition string `json:"condition"`
}

// MaxFreeGPUFaultRestarts is how many attempts of one job a GPU fault may
// end without using one of the job's restarts; past it, a job that keeps
// meeting failing GPUs (or making them fail) spends its restarts.
const MaxFreeGPUFaultRestarts = 3

// Job is a submitted JobSpec and its progress.
type Job struct {
	ID        string `json:"id"`
	RequestID string `json:"request_id,omitempty"`
	// Owner is the user who submitted the job (the ACL token's user; ""
	// for a job submitted before the cluster's ACLs were bootstrapped).
	// The job runs as the local account of that name (agent/runner).
	Owner string `json:"owner,omitempty"`
	// AllowRoot lets the job run as root when its owner's local account
	// is root; an admin allows it per user (ACLUser.AllowRoot). Without
	// it such a job does not start.
	AllowRoot   bool      `json:"allow_root,omitempty"`
	Spec        JobSpec   `json:"spec"`
	State       JobState  `json:"state"`
	SubmittedAt time.Time `json:"submitted_at"`
	StartedAt   time.Time `json:"started_at,omitzero"`
	FinishedAt  time.Time `json:"finished_at,omitzero"`
	// Attempts counts the times the job was placed.
	Attempts int `json:"attempts"`
	// NotBefore, on a queued job that failed and is to be restarted, is
	// the earliest time it may be placed again (restart backoff).
	NotBefore time.Time `json:"not_before,omitzero"`
	// StopRequested is set by a cancel while allocations still run; the job
	// becomes cancelled when the last of them has stopped.
	StopRequested bool `json:"stop_requested,omitempty"`
	// PreemptedBy, while the job's allocations stop because it was
	// preempted, is the job it makes room for; the job goes back to the
	// queue when they have stopped, and PreemptedBy is cleared.
	PreemptedBy string `json:"preempted_by,omitempty"`
	// Preemptions counts the times the job was preempted. Attempts that
	// ended in a preemption do not count against Spec.Restarts.
	Preemptions int `json:"preemptions,omitempty"`
	// PreemptReason says why the job was last preempted; it stays after
	// the job runs again.
	PreemptReason string `json:"preempt_reason,omitempty"`
	// Evicted, while the job's allocations stop because a node of its
	// drains, or it was requeued (JobRequeueType), says so; the job goes
	// back to the queue when they have stopped, without using a restart,
	// and Evicted is cleared.
	// Evictions counts such attempts.
	Evicted   string `json:"evicted,omitempty"`
	Evictions int    `json:"evictions,omitempty"`
	// ReplacedBy, on a replica on a draining node, is the replica made to
	// take its place; the replica stops once that one is available.
	ReplacedBy string `json:"replaced_by,omitempty"`
	// Reason says why the job is in its state: why a queued job waits, why a
	// job failed or was cancelled.
	Reason string `json:"reason,omitempty"`
	// ExitCode is the exit code of the last finished attempt: 0 when every
	// rank succeeded, else that of the lowest-ranked failed allocation.
	ExitCode int `json:"exit_code"`
	// GPUFaults counts attempts that ended because a GPU they held failed.
	// Up to MaxFreeGPUFaultRestarts of them do not use a restart: the
	// fault was the hardware's, not the job's.
	GPUFaults int `json:"gpu_faults,omitempty"`
	// Usage is what the job's allocations that ended used, all attempts
	// together (AllocUsage.Add): sacct's MaxRSS and TotalCPU.
	Usage *AllocUsage `json:"usage,omitempty"`
	// ArrayID and ArrayIndex place a task in its job array.
	ArrayID    string `json:"array_id,omitempty"`
	ArrayIndex int    `json:"array_index,omitempty"`
	// Number is the job's numeric ID, unique in the cluster and
	// increasing in the order jobs were committed (Slurm's job ID); 0 on
	// a job created before numbers were given. Every task of an array
	// has its own, and ArrayNumber is the array's: its first task's.
	Number      uint64 `json:"number,omitempty"`
	ArrayNumber uint64 `json:"array_number,omitempty"`
	// Held keeps a queued job from being placed until it is released
	// (JobUpdateType; Slurm's scontrol hold and release, sbatch --hold).
	Held bool `json:"held,omitempty"`
	// Service, on a replica of a service, names it: the job restarts
	// whenever it ends, for as long as the service wants it.
	// ServiceVersion is the version of the service's spec it runs
	// (Service.Version).
	Service        string `json:"service,omitempty"`
	ServiceVersion int    `json:"service_version,omitempty"`
	// Crashes, on a replica, counts its attempts in a row that ended
	// within a minute of starting, or before they started; each such
	// restart waits longer (a crash loop's backoff), and an attempt that
	// ran a minute or more sets it back to 0.
	Crashes     int    `json:"crashes,omitempty"`
	CreateIndex uint64 `json:"create_index"`
	ModifyIndex uint64 `json:"modify_index"`
}

// AllocState is where one placement of a job on one node is in its life.
type AllocState string

// Allocation states. Every state but pending and running is terminal.
const (
	AllocPending   AllocState = "pending"
	AllocRunning   AllocState = "running"
	AllocSucceeded AllocState = "succeeded"
	AllocFailed    AllocState = "failed"
	AllocLost      AllocState = "lost"
	AllocKilled    AllocState = "killed"
	// AllocTimedOut: the supervisor stopped the job at its time limit.
	AllocTimedOut AllocState = "timed_out"
)

// Terminal reports whether the allocation's process is gone for good.
func (s AllocState) Terminal() bool {
	return s != AllocPending && s != AllocRunning
}

// DesiredState is what the cluster wants an allocation's process to do.
type DesiredState string

// Desired states.
const (
	DesiredRun  DesiredState = "run"
	DesiredStop DesiredState = "stop"
)

// Allocation is one rank of one job on one node, holding specific GPUs until
// its process is gone.
type Allocation struct {
	ID      string `json:"id"`
	JobID   string `json:"job_id"`
	NodeID  string `json:"node_id"`
	Rank    int    `json:"rank"`
	Attempt int    `json:"attempt"`
	// GPUs are the allocated GPU UUIDs, in CUDA_VISIBLE_DEVICES order.
	GPUs         []string     `json:"gpus"`
	CPUs         int          `json:"cpus"`
	MemoryMiB    int64        `json:"memory_mib"`
	State        AllocState   `json:"state"`
	DesiredState DesiredState `json:"desired_state"`
	ExitCode     int          `json:"exit_code"`
	Reason       string       `json:"reason,omitempty"`
	// GPUFault, when set, says the cluster stopped the allocation because
	// a GPU it held failed: "GPU 3 on node b unhealthy: XID 79 ...".
	GPUFault string `json:"gpu_fault,omitempty"`
	// Exclusive is set on an allocation of a job with Spec.Exclusive: its
	// node runs nothing else while it is live.
	Exclusive bool `json:"exclusive,omitempty"`
	// StopGrace, when set on an allocation asked to stop, is the time its
	// process gets between SIGTERM and SIGKILL instead of the node's kill
	// grace (a preempted job's PreemptGrace).
	StopGrace Duration `json:"stop_grace,omitempty"`
	// StopSignal, when set on an allocation asked to stop, is the signal
	// sent first instead of SIGTERM (a drained job's --signal, for it to
	// checkpoint); a name from TimeSignals.
	StopSignal string    `json:"stop_signal,omitempty"`
	CreatedAt  time.Time `json:"created_at"`
	StartedAt  time.Time `json:"started_at,omitzero"`
	FinishedAt time.Time `json:"finished_at,omitzero"`
	// RunAs is the local account the node runs the job as, as it reported
	// it once the job started: "alice (uid 1001)".
	RunAs string `json:"run_as,omitempty"`
	// MasterPort is the gang's rendezvous port on rank 0's node, the same
	// on every rank, stamped by the leader (0 in entries of leaders before
	// it; the runner then derives one).
	MasterPort int `json:"master_port,omitempty"`
	// Pull, on a pending allocation of an image job, is how far its node
	// got pulling the image; it is cleared when the job starts.
	Pull *PullProgress `json:"pull,omitempty"`
	// Health, on a running replica of a service, is what its node last
	// found of its health; nil until the first check.
	Health *AllocHealth `json:"health,omitempty"`
	// Usage, on an allocation that ended, is what its job used of its
	// node, as its cgroup counted; nil where the node did not confine it.
	Usage *AllocUsage `json:"usage,omitempty"`
	// CreateIndex is the Raft index that created the allocation; it is the
	// fencing token a node uses to tell its allocations from older ones.
	CreateIndex uint64 `json:"create_index"`
	ModifyIndex uint64 `json:"modify_index"`
}

// AllocUsage is what an allocation's job used of its node, all its
// processes together, as the cgroup it ran in counted.
type AllocUsage struct {
	// MemoryPeakBytes is the most memory the job held at once (swap
	// included where the node counts it), and MemoryLimitBytes the limit
	// it ran under (0: none of its own).
	MemoryPeakBytes  int64 `json:"memory_peak_bytes,omitempty"`
	MemoryLimitBytes int64 `json:"memory_limit_bytes,omitempty"`
	// CPUTime is the CPU time used, user and system; CPUThrottled how
	// long its CPU quota held it back, over ThrottledPeriods periods.
	CPUTime          Duration `json:"cpu_time,omitempty"`
	CPUThrottled     Duration `json:"cpu_throttled,omitempty"`
	ThrottledPeriods int64    `json:"throttled_periods,omitempty"`
	// OOMKills counts the job's processes the kernel killed for its
	// memory limit.
	OOMKills int64 `json:"oom_kills,omitempty"`
}

// Add counts what another allocation used: the most memory either held
// (and the larger limit), the CPU time, throttling and OOM kills of both.
func (u *AllocUsage) Add(o AllocUsage) {
	u.MemoryPeakBytes = max(u.MemoryPeakBytes, o.MemoryPeakBytes)
	u.MemoryLimitBytes = max(u.MemoryLimitBytes, o.MemoryLimitBytes)
	u.CPUTime += o.CPUTime
	u.CPUThrottled += o.CPUThrottled
	u.ThrottledPeriods += o.ThrottledPeriods
	u.OOMKills += o.OOMKills
}

// Live reports whether the allocation still holds its GPUs.
func (a *Allocation) Live() bool { return !a.State.Terminal() }
