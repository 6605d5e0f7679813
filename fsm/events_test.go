package fsm

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/structs"
)

// allEvents reads every event the FSM holds after c, page by page.
func allEvents(f *FSM, q EventQuery) []structs.Event {
	var out []structs.Event
	for {
		p := f.Events(q)
		out = append(out, p.Events...)
		if len(p.Events) == 0 || p.Next == q.After {
			return out
		}
		q.After = p.Next
	}
}

// eventsFrom returns the events of entries after index.
func (h *harness) eventsFrom(index uint64) []structs.Event {
	return allEvents(h.f, EventQuery{After: structs.AfterIndex(index)})
}

// kinds lists the kinds of events, in order.
func kinds(evs []structs.Event) []structs.EventKind {
	out := make([]structs.EventKind, len(evs))
	for i, e := range evs {
		out[i] = e.Kind
	}
	return out
}

func TestFSM_Events_AJobThatFailsRestartsAndSucceeds(t *testing.T) {
	h := newHarness(t)
	h.register(node("n1", 2))
	s := spec(1, 1)
	s.Restarts = 1
	s.Env = map[string]string{"TOKEN": "hunter2"}
	s.SecretEnv = map[string]string{"KEY": "s3cr3t"}
	h.submit("j", s)
	h.place("j", alloc("a1", "n1", 0, gpuID("n1", 0)))
	h.mustUpdate("n1", "a1", structs.AllocRunning, 0, "")
	failedAt := h.at()
	h.mustUpdate("n1", "a1", structs.AllocFailed, 3, "")
	h.place("j", alloc("a2", "n1", 0, gpuID("n1", 1)))
	h.mustUpdate("n1", "a2", structs.AllocRunning, 0, "")
	h.mustUpdate("n1", "a2", structs.AllocSucceeded, 0, "")

	evs := allEvents(h.f, EventQuery{Job: "j"})
	want := []structs.EventKind{
		structs.EventJobSubmitted, structs.EventJobPlaced, structs.EventJobStarted, structs.EventJobRestarted,
		structs.EventJobPlaced, structs.EventJobStarted, structs.EventJobSucceeded,
	}
	if got := kinds(evs); !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	// One entry each, the entries' own times (h.at() before the entry), in
	// log order.
	for i, e := range evs {
		if e.Job != "j" || e.Seq != 0 || e.Time != t0.Add(time.Duration(e.Index-1)*time.Second) {
			t.Errorf("event %d %+v: want job j, seq 0 and the time of entry %d", i, e, e.Index)
		}
		if i > 0 && e.Cursor().Compare(evs[i-1].Cursor()) <= 0 {
			t.Errorf("event %d at %s does not follow %s", i, e.Cursor(), evs[i-1].Cursor())
		}
	}
	if r := evs[3]; r.Time != failedAt || !strings.Contains(r.Reason, "exited with code 3") || !strings.Contains(r.Reason, "attempt 2 of 2") {
		t.Errorf("restart event %+v: want the failure's time and reason", r)
	}
	if p := evs[4]; p.Node != "n1" || p.NodeName != "name-n1" || p.Reason != "attempt 2: on name-n1 (1 GPU)" {
		t.Errorf("second placement %+v: want node n1 and where it went", p)
	}
	for _, e := range evs {
		if strings.Contains(e.Reason, "hunter2") || strings.Contains(e.Reason, "s3cr3t") {
			t.Errorf("event %s tells an env value: %q", e.Kind, e.Reason)
		}
	}
}

