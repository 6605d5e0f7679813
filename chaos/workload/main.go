package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Exit codes.
const (
	exitOK        = 0
	exitError     = 1 // the workload could not do its job (shared dir unusable)
	exitUsage     = 2
	exitViolation = 3 // a GPU or job lock was already held
)

// EventsFile is the name of the event log in the shared directory.
const EventsFile = "events.log"

var (
	errUsage = errors.New("usage")
	errHeld  = errors.New("lock already held")
)

// Event is one line of the event log.
type Event struct {
	Time  time.Time `json:"time"`
	Event string    `json:"event"` // start, stop or violation
	Host  string    `json:"host"`
	Node  string    `json:"node,omitempty"`  // $SKEIN_NODE
	Alloc string    `json:"alloc,omitempty"` // $SKEIN_ALLOC_ID
	Job   string    `json:"job,omitempty"`
	GPUs  []string  `json:"gpus,omitempty"`
	What  string    `json:"what"`
}

// config is what one run of the workload is told by its flags and environment.
type config struct {
	dir   string
	dur   time.Duration
	job   string
	alloc string
	node  string
	host  string
	gpus  []string
	// serve, when set, is the address the workload serves HTTP on while
	// it runs (server, serve.go); unhealthyIf names the file whose
	// existence makes its /health fail.
	serve       string
	unhealthyIf string
	// utilFile and utilPerRequest, on simulated GPUs, make the server
	// report its GPUs busy in proportion to its requests in flight
	// (--sim-gpu-util-per-request).
	utilFile       string
	utilPerRequest float64
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stderr)
	stop()
	os.Exit(code)
}

// run parses args, takes the locks, records events and waits; it returns the
// exit code. Cancelling ctx stops the workload as SIGTERM does.
func run(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) int {
	cfg, err := parse(args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "skein-workload: %v\n", err)
		return exitUsage
	}
	log, err := os.OpenFile(filepath.Join(cfg.dir, EventsFile), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		fmt.Fprintf(stderr, "skein-workload: open event log: %v\n", err)
		return exitError
	}
	defer log.Close()
	record := func(event, what string) error {
		return writeEvent(log, Event{
			Time: time.Now().UTC(), Event: event, Host: cfg.host, Node: cfg.node,
			Alloc: cfg.alloc, Job: cfg.job, GPUs: cfg.gpus, What: what,
		})
	}

	locks, held, err := lockAll(cfg)
	defer func() {
		for _, f := range locks {
			f.Close() // closing the last descriptor drops the flock
		}
	}()
	if err != nil {
		fmt.Fprintf(stderr, "skein-workload: %v\n", err)
		return exitError
	}
	if len(held) > 0 {
		for _, h := range held {
			if err := record("violation", h.Error()); err != nil {
				fmt.Fprintf(stderr, "skein-workload: %v\n", err)
			}
			fmt.Fprintf(stderr, "skein-workload: violation: %v\n", h)
		}
		return exitViolation
	}
	if err := record("start", fmt.Sprintf("holding %d GPU(s), running for %s", len(cfg.gpus), forText(cfg.dur))); err != nil {
		fmt.Fprintf(stderr, "skein-workload: %v\n", err)
		return exitError
	}

	if cfg.serve != "" {
		srv := &server{alloc: cfg.alloc, unhealthyIf: cfg.unhealthyIf, utilFile: cfg.utilFile, utilPerRequest: cfg.utilPerRequest}
		if err := srv.reportUtil(); err != nil {
			fmt.Fprintf(stderr, "skein-workload: %v\n", err)
			_ = record("stop", err.Error())
			return exitError
		}
		stopServing, err := serve(ctx, cfg.serve, srv)
		if err != nil {
			fmt.Fprintf(stderr, "skein-workload: %v\n", err)
			_ = record("stop", err.Error())
			return exitError
		}
		defer stopServing()
	}

	var done <-chan time.Time
	if cfg.dur > 0 {
		t := time.NewTimer(cfg.dur)
		defer t.Stop()
		done = t.C
	}
	what := "finished"
	select {
	case <-done:
	case <-ctx.Done():
		what = "signalled"
	}
	if err := record("stop", what); err != nil {
		fmt.Fprintf(stderr, "skein-workload: %v\n", err)
		return exitError
	}
	return exitOK
}

func forText(d time.Duration) string {
	if d <= 0 {
		return "until signalled"
	}
	return d.String()
}

