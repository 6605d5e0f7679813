package structs

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// EventKind names what happened in an Event.
type EventKind string

// Event kinds. The state machine makes each from the change it applies
// (fsm/DESIGN.md, "Events are made by Apply").
const (
	EventJobSubmitted EventKind = "job-submitted"
	EventJobPlaced    EventKind = "job-placed"
	EventJobStarted   EventKind = "job-started"
	EventJobRestarted EventKind = "job-restarted"
	EventJobPreempted EventKind = "job-preempted"
	EventJobSucceeded EventKind = "job-succeeded"
	EventJobFailed    EventKind = "job-failed"
	EventJobTimedOut  EventKind = "job-timed-out"
	EventJobCancelled EventKind = "job-cancelled"
	// EventJobPortMoved: a job's MASTER_PORT was found held on its
	// rank-0 node by a program skein does not run, and moved.
	EventJobPortMoved EventKind = "job-port-moved"

	EventNodeJoined EventKind = "node-joined"
	EventNodeReady  EventKind = "node-ready"
	EventNodeDown   EventKind = "node-down"
	EventNodeDrain  EventKind = "node-draining"
	// EventNodeDrained: nothing runs on a draining node any more;
	// EventNodeUndrained: it takes work again; EventNodeDrainMoved: a
	// drain step moved or stopped work, the event saying which.
	EventNodeDrained    EventKind = "node-drained"
	EventNodeUndrained  EventKind = "node-undrained"
	EventNodeDrainMoved EventKind = "node-drain-moved"
	EventNodeLeft       EventKind = "node-left"
	EventNodeLost       EventKind = "node-allocs-lost"
	// EventNodeRemoved: a node down or left was forgotten.
	EventNodeRemoved EventKind = "node-removed"

	EventLeaderElected EventKind = "leader-elected"

	EventGPUFault      EventKind = "gpu-fault"
	EventGPURecovered  EventKind = "gpu-recovered"
	EventGPUCordoned   EventKind = "gpu-cordoned"
	EventGPUUncordoned EventKind = "gpu-uncordoned"

	EventServiceRegistered EventKind = "service-registered"
	EventServiceScaled     EventKind = "service-scaled"
	EventServiceUpdated    EventKind = "service-updated"
	EventServiceRolledOut  EventKind = "service-rolled-out"
	EventServiceRolledBack EventKind = "service-rolled-back"
	EventServiceDeleted    EventKind = "service-deleted"

	// EventsDropped is not a change of state: a reader that asked for
	// events older than the state still keeps is told so with one, in
	// their place (its cursor is the newest one dropped).
	EventsDropped EventKind = "events-dropped"
)

// MaxEventReasonLen bounds an event's reason, cut on a character boundary.
const MaxEventReasonLen = 512

// Event is one change of the replicated state, as the state machine
// applied it: every replica holds the same events with the same cursors.
type Event struct {
	// Index is the Raft index of the entry that made the event and Seq
	// its place among that entry's events, from 0: together, the event's
	// cursor.
	Index uint64 `json:"index"`
	Seq   int    `json:"seq"`
	// Time is the time the entry carries (stamped by the leader or the
	// reporting node), not when a replica applied it.
	Time time.Time `json:"time"`
	Kind EventKind `json:"kind"`
	// The subject: the job, node (ID, and name as it was then), GPU
	// (UUID and index, on Node) or service the event is about, those
	// that apply.
	Job      string `json:"job,omitempty"`
	Node     string `json:"node,omitempty"`
	NodeName string `json:"node_name,omitempty"`
	GPU      string `json:"gpu,omitempty"`
	GPUIndex int    `json:"gpu_index,omitempty"`
	Service  string `json:"service,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

// Cursor is where the event stands in the event log.
func (e *Event) Cursor() EventCursor { return EventCursor{Index: e.Index, Seq: e.Seq} }

// Subject is what the event is about, in one word for a table: the
// service, else the job, else the GPU, else the node.
func (e *Event) Subject() string {
	switch {
	case e.Service != "" && e.Job == "":
		return "service/" + e.Service
	case e.Job != "":
		return "job/" + ShortID(e.Job)
	case e.GPU != "":
		return fmt.Sprintf("gpu/%s:%d", e.nodeName(), e.GPUIndex)
	case e.Node != "":
		return "node/" + e.nodeName()
	}
	return "cluster"
}

// nodeName is the event's node by name, else by short ID.
func (e *Event) nodeName() string { return cmp.Or(e.NodeName, ShortID(e.Node)) }

// EventCursor orders events: by Raft index, then by place in the entry.
// Written "INDEX.SEQ"; "INDEX" alone stands after every event of that
// entry, so "after 120" starts with the first event of entry 121.
type EventCursor struct {
	Index uint64
	Seq   int
}

// eventSeqAll is the Seq of a cursor written without one: after every
// event of its entry.
const eventSeqAll = int(^uint(0) >> 1)

// AfterIndex is the cursor after every event of the entry at index.
func AfterIndex(index uint64) EventCursor { return EventCursor{Index: index, Seq: eventSeqAll} }

// Compare returns -1, 0 or 1 as c is before, at or after o.
func (c EventCursor) Compare(o EventCursor) int {
	return cmp.Or(cmp.Compare(c.Index, o.Index), cmp.Compare(c.Seq, o.Seq))
}

// IsZero reports whether c is before every event.
func (c EventCursor) IsZero() bool { return c == EventCursor{} }

func (c EventCursor) String() string {
	if c.Seq == eventSeqAll {
		return strconv.FormatUint(c.Index, 10)
	}
	return strconv.FormatUint(c.Index, 10) + "." + strconv.Itoa(c.Seq)
}

// MarshalText implements encoding.TextMarshaler.
func (c EventCursor) MarshalText() ([]byte, error) { return []byte(c.String()), nil }

// UnmarshalText reads "INDEX" or "INDEX.SEQ"; "" is the zero cursor.
func (c *EventCursor) UnmarshalText(b []byte) error {
	s := string(b)
	if s == "" {
		*c = EventCursor{}
		return nil
	}
	idx, seq, hasSeq := strings.Cut(s, ".")
	i, err := strconv.ParseUint(idx, 10, 64)
	if err != nil {
		return fmt.Errorf("event cursor %q: want INDEX or INDEX.SEQ, INDEX a Raft index", s)
	}
	n := eventSeqAll
	if hasSeq {
		if n, err = strconv.Atoi(seq); err != nil || n < 0 {
			return fmt.Errorf("event cursor %q: SEQ %q is not a number from 0", s, seq)
		}
	}
	*c = EventCursor{Index: i, Seq: n}
	return nil
}

// ParseEventCursor reads a cursor as UnmarshalText does.
func ParseEventCursor(s string) (EventCursor, error) {
	var c EventCursor
	return c, c.UnmarshalText([]byte(s))
}

// LeaderElectedRequest is a new leader's first entry: it says who leads
// from then on, so the event log shows leadership changes in log order.
type LeaderElectedRequest struct {
	NodeID string    `json:"node_id"`
	At     time.Time `json:"at"`
}
