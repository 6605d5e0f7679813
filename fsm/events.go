package fsm

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"github.com/skein-dev/skein/structs"
)

// MaxEvents is how many events the state keeps: the newest, in a ring.
// It is the same on every replica, so every replica keeps the same ones.
const MaxEvents = 10_000

// MaxEventsPage bounds how many events one read returns.
const MaxEventsPage = 1_000

// eventLog is the ring of the newest events, oldest first, and the cursor
// of the newest event it has let go of.
type eventLog struct {
	buf     []structs.Event // at most MaxEvents; once full, start is the oldest
	start   int
	dropped structs.EventCursor
}

// len is how many events the ring holds.
func (l *eventLog) len() int { return len(l.buf) }

// at returns the ith oldest event held.
func (l *eventLog) at(i int) *structs.Event { return &l.buf[(l.start+i)%len(l.buf)] }

// last returns the newest event held, or nil.
func (l *eventLog) last() *structs.Event {
	if len(l.buf) == 0 {
		return nil
	}
	return l.at(len(l.buf) - 1)
}

// lastCursor is the cursor of the newest event held, or zero.
func (l *eventLog) lastCursor() structs.EventCursor {
	if e := l.last(); e != nil {
		return e.Cursor()
	}
	return structs.EventCursor{}
}

// push adds the newest event, letting the oldest go once the ring is full.
func (l *eventLog) push(e structs.Event) {
	if len(l.buf) < MaxEvents {
		l.buf = append(l.buf, e)
		return
	}
	l.dropped = l.buf[l.start].Cursor()
	l.buf[l.start] = e
	l.start = (l.start + 1) % len(l.buf)
}

// emit records an event of the entry at index. Its Seq follows the
// entry's events before it; its reason is cut to MaxEventReasonLen.
func (s *state) emit(index uint64, e structs.Event) {
	e.Index, e.Seq = index, 0
	if last := s.events.last(); last != nil && last.Index == index {
		e.Seq = last.Seq + 1
	}
	e.Reason = structs.Clip(e.Reason, structs.MaxEventReasonLen)
	s.events.push(e)
}

// emitJob records an event about a job.
func (s *state) emitJob(index uint64, kind structs.EventKind, j *structs.Job, at time.Time, reason string) {
	s.emit(index, structs.Event{Time: at, Kind: kind, Job: j.ID, Service: j.Service, Reason: reason})
}

// emitNode records an event about a node.
func (s *state) emitNode(index uint64, kind structs.EventKind, n *structs.Node, at time.Time, reason string) {
	s.emit(index, structs.Event{Time: at, Kind: kind, Node: n.ID, NodeName: n.Name, Reason: reason})
}

// emitGPU records an event about one GPU of a node.
func (s *state) emitGPU(index uint64, kind structs.EventKind, n *structs.Node, g *structs.GPU, at time.Time, reason string) {
	s.emit(index, structs.Event{Time: at, Kind: kind, Node: n.ID, NodeName: n.Name, GPU: g.UUID, GPUIndex: g.Index, Reason: reason})
}

// emitService records an event about a service.
func (s *state) emitService(index uint64, kind structs.EventKind, svc *structs.Service, at time.Time, reason string) {
	s.emit(index, structs.Event{Time: at, Kind: kind, Service: svc.Name, Reason: reason})
}

// jobEndEvents is the event of each terminal job state.
var jobEndEvents = map[structs.JobState]structs.EventKind{
	structs.JobSucceeded: structs.EventJobSucceeded,
	structs.JobFailed:    structs.EventJobFailed,
	structs.JobTimedOut:  structs.EventJobTimedOut,
	structs.JobCancelled: structs.EventJobCancelled,
}

// nodeStatusEvents is the event of each node status a node moves to.
var nodeStatusEvents = map[structs.NodeStatus]structs.EventKind{
	structs.NodeReady:    structs.EventNodeReady,
	structs.NodeDown:     structs.EventNodeDown,
	structs.NodeDraining: structs.EventNodeDrain,
	structs.NodeLeft:     structs.EventNodeLeft,
}