func parse(args []string, getenv func(string) string, stderr io.Writer) (config, error) {
	fs := flag.NewFlagSet("skein-workload", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", "", "directory shared by all nodes for lock files and "+EventsFile+" (required)")
	dur := fs.Duration("for", 0, "how long to run (0: until SIGTERM)")
	job := fs.String("job", getenv("SKEIN_JOB_ID"), "job ID to lock (default $SKEIN_JOB_ID)")
	serveEnv := fs.String("serve-port-env", "", "serve HTTP (/health, /work, /stream, /metrics) on the port this env var holds, as a service replica (e.g. PORT)")
	unhealthyIf := fs.String("unhealthy-if", "", "with --serve-port-env: /health answers 503 while this file exists")
	utilPerRequest := fs.Float64("sim-gpu-util-per-request", 0, "with --serve-port-env on simulated GPUs: report the GPUs this many percent busy per request in flight (at most 100), in $"+simUtilEnv+", for autoscaling on GPU utilisation")
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	switch {
	case fs.NArg() > 0:
		return config{}, fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	case *dir == "":
		return config{}, fmt.Errorf("%w: --dir is required", errUsage)
	case *dur < 0:
		return config{}, fmt.Errorf("%w: --for %s: must not be negative", errUsage, *dur)
	case !(*utilPerRequest >= 0 && *utilPerRequest <= 100):
		return config{}, fmt.Errorf("%w: --sim-gpu-util-per-request %v: want 0 to 100 (percent)", errUsage, *utilPerRequest)
	case *utilPerRequest > 0 && *serveEnv == "":
		return config{}, fmt.Errorf("%w: --sim-gpu-util-per-request needs --serve-port-env: it counts the requests served", errUsage)
	}
	var addr string
	if *serveEnv != "" {
		port, err := strconv.Atoi(getenv(*serveEnv))
		if err != nil || port <= 0 || port > 65535 {
			return config{}, fmt.Errorf("%w: --serve-port-env %s: $%s is %q, not a port", errUsage, *serveEnv, *serveEnv, getenv(*serveEnv))
		}
		addr = ":" + strconv.Itoa(port)
	}
	host, err := os.Hostname()
	if err != nil {
		host = "unknown"
	}
	cfg := config{
		dir:   *dir,
		dur:   *dur,
		job:   *job,
		alloc: getenv("SKEIN_ALLOC_ID"),
		node:  getenv("SKEIN_NODE"),
		host:  host,
		serve: addr,

		unhealthyIf: *unhealthyIf,

		utilPerRequest: *utilPerRequest,
	}
	if *utilPerRequest > 0 {
		if cfg.utilFile = getenv(simUtilEnv); cfg.utilFile == "" {
			fmt.Fprintf(stderr, "skein-workload: --sim-gpu-util-per-request: $%s is not set (no simulated GPUs): reporting nothing\n", simUtilEnv)
		}
	}
	for _, u := range strings.Split(getenv("CUDA_VISIBLE_DEVICES"), ",") {
		if u = strings.TrimSpace(u); u != "" {
			cfg.gpus = append(cfg.gpus, u)
		}
	}
	return cfg, nil
}

// lockAll tries every lock once and returns the files it holds, one errHeld
// error per lock that another process holds, and any other error.
func lockAll(cfg config) (locks []*os.File, held []error, err error) {
	names := make([]string, 0, len(cfg.gpus)+1)
	for _, u := range cfg.gpus {
		names = append(names, "gpu-"+fileSafe(u)+".lock")
	}
	if cfg.job != "" {
		names = append(names, "job-"+fileSafe(cfg.job)+".lock")
	}
	holder := fmt.Sprintf("host=%s node=%s alloc=%s pid=%d", cfg.host, cfg.node, cfg.alloc, os.Getpid())
	for _, name := range names {
		f, err := lock(filepath.Join(cfg.dir, name), holder)
		switch {
		case errors.Is(err, errHeld):
			held = append(held, err)
		case err != nil:
			return locks, held, err
		default:
			locks = append(locks, f)
		}
	}
	return locks, held, nil
}

// lock takes an exclusive flock on path without waiting and writes holder
// into the file, so that a later violation can say who holds it. Lock files
// are never removed: unlinking a locked file would let a second process lock
// a new file of the same name.
func lock(path, holder string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		defer f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			owner, _ := io.ReadAll(io.LimitReader(f, 512))
			return nil, fmt.Errorf("%s: %w by %s", filepath.Base(path), errHeld, strings.TrimSpace(string(owner)))
		}
		return nil, fmt.Errorf("flock %s: %w", path, err)
	}
	if err := f.Truncate(0); err != nil {
		f.Close()
		return nil, fmt.Errorf("truncate lock %s: %w", path, err)
	}
	if _, err := f.WriteAt([]byte(holder+"\n"), 0); err != nil {
		f.Close()
		return nil, fmt.Errorf("write lock %s: %w", path, err)
	}
	return f, nil
}

// fileSafe maps s to a file name component: every byte outside
// [A-Za-z0-9._-] becomes '_'. Two names that map alike share a lock, which
// can only report a violation too many, never miss one.
func fileSafe(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '-', r == '_':
			return r
		}
		return '_'
	}, s)
}

// writeEvent appends e as one JSON line in a single write: with O_APPEND on a
// local file system, lines written by many processes never interleave.
func writeEvent(w io.Writer, e Event) error {
	b, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("encode event: %w", err)
	}
	if _, err := w.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("write event: %w", err)
	}
	return nil
}
