package structs

import "time"

// MessageType is the first byte of every Raft log entry. The numbers are
// explicit and append-only: never renumber, never reuse, never use iota.
type MessageType uint8

// Message types. A new type takes the next free number.
const (
	NodeRegisterType    MessageType = 1
	JobSubmitType       MessageType = 2
	JobCancelType       MessageType = 3
	PlanApplyType       MessageType = 4
	AllocUpdateType     MessageType = 5
	NodeStatusType      MessageType = 6
	NodeAllocsLostType  MessageType = 7
	NodeGPUHealthType   MessageType = 8
	GPUCordonType       MessageType = 9
	JobPreemptType      MessageType = 10
	JobGCType           MessageType = 11
	TrustInitType       MessageType = 12
	JoinTokenType       MessageType = 13
	NodeAdmitType       MessageType = 14
	NodeRevokeType      MessageType = 15
	KeyringType         MessageType = 16
	ACLBootstrapType    MessageType = 17
	ACLTokenType        MessageType = 18
	ACLUserType         MessageType = 19
	LimitsSetType       MessageType = 20
	ServiceRegisterType MessageType = 21
	ServiceScaleType    MessageType = 22
	ServiceDeleteType   MessageType = 23
	// Reserved for the autoscaler and rolling updates.
	ServiceAutoscaleType MessageType = 24
	ServiceUpdateType    MessageType = 25
	ServiceRolloutType   MessageType = 26
	// A new leader's first entry; written with IgnoreUnknownTypeFlag,
	// since it changes nothing but the event log.
	LeaderElectedType MessageType = 27
	// Draining a node: an operator's drain or undrain, and the leader's
	// steps that move its work away.
	NodeDrainType     MessageType = 28
	NodeDrainStepType MessageType = 29
	// A node down or left for good is forgotten (skein node remove, or
	// the leader's --node-gc).
	NodeRemoveType MessageType = 30
	// Fair share: the account tree, QoS and the priority weights, and
	// the leader's periodic usage charge.
	AccountSetType  MessageType = 32
	QoSSetType      MessageType = 33
	UsageChargeType MessageType = 34

	// JobUpdateType holds, releases or changes a queued job (Slurm's
	// scontrol hold, release and update).
	JobUpdateType MessageType = 36
	// PartitionSetType sets or drops a partition's limits.
	PartitionSetType MessageType = 37
	// JobNumbersStartType turns job numbers on: every job so far gets
	// one, in the order it was made, and every later job the next. The
	// leader commits it once every node applies it: a release before
	// numbers gives none, and replicas must agree on each job's.
	JobNumbersStartType MessageType = 38
	// JobRequeueType stops a running batch job's attempt and puts it back
	// in the queue without using a restart (Slurm's scontrol requeue).
	JobRequeueType MessageType = 39
)

// IgnoreUnknownTypeFlag marks an entry that a replica which does not know its
// type may skip instead of stopping. Set it only on entries whose loss cannot
// change placement or GPU ownership.
const IgnoreUnknownTypeFlag MessageType = 0x80

func (t MessageType) String() string {
	switch t &^ IgnoreUnknownTypeFlag {
	case NodeRegisterType:
		return "node-register"
	case JobSubmitType:
		return "job-submit"
	case JobCancelType:
		return "job-cancel"
	case PlanApplyType:
		return "plan-apply"
	case AllocUpdateType:
		return "alloc-update"
	case NodeStatusType:
		return "node-status"
	case NodeAllocsLostType:
		return "node-allocs-lost"
	case NodeGPUHealthType:
		return "node-gpu-health"
	case GPUCordonType:
		return "gpu-cordon"
	case JobPreemptType:
		return "job-preempt"
	case JobGCType:
		return "job-gc"
	case TrustInitType:
		return "trust-init"
	case JoinTokenType:
		return "join-token"
	case NodeAdmitType:
		return "node-admit"
	case NodeRevokeType:
		return "node-revoke"
	case KeyringType:
		return "keyring"
	case ACLBootstrapType:
		return "acl-bootstrap"
	case ACLTokenType:
		return "acl-token"
	case ACLUserType:
		return "acl-user"
	case LimitsSetType:
		return "limits-set"
	case ServiceRegisterType:
		return "service-register"
	case ServiceScaleType:
		return "service-scale"
	case ServiceDeleteType:
		return "service-delete"
	case ServiceAutoscaleType:
		return "service-autoscale"
	case ServiceUpdateType:
		return "service-update"
	case ServiceRolloutType:
		return "service-rollout"
	case LeaderElectedType:
		return "leader-elected"
	case NodeDrainType:
		return "node-drain"
	case NodeDrainStepType:
		return "node-drain-step"
	case NodeRemoveType:
		return "node-remove"
	case AccountSetType:
		return "account-set"
	case QoSSetType:
		return "qos-set"
	case UsageChargeType:
		return "usage-charge"
	case JobUpdateType:
		return "job-update"
	case PartitionSetType:
		return "partition-set"
	case JobNumbersStartType:
		return "job-numbers-start"
	case JobRequeueType:
		return "job-requeue"
	}
	return "unknown"
}

