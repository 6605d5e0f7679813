package api

import "github.com/skein-dev/skein/structs"

// MaxBodyBytes caps every request body the API accepts.
const MaxBodyBytes = 1 << 20

// MaxSnapshotBytes caps the backup a restore accepts.
const MaxSnapshotBytes = 1 << 30

// SnapshotIndexHeader, on a saved snapshot, is the Raft index of the
// state it holds.
const SnapshotIndexHeader = "X-Skein-Snapshot-Index"

// TokenHeader carries the API token. Bearer authorization is accepted too.
const TokenHeader = "X-Skein-Token"

// SubmitRequest is the body of POST /v1/jobs. RequestID makes the submission
// idempotent: repeating it returns the job the first request created.
type SubmitRequest struct {
	RequestID string          `json:"request_id,omitempty"`
	Spec      structs.JobSpec `json:"spec"`
}

// JobUpdate is the body of POST /v1/jobs/{id}/update: hold (true) or
// release (false) a queued job, or every queued task of an array, and
// change its name, time limit or priority. Nil fields stay as they are.
// The answer is every job changed.
type JobUpdate struct {
	Hold      *bool             `json:"hold,omitempty"`
	Name      *string           `json:"name,omitempty"`
	TimeLimit *structs.Duration `json:"time_limit,omitempty"`
	Priority  *int              `json:"priority,omitempty"`
}

// ExecRequest is the body of POST /v1/jobs/{id}/exec: run Command beside
// the job's rank Rank (0 when unset), as the job's account, in its
// environment and working directory (or its container), and answer how
// it ended (ExecResult).
type ExecRequest struct {
	Rank    int      `json:"rank,omitempty"`
	Command []string `json:"command"`
	// TTY runs Command under a terminal of Rows by Cols, with TERM Term
	// (the job's own TERM, or none, when empty), on a connection the
	// request upgrades (PTYUpgrade) to a stream of frames (pty.go). It
	// is asked with Client.ExecPTY.
	TTY  bool   `json:"tty,omitempty"`
	Rows uint16 `json:"rows,omitempty"`
	Cols uint16 `json:"cols,omitempty"`
	Term string `json:"term,omitempty"`
}

// ExecResult is how a command exec ran ended: its exit code and the end
// of its output, stdout and stderr interleaved (at most the runner's
// MaxExecOutput, 4 KiB).
type ExecResult struct {
	ExitCode int    `json:"exit_code"`
	Output   string `json:"output"`
}

// PartitionInfo is one partition in GET /v1/partitions: its settings
// (zero without any), whether it is the default one, and its nodes'
// names, sorted.
type PartitionInfo struct {
	structs.Partition
	Default bool     `json:"default,omitempty"`
	Nodes   []string `json:"nodes"`
}

// JobDetail is GET /v1/jobs/{id}: a job with every allocation of every attempt.
type JobDetail struct {
	Job         structs.Job          `json:"job"`
	Allocations []structs.Allocation `json:"allocations"`
	// Nodes maps the node IDs of the allocations to node names.
	Nodes map[string]string `json:"nodes,omitempty"`
	// Queue, on a queued job, is its place in the queue and what puts
	// the job ahead of it first.
	Queue *QueuePlace `json:"queue,omitempty"`
}

// NodeInfo is one entry of GET /v1/nodes: the registered node and what is
// in use on it now.
type NodeInfo struct {
	structs.Node
	GPUsTotal     int `json:"gpus_total"`
	GPUsFree      int `json:"gpus_free"`
	GPUsUnhealthy int `json:"gpus_unhealthy"`
	// GPUsHeldBack counts idle GPUs kept out of service by a cordon or by
	// processes skein did not start (skein gpus says which).
	GPUsHeldBack int `json:"gpus_held_back,omitempty"`
	// GPUJobs maps the UUID of each GPU in use to the job using it.
	GPUJobs map[string]string `json:"gpu_jobs,omitempty"`
	// LiveAllocs counts allocations pending or running on the node.
	LiveAllocs int `json:"live_allocs"`
	// Protocol is what the node speaks, as gossip says; zero for a node
	// gossip does not know now.
	Protocol structs.Protocol `json:"protocol"`
}

