package cli

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/structs"
)

var evTime = time.Date(2026, 5, 4, 10, 30, 0, 0, time.UTC)

func testEvents() []structs.Event {
	return []structs.Event{
		{Index: 7, Seq: 0, Time: evTime, Kind: structs.EventNodeJoined, Node: "n1", NodeName: "gpu-01", Reason: "registered with 8 GPUs (nvml)"},
		{Index: 9, Seq: 0, Time: evTime.Add(time.Second), Kind: structs.EventJobSubmitted, Job: "abcdef0123456789", Reason: "queued: 1 GPU by alice"},
		{Index: 9, Seq: 1, Time: evTime.Add(time.Second), Kind: structs.EventGPUFault, Node: "n1", NodeName: "gpu-01", GPU: "GPU-1", GPUIndex: 3, Reason: "XID 79"},
		{Index: 12, Seq: 0, Time: evTime.Add(2 * time.Second), Kind: structs.EventServiceScaled, Service: "web", Reason: "2→3"},
	}
}

func TestEvents_TableHasTimeKindSubjectReason(t *testing.T) {
	f := newFakeAgent(t)
	f.handle("GET /v1/events", pagesOf(testEvents()))
	r := runCLI(t, "--addr", f.URL, "events", "--job", "abc", "--node", "gpu-01", "--since-index", "5")
	if r.code != exitOK {
		t.Fatalf("exit code %d: %s", r.code, r.stderr)
	}
	want := []string{
		"TIME KIND SUBJECT REASON",
		"2026-05-04T10:30:00Z node-joined node/gpu-01 registered with 8 GPUs (nvml)",
		"2026-05-04T10:30:01Z job-submitted job/abcdef01 queued: 1 GPU by alice",
		"2026-05-04T10:30:01Z gpu-fault gpu/gpu-01:3 XID 79",
		"2026-05-04T10:30:02Z service-scaled service/web 2→3",
	}
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if len(lines) != len(want) {
		t.Fatalf("got %d lines, want %d:\n%s", len(lines), len(want), r.stdout)
	}
	for i, w := range want {
		if got := strings.Join(strings.Fields(lines[i]), " "); got != w {
			t.Errorf("line %d = %q, want %q", i, got, w)
		}
	}
	// Two events a page, then the empty one after the last.
	reqs := f.requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3 (two pages, then the empty one after them)", len(reqs))
	}
	if q := reqs[0].Query; q.Get("after") != "5" || q.Get("job") != "abc" || q.Get("node") != "gpu-01" || q.Has("follow") {
		t.Errorf("first query %v", q)
	}
	if q := reqs[1].Query; q.Get("after") != "9.0" {
		t.Errorf("second query after %q, want 9.0", q.Get("after"))
	}
}

// pagesOf answers GET /v1/events from evs, two events a page, as an agent
// does: only events after the query's cursor.
func pagesOf(evs []structs.Event) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		after, err := structs.ParseEventCursor(r.URL.Query().Get("after"))
		if err != nil {
			writeJSON(w, http.StatusBadRequest, api.ErrorBody{Error: err.Error()})
			return
		}
		p := api.EventsPage{Events: []structs.Event{}, Next: after}
		for _, e := range evs {
			if e.Cursor().Compare(after) > 0 && len(p.Events) < 2 {
				p.Events = append(p.Events, e)
				p.Next = e.Cursor()
			}
		}
		writeJSON(w, http.StatusOK, p)
	}
}

func TestEvents_JSONIsOneEventPerLineAndDroppedIsSaid(t *testing.T) {
	f := newFakeAgent(t)
	f.handle("GET /v1/events", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("after") != "" {
			writeJSON(w, http.StatusOK, api.EventsPage{Events: []structs.Event{}, Next: structs.EventCursor{Index: 12}})
			return
		}
		writeJSON(w, http.StatusOK, api.EventsPage{Events: testEvents(), Next: structs.EventCursor{Index: 12}, Dropped: structs.EventCursor{Index: 6, Seq: 2}})
	})
	r := runCLI(t, "--addr", f.URL, "events", "--json")
	if r.code != exitOK {
		t.Fatalf("exit code %d: %s", r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d lines, want 4:\n%s", len(lines), r.stdout)
	}
	for i, l := range lines {
		var e structs.Event
		mustDecode(t, l, &e)
		if e != testEvents()[i] {
			t.Errorf("line %d decodes to %+v", i, e)
		}
	}
	if !strings.Contains(r.stderr, "events after 0.0 up to 6.2 were dropped") {
		t.Errorf("stderr %q does not say what was dropped", r.stderr)
	}
}

func TestEvents_BadSinceIndexNamesTheFlag(t *testing.T) {
	r := runCLI(t, "--addr", "127.0.0.1:1", "events", "--since-index", "twelve")
	if r.code == exitOK || !strings.Contains(r.stderr, "--since-index") {
		t.Fatalf("exit %d, stderr %q: want an error naming --since-index", r.code, r.stderr)
	}
}

// TestEvents_FollowResumesAfterABreakFromTheLastEventPrinted breaks the
// stream after two events: the next request asks after the second and
// the output holds every event once.
func TestEvents_FollowResumesAfterABreakFromTheLastEventPrinted(t *testing.T) {
	f := newFakeAgent(t)
	evs := testEvents()
	var calls atomic.Int32
	f.handle("GET /v1/events", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("follow") != "true" {
			http.Error(w, "want follow", http.StatusBadRequest)
			return
		}
		var send []structs.Event
		switch calls.Add(1) {
		case 1:
			send = evs[:2] // then the connection ends
		case 2:
			if after := r.URL.Query().Get("after"); after != "9.0" {
				writeJSON(w, http.StatusBadRequest, api.ErrorBody{Error: "resumed after " + after + ", want 9.0"})
				return
			}
			send = evs[1:] // one already printed: it must not show twice
		default:
			writeJSON(w, http.StatusForbidden, api.ErrorBody{Error: "ACL token revoked"})
			return
		}
		w.Header().Set("Content-Type", "application/x-ndjson")
		for _, e := range send {
			b, _ := json.Marshal(e)
			fmt.Fprintf(w, "%s\n", b)
		}
	})
	r := runCLI(t, "--addr", f.URL, "events", "-f")
	if r.code == exitOK || !strings.Contains(r.stderr, "ACL token revoked") {
		t.Fatalf("exit %d, stderr %q: want the 403 that ended it", r.code, r.stderr)
	}
	if strings.Contains(r.stderr, "want 9.0") {
		t.Fatalf("did not resume after the last event printed: %s", r.stderr)
	}
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if len(lines) != 1+len(evs) {
		t.Fatalf("%d lines, want a header and %d events:\n%s", len(lines), len(evs), r.stdout)
	}
	for i, e := range evs {
		if !strings.Contains(lines[i+1], string(e.Kind)) {
			t.Errorf("line %d %q, want event %s", i+1, lines[i+1], e.Kind)
		}
	}
	if n := strings.Count(r.stderr, "event stream broke"); n != 2 {
		t.Errorf("stderr says the stream broke %d times, want 2:\n%s", n, r.stderr)
	}
}
