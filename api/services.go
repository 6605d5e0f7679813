package api

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/skein-dev/skein/structs"
)

// ServiceCreateRequest is the body of POST /v1/services: a service called
// Name that wants Replicas replicas, each running Spec.Job.
type ServiceCreateRequest struct {
	Name     string              `json:"name"`
	Replicas int                 `json:"replicas"`
	Spec     structs.ServiceSpec `json:"spec"`
	// Autoscale, when set, lets the leader scale it (Replicas is then
	// brought within its bounds).
	Autoscale *structs.Autoscale `json:"autoscale,omitempty"`
}

// ServiceScaleRequest is the body of POST /v1/services/{name}/scale.
// Reason, when given, says why instead of "scaled 2→4 by alice".
type ServiceScaleRequest struct {
	Replicas int    `json:"replicas"`
	Reason   string `json:"reason,omitempty"`
}

// ServiceAutoscaleRequest is the body of POST
// /v1/services/{name}/autoscale: how the leader is to scale the service,
// or null to turn autoscaling off.
type ServiceAutoscaleRequest struct {
	Autoscale *structs.Autoscale `json:"autoscale"`
}

// ServiceUpdateRequest is the body of POST /v1/services/{name}/update:
// the service's whole new spec, rolled out at most MaxSurge replicas
// beyond those it wants and MaxUnavailable fewer available (both 0: a
// surge of 1, none unavailable). The new spec's ProgressDeadline and
// UnhealthyTimeout say when the rollout gives up and rolls back.
type ServiceUpdateRequest struct {
	Spec           structs.ServiceSpec `json:"spec"`
	MaxSurge       int                 `json:"max_surge,omitempty"`
	MaxUnavailable int                 `json:"max_unavailable,omitempty"`
}

// ReplicaStatus is where a replica of a service stands, in one word.
type ReplicaStatus string

// Replica statuses.
const (
	// ReplicaHealthy: its allocation runs and passes its health check
	// (or the service has none): it is one of the service's endpoints.
	ReplicaHealthy ReplicaStatus = "healthy"
	// ReplicaStarting: about to be placed, or placed and not yet
	// healthy: within its health check's grace, or before its first
	// check.
	ReplicaStarting ReplicaStatus = "starting"
	// ReplicaQueued: waiting for room to be placed; the reason says why.
	ReplicaQueued ReplicaStatus = "queued"
	// ReplicaUnhealthy: running, but failing its health check.
	ReplicaUnhealthy ReplicaStatus = "unhealthy"
	// ReplicaCrashLooping: it exited and waits out its backoff to start
	// again.
	ReplicaCrashLooping ReplicaStatus = "crash-looping"
	// ReplicaStopping: a scale down or the service's delete stops it.
	ReplicaStopping ReplicaStatus = "stopping"
)

// ServiceInfo is one entry of GET /v1/services: a service and how its
// replicas stand. Service.Replicas is how many it wants.
type ServiceInfo struct {
	Service structs.Service `json:"service"`
	// Running counts the replicas whose allocation runs, Healthy those of
	// them that are endpoints, and Statuses every live replica by status.
	Running  int                   `json:"running"`
	Healthy  int                   `json:"healthy"`
	Statuses map[ReplicaStatus]int `json:"statuses"`
	// State says it in words: "2/2 healthy", "1/2 healthy, 1
	// crash-looping", "scaling 2→4", "rolling out v2: 1/3 updated, 1
	// starting, 1 stopping", "rolling back to v1: 2/3 back",
	// "deleting, 2 stopping".
	State string `json:"state"`
}

// ServiceDetail is GET /v1/services/{name}, and the answer to a create,
// scale or delete: the service, its live replicas, oldest first, and the
// URLs clients reach it at.
type ServiceDetail struct {
	ServiceInfo
	Replicas []Replica `json:"replicas"`
	// Endpoints are the service's URLs on the ingress of every ready
	// node: http://NODE:INGRESS-PORT/NAME/ (https in a cluster with TLS).
	// Any of them reaches every healthy replica.
	Endpoints []string `json:"endpoints"`
	// Observed is the leader's latest look at the load per replica of
	// an autoscaled service; nil when it has none (or none answered).
	Observed *structs.AutoscaleObservation `json:"observed,omitempty"`
}

