package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync/atomic"
	"time"
)

// maxWork bounds how long one request to /work may ask to take.
const maxWork = time.Minute

// server is the HTTP side of a workload run with --serve: a replica of a
// service, as an inference server would be, reduced to what the tests of
// services need.
//
//	GET /health           200 "ok", or 503 while the file --unhealthy-if names exists
//	GET /work?ms=N        waits N ms (default 0, at most a minute), then answers
//	                      "alloc=ID path=PATH" (the path as the replica got it)
//	GET /stream?n=K       K lines, one every 50 ms, each flushed at once
//	GET /metrics          the gauge skein_workload_in_flight in the Prometheus text format
//
// Every other path answers as /work does, so that a prefix the ingress
// failed to strip shows in the answer.
type server struct {
	alloc       string
	unhealthyIf string
	inFlight    atomic.Int64
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/health":
		if s.unhealthyIf != "" {
			if _, err := os.Stat(s.unhealthyIf); err == nil {
				http.Error(w, "unhealthy: "+s.unhealthyIf+" exists", http.StatusServiceUnavailable)
				return
			}
		}
		fmt.Fprintln(w, "ok")
	case "/metrics":
		fmt.Fprintf(w, "# TYPE skein_workload_in_flight gauge\nskein_workload_in_flight %d\n", s.inFlight.Load())
	case "/stream":
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		f, _ := w.(http.Flusher)
		for i := range min(max(n, 1), 1000) {
			if i > 0 {
				select {
				case <-r.Context().Done():
					return
				case <-time.After(50 * time.Millisecond):
				}
			}
			fmt.Fprintf(w, "chunk %d alloc=%s\n", i, s.alloc)
			if f != nil {
				f.Flush()
			}
		}
	default:
		s.inFlight.Add(1)
		defer s.inFlight.Add(-1)
		ms, _ := strconv.Atoi(r.URL.Query().Get("ms"))
		d := min(time.Duration(max(ms, 0))*time.Millisecond, maxWork)
		select {
		case <-r.Context().Done():
			return
		case <-time.After(d):
		}
		fmt.Fprintf(w, "alloc=%s path=%s\n", s.alloc, r.URL.Path)
	}
}

// serve listens on addr and serves s until ctx is done; it returns once
// the listener is up, and the returned function stops the server.
func serve(ctx context.Context, addr string, s *server) (func(), error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	hs := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := hs.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintf(os.Stderr, "skein-workload: serve: %v\n", err)
		}
	}()
	stop := func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
		<-done
	}
	return stop, nil
}
