package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
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
// With --sim-gpu-util-per-request P it also reports, on simulated GPUs,
// its GPUs P % busy per /work request in flight (at most 100 %), so that
// autoscaling on GPU utilisation can be tested end to end.
//
// Every other path answers as /work does, so that a prefix the ingress
// failed to strip shows in the answer.
type server struct {
	alloc       string
	unhealthyIf string
	inFlight    atomic.Int64
	// utilFile, when set, is told the GPUs' utilisation: utilPerRequest
	// percent per request in flight to /work, at most 100, rewritten
	// whenever that count changes (utilMu orders the rewrites).
	utilFile       string
	utilPerRequest float64
	utilMu         sync.Mutex
}

// simUtilEnv names the file a job on simulated GPUs reports their
// utilisation in: "UTIL" in percent, one line (skein's runner sets it).
const simUtilEnv = "SKEIN_SIM_GPU_UTIL_FILE"

// reportUtil writes the utilisation the requests in flight make, when
// the workload reports one. The file is rewritten in place (its
// directory is not the job's to make files in); a reader that catches it
// empty keeps the last value.
func (s *server) reportUtil() error {
	if s.utilFile == "" {
		return nil
	}
	s.utilMu.Lock()
	defer s.utilMu.Unlock()
	util := min(s.utilPerRequest*float64(s.inFlight.Load()), 100)
	if err := os.WriteFile(s.utilFile, []byte(strconv.FormatFloat(util, 'f', -1, 64)+"\n"), 0o600); err != nil {
		return fmt.Errorf("report GPU utilisation: %w", err)
	}
	return nil
}

// track counts a request in flight until the returned function is
// called, reporting the utilisation at each change.
func (s *server) track() func() {
	s.inFlight.Add(1)
	s.logUtil()
	return func() {
		s.inFlight.Add(-1)
		s.logUtil()
	}
}

// logUtil reports the utilisation; a failure is said on stderr and the
// request goes on.
func (s *server) logUtil() {
	if err := s.reportUtil(); err != nil {
		fmt.Fprintf(os.Stderr, "skein-workload: %v\n", err)
	}
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
		defer s.track()()
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
