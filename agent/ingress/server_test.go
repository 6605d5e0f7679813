package ingress

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// pacedServer serves h on loopback with a short body grace and rate.
func pacedServer(t *testing.T, h http.Handler) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(ServerConfig{Listener: l, Handler: h, Timeouts: Timeouts{BodyGrace: 300 * time.Millisecond, BodyRate: 100}})
	go s.Serve()
	t.Cleanup(func() { _ = s.http.Close() })
	return l.Addr().String()
}

// readAll is a handler that waits wait before it reads the body, then
// answers how much it read and why it stopped.
func readAll(wait time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(wait) // a request held for a replica before its body is read
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, fmt.Sprintf("read %d bytes: %v", len(b), err), http.StatusBadRequest)
			return
		}
		fmt.Fprintf(w, "read %d bytes", len(b))
	})
}

func TestServer_ABodyIsReadAtAPace_CountedFromItsFirstRead(t *testing.T) {
	addr := pacedServer(t, readAll(time.Second))
	// Sent at once, read a second later (past the grace): whole.
	resp, err := http.Post("http://"+addr+"/", "text/plain", strings.NewReader(strings.Repeat("x", 1000)))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(b) != "read 1000 bytes" {
		t.Fatalf("a prompt body read late: %d %q, want it whole", resp.StatusCode, b)
	}

	// A byte every 100 ms against 100 bytes a second after 300 ms: cut off.
	slow := pacedServer(t, readAll(0))
	c, err := net.Dial("tcp", slow)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n")
	go func() {
		for range 100 {
			if _, err := c.Write([]byte("x")); err != nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	got, _ := io.ReadAll(c)
	if !strings.Contains(string(got), "came slower than 100 bytes a second") {
		t.Fatalf("a body at 10 bytes a second got %q, want it cut off as too slow", got)
	}
}