// NodeRegisterRequest adds a node or replaces its inventory.
type NodeRegisterRequest struct {
	Node Node      `json:"node"`
	At   time.Time `json:"at"`
}

// JobSubmitRequest creates a job. RequestID makes it idempotent: a second
// request with the same RequestID creates nothing and returns the first job.
// The leader stamps JobID and SubmittedAt.
type JobSubmitRequest struct {
	RequestID   string    `json:"request_id"`
	JobID       string    `json:"job_id"`
	Spec        JobSpec   `json:"spec"`
	SubmittedAt time.Time `json:"submitted_at"`
	// Owner and AllowRoot are stamped by the leader, from the caller's
	// ACL token and what an admin allows its user (Job.Owner,
	// Job.AllowRoot).
	Owner     string `json:"owner,omitempty"`
	AllowRoot bool   `json:"allow_root,omitempty"`
}

// ServiceRegisterRequest creates a service (Service.ID is new) and its
// replica jobs. Owner and AllowRoot are stamped by the leader as for a
// job.
type ServiceRegisterRequest struct {
	Service Service `json:"service"`
}

// ServiceScaleRequest sets how many replicas a service wants: new replica
// jobs are made, or the newest replicas are stopped, to match.
type ServiceScaleRequest struct {
	Name     string    `json:"name"`
	Replicas int       `json:"replicas"`
	Reason   string    `json:"reason,omitempty"`
	At       time.Time `json:"at"`
}

// ServiceDeleteRequest stops every replica of a service; the service goes
// once none runs.
type ServiceDeleteRequest struct {
	Name   string    `json:"name"`
	Reason string    `json:"reason,omitempty"`
	At     time.Time `json:"at"`
}

// ServiceAutoscaleRequest sets how the leader scales a service
// (Service.Autoscale), or with Autoscale nil turns autoscaling off. Set,
// it brings Replicas within Min and Max at once.
type ServiceAutoscaleRequest struct {
	Name      string     `json:"name"`
	Autoscale *Autoscale `json:"autoscale,omitempty"`
	At        time.Time  `json:"at"`
}

// ServiceUpdateRequest gives a service a new spec (validated as a
// register's): its Version goes up by one and a rollout replaces the
// replicas of older versions, at most MaxSurge beyond its replicas and
// at most MaxUnavailable of them unavailable at any time. Both 0 takes
// the defaults, a surge of 1 and none unavailable.
type ServiceUpdateRequest struct {
	Name           string      `json:"name"`
	Spec           ServiceSpec `json:"spec"`
	MaxSurge       int         `json:"max_surge,omitempty"`
	MaxUnavailable int         `json:"max_unavailable,omitempty"`
	Reason         string      `json:"reason,omitempty"`
	At             time.Time   `json:"at"`
}

// ServiceRolloutRequest is one step of a rollout, as the leader decided
// it from the state (sched.NextRolloutStep): make Add replicas of
// Version and stop the older replicas Stop names (drained, as a scale
// down stops them); or, alone, RollBack (return to the version the
// rollout replaces, Reason saying why) or Done (every replica is of
// Version and healthy). The state refuses a step whose rollout is no
// longer the one running at Version, whose IDs are not older replicas of
// the service, or that would pass MaxSurge or MaxUnavailable: a step of
// an old leader, or one decided on a state that has moved on.
type ServiceRolloutRequest struct {
	Name     string    `json:"name"`
	Version  int       `json:"version"`
	Add      int       `json:"add,omitempty"`
	Stop     []string  `json:"stop,omitempty"`
	RollBack bool      `json:"roll_back,omitempty"`
	Done     bool      `json:"done,omitempty"`
	Reason   string    `json:"reason,omitempty"`
	At       time.Time `json:"at"`
}

// JobCancelRequest cancels a job: a queued job ends at once, a running job's
// allocations are asked to stop and the job ends when they have. With
// ArrayID instead of JobID it cancels every task of that job array that
// has not ended, in one entry.
type JobCancelRequest struct {
	JobID   string    `json:"job_id,omitempty"`
	ArrayID string    `json:"array_id,omitempty"`
	Reason  string    `json:"reason,omitempty"`
	At      time.Time `json:"at"`
}

