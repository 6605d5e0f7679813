package endpoint

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/fsm"
	"github.com/skein-dev/skein/sched"
	"github.com/skein-dev/skein/structs"
)

// ServicesState is what the services' endpoints read of the state
// (fsm.FSM).
type ServicesState interface {
	Service(name string) (*structs.Service, bool)
	Services() []*structs.Service
	ServiceReplicas(name string) []*structs.Job
	Allocs(jobID string) []*structs.Allocation
	Node(id string) (*structs.Node, bool)
	Nodes() []*structs.Node
	ACLUser(name string) (structs.ACLUser, bool)
}

// Services creates, scales, updates and deletes services, and describes
// them: their replicas, how they stand, their endpoints.
type Services struct {
	State ServicesState
	// IngressPort is the port the nodes' ingress serves services on, in
	// the endpoints a service's detail lists (0: no ingress, none).
	IngressPort int
}

// Find is the service name names.
func (s Services) Find(name string) (*structs.Service, error) {
	svc, ok := s.State.Service(name)
	if !ok {
		return nil, fmt.Errorf("%w: %q (skein services lists them)", fsm.ErrServiceNotFound, name)
	}
	return svc, nil
}

// Owned is the service name names, when id may act on it (verb says how:
// "scale").
func (s Services) Owned(id Identity, name, verb string) (*structs.Service, error) {
	svc, err := s.Find(name)
	if err != nil {
		return nil, err
	}
	if err := CheckActFor(id, svc.Owner, verb+" another user's service"); err != nil {
		return nil, err
	}
	return svc, nil
}

// List is every service with how its replicas stand, as id may see them.
func (s Services) List(id Identity) []api.ServiceInfo {
	out := []api.ServiceInfo{}
	for _, svc := range s.State.Services() {
		out = append(out, s.serviceInfo(RedactService(id, svc, false), s.replicas(svc)))
	}
	return out
}

// Create checks a service owned by the caller and has the leader commit
// it. Its spec is checked as a job's is (and its loader variables), its
// name must be free, and some node able to run a replica (with none
// registered yet, the replicas wait); the leader gives it its ID and
// time. It answers the service's detail.
func (s Services) Create(w Writer, id Identity, req api.ServiceCreateRequest) (api.ServiceDetail, error) {
	req.Spec.Normalize()
	svc := structs.Service{Name: req.Name, Replicas: req.Replicas, Spec: req.Spec, Autoscale: req.Autoscale}
	if err := svc.Validate(); err != nil {
		return api.ServiceDetail{}, err
	}
	if err := CheckLoaderEnv(id, &req.Spec.Job); err != nil {
		return api.ServiceDetail{}, err
	}
	if _, ok := s.State.Service(req.Name); ok {
		return api.ServiceDetail{}, fmt.Errorf("service %s: %w (skein service %s)", req.Name, fsm.ErrServiceExists, req.Name)
	}
	if err := sched.CheckFits(s.State.Nodes(), req.Spec.Job); err != nil && !errors.Is(err, sched.ErrNoNodes) {
		return api.ServiceDetail{}, err
	}
	resp, err := w.Write(structs.ServiceRegisterType, nil, func() (any, error) {
		svc := structs.Service{ID: structs.NewID(), Name: req.Name, Owner: id.User, Spec: req.Spec, Replicas: req.Replicas,
			Autoscale: req.Autoscale, CreatedAt: now()}
		if u, ok := s.State.ACLUser(id.User); ok && id.ACL {
			svc.AllowRoot = u.AllowRoot
		}
		return structs.ServiceRegisterRequest{Service: svc}, nil
	})
	if err != nil {
		return api.ServiceDetail{}, err
	}
	created, ok := resp.(*structs.Service)
	if !ok {
		return api.ServiceDetail{}, fmt.Errorf("create service: unexpected answer %T from the state machine", resp)
	}
	return s.Detail(id, created, false), nil
}

