package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/skein-dev/skein/api"
)

// logAgent serves one allocation's stdout, out, from the ?offset asked,
// saying it begins begin bytes earlier than asked (a node that cannot
// skip, or skips less); with breakAfter > 0 its first answer breaks off
// after that many bytes, and every later request is cut before it is
// answered (a node that died).
func logAgent(t *testing.T, out string, breakAfter, begin int, asked *atomic.Int64) *httptest.Server {
	t.Helper()
	var answers atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := answers.Add(1)
		if breakAfter > 0 && n > 1 {
			panic(http.ErrAbortHandler)
		}
		from, _ := strconv.Atoi(r.URL.Query().Get("offset"))
		if asked != nil {
			asked.Store(int64(from))
		}
		start := max(from-begin, 0)
		w.Header().Set(api.LogOffsetHeader, strconv.Itoa(start))
		w.Header().Set(api.LogAttemptHeader, "1")
		w.WriteHeader(http.StatusOK)
		body := out[start:]
		if breakAfter > 0 {
			w.Write([]byte(body[:breakAfter]))
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler)
		}
		w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// A stream whose answer breaks off is asked again through the next agent
// from the byte it got to; what that agent sends again is skipped, so
// every byte comes once.
func TestResumable_ABrokenStreamGoesOnThroughAnotherAgentOnce(t *testing.T) {
	out := "line one\nline two\nline three\n"
	var asked atomic.Int64
	first := logAgent(t, out, 12, 0, nil)
	second := logAgent(t, out, 0, 5, &asked)
	cl, err := api.NewClient(first.URL+","+second.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl = cl.WithTimeouts(api.DefaultHedgeAfter, api.DefaultAnswerWait)
	opts := api.LogOptions{Stream: api.StreamStdout, Follow: true}
	ls, err := cl.OpenLogs(ctx, "j1", opts)
	if err != nil {
		t.Fatal(err)
	}
	r := newResumable(ctx, cl, "j1", opts, ls, func(n int64) { t.Errorf("a gap of %d bytes where none was", n) })
	got, err := io.ReadAll(r)
	if err != nil || string(got) != out {
		t.Fatalf("read %q (%v), want %q", got, err, out)
	}
	if asked.Load() != 12 {
		t.Fatalf("the second agent was asked from byte %d, want 12", asked.Load())
	}
}

// An answer that begins past the byte asked (the cap dropped output
// meanwhile) says how much was lost.
func TestResumable_OutputDroppedBetweenTwoAnswersIsSaid(t *testing.T) {
	out := "0123456789abcdefghij"
	first := logAgent(t, out, 4, 0, nil)
	second := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(api.LogOffsetHeader, "10")
		w.Header().Set(api.LogAttemptHeader, "1")
		fmt.Fprint(w, out[10:])
	}))
	t.Cleanup(second.Close)
	cl, err := api.NewClient(first.URL+","+second.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	opts := api.LogOptions{Stream: api.StreamStdout}
	ls, err := cl.WithTimeouts(api.DefaultHedgeAfter, api.DefaultAnswerWait).OpenLogs(ctx, "j1", opts)
	if err != nil {
		t.Fatal(err)
	}
	var gap int64
	r := newResumable(ctx, cl, "j1", opts, ls, func(n int64) { gap += n })
	got, err := io.ReadAll(r)
	if err != nil || string(got) != "0123abcdefghij" || gap != 6 {
		t.Fatalf("read %q (%v) with a gap of %d, want %q and 6", got, err, gap, "0123abcdefghij")
	}
}