// Plan is the whole decision of one scheduling pass. The leader commits it
// in entries of bounded size; each entry is checked and applied on its own.
type Plan struct {
	// Placements are applied per job, all or nothing.
	Placements []JobPlacement `json:"placements,omitempty"`
	// Blocked lists jobs that could not be placed, with the reason.
	Blocked []JobBlocked `json:"blocked,omitempty"`
	// Cancels end queued jobs that can never run (a dependency that
	// failed or does not exist), with why.
	Cancels []JobCancel `json:"cancels,omitempty"`
	// Preemptions stop running preemptible jobs to make room for queued
	// jobs of higher priority.
	Preemptions []Preemption `json:"preemptions,omitempty"`
}

// JobCancel ends one queued job that can never run.
type JobCancel struct {
	JobID  string `json:"job_id"`
	Reason string `json:"reason"`
}

// Preemption stops the running preemptible jobs Victims to make room for
// the queued job For. Attempts[i] is the attempt of Victims[i] the leader
// chose; a victim that has moved on to another attempt is left alone, so
// a repeated decision stops nothing twice. Victims are stopped as
// JobPreemptRequest describes.
type Preemption struct {
	For      string   `json:"for"`
	Victims  []string `json:"victims"`
	Attempts []int    `json:"attempts,omitempty"`
}

// JobPlacement is the allocations, one per rank, that start one attempt of a job.
type JobPlacement struct {
	JobID       string       `json:"job_id"`
	Allocations []Allocation `json:"allocations"`
}

// JobBlocked says why a job stays queued.
type JobBlocked struct {
	JobID  string `json:"job_id"`
	Reason string `json:"reason"`
}

// PlanApplyRequest commits a plan. The leader stamps allocation IDs and times.
type PlanApplyRequest struct {
	Plan Plan      `json:"plan"`
	At   time.Time `json:"at"`
}

// PlanResult is what Apply returns for a PlanApplyRequest: the parts of
// the plan it refused because committed state no longer allowed them, each
// naming its job and the reason. Everything else in the entry was applied.
// A leader that finds any refusal re-plans from fresh state.
type PlanResult struct {
	// Rejected are the refused placements, by the job to be placed.
	Rejected []JobBlocked `json:"rejected,omitempty"`
	// RejectedCancels are the refused cancels, by the job to be cancelled.
	RejectedCancels []JobBlocked `json:"rejected_cancels,omitempty"`
	// RejectedVictims are the preemption victims left running, by victim.
	// When the preempting job itself may no longer preempt, every victim
	// of its preemption is listed, with that reason.
	RejectedVictims []JobBlocked `json:"rejected_victims,omitempty"`
}

// AllocUpdateRequest reports allocation progress from the node that runs them.
type AllocUpdateRequest struct {
	NodeID  string        `json:"node_id"`
	Updates []AllocUpdate `json:"updates"`
}

// AllocUpdate is one allocation's new state. Only moves forward are applied:
// pending -> running -> terminal.
type AllocUpdate struct {
	AllocID  string     `json:"alloc_id"`
	State    AllocState `json:"state"`
	ExitCode int        `json:"exit_code"`
	Reason   string     `json:"reason,omitempty"`
	At       time.Time  `json:"at"`
	// RunAs, on a running report, is the account the job runs as
	// (Allocation.RunAs).
	RunAs string `json:"run_as,omitempty"`
	// Pull, on a pending report, is how far the node got pulling the
	// allocation's image (Allocation.Pull).
	Pull *PullProgress `json:"pull,omitempty"`
	// Health, on a running report of a service's replica, is what its
	// node found of its health (Allocation.Health).
	Health *AllocHealth `json:"health,omitempty"`
	// Usage, on a terminal report, is what the job used (Allocation.Usage).
	Usage *AllocUsage `json:"usage,omitempty"`
	// PortBusy, on a pending report of a gang's rank 0 or a replica, is
	// its MASTER_PORT, which the node found held by a program skein does
	// not run: the allocation did not start, and the attempt's ranks are
	// given another port (fsm, "A port found busy").
	PortBusy int `json:"port_busy,omitempty"`
}

// NodeStatusRequest changes a node's status: the leader marks a node down
// when it stops answering, ready when it is back, left when it leaves.
type NodeStatusRequest struct {
	NodeID string     `json:"node_id"`
	Status NodeStatus `json:"status"`
	Reason string     `json:"reason,omitempty"`
	At     time.Time  `json:"at"`
}

