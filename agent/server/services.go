package server

import (
	"cmp"
	"errors"
	"fmt"
	"github.com/skein-dev/skein/agent/server/endpoint"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/fsm"
	"github.com/skein-dev/skein/sched"
	"github.com/skein-dev/skein/structs"
)

// handleServiceCreate creates a service owned by the caller. Its spec is
// checked as a job's is, and refused when no node could ever run a
// replica; the leader gives it its ID and commits it.
func (s *Server) handleServiceCreate(w http.ResponseWriter, r *http.Request) {
	id := identityOf(r)
	var req api.ServiceCreateRequest
	s.leaderWrite(w, r, &req, func() error { return s.checkServiceCreate(id, &req) }, statusOf, func() (any, error) {
		svc := structs.Service{ID: structs.NewID(), Name: req.Name, Owner: id.User, Spec: req.Spec, Replicas: req.Replicas,
			Autoscale: req.Autoscale, CreatedAt: now()}
		if u, ok := s.fsm.ACLUser(id.User); ok && id.ACL {
			svc.AllowRoot = u.AllowRoot
		}
		resp, err := s.cfg.Apply(structs.ServiceRegisterType, structs.ServiceRegisterRequest{Service: svc})
		if err != nil {
			return nil, err
		}
		created, ok := resp.(*structs.Service)
		if !ok {
			return nil, fmt.Errorf("create service: unexpected answer %T from the state machine", resp)
		}
		return s.serviceDetail(id, created, false), nil
	})
}

// checkServiceCreate normalizes and checks a create: the service itself,
// the loader variables its replicas set, its name free, and some node
// able to run a replica (with none registered yet, the replicas wait).
func (s *Server) checkServiceCreate(id Identity, req *api.ServiceCreateRequest) error {
	req.Spec.Normalize()
	svc := structs.Service{Name: req.Name, Replicas: req.Replicas, Spec: req.Spec, Autoscale: req.Autoscale}
	if err := svc.Validate(); err != nil {
		return err
	}
	if err := endpoint.CheckLoaderEnv(id, &req.Spec.Job); err != nil {
		return err
	}
	if _, ok := s.fsm.Service(req.Name); ok {
		return fmt.Errorf("service %s: %w (skein service %s)", req.Name, fsm.ErrServiceExists, req.Name)
	}
	if err := sched.CheckFits(s.fsm.Nodes(), req.Spec.Job); err != nil && !errors.Is(err, sched.ErrNoNodes) {
		return err
	}
	return nil
}

// handleServices lists every service with how its replicas stand.
func (s *Server) handleServices(w http.ResponseWriter, r *http.Request) {
	id := identityOf(r)
	out := []api.ServiceInfo{}
	for _, svc := range s.fsm.Services() {
		out = append(out, s.serviceInfo(endpoint.RedactService(id, svc, false), s.replicas(svc)))
	}
	writeJSON(w, http.StatusOK, out)
}

// handleService answers one service, its replicas and its endpoints.
func (s *Server) handleService(w http.ResponseWriter, r *http.Request) {
	svc, ok := s.findService(w, r)
	if !ok {
		return
	}
	d := s.serviceDetail(identityOf(r), svc, r.URL.Query().Get("secrets") == "true")
	if svc.Autoscale != nil {
		d.Observed = s.observed(r.Context(), svc.Name)
	}
	writeJSON(w, http.StatusOK, d)
}