// Status is GET /v1/status: the cluster at a glance, from the answering node.
type Status struct {
	Node          string                   `json:"node"`
	Leader        string                   `json:"leader"`
	LeaderID      string                   `json:"leader_id"`
	Nodes         int                      `json:"nodes"`
	NodesReady    int                      `json:"nodes_ready"`
	GPUsTotal     int                      `json:"gpus_total"`
	GPUsFree      int                      `json:"gpus_free"`
	GPUsSimulated bool                     `json:"gpus_simulated"`
	Jobs          map[structs.JobState]int `json:"jobs"`
	RaftIndex     uint64                   `json:"raft_index"`
	Version       string                   `json:"version"`
	// Protocol is what the answering node speaks.
	Protocol structs.Protocol `json:"protocol"`
	// JobRetention is how long a finished job stays, as this node is
	// configured (--job-retention; the leader's applies).
	JobRetention structs.Duration `json:"job_retention"`
	// Mail says whether this node sends the mail jobs ask for
	// (--mail-prog): sbatch warns when a job asks for mail and the node
	// it submits through has no mail program.
	Mail bool `json:"mail,omitempty"`
	// StateHash, asked for with ?hash=true, is a digest of the whole
	// replicated state at HashIndex: replicas at one index must agree.
	StateHash string `json:"state_hash,omitempty"`
	HashIndex uint64 `json:"hash_index,omitempty"`
}

// ErrorBody is the JSON body of every error response.
type ErrorBody struct {
	Error string `json:"error"`
	// Field is the request's field the error is about, by its JSON name
	// ("gpus", "mounts", "job.memory_mib"), where it is about one: the
	// CLI tells its flag.
	Field string `json:"field,omitempty"`
}

// Log streams of an allocation.
const (
	StreamStdout = "stdout"
	StreamStderr = "stderr"
)

// Headers of an answer to GET /v1/jobs/{id}/logs, set when the node's log
// cap (the agent's --log-max) dropped part of the stream before the answer
// began: how many bytes, and that cap in bytes.
const (
	LogDroppedHeader = "X-Skein-Log-Dropped"
	LogMaxHeader     = "X-Skein-Log-Max"
)

// LogAttemptHeader, on every answer to GET /v1/jobs/{id}/logs, is the
// attempt whose output it is: the one ?attempt=N asked for, else the
// newest.
const LogAttemptHeader = "X-Skein-Log-Attempt"

// LogOffsetHeader, on an answer to GET /v1/jobs/{id}/logs that is not
// the end of a stream without follow, is where in the stream the answer's
// first byte is: how many bytes the job wrote to it before, those the cap
// dropped counted. A client whose answer broke off asks again, through any
// node, with ?offset=N, N that offset plus the bytes it got, and the
// answer goes on from there; if it begins later (the cap dropped output
// meanwhile), its offset says how much is lost, and if earlier (a node
// that cannot skip), the client skips what it has. An offset is exact
// unless the node's disk did not take output for a while (it was
// discarded, and counted with the dropped bytes).
const LogOffsetHeader = "X-Skein-Log-Offset"

// The end of a stream, as GET /v1/jobs/{id}/logs answers it when asked:
// ?tail=N is its last N bytes (0..MaxLogTail), ?lines=N its last N lines
// (0..MaxLogLines) within its last MaxLogTail bytes, or within the last
// tail bytes when both are given. With follow the stream goes on from
// there. Such an answer leaves out the headers of what the cap dropped.
const (
	MaxLogTail  = 1 << 20
	MaxLogLines = 100000
)

// LogOptions select what GET /v1/jobs/{id}/logs returns.
type LogOptions struct {
	Rank int // which rank of a multi-node job; 0 by default
	// Attempt, when above 0, asks for that attempt's output (the job's
	// first placement is attempt 1); 0 asks for the newest.
	Attempt int
	Stream  string // StreamStdout or StreamStderr
	Follow  bool   // keep streaming until the allocation ends
	// Tail, when above 0, asks for only the last Tail bytes of the
	// stream, and Lines, when above 0, for only its last Lines lines
	// (MaxLogTail, MaxLogLines).
	Tail  int
	Lines int
	// Offset, when above 0, asks for the stream from that byte on
	// (LogOffsetHeader); it goes with neither Tail nor Lines.
	Offset int64
}

// Member is one entry of GET /v1/members: a node as gossip sees it.
type Member struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Addr      string `json:"addr"` // gossip host:port
	Status    string `json:"status"`
	Role      string `json:"role,omitempty"`
	HTTP      string `json:"http,omitempty"`
	GPUsFree  int    `json:"gpus_free"`
	GPUsTotal int    `json:"gpus_total"`
	Unhealthy uint64 `json:"unhealthy_gpus,omitempty"` // bit i set: GPU i unhealthy
	Version   string `json:"version,omitempty"`
	// Protocol is what the member speaks, as its gossip says.
	Protocol   structs.Protocol `json:"protocol"`
	Keyring    uint64           `json:"keyring,omitempty"` // gossip keyring generation installed
	Server     bool             `json:"server,omitempty"`  // in the Raft configuration, by its own gossip
	IsThisNode bool             `json:"is_this_node,omitempty"`
}

