package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/fsm"
	"github.com/skein-dev/skein/structs"
)

var (
	// errAutoscaled refuses a manual scale of an autoscaled service.
	errAutoscaled = errors.New("service is autoscaled")
	// errNoObservation: the leader has not observed the service's load.
	errNoObservation = errors.New("no autoscale observation")
)

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
		if err := e.Validate(); err != nil || e.Autoscale == nil {
			return err
		}
		return e.Autoscale.ValidateFor(&svc.Spec)
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

// observedWait bounds the question to the leader for an observation.
const observedWait = 2 * time.Second

// observed is the leader's latest observation of an autoscaled service's
// load: its own when this node leads, else asked of the leader; nil when
// it has none or does not answer in time.
func (s *Server) observed(ctx context.Context, name string) *structs.AutoscaleObservation {
	if s.cfg.Raft.IsLeader() {
		if s.cfg.Autoscaler == nil {
			return nil
		}
		if o, ok := s.cfg.Autoscaler.Observed(name); ok {
			return &o
		}
		return nil
	}
	if s.cfg.Peers == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, observedWait)
	defer cancel()
	c, err := s.cfg.Peers.LeaderClient(ctx)
	if err != nil || c == nil {
		return nil
	}
	o, err := c.AutoscaleObserved(ctx, name)
	if err != nil {
		return nil
	}
	return o
}

// handleObserved answers the leader's latest observation of a service's
// load. Leader only; 404 when it has none.
func (s *Server) handleObserved(w http.ResponseWriter, r *http.Request) {
	if !s.cfg.Raft.IsLeader() {
		writeError(w, http.StatusServiceUnavailable, errNotLeaderHere)
		return
	}
	var o structs.AutoscaleObservation
	ok := false
	if s.cfg.Autoscaler != nil {
		o, ok = s.cfg.Autoscaler.Observed(r.PathValue("name"))
	}
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Errorf("%w: no observation of %q", errNoObservation, r.PathValue("name")))
		return
	}
	writeJSON(w, http.StatusOK, o)
}