func TestFSM_Events_EachTransition(t *testing.T) {
	type step func(h *harness)
	cases := []struct {
		name  string
		setup step // applied before; its events are not looked at
		do    step
		want  []structs.EventKind
		// in is a part of the first event's reason.
		in string
	}{
		{"node joins", nil, func(h *harness) { h.register(node("n2", 2)) },
			[]structs.EventKind{structs.EventNodeJoined}, "registered with 2 GPUs"},
		{"node re-registers unchanged", nil, func(h *harness) { h.register(node("n1", 2)) }, nil, ""},
		{"node goes down", nil, func(h *harness) { h.nodeStatus("n1", structs.NodeDown) },
			[]structs.EventKind{structs.EventNodeDown}, "was ready"},
		{"node comes back", func(h *harness) { h.nodeStatus("n1", structs.NodeDown) },
			func(h *harness) { h.nodeStatus("n1", structs.NodeReady) },
			[]structs.EventKind{structs.EventNodeReady}, "was down"},
		{"node leaves", nil, func(h *harness) { h.nodeStatus("n1", structs.NodeLeft) },
			[]structs.EventKind{structs.EventNodeLeft}, "was ready"},
		{"down node registers again", func(h *harness) { h.nodeStatus("n1", structs.NodeDown) },
			func(h *harness) { h.register(node("n1", 2)) },
			[]structs.EventKind{structs.EventNodeReady}, "registered again, was down"},
		{"node lost with its job", func(h *harness) {
			h.submit("j", withRestarts(spec(1, 1), 1))
			h.place("j", alloc("a", "n1", 0, gpuID("n1", 0)))
			h.nodeStatus("n1", structs.NodeDown)
		}, func(h *harness) { h.allocsLost("n1") },
			[]structs.EventKind{structs.EventNodeLost, structs.EventJobRestarted}, "1 of its allocations lost"},
		{"GPU fault stops its job", func(h *harness) {
			h.submit("j", spec(1, 1))
			h.place("j", alloc("a", "n1", 0, gpuID("n1", 0)))
		}, func(h *harness) { h.health("n1", h.fault("n1", 0, "XID 79")) },
			[]structs.EventKind{structs.EventGPUFault}, "XID 79"},
		{"GPU recovers", func(h *harness) { h.health("n1", h.fault("n1", 0, "XID 79")) },
			func(h *harness) { h.health("n1", structs.GPUHealth{UUID: gpuID("n1", 0), Healthy: true}) },
			[]structs.EventKind{structs.EventGPURecovered}, "healthy again after XID 79"},
		{"GPU cordoned", nil, func(h *harness) { h.cordon("n1", 1, true, "fan noise") },
			[]structs.EventKind{structs.EventGPUCordoned}, "fan noise"},
		{"GPU cordoned twice", func(h *harness) { h.cordon("n1", 1, true, "fan noise") },
			func(h *harness) { h.cordon("n1", 1, true, "fan noise") }, nil, ""},
		{"GPU uncordoned ends a quarantine", func(h *harness) { h.health("n1", h.fault("n1", 0, "XID 48")) },
			func(h *harness) { h.cordon("n1", 0, false, "") },
			[]structs.EventKind{structs.EventGPUUncordoned}, "ending its fault quarantine (XID 48)"},
		{"queued job cancelled", func(h *harness) { h.submit("j", spec(1, 1)) },
			func(h *harness) {
				h.apply(structs.JobCancelType, structs.JobCancelRequest{JobID: "j", Reason: "typo", At: h.at()})
			},
			[]structs.EventKind{structs.EventJobCancelled}, "typo"},
		{"running job cancelled ends when it stops", func(h *harness) {
			h.submit("j", spec(1, 1))
			h.place("j", alloc("a", "n1", 0, gpuID("n1", 0)))
			h.mustUpdate("n1", "a", structs.AllocRunning, 0, "")
			h.apply(structs.JobCancelType, structs.JobCancelRequest{JobID: "j", At: h.at()})
		}, func(h *harness) { h.mustUpdate("n1", "a", structs.AllocKilled, 143, "") },
			[]structs.EventKind{structs.EventJobCancelled}, "cancelled by user"},
		{"job fails for good", func(h *harness) {
			h.submit("j", spec(1, 1))
			h.place("j", alloc("a", "n1", 0, gpuID("n1", 0)))
		}, func(h *harness) { h.mustUpdate("n1", "a", structs.AllocFailed, 2, "") },
			[]structs.EventKind{structs.EventJobFailed}, "exited with code 2"},
		{"job times out", func(h *harness) {
			h.submit("j", withRestarts(spec(1, 1), 3))
			h.place("j", alloc("a", "n1", 0, gpuID("n1", 0)))
		}, func(h *harness) { h.mustUpdate("n1", "a", structs.AllocTimedOut, 137, "time limit 1h reached") },
			[]structs.EventKind{structs.EventJobTimedOut}, "time limit 1h reached"},
		{"job preempted and requeued", func(h *harness) {
			h.submit("low", preemptible(1, 2, 0))
			h.place("low", alloc("a", "n1", 0, gpuID("n1", 0), gpuID("n1", 1)))
			h.mustUpdate("n1", "a", structs.AllocRunning, 0, "")
			h.submit("high", urgent(1, 2))
		}, func(h *harness) {
			h.preempt("high", "low")
			h.mustUpdate("n1", "a", structs.AllocKilled, 143, "")
		}, []structs.EventKind{structs.EventJobPreempted, structs.EventJobRestarted}, "preempted by job high"},
		{"leader elected", nil, func(h *harness) {
			h.apply(structs.LeaderElectedType|structs.IgnoreUnknownTypeFlag, structs.LeaderElectedRequest{NodeID: "n1", At: h.at()})
		}, []structs.EventKind{structs.EventLeaderElected}, "name-n1 leads from raft index"},
		{"service registered", nil, func(h *harness) { h.registerService(service("web", 2, 1)) },
			[]structs.EventKind{structs.EventServiceRegistered, structs.EventJobSubmitted, structs.EventJobSubmitted}, "2 replicas of version 1: by alice"},
		{"service scaled down", func(h *harness) { h.registerService(service("web", 2, 1)) },
			func(h *harness) { h.scale("web", 1, "") },
			[]structs.EventKind{structs.EventServiceScaled, structs.EventJobCancelled}, "2→1"},
		{"service scaled up", func(h *harness) { h.registerService(service("web", 1, 1)) },
			func(h *harness) { h.scale("web", 2, "busy") },
			[]structs.EventKind{structs.EventServiceScaled, structs.EventJobSubmitted}, "1→2: busy"},
		{"service scaled to what it has", func(h *harness) { h.registerService(service("web", 2, 1)) },
			func(h *harness) { h.scale("web", 2, "") }, nil, ""},
		{"service deleted", func(h *harness) { h.registerService(service("web", 1, 1)) },
			func(h *harness) { h.deleteService("web", "retired") },
			[]structs.EventKind{structs.EventServiceDeleted, structs.EventJobCancelled}, "stopping 1 replica: retired"},
		{"service updated", func(h *harness) { h.registerService(service("web", 1, 1)) },
			func(h *harness) { h.updateService("llama-2", 1, 0) },
			[]structs.EventKind{structs.EventServiceUpdated}, "rolling out version 2 over version 1"},
		{"service rolled back", func(h *harness) {
			h.registerService(service("web", 1, 1))
			h.updateService("llama-2", 1, 0)
		}, func(h *harness) {
			h.step(structs.ServiceRolloutRequest{Version: 2, RollBack: true, Reason: "unhealthy"})
		},
			[]structs.EventKind{structs.EventServiceRolledBack}, "rolling back from version 2 to 1: unhealthy"},
		{"service rolled out", func(h *harness) {
			h.registerService(service("web", 1, 1))
			h.runHealthy("svc-web-r0", "a0", 0)
			h.updateService("llama-2", 1, 0)
			h.step(structs.ServiceRolloutRequest{Version: 2, Add: 1})
			h.runHealthy("svc-web-r1", "a1", 1)
			h.step(structs.ServiceRolloutRequest{Version: 2, Stop: []string{"svc-web-r0"}})
			h.mustUpdate("n1", "a0", structs.AllocKilled, 143, "")
		}, func(h *harness) { h.step(structs.ServiceRolloutRequest{Version: 2, Done: true}) },
			[]structs.EventKind{structs.EventServiceRolledOut}, "every replica runs version 2"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.register(node("n1", 2))
			if tc.setup != nil {
				tc.setup(h)
			}
			from := h.idx
			tc.do(h)
			evs := h.eventsFrom(from)
			if got := kinds(evs); !slices.Equal(got, tc.want) {
				t.Fatalf("events %v, want %v (%+v)", got, tc.want, evs)
			}
			if len(evs) > 0 && !strings.Contains(evs[0].Reason, tc.in) {
				t.Fatalf("reason %q does not say %q", evs[0].Reason, tc.in)
			}
		})
	}
}

