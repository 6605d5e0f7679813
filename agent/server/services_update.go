package server

import (
	"errors"
	"fmt"
	"github.com/skein-dev/skein/agent/server/endpoint"
	"net/http"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/fsm"
	"github.com/skein-dev/skein/sched"
	"github.com/skein-dev/skein/structs"
)

// handleServiceUpdate gives a service a new spec, which the leader then
// rolls out a few replicas at a time (agent/leader's rollout loop). The
// body carries the whole new spec (skein service update makes it from
// the current one); it is checked as a create's is: valid, no loader
// variables the caller may not set, and runnable on some node.
func (s *Server) handleServiceUpdate(w http.ResponseWriter, r *http.Request) {
	svc, ok := s.findService(w, r)
	if !ok || !mayActOnService(w, r, svc, "update") {
		return
	}
	id := identityOf(r)
	var req api.ServiceUpdateRequest
	var upd structs.ServiceUpdateRequest
	check := func() error {
		upd = structs.ServiceUpdateRequest{Name: svc.Name, Spec: req.Spec, MaxSurge: req.MaxSurge, MaxUnavailable: req.MaxUnavailable, At: now()}
		if id.User != "" {
			upd.Reason = "by " + id.User
		}
		upd.Normalize()
		if svc.Deleted {
			return fmt.Errorf("service %s: %w", svc.Name, fsm.ErrServiceDeleted)
		}
		if err := upd.Validate(); err != nil {
			return err
		}
		if err := endpoint.CheckLoaderEnv(id, &upd.Spec.Job); err != nil {
			return err
		}
		if err := sched.CheckFits(s.fsm.Nodes(), upd.Spec.Job); err != nil && !errors.Is(err, sched.ErrNoNodes) {
			return err
		}
		return nil
	}
	s.leaderWrite(w, r, &req, check, statusOf, func() (any, error) {
		resp, err := s.cfg.Apply(structs.ServiceUpdateType, upd)
		if err != nil {
			return nil, err
		}
		return s.serviceAnswer(r, resp, "update")
	})
}
