package fsm

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"github.com/skein-dev/skein/structs"
)

// applyNodeDrain starts or ends a node's drain (structs.NodeDrainRequest).
// A drain keeps new placements off the node (checkAlloc); the leader's
// drain steps move what runs there. An undrain ends it: a replacement
// made for a replica still on the node is stopped again, so the service
// keeps the replicas it wants. It returns a copy of the node.
func (s *state) applyNodeDrain(l *raft.Log) any {
	var req structs.NodeDrainRequest
	decode(l, &req)
	if err := req.Validate(); err != nil {
		return fmt.Errorf("node drain: %w: %w", ErrInvalidRequest, err)
	}
	n, ok := s.nodes[req.NodeID]
	if !ok {
		return fmt.Errorf("node %s: %w", structs.ShortID(req.NodeID), ErrNodeNotFound)
	}
	if !req.Drain {
		if n.Drain == nil {
			return n.Copy()
		}
		n = s.writableNode(n)
		n.Drain = nil
		delete(s.draining, n.ID)
		n.ModifyIndex = l.Index
		s.emitNode(l.Index, structs.EventNodeUndrained, n, req.At, withReason("takes work again", req.Reason))
		s.dropReplacements(n, req.At, l.Index)
		return n.Copy()
	}
	if n.Status == structs.NodeLeft {
		return fmt.Errorf("node %s: %w: it has left the cluster", nodeName(n), ErrInvalidRequest)
	}
	d := structs.NodeDrain{Deadline: req.Deadline, Force: req.Force, Reason: req.Reason, StartedAt: req.At}
	if n.Drain != nil {
		d.StartedAt, d.DrainedAt = n.Drain.StartedAt, n.Drain.DrainedAt
	}
	n = s.writableNode(n)
	n.Drain = &d
	s.draining[n.ID] = true
	n.ModifyIndex = l.Index
	what := "draining"
	switch {
	case d.Force:
		what += ", forced: everything stops now"
	case !d.Deadline.IsZero():
		what += fmt.Sprintf(", deadline %s", d.Deadline.UTC().Format(time.RFC3339))
	default:
		what += ", no deadline"
	}
	s.emitNode(l.Index, structs.EventNodeDrain, n, req.At, withReason(what, req.Reason))
	return n.Copy()
}

// dropReplacements stops the replacements made for replicas that still
// run on node n, whose drain was called off, and forgets them.
func (s *state) dropReplacements(n *structs.Node, at time.Time, index uint64) {
	for _, a := range sortedAllocs(s.nodeLive[n.ID]) {
		j := s.jobs[a.JobID]
		if j == nil || j.ReplacedBy == "" {
			continue
		}
		if r := s.jobs[j.ReplacedBy]; r != nil && s.wantsReplica(r) {
			s.cancel(r, fmt.Sprintf("node %s undrained: replica %s stays", nodeName(n), structs.ShortID(j.ID)), at, index)
		}
		j.ReplacedBy = ""
		j.ModifyIndex = index
	}
}

// applyNodeDrainStep applies one step of a drain
// (structs.NodeDrainStepRequest), all of it or, when any part no longer
// fits the state, none of it (ErrDrainStale): the leader decides again.
// It returns a copy of the node.
func (s *state) applyNodeDrainStep(l *raft.Log) any {
	var req structs.NodeDrainStepRequest
	decode(l, &req)
	if err := req.Validate(); err != nil {
		return fmt.Errorf("node drain step: %w: %w", ErrInvalidRequest, err)
	}
	n, ok := s.nodes[req.NodeID]
	if !ok {
		return fmt.Errorf("node %s: %w", structs.ShortID(req.NodeID), ErrNodeNotFound)
	}
	if n.Drain == nil {
		return fmt.Errorf("node %s: %w: it is not draining", nodeName(n), ErrDrainStale)
	}
	if req.Done {
		if live := len(s.nodeLive[n.ID]); live > 0 {
			return fmt.Errorf("node %s: %w: %d allocations still live", nodeName(n), ErrDrainStale, live)
		}
		if n.Drain.Drained() {
			return n.Copy()
		}
		n = s.writableNode(n)
		n.Drain.DrainedAt = req.At
		n.ModifyIndex = l.Index
		s.emitNode(l.Index, structs.EventNodeDrained, n, req.At, "drained: nothing runs on it")
		return n.Copy()
	}
	if err := s.checkDrainStep(n, &req); err != nil {
		return fmt.Errorf("node %s: %w", nodeName(n), err)
	}
	var moved []string
	for _, id := range req.Replace {
		j := s.jobs[id]
		r := s.addReplica(s.serviceOf(j), req.At, l.Index)
		j.ReplacedBy = r.ID
		j.ModifyIndex = l.Index
		moved = append(moved, fmt.Sprintf("replica %s of service %s: replacement %s made", structs.ShortID(id), j.Service, structs.ShortID(r.ID)))
	}
	for _, id := range req.Stop {
		j := s.jobs[id]
		why := fmt.Sprintf("moved off draining node %s", nodeName(n))
		if j.ReplacedBy != "" {
			why += fmt.Sprintf(" (replacement %s)", structs.ShortID(j.ReplacedBy))
		}
		s.cancel(j, why, req.At, l.Index)
		moved = append(moved, fmt.Sprintf("replica %s of service %s stopped", structs.ShortID(id), j.Service))
	}
	for _, id := range req.Evict {
		j := s.jobs[id]
		reason := fmt.Sprintf("evicted: node %s drains", nodeName(n))
		for _, a := range s.jobAllocs[j.ID] {
			if a.Live() && a.Attempt == j.Attempts {
				stopAlloc(a, l.Index)
				a.Reason = reason
				a.StopGrace = j.Spec.PreemptGrace
				if j.Spec.Signal != nil {
					a.StopSignal = j.Spec.Signal.Name
				}
			}
		}
		j.Evicted = reason
		j.Reason = reason + ": stopping, to run again elsewhere"
		j.ModifyIndex = l.Index
		s.emitJob(l.Index, structs.EventJobPreempted, j, req.At, reason)
		what := fmt.Sprintf("job %s stopped to run again elsewhere", structs.ShortID(id))
		if j.Spec.Signal != nil {
			what += " (SIG" + j.Spec.Signal.Name + " first)"
		}
		moved = append(moved, what)
	}
	for _, id := range req.Kill {
		j := s.jobs[id]
		reason := fmt.Sprintf("killed: node %s drains", nodeName(n))
		if n.Drain.Force {
			reason += ", forced"
		} else {
			reason += ", past its deadline"
		}
		for _, a := range s.jobAllocs[j.ID] {
			if a.Live() && a.Attempt == j.Attempts {
				stopAlloc(a, l.Index)
				a.Reason = reason
			}
		}
		j.ModifyIndex = l.Index
		moved = append(moved, fmt.Sprintf("job %s stopped", structs.ShortID(id)))
	}
	s.emitNode(l.Index, structs.EventNodeDrainMoved, n, req.At, strings.Join(moved, "; "))
	return n.Copy()
}