// Scale sets how many replicas svc (which the caller may act on) wants,
// saying who scaled it from what unless the request gives a reason. An
// autoscaled service refuses it (ErrAutoscaled).
func (s Services) Scale(w Writer, id Identity, svc *structs.Service, req api.ServiceScaleRequest) (api.ServiceDetail, error) {
	scale := structs.ServiceScaleRequest{Name: svc.Name, Replicas: req.Replicas, Reason: req.Reason, At: now()}
	if scale.Reason == "" {
		scale.Reason = fmt.Sprintf("scaled %d→%d", svc.Replicas, req.Replicas)
		if id.User != "" {
			scale.Reason += " by " + id.User
		}
	}
	var err error
	switch {
	case svc.Deleted:
		err = fmt.Errorf("service %s: %w", svc.Name, fsm.ErrServiceDeleted)
	case svc.Autoscale != nil:
		err = autoscaledError(svc)
	default:
		err = scale.Validate()
	}
	if err != nil {
		return api.ServiceDetail{}, err
	}
	return s.write(w, id, structs.ServiceScaleType, "scale", func() (any, error) { return scale, nil })
}

// autoscaledError is why a manual scale of svc, which is autoscaled, is
// refused, and how to do it.
func autoscaledError(svc *structs.Service) error {
	return fmt.Errorf("%w: %s scales itself within %d-%d replicas; turn that off first (skein service autoscale %s off), or change its bounds (skein service autoscale %s MIN-MAX --target ...)",
		ErrAutoscaled, svc.Name, svc.Autoscale.Min, svc.Autoscale.Max, svc.Name, svc.Name)
}

// Autoscale sets how the leader scales svc, or turns autoscaling off (a
// request whose autoscale is nil); the caller must be one who may scale
// it.
func (s Services) Autoscale(w Writer, id Identity, svc *structs.Service, req api.ServiceAutoscaleRequest) (api.ServiceDetail, error) {
	entry := func() structs.ServiceAutoscaleRequest {
		return structs.ServiceAutoscaleRequest{Name: svc.Name, Autoscale: req.Autoscale, At: now()}
	}
	if svc.Deleted {
		return api.ServiceDetail{}, fmt.Errorf("service %s: %w", svc.Name, fsm.ErrServiceDeleted)
	}
	e := entry()
	err := e.Validate()
	if err == nil && e.Autoscale != nil {
		err = e.Autoscale.ValidateFor(&svc.Spec)
	}
	if err != nil {
		return api.ServiceDetail{}, err
	}
	return s.write(w, id, structs.ServiceAutoscaleType, "autoscale", func() (any, error) { return entry(), nil })
}

// Update gives svc a new spec, which the leader then rolls out a few
// replicas at a time (agent/leader's rollout loop). The request carries
// the whole new spec (skein service update makes it from the current
// one); it is checked as a create's is: valid, no loader variables the
// caller may not set, and runnable on some node.
func (s Services) Update(w Writer, id Identity, svc *structs.Service, req api.ServiceUpdateRequest) (api.ServiceDetail, error) {
	upd := structs.ServiceUpdateRequest{Name: svc.Name, Spec: req.Spec, MaxSurge: req.MaxSurge, MaxUnavailable: req.MaxUnavailable, At: now()}
	if id.User != "" {
		upd.Reason = "by " + id.User
	}
	upd.Normalize()
	if svc.Deleted {
		return api.ServiceDetail{}, fmt.Errorf("service %s: %w", svc.Name, fsm.ErrServiceDeleted)
	}
	if err := upd.Validate(); err != nil {
		return api.ServiceDetail{}, err
	}
	if err := CheckLoaderEnv(id, &upd.Spec.Job); err != nil {
		return api.ServiceDetail{}, err
	}
	if err := sched.CheckFits(s.State.Nodes(), upd.Spec.Job); err != nil && !errors.Is(err, sched.ErrNoNodes) {
		return api.ServiceDetail{}, err
	}
	return s.write(w, id, structs.ServiceUpdateType, "update", func() (any, error) { return upd, nil })
}

// Delete stops every replica of svc (which the caller may act on); it
// goes once none runs.
func (s Services) Delete(w Writer, id Identity, svc *structs.Service) (api.ServiceDetail, error) {
	return s.write(w, id, structs.ServiceDeleteType, "delete", func() (any, error) {
		del := structs.ServiceDeleteRequest{Name: svc.Name, At: now()}
		if id.User != "" {
			del.Reason = "by " + id.User
		}
		return del, nil
	})
}

