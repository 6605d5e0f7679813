package structs

import "time"

// MaxDrainDeadline is the longest deadline a drain may be given.
const MaxDrainDeadline = 30 * 24 * time.Hour

// MaxDrainStep bounds each list of a drain step, as a plan's entries are
// bounded.
const MaxDrainStep = 1000

// NodeDrain is a node's drain: no new work is placed on it, the replicas
// of services running there are moved (a replacement is healthy before
// the replica stops), restartable jobs are stopped with their signal and
// grace and run again elsewhere, and other jobs run out, or are stopped
// at Deadline. Force stops everything at once.
type NodeDrain struct {
	// Deadline is when the jobs still running are stopped; zero: none,
	// they may run out.
	Deadline time.Time `json:"deadline,omitzero"`
	Force    bool      `json:"force,omitempty"`
	Reason   string    `json:"reason,omitempty"`
	// StartedAt is when the drain began; DrainedAt when nothing was left
	// running on the node (zero while something is).
	StartedAt time.Time `json:"started_at"`
	DrainedAt time.Time `json:"drained_at,omitzero"`
}

// Drained reports whether the drain is over: nothing runs on the node.
func (d *NodeDrain) Drained() bool { return d != nil && !d.DrainedAt.IsZero() }

// NodeDrainRequest starts a node's drain (Drain) or ends it (!Drain:
// undrain, the node takes work again). The leader stamps At and turns
// the operator's deadline into the time Deadline. Draining a draining
// node again replaces its deadline, force and reason.
type NodeDrainRequest struct {
	NodeID   string    `json:"node_id"`
	Drain    bool      `json:"drain"`
	Deadline time.Time `json:"deadline,omitzero"`
	Force    bool      `json:"force,omitempty"`
	Reason   string    `json:"reason,omitempty"`
	At       time.Time `json:"at"`
}

// Validate checks the request's shape.
func (r *NodeDrainRequest) Validate() error {
	switch {
	case r.NodeID == "":
		return fieldErr("node_id", "empty")
	case len(r.Reason) > MaxServiceReasonLen:
		return fieldErr("reason", "%d bytes; at most %d", len(r.Reason), MaxServiceReasonLen)
	case !r.Drain && (r.Force || !r.Deadline.IsZero()):
		return fieldErr("force", "an undrain takes no deadline and no force")
	}
	return nil
}

// NodeDrainStepRequest is one step of a node's drain as the leader
// decided it from the state (sched.NextDrainStep); the state re-checks
// each part against what it holds and refuses a step that no longer
// fits:
//   - Replace: replica jobs on the node that get a replacement, a new
//     replica of their service, placed elsewhere (Job.ReplacedBy);
//   - Stop: replica jobs on the node whose replacement is available (or
//     whose drain is past its deadline, or forced): they stop for good;
//   - Evict: restartable jobs with an allocation on the node: stopped
//     with their signal and grace, they go back to the queue without
//     using a restart (Job.Evicted);
//   - Kill: other jobs on the node, past the deadline or forced: stopped
//     as a cancel stops them, and handled by their restart policy;
//   - Done alone: nothing runs on the node any more.
type NodeDrainStepRequest struct {
	NodeID  string    `json:"node_id"`
	Replace []string  `json:"replace,omitempty"`
	Stop    []string  `json:"stop,omitempty"`
	Evict   []string  `json:"evict,omitempty"`
	Kill    []string  `json:"kill,omitempty"`
	Done    bool      `json:"done,omitempty"`
	At      time.Time `json:"at"`
}

// Empty reports whether the step does nothing.
func (r *NodeDrainStepRequest) Empty() bool {
	return !r.Done && len(r.Replace)+len(r.Stop)+len(r.Evict)+len(r.Kill) == 0
}

// Validate checks the step's shape.
func (r *NodeDrainStepRequest) Validate() error {
	for _, l := range []struct {
		name string
		ids  []string
	}{{"replace", r.Replace}, {"stop", r.Stop}, {"evict", r.Evict}, {"kill", r.Kill}} {
		if len(l.ids) > MaxDrainStep {
			return fieldErr(l.name, "%d jobs, more than the limit of %d", len(l.ids), MaxDrainStep)
		}
	}
	switch {
	case r.NodeID == "":
		return fieldErr("node_id", "empty")
	case r.Done && len(r.Replace)+len(r.Stop)+len(r.Evict)+len(r.Kill) > 0:
		return fieldErr("done", "set with jobs to move: a step does one or the other")
	case r.Empty():
		return fieldErr("done", "false with no job to move: the step does nothing")
	}
	return nil
}

// RestartsUsed is how many of its restarts a job has used: its attempts
// after the first, less those that ended in a preemption, an eviction by
// a drain or one of the free GPU-fault restarts.
func (j *Job) RestartsUsed() int {
	return max(j.Attempts-1-j.Preemptions-j.Evictions-j.GPUFaults, 0)
}

// Restartable reports whether a drain may stop the job and run it again
// elsewhere: it is preemptible, or has restarts left.
func (j *Job) Restartable() bool {
	return j.Spec.Preemptible || j.RestartsUsed() < j.Spec.Restarts
}

// Copy returns a copy of the drain, nil for nil.
func (d *NodeDrain) Copy() *NodeDrain {
	if d == nil {
		return nil
	}
	c := *d
	return &c
}

// StatusText is the node's status as the CLI and the UI show it: its
// Status, or "draining" or "drained" for a ready node that drains; a
// draining node that is down is "down (draining)".
func (n *Node) StatusText() string {
	if n.Drain == nil {
		return string(n.Status)
	}
	d := "draining"
	if n.Drain.Drained() {
		d = "drained"
	}
	if n.Status == NodeReady || n.Status == NodeDraining {
		return d
	}
	return string(n.Status) + " (" + d + ")"
}

// NodeRemoveRequest forgets a node that is down or has left: it leaves
// the state (its ended allocations stay with their jobs). A node that
// still holds live allocations is refused: they must be declared lost
// first, once it cannot run them any more.
type NodeRemoveRequest struct {
	NodeID string    `json:"node_id"`
	Reason string    `json:"reason,omitempty"`
	At     time.Time `json:"at"`
}