func TestFSM_Events_APlacementSaysWhereItsRanksWent(t *testing.T) {
	h := newHarness(t)
	var big []structs.Allocation
	for i := range 6 {
		id := fmt.Sprintf("n%d", i)
		h.register(node(id, 1))
		big = append(big, alloc("b"+id, id, i, gpuID(id, 0)))
	}
	h.submit("pair", spec(2, 0))
	h.place("pair", alloc("p0", "n0", 0), alloc("p1", "n1", 1))
	h.submit("big", spec(6, 1))
	h.mustUpdate("n0", "p0", structs.AllocSucceeded, 0, "")
	h.mustUpdate("n1", "p1", structs.AllocSucceeded, 0, "")
	h.place("big", big...)
	for job, want := range map[string]string{
		"pair": "attempt 1: rank 0 on name-n0, rank 1 on name-n1",
		"big":  "attempt 1: 6 ranks on 6 nodes, 1 GPU each",
	} {
		evs := allEvents(h.f, EventQuery{Job: job})
		if evs[1].Kind != structs.EventJobPlaced || evs[1].Reason != want || evs[1].Node != "" {
			t.Errorf("%s placed: %+v, want reason %q and no one node", job, evs[1], want)
		}
	}
}

func withRestarts(s structs.JobSpec, n int) structs.JobSpec {
	s.Restarts = n
	return s
}

