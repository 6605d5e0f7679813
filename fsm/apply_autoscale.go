package fsm

import (
	"fmt"

	"github.com/hashicorp/raft"

	"github.com/skein-dev/skein/structs"
)

// applyServiceAutoscale sets or clears how the leader scales a service
// and returns a copy of the service. Set, it brings Replicas within the
// autoscale's Min and Max at once, by the path a scale takes, saying so
// in Reason; cleared, the replicas stay as they are.
func (s *state) applyServiceAutoscale(l *raft.Log) any {
	var req structs.ServiceAutoscaleRequest
	decode(l, &req)
	if err := req.Validate(); err != nil {
		return fmt.Errorf("service autoscale: %w", err)
	}
	svc, err := s.liveService(req.Name)
	if err != nil {
		return err
	}
	a := req.Autoscale
	if a == nil {
		svc.Autoscale = nil
		svc.ModifyIndex = l.Index
		return svc.Copy()
	}
	if err := a.ValidateFor(&svc.Spec); err != nil {
		return fmt.Errorf("service autoscale: %w", err)
	}
	if n := a.Clamp(svc.Replicas); n != svc.Replicas {
		why := fmt.Sprintf("scaled %d→%d: autoscale is %d-%d", svc.Replicas, n, a.Min, a.Max)
		if err := s.scaleService(svc, n, why, req.At, l.Index); err != nil {
			return err
		}
	}
	svc.Autoscale = a
	svc.ModifyIndex = l.Index
	return svc.Copy()
}
