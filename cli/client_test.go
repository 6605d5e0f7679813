package cli

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/structs"
)

// busyThen answers 429 as a busy leader does (Retry-After 0: the client's
// shortest wait) the first busy times, then with ok.
func busyThen(busy int32, ok http.HandlerFunc) http.HandlerFunc {
	var n atomic.Int32
	return func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) <= busy {
			w.Header().Set("Retry-After", "0")
			w.Header().Set(api.BusyHeader, "writes")
			writeJSON(w, http.StatusTooManyRequests, api.ErrorBody{Error: "cluster busy: the leader has 2 writes in flight, its limit; nothing was done: try again in 0s"})
			return
		}
		ok(w, r)
	}
}

// A command the cluster refuses as busy waits and tries again, saying so
// once on stderr however often it waits, and then succeeds.
func TestClient_ABusyClusterIsWaitedForAndSaidOnce(t *testing.T) {
	f := newFakeAgent(t)
	f.handle("DELETE /v1/jobs/{id}", busyThen(3, func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, structs.Job{ID: testJobID, State: structs.JobCancelled})
	}))
	r := runCLI(t, "--addr", f.URL, "cancel", "abcdef01")
	if r.code != exitOK || r.stdout != "cancelled abcdef01\n" {
		t.Fatalf("got code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if strings.Count(r.stderr, "\n") != 1 || !strings.HasPrefix(r.stderr, "cluster busy, retrying in 100ms") && !strings.HasPrefix(r.stderr, "cluster busy, retrying in 200ms") {
		t.Fatalf("stderr %q; want one line saying the cluster is busy and how long the client waits", r.stderr)
	}
	if n := len(f.requests()); n != 4 {
		t.Fatalf("%d requests; want 4 (three refused as busy)", n)
	}
}