func TestFSM_Events_OneEntryNumbersItsEventsInOrder(t *testing.T) {
	h := newHarness(t)
	h.register(node("n1", 4))
	h.apply(structs.JobSubmitType, structs.JobSubmitRequest{JobID: "arr", SubmittedAt: h.at(),
		Spec: structs.JobSpec{Command: []string{"x"}, Nodes: 1, GPUs: 1, Array: &structs.ArraySpec{Start: 0, End: 2}}})
	evs := h.eventsFrom(h.idx - 1)
	if len(evs) != 3 {
		t.Fatalf("%d events for an array of 3, want 3", len(evs))
	}
	for i, e := range evs {
		if e.Index != h.idx || e.Seq != i || e.Job != structs.ArrayTaskID("arr", i) {
			t.Errorf("event %d is %s of %s, want %d.%d of task %d", i, e.Cursor(), e.Job, h.idx, i, i)
		}
	}
	// A cursor in the middle of the entry resumes in the middle.
	if got := allEvents(h.f, EventQuery{After: evs[0].Cursor()}); !reflect.DeepEqual(got, evs[1:]) {
		t.Fatalf("after %s: %v, want the last two", evs[0].Cursor(), kinds(got))
	}
}

func TestFSM_Events_RefusedEntriesAndDryRunsMakeNone(t *testing.T) {
	h := newHarness(t)
	h.register(node("n1", 1))
	h.submit("j", spec(1, 1))
	before := h.f.Events(EventQuery{})
	if err := h.applyErr(structs.JobCancelType, structs.JobCancelRequest{JobID: "nope", At: h.at()}); err == nil {
		t.Fatal("cancel of an unknown job accepted")
	}
	h.f.CheckPlan(structs.Plan{Placements: []structs.JobPlacement{{JobID: "j", Allocations: []structs.Allocation{alloc("a", "n1", 0, gpuID("n1", 0))}}}})
	after := h.f.Events(EventQuery{})
	if !reflect.DeepEqual(before.Events, after.Events) {
		t.Fatalf("events changed from %v to %v", kinds(before.Events), kinds(after.Events))
	}
	select {
	case <-before.Changed:
		t.Fatal("Changed closed without a new event")
	default:
	}
}

