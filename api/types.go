package api

import "github.com/skein-dev/skein/structs"

// MaxBodyBytes caps every request body the API accepts.
const MaxBodyBytes = 1 << 20

// TokenHeader carries the API token. Bearer authorization is accepted too.
const TokenHeader = "X-Skein-Token"

// SubmitRequest is the body of POST /v1/jobs. RequestID makes the submission
// idempotent: repeating it returns the job the first request created.
type SubmitRequest struct {
	RequestID string          `json:"request_id,omitempty"`
	Spec      structs.JobSpec `json:"spec"`
}

// JobDetail is GET /v1/jobs/{id}: a job with every allocation of every attempt.
type JobDetail struct {
	Job         structs.Job          `json:"job"`
	Allocations []structs.Allocation `json:"allocations"`
	// Nodes maps the node IDs of the allocations to node names.
	Nodes map[string]string `json:"nodes,omitempty"`
}

// NodeInfo is one entry of GET /v1/nodes: the registered node and what is
// in use on it now.
type NodeInfo struct {
	structs.Node
	GPUsTotal     int `json:"gpus_total"`
	GPUsFree      int `json:"gpus_free"`
	GPUsUnhealthy int `json:"gpus_unhealthy"`
	// GPUJobs maps the UUID of each GPU in use to the job using it.
	GPUJobs map[string]string `json:"gpu_jobs,omitempty"`
	// LiveAllocs counts allocations pending or running on the node.
	LiveAllocs int `json:"live_allocs"`
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
}

// ErrorBody is the JSON body of every error response.
type ErrorBody struct {
	Error string `json:"error"`
}

// Log streams of an allocation.
const (
	StreamStdout = "stdout"
	StreamStderr = "stderr"
)

// LogOptions select what GET /v1/jobs/{id}/logs returns.
type LogOptions struct {
	Rank   int    // which rank of a multi-node job; 0 by default
	Stream string // StreamStdout or StreamStderr
	Follow bool   // keep streaming until the allocation ends
}