// checkDrainStep checks every part of a drain step on node n against the
// state.
func (s *state) checkDrainStep(n *structs.Node, req *structs.NodeDrainStepRequest) error {
	late := n.Drain.Force || (!n.Drain.Deadline.IsZero() && !req.At.Before(n.Drain.Deadline))
	seen := map[string]bool{}
	job := func(id string) (*structs.Job, error) {
		j := s.jobs[id]
		switch {
		case seen[id]:
			return nil, fmt.Errorf("%w: job %s named twice", ErrInvalidRequest, structs.ShortID(id))
		case j == nil:
			return nil, fmt.Errorf("%w: job %s: %w", ErrDrainStale, structs.ShortID(id), ErrJobNotFound)
		case !s.runsOn(j, n.ID):
			return nil, fmt.Errorf("%w: job %s runs nothing on the node, or is stopping", ErrDrainStale, structs.ShortID(id))
		}
		seen[id] = true
		return j, nil
	}
	for _, id := range req.Replace {
		j, err := job(id)
		if err != nil {
			return err
		}
		svc := s.serviceOf(j)
		switch {
		case !s.wantsReplica(j):
			return fmt.Errorf("%w: job %s is no replica its service wants", ErrDrainStale, structs.ShortID(id))
		case j.ReplacedBy != "" && s.jobs[j.ReplacedBy] != nil && s.wantsReplica(s.jobs[j.ReplacedBy]):
			return fmt.Errorf("%w: replica %s already has replacement %s", ErrDrainStale, structs.ShortID(id), structs.ShortID(j.ReplacedBy))
		}
		if err := s.checkReplicaLimits(svc, 1); err != nil {
			return err
		}
	}
	for _, id := range req.Stop {
		j, err := job(id)
		if err != nil {
			return err
		}
		switch {
		case !s.wantsReplica(j):
			return fmt.Errorf("%w: job %s is no replica its service wants", ErrDrainStale, structs.ShortID(id))
		case late:
		case j.ReplacedBy == "" || s.jobs[j.ReplacedBy] == nil:
			return fmt.Errorf("%w: replica %s has no replacement", ErrDrainStale, structs.ShortID(id))
		case !s.replicaAvailable(s.serviceOf(j), s.jobs[j.ReplacedBy]):
			return fmt.Errorf("%w: replica %s: replacement %s is not available yet", ErrDrainStale, structs.ShortID(id), structs.ShortID(j.ReplacedBy))
		}
	}
	for _, id := range req.Evict {
		j, err := job(id)
		if err != nil {
			return err
		}
		switch {
		case j.Service != "":
			return fmt.Errorf("%w: job %s is a replica: it is replaced, not evicted", ErrInvalidRequest, structs.ShortID(id))
		case j.State != structs.JobRunning || j.PreemptedBy != "" || j.Evicted != "":
			return fmt.Errorf("%w: job %s is %s or already stopping", ErrDrainStale, structs.ShortID(id), j.State)
		case !j.Restartable():
			return fmt.Errorf("%w: job %s cannot run again: not preemptible and no restart left", ErrDrainStale, structs.ShortID(id))
		}
	}
	for _, id := range req.Kill {
		if _, err := job(id); err != nil {
			return err
		}
		if !late {
			return fmt.Errorf("%w: job %s: the drain is not forced and its deadline has not passed", ErrDrainStale, structs.ShortID(id))
		}
	}
	return nil
}

// runsOn reports whether job j's current attempt has an allocation on
// node nodeID that is live and not yet asked to stop, and j is not being
// cancelled.
func (s *state) runsOn(j *structs.Job, nodeID string) bool {
	if j.StopRequested {
		return false
	}
	return slices.ContainsFunc(s.jobAllocs[j.ID], func(a *structs.Allocation) bool {
		return a.NodeID == nodeID && a.Live() && a.Attempt == j.Attempts && a.DesiredState != structs.DesiredStop
	})
}

// requeueEvicted puts a job stopped by a drain back in the queue, at
// once and without using a restart.
func (s *state) requeueEvicted(j *structs.Job, evicted string, at time.Time, index uint64) {
	s.requeue(j, index)
	j.Evictions++
	j.Reason = "requeued: " + evicted
	s.emitJob(index, structs.EventJobRestarted, j, at, j.Reason)
}