func TestFSM_Events_ChangedClosesOnANewEvent(t *testing.T) {
	h := newHarness(t)
	h.register(node("n1", 1))
	p := h.f.Events(EventQuery{})
	h.apply(structs.PlanApplyType, structs.PlanApplyRequest{At: h.at()}) // an entry without events
	select {
	case <-p.Changed:
		t.Fatal("Changed closed by an entry without events")
	default:
	}
	h.submit("j", spec(1, 1))
	select {
	case <-p.Changed:
	default:
		t.Fatal("Changed still open after a submit")
	}
	if got := h.f.Events(EventQuery{After: p.Next}); len(got.Events) != 1 || got.Events[0].Kind != structs.EventJobSubmitted {
		t.Fatalf("after %s: %v, want the submit", p.Next, kinds(got.Events))
	}
}

func TestFSM_Events_FiltersLimitAndNext(t *testing.T) {
	h := newHarness(t)
	h.register(node("n1", 2))
	h.register(node("n2", 2))
	h.submit("a", spec(1, 1))
	h.submit("b", spec(1, 1))
	h.place("a", alloc("a0", "n2", 0, gpuID("n2", 0)))
	h.cordon("n2", 1, true, "")
	last := h.f.Events(EventQuery{Limit: MaxEventsPage})

	if got := kinds(allEvents(h.f, EventQuery{Job: "a"})); !slices.Equal(got, []structs.EventKind{structs.EventJobSubmitted, structs.EventJobPlaced}) {
		t.Errorf("job a: %v", got)
	}
	if got := kinds(allEvents(h.f, EventQuery{Node: "n2"})); !slices.Equal(got,
		[]structs.EventKind{structs.EventNodeJoined, structs.EventJobPlaced, structs.EventGPUCordoned}) {
		t.Errorf("node n2: %v", got)
	}
	// Next moves past what did not match, so a follower does not read it again.
	p := h.f.Events(EventQuery{Job: "b"})
	if len(p.Events) != 1 || p.Next != last.Events[len(last.Events)-1].Cursor() {
		t.Errorf("job b: %v next %s, want one event and the newest cursor", kinds(p.Events), p.Next)
	}
	p = h.f.Events(EventQuery{Limit: 2})
	if len(p.Events) != 2 || p.Next != p.Events[1].Cursor() {
		t.Errorf("limit 2: %d events, next %s", len(p.Events), p.Next)
	}
	if p := h.f.Events(EventQuery{Limit: MaxEventsPage + 5}); len(p.Events) != len(last.Events) {
		t.Errorf("limit over the page bound: %d events, want all %d", len(p.Events), len(last.Events))
	}
	if got := h.f.RecentEvents("", "n2", 2); !slices.Equal(kinds(got), []structs.EventKind{structs.EventJobPlaced, structs.EventGPUCordoned}) {
		t.Errorf("recent of n2: %v, want the newest two, oldest first", kinds(got))
	}
	if got := h.f.RecentEvents("a", "", 10); len(got) != 2 {
		t.Errorf("recent of job a: %d events, want 2", len(got))
	}
}

// flap makes n events: node n1 going down and coming back.
func (h *harness) flap(n int) {
	for i := range n {
		st := structs.NodeDown
		if i%2 == 1 {
			st = structs.NodeReady
		}
		if err := h.nodeStatus("n1", st); err != nil {
			h.t.Fatalf("status: %v", err)
		}
	}
}

