package endpoint

import (
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/structs"
)

// Writer is the one path of every write an endpoint makes. The agent's
// server gives each request its own (it knows the request to pass on).
type Writer interface {
	// Leads reports whether this node leads: a read that misses on
	// another node may be a write not yet applied there, which the
	// leader will know.
	Leads() bool
	// Write carries out one write of type typ. On the leader it calls
	// entry for the entry (stamped there with the leader's clock and IDs
	// and checked against the leader's state) and applies it through
	// Raft, answering what the state machine returned. On any other node
	// it passes the request on to the leader, which serves it again,
	// with forward as its body (nil: the body as it came), never calls
	// entry, and answers ErrForwarded.
	Write(typ structs.MessageType, forward any, entry func() (any, error)) (any, error)
	// Lead is Write for a write that is not one entry (a node's removal
	// changes Raft's configuration too): on the leader it answers what
	// do does, elsewhere it passes the request on as Write does.
	Lead(forward any, do func() (any, error)) (any, error)
}

// Errors of the endpoints. Domain refusals come from fsm, sched and
// structs as they are (the transport maps them all to HTTP statuses);
// these are the endpoints' own.
var (
	// ErrForwarded: the leader answered the request, and that answer
	// has been given; the caller answers nothing more.
	ErrForwarded = errors.New("passed on to the leader")
	// ErrAutoscaled refuses a manual scale of an autoscaled service.
	ErrAutoscaled = errors.New("service is autoscaled")
	// ErrInvalid is a request that asks nothing, or something no field
	// error describes.
	ErrInvalid = errors.New("bad request")
	// ErrCannotRemove: this node leads but was given no way to remove
	// nodes.
	ErrCannotRemove = errors.New("this node cannot remove nodes")
)

// BadRequest is a request refused for what it asks, whatever Err (which
// says why) would otherwise mean: the transport answers 400.
type BadRequest struct{ Err error }

func (e *BadRequest) Error() string { return e.Err.Error() }
func (e *BadRequest) Unwrap() error { return e.Err }

// Conflict is a request refused for the state of what it acts on (a
// job not running), whatever Err (which says why) would otherwise mean:
// the transport answers 409.
type Conflict struct{ Err error }

func (e *Conflict) Error() string { return e.Err.Error() }
func (e *Conflict) Unwrap() error { return e.Err }

// badRequest is err, when there is one, as a BadRequest.
func badRequest(err error) error {
	if err == nil {
		return nil
	}
	return &BadRequest{Err: err}
}

// Identity is who a user request comes from.
type Identity struct {
	// ACL is whether the cluster has ACLs. Without them the caller holds
	// the cluster's API token (or none, on loopback), every permission,
	// and no user: its jobs have the owner "".
	ACL     bool
	User    string
	Role    structs.Role
	TokenID string
}

// Can reports whether the caller holds p.
func (id Identity) Can(p structs.Permission) bool { return id.Role.Can(p) }

// MayActFor reports whether the caller may act on what owner owns: as
// that owner, or as one who may act on every user's jobs.
func (id Identity) MayActFor(owner string) bool { return id.Role.MayActFor(id.User, owner) }

// MayActOn reports whether the caller may cancel job, read its logs and
// see its environment.
func (id Identity) MayActOn(job *structs.Job) bool { return id.MayActFor(job.Owner) }

// CheckActFor refuses, naming the permission missing, unless id may act
// on what owner owns (what, for the message, says what was refused).
func CheckActFor(id Identity, owner, what string) error {
	if id.MayActFor(owner) {
		return nil
	}
	need := structs.PermAnyJob
	if owner == id.User {
		need = structs.PermSubmit
	}
	return &structs.PermissionError{Role: id.Role, Need: need, What: what}
}

// CheckLoaderEnv refuses a spec that sets the dynamic loader's variables
// unless the caller may.
func CheckLoaderEnv(id Identity, spec *structs.JobSpec) error {
	if id.Can(structs.PermLoaderEnv) {
		return nil
	}
	for _, env := range []map[string]string{spec.Env, spec.SecretEnv} {
		for _, k := range slices.Sorted(maps.Keys(env)) {
			if structs.IsLoaderEnv(k) {
				return &structs.PermissionError{Role: id.Role, Need: structs.PermLoaderEnv, What: "set " + k}
			}
		}
	}
	return nil
}

// Redact hides what the caller may not see of a job: the values of its
// env unless the caller may act on it, and of its secret_env unless
// secrets were asked for too. It changes job, which must be a copy.
func Redact(id Identity, job *structs.Job, secrets bool) *structs.Job {
	redactSpec(id.MayActOn(job), &job.Spec, secrets)
	return job
}

// RedactService hides what the caller may not see of a service's
// replicas' job, as Redact does of a job's. It changes svc, which must be
// a copy.
func RedactService(id Identity, svc *structs.Service, secrets bool) *structs.Service {
	redactSpec(id.MayActFor(svc.Owner), &svc.Spec.Job, secrets)
	if svc.PrevSpec != nil { // the spec a rollback would return to
		redactSpec(id.MayActFor(svc.Owner), &svc.PrevSpec.Job, secrets)
	}
	return svc
}

// redactSpec hides the values of spec's env unless mine, and of its
// secret_env unless mine and secrets.
func redactSpec(mine bool, spec *structs.JobSpec, secrets bool) {
	if !mine {
		hide(spec.Env)
	}
	if !mine || !secrets {
		hide(spec.SecretEnv)
	}
}

func hide(env map[string]string) {
	for k := range env {
		env[k] = api.HiddenValue
	}
}

// now is the leader's clock, which stamps the entries it writes.
func now() time.Time { return time.Now().UTC() }