// RaftPeer is one entry of GET /v1/raft/peers: a server of the Raft
// configuration.
type RaftPeer struct {
	ID      string `json:"id"`
	Name    string `json:"name,omitempty"`
	Address string `json:"address"`
	Voter   bool   `json:"voter"`
	Leader  bool   `json:"leader"`
}

// JoinRequest is the body of POST /v1/join: gossip addresses of any members
// of the cluster to join ("host" or "host:port").
type JoinRequest struct {
	Addrs []string `json:"addrs"`
}

// JoinResponse says how many of the addresses answered.
type JoinResponse struct {
	Joined int `json:"joined"`
}

// LeaveResponse is the answer to POST /v1/leave, sent before the agent
// leaves and exits.
type LeaveResponse struct {
	Node string `json:"node"`
}

// Agent-to-agent requests, sent by a node to the leader.

// HeartbeatRequest renews a node's lease, with the leader or through a
// server that passes it on.
type HeartbeatRequest struct {
	NodeID string `json:"node_id"`
}

// LoadsRequest is a node's view of the autoscaled services' load.
type LoadsRequest struct {
	NodeID   string                `json:"node_id"`
	Services []structs.ServiceLoad `json:"services"`
}

// RelayedHeartbeatsRequest is a round of lease renewals a server passes
// to the leader: the nodes that renewed through it since its last round.
type RelayedHeartbeatsRequest struct {
	From    string   `json:"from"`
	NodeIDs []string `json:"node_ids"`
}

// HeartbeatResponse names the leader that accepted the heartbeat.
type HeartbeatResponse struct {
	LeaderID string `json:"leader_id"`
}

// RegisterRequest asks the leader to record a node's inventory.
type RegisterRequest struct {
	Node structs.Node `json:"node"`
}

// AllocUpdatesRequest carries allocation progress from a node to the leader.
type AllocUpdatesRequest struct {
	NodeID  string                `json:"node_id"`
	Updates []structs.AllocUpdate `json:"updates"`
}

// GPUInfo is one entry of GET /v1/gpus: a GPU, its node, the health state
// that decides whether work may be placed on it, and the job using it.
type GPUInfo struct {
	Node   string `json:"node"`
	NodeID string `json:"node_id"`
	structs.GPU
	// Health is healthy, unhealthy, cordoned or foreign (structs.GPU.HealthState).
	Health string `json:"health"`
	// Job is the ID of the job whose live allocation holds the GPU.
	Job string `json:"job,omitempty"`
}

// GPURequest names one GPU for POST /v1/gpus/cordon and /v1/gpus/uncordon.
// Node is a node name, ID or unique ID prefix.
type GPURequest struct {
	Node   string `json:"node"`
	Index  int    `json:"index"`
	Reason string `json:"reason,omitempty"`
}

// GPUFaultRequest is the body of POST /v1/gpus/fault: a health event to
// inject into a simulated GPU (a development and test control). Kind is
// fatal (the default), warning or processes; PIDs go with processes.
type GPUFaultRequest struct {
	Node   string   `json:"node"`
	Index  int      `json:"index"`
	Kind   string   `json:"kind,omitempty"`
	Reason string   `json:"reason,omitempty"`
	PIDs   []uint32 `json:"pids,omitempty"`
}

// ForwardedHeader marks a request one agent passed to another, so it is never
// passed on again.
const ForwardedHeader = "X-Skein-Forwarded"

// BusyHeader marks a 429 as the leader's back-pressure: the request was
// refused before any of it was carried out, a write because the leader
// already has as many in flight as it takes ("writes"), a read because
// the leader is short of CPU ("reads"), and may be sent again after the
// answer's Retry-After. (A 429 without it is a client refused for its
// failed authentications.)
const BusyHeader = "X-Skein-Busy"

// StaleHeader, on a scrape of a leader short of CPU, says how old the
// metrics it answered with are (agent/server, shed.go).
const StaleHeader = "X-Skein-Stale"

// NodeDrainRequest is the body of POST /v1/nodes/{id}/drain: Deadline,
// when set, is how long the jobs that cannot move may run out before they
// are stopped; Force stops everything at once. POST
// /v1/nodes/{id}/undrain takes only Reason.
type NodeDrainRequest struct {
	Deadline structs.Duration `json:"deadline,omitempty"`
	Force    bool             `json:"force,omitempty"`
	Reason   string           `json:"reason,omitempty"`
}

// NodeRemoveRequest is the body of POST /v1/nodes/{id}/remove.
type NodeRemoveRequest struct {
	Reason string `json:"reason,omitempty"`
}

// DepartRequest is the body of POST /v1/internal/depart: the node that
// leaves.
type DepartRequest struct {
	NodeID string `json:"node_id"`
}