func TestFSM_Events_RingKeepsTheNewestAndSaysWhatWasDropped(t *testing.T) {
	h := newHarness(t)
	h.register(node("n1", 1)) // event 1.0
	h.flap(MaxEvents + 9)     // 10 events too many
	if n := h.f.st.events.len(); n != MaxEvents {
		t.Fatalf("the ring holds %d events, want %d", n, MaxEvents)
	}
	// The register and the first nine flaps (entries 2 to 10) are gone.
	wantDropped := structs.EventCursor{Index: 10, Seq: 0}
	p := h.f.Events(EventQuery{})
	if p.Dropped != wantDropped {
		t.Fatalf("dropped %s, want %s", p.Dropped, wantDropped)
	}
	if len(p.Events) != MaxEventsPage || p.Events[0].Index != 11 {
		t.Fatalf("%d events from %s, want %d from 11.0", len(p.Events), p.Events[0].Cursor(), MaxEventsPage)
	}
	if p := h.f.Events(EventQuery{After: wantDropped}); !p.Dropped.IsZero() || p.Events[0].Index != 11 {
		t.Fatalf("after the dropped cursor: dropped %s, first %s", p.Dropped, p.Events[0].Cursor())
	}
	if got := allEvents(h.f, EventQuery{After: wantDropped}); len(got) != MaxEvents || got[len(got)-1].Index != h.idx {
		t.Fatalf("read %d events up to %s, want %d up to %d", len(got), got[len(got)-1].Cursor(), MaxEvents, h.idx)
	}

	// The full ring and its dropped cursor survive a snapshot.
	g := restoreFresh(t, h.f)
	if !reflect.DeepEqual(allEvents(g, EventQuery{}), allEvents(h.f, EventQuery{})) || g.Events(EventQuery{}).Dropped != wantDropped {
		t.Fatal("restored ring differs")
	}
	other := &harness{t: t, f: g, idx: h.idx}
	for _, x := range []*harness{h, other} {
		x.flap(3)
	}
	if !reflect.DeepEqual(allEvents(g, EventQuery{}), allEvents(h.f, EventQuery{})) {
		t.Fatal("restored ring diverged after the same entries")
	}
}

func TestFSM_Events_SameLogSameEvents(t *testing.T) {
	// richState applies the same entries each time: every replica of the
	// state machine that applies them holds the same events.
	a, b := richState(t), richState(t)
	ea, eb := allEvents(a.f, EventQuery{}), allEvents(b.f, EventQuery{})
	if len(ea) < 10 {
		t.Fatalf("rich state has only %d events", len(ea))
	}
	if !reflect.DeepEqual(ea, eb) {
		t.Fatal("two FSMs applying the same log hold different events")
	}
	if g := restoreFresh(t, a.f); !reflect.DeepEqual(allEvents(g, EventQuery{}), ea) {
		t.Fatal("a restored FSM holds different events")
	}
}

func TestFSM_Restore_RefusesBadEventRecords(t *testing.T) {
	const hdr = `{"version":6,"index":9}` + "\n"
	const log = `{"type":"event_log","event_log":{"dropped":"2.0"}}` + "\n"
	ev := func(cursor string) string {
		i, s, _ := strings.Cut(cursor, ".")
		return fmt.Sprintf(`{"type":"event","event":{"index":%s,"seq":%s,"kind":"node-down"}}`+"\n", i, s)
	}
	cases := []struct{ name, data, want string }{
		{"event in version 5", `{"version":5,"index":9}` + "\n" + log, "event_log record in a version 5 snapshot"},
		{"event before the log", hdr + ev("3.0"), "event 3.0 before the event log"},
		{"log twice", hdr + log + log, "event log twice"},
		{"event not after dropped", hdr + log + ev("2.0"), "event 2.0 out of order"},
		{"events out of order", hdr + log + ev("4.1") + ev("4.0"), "event 4.0 out of order"},
		{"event after the index", hdr + log + ev("10.0"), "event 10.0 after the snapshot's index 9"},
		{"record without event", hdr + log + `{"type":"event"}`, "event record without event"},
		{"long reason", hdr + log + fmt.Sprintf(`{"type":"event","event":{"index":3,"seq":0,"reason":%q}}`, strings.Repeat("x", structs.MaxEventReasonLen+1)),
			"reason longer than"},
	}
	h := richState(t)
	before := allEvents(h.f, EventQuery{})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wantErrIs(t, h.f.Restore(readCloser([]byte(tc.data))), ErrBadSnapshot, tc.want)
			if !reflect.DeepEqual(allEvents(h.f, EventQuery{}), before) {
				t.Fatal("a refused restore changed the events")
			}
		})
	}
	// A good one restores, cursor and all.
	if err := h.f.Restore(readCloser([]byte(hdr + log + ev("3.0") + ev("3.1")))); err != nil {
		t.Fatal(err)
	}
	if p := h.f.Events(EventQuery{}); p.Dropped != (structs.EventCursor{Index: 2}) || len(p.Events) != 2 {
		t.Fatalf("restored %d events, dropped %s", len(p.Events), p.Dropped)
	}
}