// write writes one entry on a service that answers the service (what
// says which write, for an answer of another type), and answers its
// detail.
func (s Services) write(w Writer, id Identity, typ structs.MessageType, what string, entry func() (any, error)) (api.ServiceDetail, error) {
	resp, err := w.Write(typ, nil, entry)
	if err != nil {
		return api.ServiceDetail{}, err
	}
	svc, ok := resp.(*structs.Service)
	if !ok {
		return api.ServiceDetail{}, fmt.Errorf("%s service: unexpected answer %T from the state machine", what, resp)
	}
	return s.Detail(id, svc, false), nil
}

// Detail is svc, which must be a copy, with its replicas and
// endpoints, hiding what the caller may not see.
func (s Services) Detail(id Identity, svc *structs.Service, secrets bool) api.ServiceDetail {
	reps := s.replicas(svc)
	d := api.ServiceDetail{
		ServiceInfo: s.serviceInfo(RedactService(id, svc, secrets), reps),
		Replicas:    make([]api.Replica, len(reps)),
		Endpoints:   s.endpoints(svc.Name),
	}
	for i, rep := range reps {
		d.Replicas[i] = rep.Replica
	}
	return d
}

// replica is a live replica with the job it describes.
type replica struct {
	api.Replica
	job *structs.Job
}

// replicas are the live replicas of svc, oldest first.
func (s Services) replicas(svc *structs.Service) []replica {
	var out []replica
	for _, job := range s.State.ServiceReplicas(svc.Name) {
		if job.State.Terminal() {
			continue // stopped by a scale down or the delete: no longer one of them
		}
		out = append(out, replica{Replica: s.replicaOf(svc, job), job: job})
	}
	slices.SortFunc(out, func(a, b replica) int { return cmp.Compare(a.Index, b.Index) })
	return out
}

// replicaOf describes a live replica job of svc from its latest
// allocation.
func (s Services) replicaOf(svc *structs.Service, job *structs.Job) api.Replica {
	rep := api.Replica{JobID: job.ID, Version: job.ServiceVersion, State: job.State, Restarts: job.Attempts, Crashes: job.Crashes, Reason: job.Reason}
	rep.Index, _ = strconv.Atoi(strings.TrimPrefix(job.ID, svc.ID+"-r"))
	allocs := s.State.Allocs(job.ID) // by attempt: the latest last
	for i := len(allocs) - 1; i >= 0; i-- {
		if a := allocs[i]; a.State.Terminal() {
			rep.LastExit = &api.ReplicaExit{State: a.State, ExitCode: a.ExitCode, Reason: a.Reason, At: a.FinishedAt}
			break
		}
	}
	var latest *structs.Allocation
	if len(allocs) > 0 {
		latest = allocs[len(allocs)-1]
		rep.Alloc = latest
	}
	live := latest != nil && latest.Live()
	if live {
		// The attempt running counts no restart until it ends.
		rep.Restarts, rep.Port = job.Attempts-1, latest.MasterPort
		if n, ok := s.State.Node(latest.NodeID); ok {
			rep.Node = n.Name
		}
	}
	running := live && latest.State == structs.AllocRunning
	switch {
	case job.StopRequested:
		rep.Status = api.ReplicaStopping
	case running && (svc.Spec.Health == nil || latest.Health != nil && latest.Health.Healthy):
		rep.Status, rep.Reason = api.ReplicaHealthy, ""
	case running && latest.Health != nil && !latest.Health.Starting:
		rep.Status, rep.Reason = api.ReplicaUnhealthy, latest.Health.Reason
	case live:
		rep.Status = api.ReplicaStarting
		if latest.Health != nil {
			rep.Reason = latest.Health.Reason
		}
	case job.Crashes > 0:
		rep.Status = api.ReplicaCrashLooping
	case job.Reason != "":
		rep.Status = api.ReplicaQueued // the scheduler said why it waits
	default:
		rep.Status = api.ReplicaStarting // made, and not yet looked at
	}
	return rep
}

