package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/structs"
)

// TestFollowEvents_ASilentAgentIsLeftForTheNext: the first agent takes
// the request and never answers, as a frozen or cut-off node would; the
// follow gives up on it after followIdle and goes on with the next agent
// of the list, from where it was.
func TestFollowEvents_ASilentAgentIsLeftForTheNext(t *testing.T) {
	followIdle = 200 * time.Millisecond
	t.Cleanup(func() { followIdle = 3 * EventKeepAlive })

	stuck := make(chan struct{})
	silent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		select { // headers, then nothing, as a stream whose node froze
		case <-stuck:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(silent.Close)
	t.Cleanup(func() { close(stuck) })
	afters := make(chan string, 10)
	live := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		afters <- r.URL.Query().Get("after")
		for i := range 3 {
			b, _ := json.Marshal(structs.Event{Index: uint64(10 + i), Kind: structs.EventNodeDown})
			fmt.Fprintf(w, "%s\n\n", b) // each with a keep-alive after it
		}
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	t.Cleanup(live.Close)

	c, err := NewClient(silent.URL+","+live.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var got []structs.Event
	var breaks []string
	err = c.FollowEvents(ctx, EventsQuery{After: structs.EventCursor{Index: 9}},
		func(err error, _ time.Duration) { breaks = append(breaks, err.Error()) },
		func(e structs.Event) error {
			got = append(got, e)
			if len(got) == 3 {
				cancel()
			}
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].Index != 10 || got[2].Index != 12 {
		t.Fatalf("followed %+v, want events 10 to 12", got)
	}
	if len(breaks) != 1 || !strings.Contains(breaks[0], "silent for 200ms") {
		t.Fatalf("breaks %q, want one for the silent agent", breaks)
	}
	if a := <-afters; a != "9.0" {
		t.Fatalf("the live agent was asked after %q, want 9.0", a)
	}
}