// handleServiceScale sets how many replicas a service wants, saying who
// scaled it from what unless the request gives a reason. The body is
// required: an empty one would scale the service to 0.
func (s *Server) handleServiceScale(w http.ResponseWriter, r *http.Request) {
	svc, ok := s.findService(w, r)
	if !ok || !mayActOnService(w, r, svc, "scale") {
		return
	}
	var req api.ServiceScaleRequest
	body, err := readBody(w, r)
	if err == nil {
		err = decodeStrict(body, &req)
	}
	scale := structs.ServiceScaleRequest{Name: svc.Name, Replicas: req.Replicas, Reason: req.Reason, At: now()}
	if scale.Reason == "" {
		scale.Reason = fmt.Sprintf("scaled %d→%d", svc.Replicas, req.Replicas)
		if user := identityOf(r).User; user != "" {
			scale.Reason += " by " + user
		}
	}
	switch {
	case err != nil:
	case svc.Deleted:
		err = fmt.Errorf("service %s: %w", svc.Name, fsm.ErrServiceDeleted)
	case svc.Autoscale != nil:
		err = autoscaledError(svc)
	default:
		err = scale.Validate()
	}
	if err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	if !s.cfg.Raft.IsLeader() && s.forward(w, r, body) {
		return
	}
	resp, err := s.cfg.Apply(structs.ServiceScaleType, scale)
	if err == nil {
		resp, err = s.serviceAnswer(r, resp, "scale")
	}
	if err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

// handleServiceDelete stops every replica of a service; it goes once
// none runs.
func (s *Server) handleServiceDelete(w http.ResponseWriter, r *http.Request) {
	svc, ok := s.findService(w, r)
	if !ok || !mayActOnService(w, r, svc, "delete") {
		return
	}
	s.leaderWrite(w, r, nil, nil, statusOf, func() (any, error) {
		del := structs.ServiceDeleteRequest{Name: svc.Name, At: now()}
		if user := identityOf(r).User; user != "" {
			del.Reason = "by " + user
		}
		resp, err := s.cfg.Apply(structs.ServiceDeleteType, del)
		if err != nil {
			return nil, err
		}
		return s.serviceAnswer(r, resp, "delete")
	})
}

// serviceAnswer is the detail of the service a write's entry returned.
func (s *Server) serviceAnswer(r *http.Request, resp any, what string) (any, error) {
	svc, ok := resp.(*structs.Service)
	if !ok {
		return nil, fmt.Errorf("%s service: unexpected answer %T from the state machine", what, resp)
	}
	return s.serviceDetail(identityOf(r), svc, false), nil
}

// findService returns the service the path names, or answers 404.
func (s *Server) findService(w http.ResponseWriter, r *http.Request) (*structs.Service, bool) {
	name := r.PathValue("name")
	svc, ok := s.fsm.Service(name)
	if !ok {
		err := fmt.Errorf("%w: %q (skein services lists them)", fsm.ErrServiceNotFound, name)
		writeError(w, http.StatusNotFound, err)
	}
	return svc, ok
}

// serviceDetail is svc, which must be a copy, with its replicas and
// endpoints, hiding what the caller may not see.
func (s *Server) serviceDetail(id Identity, svc *structs.Service, secrets bool) api.ServiceDetail {
	reps := s.replicas(svc)
	d := api.ServiceDetail{
		ServiceInfo: s.serviceInfo(endpoint.RedactService(id, svc, secrets), reps),
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
func (s *Server) replicas(svc *structs.Service) []replica {
	var out []replica
	for _, job := range s.fsm.ServiceReplicas(svc.Name) {
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
func (s *Server) replicaOf(svc *structs.Service, job *structs.Job) api.Replica {
	rep := api.Replica{JobID: job.ID, Version: job.ServiceVersion, State: job.State, Restarts: job.Attempts, Crashes: job.Crashes, Reason: job.Reason}
	rep.Index, _ = strconv.Atoi(strings.TrimPrefix(job.ID, svc.ID+"-r"))
	allocs := s.fsm.Allocs(job.ID) // by attempt: the latest last
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
		if n, ok := s.fsm.Node(latest.NodeID); ok {
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
func (s *Server) serviceInfo(svc *structs.Service, reps []replica) api.ServiceInfo {
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
func (s *Server) endpoints(name string) []string {
	out := []string{}
	if s.cfg.IngressPort == 0 {
		return out
	}
	for _, n := range s.fsm.Nodes() {
		u, err := url.Parse(n.Addresses.HTTP)
		if n.Status != structs.NodeReady || err != nil || u.Hostname() == "" {
			continue
		}
		ingress := url.URL{Scheme: u.Scheme, Host: net.JoinHostPort(u.Hostname(), strconv.Itoa(s.cfg.IngressPort)), Path: "/" + name + "/"}
		out = append(out, ingress.String())
	}
	return out
}