// Replica is one replica of a service: its job and that job's latest
// allocation.
type Replica struct {
	JobID string `json:"job_id"`
	// Index is the replica's number in its job ID
	// (structs.ReplicaJobID).
	Index int `json:"index"`
	// Version is the version of the service's spec the replica runs
	// (structs.Job.ServiceVersion).
	Version int              `json:"version"`
	State   structs.JobState `json:"state"`
	Status  ReplicaStatus    `json:"status"`
	// Reason says why it is not healthy: why it waits, what its health
	// check found, or how it last ended.
	Reason string `json:"reason,omitempty"`
	// Alloc is the latest allocation of the replica's job (nil before
	// its first placement); while it is live, it is on the node named
	// Node, listening on Port.
	Alloc *structs.Allocation `json:"alloc,omitempty"`
	Node  string              `json:"node,omitempty"`
	Port  int                 `json:"port,omitempty"`
	// Restarts counts the replica's attempts that ended, for any reason,
	// and were followed by another (or will be: it waits to start again);
	// Crashes its attempts in a row that ended soon after they started
	// (structs.Job.Crashes).
	Restarts int `json:"restarts"`
	Crashes  int `json:"crashes"`
	// LastExit is how its latest ended allocation ended.
	LastExit *ReplicaExit `json:"last_exit,omitempty"`
}

// ReplicaExit is how an allocation of a replica ended.
type ReplicaExit struct {
	State    structs.AllocState `json:"state"`
	ExitCode int                `json:"exit_code"`
	Reason   string             `json:"reason,omitempty"`
	At       time.Time          `json:"at"`
}

// CreateService creates a service and its replicas.
func (c *Client) CreateService(ctx context.Context, req ServiceCreateRequest) (*ServiceDetail, error) {
	var d ServiceDetail
	return &d, c.do(ctx, http.MethodPost, "/v1/services", nil, req, &d)
}

// Services lists every service, by name, with how its replicas stand.
func (c *Client) Services(ctx context.Context) ([]ServiceInfo, error) {
	var list []ServiceInfo
	return list, c.do(ctx, http.MethodGet, "/v1/services", nil, nil, &list)
}

// Service returns a service, its replicas and its endpoints.
func (c *Client) Service(ctx context.Context, name string) (*ServiceDetail, error) {
	var d ServiceDetail
	return &d, c.do(ctx, http.MethodGet, "/v1/services/"+url.PathEscape(name), nil, nil, &d)
}

// ServiceWithSecrets is Service with the values of its replicas'
// secret_env, which only its owner and operators may see.
func (c *Client) ServiceWithSecrets(ctx context.Context, name string) (*ServiceDetail, error) {
	var d ServiceDetail
	return &d, c.do(ctx, http.MethodGet, "/v1/services/"+url.PathEscape(name), url.Values{"secrets": {"true"}}, nil, &d)
}

// ScaleService sets how many replicas a service wants.
func (c *Client) ScaleService(ctx context.Context, name string, req ServiceScaleRequest) (*ServiceDetail, error) {
	var d ServiceDetail
	return &d, c.do(ctx, http.MethodPost, "/v1/services/"+url.PathEscape(name)+"/scale", nil, req, &d)
}

// AutoscaleService sets how the leader scales a service; nil turns
// autoscaling off.
func (c *Client) AutoscaleService(ctx context.Context, name string, a *structs.Autoscale) (*ServiceDetail, error) {
	var d ServiceDetail
	return &d, c.do(ctx, http.MethodPost, "/v1/services/"+url.PathEscape(name)+"/autoscale", nil, ServiceAutoscaleRequest{Autoscale: a}, &d)
}

// UpdateService gives a service a new spec, which the leader rolls out.
func (c *Client) UpdateService(ctx context.Context, name string, req ServiceUpdateRequest) (*ServiceDetail, error) {
	var d ServiceDetail
	return &d, c.do(ctx, http.MethodPost, "/v1/services/"+url.PathEscape(name)+"/update", nil, req, &d)
}

// DeleteService stops every replica of a service; the service goes once
// none runs.
func (c *Client) DeleteService(ctx context.Context, name string) (*ServiceDetail, error) {
	var d ServiceDetail
	return &d, c.do(ctx, http.MethodDelete, "/v1/services/"+url.PathEscape(name), nil, nil, &d)
}
