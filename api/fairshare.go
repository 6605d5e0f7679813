package api

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/skein-dev/skein/structs"
)

// ShareInfo is GET /v1/share: the fair tree as the scheduler sees it now
// (sshare): every account and every member of one, in the order the
// fair-tree walk meets them.
type ShareInfo struct {
	// On is false while the cluster has no account or QoS: the queue
	// goes by --priority and age.
	On bool `json:"on"`
	// ChargedAt is when usage was last charged.
	ChargedAt time.Time  `json:"charged_at,omitzero"`
	Rows      []ShareRow `json:"rows"`
}

// ShareRow is one account, or one user within an account (User set).
type ShareRow struct {
	Account string `json:"account"`
	User    string `json:"user,omitempty"`
	Depth   int    `json:"depth"`
	// Shares and NormShares: its shares, and their part of its
	// siblings'.
	Shares     int     `json:"shares"`
	NormShares float64 `json:"norm_shares"`
	// Usage is its decayed use, NormUsage its part of its siblings'
	// GPU time.
	Usage     structs.Usage `json:"usage"`
	NormUsage float64       `json:"norm_usage"`
	// LevelFS is NormShares / NormUsage; nil when it used nothing
	// (infinite: first in its level).
	LevelFS *float64 `json:"level_fs"`
	// FairShare and Rank, on a user row: its jobs' fair-share factor
	// in this account and its place among all users (1 first).
	FairShare float64 `json:"fair_share,omitempty"`
	Rank      int     `json:"rank,omitempty"`
}

// PrioInfo is GET /v1/prio: the queued jobs in queue order with their
// priority factors (sprio).
type PrioInfo struct {
	// Weights are the weights in force; nil when the multifactor
	// priority is off (no account or QoS).
	Weights *structs.PriorityWeights `json:"weights,omitempty"`
	// Total is how many jobs are queued; Jobs the first of them (as many
	// as the limit asked for), in queue order.
	Total int           `json:"total"`
	Jobs  []JobPriority `json:"jobs"`
}

// JobPriority is one queued job's place in the queue and its factors,
// each between 0 and 1.
type JobPriority struct {
	JobID    string `json:"job_id"`
	Position int    `json:"position"`
	Owner    string `json:"owner,omitempty"`
	Account  string `json:"account,omitempty"`
	QoS      string `json:"qos,omitempty"`
	// Priority is the place's priority: the weighted factors' sum, its
	// owner's jobs then ordered by their own --priority (Own).
	Priority  int64   `json:"priority"`
	Age       float64 `json:"age"`
	FairShare float64 `json:"fair_share"`
	JobSize   float64 `json:"job_size"`
	QoSFactor float64 `json:"qos_factor"`
	Own       int     `json:"own_priority,omitempty"`
}

// QueuePlace is where a queued job stands (JobDetail.Queue): its place
// and factors, the job just ahead of it and why that one goes first.
type QueuePlace struct {
	JobPriority
	Total  int          `json:"total"`
	Ahead  *JobPriority `json:"ahead,omitempty"`
	Behind string       `json:"behind,omitempty"`
}

// Share returns the fair tree.
func (c *Client) Share(ctx context.Context) (*ShareInfo, error) {
	var s ShareInfo
	return &s, c.do(ctx, http.MethodGet, "/v1/share", nil, nil, &s)
}

// Prio returns the first limit queued jobs with their factors; with
// owner set, only that user's jobs.
func (c *Client) Prio(ctx context.Context, owner string, limit int) (*PrioInfo, error) {
	q := url.Values{}
	if owner != "" {
		q.Set("owner", owner)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var p PrioInfo
	return &p, c.do(ctx, http.MethodGet, "/v1/prio", q, nil, &p)
}