// placedReason says where a placement put a job's ranks: each rank's
// node, or for a gang of more than a few, how many nodes (the allocations
// say which).
func (s *state) placedReason(j *structs.Job, p *structs.JobPlacement) string {
	if n := len(p.Allocations); n > 4 {
		return fmt.Sprintf("attempt %d: %d ranks on %d nodes, %s each", j.Attempts, n, n, gpusText(j.Spec.GPUs))
	}
	parts := make([]string, 0, len(p.Allocations))
	for _, a := range p.Allocations {
		where := nodeName(s.nodes[a.NodeID])
		if len(a.GPUs) > 0 {
			where += " (" + gpusText(len(a.GPUs)) + ")"
		}
		if j.Spec.Nodes > 1 {
			where = fmt.Sprintf("rank %d on %s", a.Rank, where)
		}
		parts = append(parts, where)
	}
	reason := "on " + strings.Join(parts, ", ")
	if j.Spec.Nodes > 1 {
		reason = strings.Join(parts, ", ")
	}
	return fmt.Sprintf("attempt %d: %s", j.Attempts, reason)
}

// gpusText says how many GPUs: "1 GPU", "8 GPUs".
func gpusText(n int) string {
	if n == 1 {
		return "1 GPU"
	}
	return fmt.Sprintf("%d GPUs", n)
}

// applyLeaderElected records who leads, by the name the state knows the
// node by. It changes nothing but the event log, so old binaries may skip
// it (it is written with structs.IgnoreUnknownTypeFlag).
func (s *state) applyLeaderElected(l *raft.Log) any {
	var req structs.LeaderElectedRequest
	decode(l, &req)
	if req.NodeID == "" {
		return fmt.Errorf("leader elected: %w: empty node id", ErrInvalidRequest)
	}
	var name string
	if n, ok := s.nodes[req.NodeID]; ok {
		name = n.Name
	}
	s.emit(l.Index, structs.Event{Time: req.At, Kind: structs.EventLeaderElected, Node: req.NodeID, NodeName: name,
		Reason: fmt.Sprintf("%s leads from raft index %d", nameOr(name, req.NodeID), l.Index)})
	return nil
}

// nameOr is name, else the short form of id.
func nameOr(name, id string) string {
	if name != "" {
		return name
	}
	return structs.ShortID(id)
}

// EventQuery selects events: those after a cursor, about one job or one
// node (its own events and those of its GPUs and of the allocations it
// ran) when set, at most Limit (MaxEventsPage when 0 or more).
type EventQuery struct {
	After structs.EventCursor
	Job   string
	Node  string
	Limit int
}

// EventPage is what Events answers.
type EventPage struct {
	// Events are the events selected, oldest first: copies.
	Events []structs.Event
	// Dropped, when not zero, is the newest event after the query's
	// cursor that the state no longer holds: every event from the
	// cursor up to it is gone (the ring keeps MaxEvents).
	Dropped structs.EventCursor
	// Next is where the next read resumes: the newest event looked at,
	// whether it matched or not, or the query's cursor.
	Next structs.EventCursor
	// Changed is closed once an event is added after this page (or the
	// state is restored from a snapshot).
	Changed <-chan struct{}
}

// Events returns the events a query selects and a channel to wait on for
// newer ones; it copies only what it returns.
func (f *FSM) Events(q EventQuery) EventPage {
	limit := q.Limit
	if limit <= 0 || limit > MaxEventsPage {
		limit = MaxEventsPage
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	l := &f.st.events
	page := EventPage{Next: q.After, Changed: f.eventWatch}
	if !l.dropped.IsZero() && q.After.Compare(l.dropped) < 0 {
		page.Dropped = l.dropped
		page.Next = l.dropped
	}
	for i := l.firstAfter(q.After); i < l.len(); i++ {
		e := l.at(i)
		page.Next = e.Cursor()
		if (q.Job == "" || e.Job == q.Job) && (q.Node == "" || e.Node == q.Node) {
			page.Events = append(page.Events, *e)
			if len(page.Events) == limit {
				break
			}
		}
	}
	return page
}

// firstAfter is the position of the oldest event held after c.
func (l *eventLog) firstAfter(c structs.EventCursor) int {
	lo, hi := 0, l.len()
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if l.at(mid).Cursor().Compare(c) <= 0 {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// RecentEvents returns up to n of the newest events about a job (when
// job is set) or a node (when node is set), oldest first: what a page
// about one job or node shows.
func (f *FSM) RecentEvents(job, node string, n int) []structs.Event {
	n = min(max(n, 0), MaxEventsPage)
	f.mu.RLock()
	defer f.mu.RUnlock()
	l := &f.st.events
	var out []structs.Event
	for i := l.len() - 1; i >= 0 && len(out) < n; i-- {
		e := l.at(i)
		if (job == "" || e.Job == job) && (node == "" || e.Node == node) {
			out = append(out, *e)
		}
	}
	slices.Reverse(out)
	return out
}
