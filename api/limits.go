package api

import (
	"context"
	"net/http"
	"net/url"

	"github.com/skein-dev/skein/structs"
)

// Paging of GET /v1/jobs (?limit=N&after=CURSOR). The answer is a JSON
// array of at most limit jobs, oldest first; when more follow, the
// NextCursorHeader of the answer holds the after of the next page.
const (
	// DefaultJobsPage is the page size when the request gives no limit.
	DefaultJobsPage = 1000
	// MaxJobsPage is the largest limit an agent accepts.
	MaxJobsPage = 10000
	// NextCursorHeader carries the cursor of the next page of jobs.
	NextCursorHeader = "X-Skein-Next"
)

// LimitsInfo is GET /v1/limits: the cluster's limits, the defaults every
// user has, and each user that has limits of its own or holds something.
type LimitsInfo struct {
	Cluster ClusterLimitsInfo `json:"cluster"`
	// Default are the limits of a user without limits of its own.
	Default structs.UserLimits `json:"default"`
	// DefaultSet are the defaults an admin set (the others are built in).
	DefaultSet structs.Limits `json:"default_set"`
	// Users are sorted by name; the owner "" (jobs from before ACLs) is
	// listed as "".
	Users []UserLimitsInfo `json:"users"`
}

// ClusterLimitsInfo is the cluster-wide limit and what the cluster holds.
type ClusterLimitsInfo struct {
	MaxQueued int `json:"max_queued"`
	Queued    int `json:"queued"`
}

// UserLimitsInfo is GET /v1/limits/{user}: the limits in force for one
// user, those set for it, and what its jobs hold.
type UserLimitsInfo struct {
	User   string             `json:"user"`
	Limits structs.UserLimits `json:"limits"`
	// Set are the values set for this user; the others are the defaults.
	Set structs.Limits `json:"set"`
	// Queued is how many of its jobs are queued, GPUs how many GPUs its
	// running jobs hold.
	Queued int `json:"queued"`
	GPUs   int `json:"gpus"`
}

// Limits returns the cluster's limits and every user's.
func (c *Client) Limits(ctx context.Context) (*LimitsInfo, error) {
	var l LimitsInfo
	return &l, c.do(ctx, http.MethodGet, "/v1/limits", nil, nil, &l)
}

// UserLimits returns one user's limits and usage.
func (c *Client) UserLimits(ctx context.Context, user string) (*UserLimitsInfo, error) {
	var u UserLimitsInfo
	return &u, c.do(ctx, http.MethodGet, "/v1/limits/"+url.PathEscape(user), nil, nil, &u)
}

// SetLimits changes a user's limits, the defaults or the cluster's (an
// admin's write) and returns the limits as they are now.
func (c *Client) SetLimits(ctx context.Context, req structs.LimitsSetRequest) (*LimitsInfo, error) {
	var l LimitsInfo
	return &l, c.do(ctx, http.MethodPost, "/v1/limits", nil, req, &l)
}
