package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/skein-dev/skein/structs"
)

var (
	// errNoObservation: the leader has not observed the service's load.
	errNoObservation = errors.New("no autoscale observation")
)

// observedWait bounds the question to the leader for an observation.
const observedWait = 2 * time.Second

// observed is the leader's latest observation of an autoscaled service's
// load: its own when this node leads, else asked of the leader; nil when
// it has none or does not answer in time.
func (s *serviceRoutes) observed(ctx context.Context, name string) *structs.AutoscaleObservation {
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
func (s *serviceRoutes) handleObserved(w http.ResponseWriter, r *http.Request) {
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