// serviceInfo sums up how the replicas of svc stand.
func (s Services) serviceInfo(svc *structs.Service, reps []replica) api.ServiceInfo {
	info := api.ServiceInfo{Service: *svc, Statuses: map[api.ReplicaStatus]int{}}
	growing := 0 // replicas a scale up made that have not run yet
	updated := 0 // healthy replicas of the version a rollout moves to
	for _, rep := range reps {
		info.Statuses[rep.Status]++
		if svc.Rollout.Active() && rep.Version == svc.Rollout.Version && rep.Status == api.ReplicaHealthy {
			updated++
		}
		if rep.Status != api.ReplicaStopping && rep.Alloc != nil && rep.Alloc.State == structs.AllocRunning {
			info.Running++
		}
		if rep.job.CreateIndex > svc.CreateIndex && rep.job.Attempts <= 1 &&
			(rep.Status == api.ReplicaStarting || rep.Status == api.ReplicaQueued) {
			growing++
		}
	}
	info.Healthy = info.Statuses[api.ReplicaHealthy]
	info.State = serviceState(svc, info.Statuses, growing, len(reps), updated)
	return info
}

// serviceState says how a service stands in words from the count of its
// live replicas by status, growing of them new from a scale up, and, in
// a rollout, updated of them healthy at the version it moves to: a
// rollout replaces replicas, surging above the count and stopping the old
// ones, which is no scaling.
func serviceState(svc *structs.Service, st map[api.ReplicaStatus]int, growing, live, updated int) string {
	stopping := st[api.ReplicaStopping]
	var head string
	switch {
	case svc.Deleted && stopping > 0:
		return fmt.Sprintf("deleting, %d stopping", stopping)
	case svc.Deleted:
		return "deleted"
	case svc.Rollout.Active():
		head = fmt.Sprintf("rolling out v%d: %d/%d updated", svc.Rollout.Version, updated, svc.Replicas)
		if svc.Rollout.State == structs.RolloutRollingBack {
			head = fmt.Sprintf("rolling back to v%d: %d/%d back", svc.Rollout.Version, updated, svc.Replicas)
		}
		growing = 0 // a rollout's new replicas are said as starting
	case stopping > 0:
		head = fmt.Sprintf("scaling %d→%d", live, svc.Replicas)
	case growing > 0:
		head = fmt.Sprintf("scaling %d→%d", live-growing, svc.Replicas)
	default:
		head = fmt.Sprintf("%d/%d healthy", st[api.ReplicaHealthy], svc.Replicas)
	}
	parts := []string{head}
	starting := st[api.ReplicaStarting]
	if growing > 0 {
		// Starting is what a scale up's replicas do: only the queued
		// among them say more.
		starting = max(0, starting-growing)
	}
	for _, p := range []struct {
		n    int
		what api.ReplicaStatus
	}{{starting, api.ReplicaStarting}, {st[api.ReplicaQueued], api.ReplicaQueued},
		{st[api.ReplicaUnhealthy], api.ReplicaUnhealthy}, {st[api.ReplicaCrashLooping], api.ReplicaCrashLooping}} {
		if p.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", p.n, p.what))
		}
	}
	if svc.Rollout.Active() && stopping > 0 {
		parts = append(parts, fmt.Sprintf("%d %s", stopping, api.ReplicaStopping))
	}
	return strings.Join(parts, ", ")
}

// endpoints are the service's URLs on the ingress of every ready node,
// by node name; none when the ingress is off. A node's ingress answers
// on its API's address and scheme (HTTPS in a cluster with TLS).
func (s Services) endpoints(name string) []string {
	out := []string{}
	if s.IngressPort == 0 {
		return out
	}
	for _, n := range s.State.Nodes() {
		u, err := url.Parse(n.Addresses.HTTP)
		if n.Status != structs.NodeReady || err != nil || u.Hostname() == "" {
			continue
		}
		ingress := url.URL{Scheme: u.Scheme, Host: net.JoinHostPort(u.Hostname(), strconv.Itoa(s.IngressPort)), Path: "/" + name + "/"}
		out = append(out, ingress.String())
	}
	return out
}
