package server

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/fsm"
	"github.com/skein-dev/skein/structs"
)

// errAutoscaled refuses a manual scale of an autoscaled service.
var errAutoscaled = errors.New("service is autoscaled")

// handleServiceAutoscale sets how the leader scales a service, or turns
// autoscaling off (a body whose autoscale is null); permissions as for a
// scale.
func (s *Server) handleServiceAutoscale(w http.ResponseWriter, r *http.Request) {
	svc, ok := s.findService(w, r)
	if !ok || !mayActOnService(w, r, svc, "autoscale") {
		return
	}
	var req api.ServiceAutoscaleRequest
	entry := func() structs.ServiceAutoscaleRequest {
		return structs.ServiceAutoscaleRequest{Name: svc.Name, Autoscale: req.Autoscale, At: now()}
	}
	valid := func() error {
		if svc.Deleted {
			return fmt.Errorf("service %s: %w", svc.Name, fsm.ErrServiceDeleted)
		}
		e := entry()
		return e.Validate()
	}
	s.leaderWrite(w, r, &req, valid, statusOf, func() (any, error) {
		resp, err := s.cfg.Apply(structs.ServiceAutoscaleType, entry())
		if err != nil {
			return nil, err
		}
		return s.serviceAnswer(r, resp, "autoscale")
	})
}

// autoscaledError is why a manual scale of svc, which is autoscaled, is
// refused, and how to do it.
func autoscaledError(svc *structs.Service) error {
	return fmt.Errorf("%w: %s scales itself within %d-%d replicas; turn that off first (skein service autoscale %s off), or change its bounds (skein service autoscale %s MIN-MAX --target ...)",
		errAutoscaled, svc.Name, svc.Autoscale.Min, svc.Autoscale.Max, svc.Name, svc.Name)
}