// NodeAllocsLostRequest ends every live allocation of a node that is not
// ready as lost, so their jobs are handled by their restart policy. The
// leader sends it only after the node has had time to stop them itself
// (docs/architecture.md, "Liveness and fencing"); Apply refuses it for a
// ready node.
type NodeAllocsLostRequest struct {
	NodeID string    `json:"node_id"`
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
}

// NodeGPUHealthRequest is a node's own view of the health of its GPUs,
// sent by its agent when that view changes. Only the GPUs listed change.
type NodeGPUHealthRequest struct {
	NodeID string      `json:"node_id"`
	GPUs   []GPUHealth `json:"gpus"`
	At     time.Time   `json:"at"`
}

// GPUHealth is one GPU's health as its node sees it. A GPU that turns
// unhealthy stops the live allocations holding it. A report whose
// LastFaultAt is not after the GPU's ClearedAt is stale (a person returned
// the GPU to service since) and leaves the GPU healthy.
type GPUHealth struct {
	UUID           string    `json:"uuid"`
	Healthy        bool      `json:"healthy"`
	Reason         string    `json:"reason,omitempty"`
	UnhealthySince time.Time `json:"unhealthy_since,omitzero"`
	LastFaultAt    time.Time `json:"last_fault_at,omitzero"`
	Warning        string    `json:"warning,omitempty"`
	// ForeignProcesses counts processes on the GPU that no live allocation
	// of this node accounts for.
	ForeignProcesses int  `json:"foreign_processes,omitempty"`
	ForeignAllowed   bool `json:"foreign_allowed,omitempty"`
}

// GPUCordonRequest takes a GPU out of service by hand (Cordon) or returns
// it (!Cordon). Cordoning never stops work already on the GPU. Returning a
// GPU also ends a fault quarantine: a person has decided it is fine.
type GPUCordonRequest struct {
	NodeID string    `json:"node_id"`
	UUID   string    `json:"uuid"`
	Cordon bool      `json:"cordon"`
	Reason string    `json:"reason,omitempty"`
	At     time.Time `json:"at"`
}

// JobPreemptRequest stops running preemptible jobs (Victims) to make room
// for a queued job of higher priority (For). Each victim's live
// allocations are asked to stop, with the victim's PreemptGrace between
// SIGTERM and SIGKILL, and the victim goes back to the queue when they
// have stopped, without using a restart. Attempts[i], when given, is the
// attempt of Victims[i] the leader chose; a victim that has moved on to
// another attempt is left alone, so a repeated request stops nothing twice.
type JobPreemptRequest struct {
	Victims  []string  `json:"victims"`
	Attempts []int     `json:"attempts,omitempty"`
	For      string    `json:"for"`
	Reason   string    `json:"reason,omitempty"`
	At       time.Time `json:"at"`
}

// JobGCRequest removes finished jobs, with their allocations, from the
// state once they have been finished for Retention at At (both stamped by
// the leader). Apply re-checks every job: finished for that long, no job
// that has not ended depends on it, and no task of its array is still
// going; jobs that fail a check are kept and listed in the returned error.
type JobGCRequest struct {
	JobIDs    []string  `json:"job_ids"`
	Retention Duration  `json:"retention"`
	At        time.Time `json:"at"`
}

// JobUpdateRequest changes a queued job, or with ArrayID every queued
// task of an array: Hold holds it (true) or releases it (false); Name,
// TimeLimit and Priority replace its spec's. Nil fields are left as they
// are. A job that has started or ended is refused (Slurm changes a
// running job's limits only for its operators).
type JobUpdateRequest struct {
	JobID     string    `json:"job_id,omitempty"`
	ArrayID   string    `json:"array_id,omitempty"`
	Hold      *bool     `json:"hold,omitempty"`
	Name      *string   `json:"name,omitempty"`
	TimeLimit *Duration `json:"time_limit,omitempty"`
	Priority  *int      `json:"priority,omitempty"`
	At        time.Time `json:"at"`
}

// JobRequeueRequest puts a running batch job back in the queue (Slurm's
// scontrol requeue): its attempt's allocations stop, and once they have,
// it waits to be placed again, without using a restart. By says who
// asked, for the job's reason. A queued job is left as it is; a finished
// job, a replica or one being cancelled is refused.
type JobRequeueRequest struct {
	JobID string    `json:"job_id"`
	By    string    `json:"by,omitempty"`
	At    time.Time `json:"at"`
}

// Empty reports whether the request changes nothing.
func (r *JobUpdateRequest) Empty() bool {
	return r.Hold == nil && r.Name == nil && r.TimeLimit == nil && r.Priority == nil
}
