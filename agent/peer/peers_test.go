package peer

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func TestPeers_CallsLeaveFromTheAddressGiven(t *testing.T) {
	seen := make(chan string, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := net.SplitHostPort(r.RemoteAddr)
		seen <- host
	}))
	t.Cleanup(srv.Close)
	for _, streams := range []bool{false, true} {
		p := New(Config{DialFrom: net.ParseIP("127.0.0.7"), CallTimeout: 10 * time.Second})
		c := p.Calls()
		if streams {
			c = p.Streams()
		}
		resp, err := c.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if got := <-seen; got != "127.0.0.7" {
			t.Fatalf("a call (streams: %v) came from %s, want 127.0.0.7", streams, got)
		}
		c.CloseIdleConnections()
	}
}
