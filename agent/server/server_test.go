package server

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestRelay_AStreamOutlastsTheServersWriteTimeout relays a stream that
// lasts longer than the relaying server's write timeout, as a followed log
// proxied from another node does: every part arrives.
func TestRelay_AStreamOutlastsTheServersWriteTimeout(t *testing.T) {
	const serverWriteTimeout = 200 * time.Millisecond
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for i := range 4 {
			if i > 0 {
				time.Sleep(serverWriteTimeout * 3 / 4) // the stream outlasts the timeout
			}
			fmt.Fprintf(w, "part %d\n", i)
			w.(http.Flusher).Flush()
		}
	}))
	t.Cleanup(upstream.Close)
	s := &shared{timeouts: Timeouts{}.withDefaults()} // holdWrite renews the bound by the default, a minute
	relaying := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		resp, err := http.Get(upstream.URL)
		if err != nil {
			writeError(w, http.StatusBadGateway, err)
			return
		}
		defer resp.Body.Close()
		s.relay(w, resp)
	}))
	relaying.Config.WriteTimeout = serverWriteTimeout
	relaying.Start()
	t.Cleanup(relaying.Close)

	resp, err := http.Get(relaying.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if want := "part 0\npart 1\npart 2\npart 3\n"; err != nil || string(got) != want {
		t.Fatalf("relayed %q, %v; want %q", got, err, want)
	}
}
