package api

import (
	"context"
	"net/http"
	"net/url"

	"github.com/skein-dev/skein/structs"
)

// SignalRequest is the body of POST /v1/jobs/{id}/signal: send Signal (a
// name of structs.JobSignals, or its number) to everything the job, or
// each running task of an array, runs on every node, and nothing else:
// the job goes on unless the signal ends it (scancel --signal).
type SignalRequest struct {
	Signal string `json:"signal"`
}

// SignalResult answers a SignalRequest: the signal's name and each rank
// it was sent to.
type SignalResult struct {
	Signal    string           `json:"signal"`
	Signalled []SignalledAlloc `json:"signalled"`
}

// SignalledAlloc is one rank of a job a signal was sent to, and its node.
type SignalledAlloc struct {
	JobID   string `json:"job_id"`
	SlurmID string `json:"slurm_id,omitempty"`
	Rank    int    `json:"rank"`
	Node    string `json:"node"`
}

// SignalJob sends a signal to a running job's processes on every node it
// runs on (or to each running task of an array), without stopping it.
func (c *Client) SignalJob(ctx context.Context, id, signal string) (*SignalResult, error) {
	var res SignalResult
	return &res, c.do(ctx, http.MethodPost, "/v1/jobs/"+url.PathEscape(id)+"/signal", nil, SignalRequest{Signal: signal}, &res)
}

// RequeueJob puts a running batch job back in the queue (scontrol
// requeue): its allocations stop and it waits to be placed again,
// without using a restart. A queued job is returned as it is.
func (c *Client) RequeueJob(ctx context.Context, id string) (*structs.Job, error) {
	var job structs.Job
	return &job, c.do(ctx, http.MethodPost, "/v1/jobs/"+url.PathEscape(id)+"/requeue", nil, nil, &job)
}
