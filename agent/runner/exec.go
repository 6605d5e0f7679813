package runner

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
)

// MaxExecOutput bounds the output Exec returns: the end of it.
const MaxExecOutput = 4 << 10

// ExecResult is how a command Exec ran ended.
type ExecResult struct {
	ExitCode int
	// Output is the end of its standard output and error, interleaved,
	// at most MaxExecOutput bytes.
	Output string
}

// Exec runs argv beside a running allocation's job, as the job itself
// would run it, and waits for its end: a process job's command runs as
// the job's account (spec.json's), with its environment and in its
// working directory, in a process group of its own; an image job's runs
// in its container (the engine's exec), as its account. A service
// replica's exec health check runs through it.
//
// ctx bounds it: a process command still running when ctx ends is
// killed with its group, and Exec returns ctx's error; the engine cannot
// stop an exec, so a container's runs on until it ends by itself. An
// allocation whose supervisor does not hold it, or whose job has not
// started, is ErrNotRunning; a command that could not be run is an
// error that says why.
func (r *Runner) Exec(ctx context.Context, allocID string, argv []string) (ExecResult, error) {
	if err := checkID(allocID); err != nil {
		return ExecResult{}, err
	}
	if len(argv) == 0 || argv[0] == "" {
		return ExecResult{}, fmt.Errorf("exec for allocation %s: %w", allocID, ErrNoCommand)
	}
	dir := filepath.Join(r.dir, allocID)
	if held, err := lockHeld(dir); err != nil || !held {
		return ExecResult{}, fmt.Errorf("exec for allocation %s: %w: no supervisor holds it", allocID, ErrNotRunning)
	}
	var rec jobRecord
	if found, err := readJSON(filepath.Join(dir, jobPIDFile), &rec); err != nil {
		return ExecResult{}, fmt.Errorf("exec for allocation %s: %w", allocID, err)
	} else if !found {
		return ExecResult{}, fmt.Errorf("exec for allocation %s: %w: its job has not started", allocID, ErrNotRunning)
	}
	sp, d, err := specDriver(dir)
	if err != nil {
		return ExecResult{}, fmt.Errorf("exec for allocation %s: %w", allocID, err)
	}
	out := &tailWriter{max: MaxExecOutput}
	code, err := d.exec(ctx, sp, dir, rec, argv, out)
	if err != nil {
		return ExecResult{Output: out.String()}, fmt.Errorf("exec %s for allocation %s: %w", argv[0], allocID, err)
	}
	return ExecResult{ExitCode: code, Output: out.String()}, nil
}

// tailWriter keeps the last max bytes written to it.
type tailWriter struct {
	max int
	mu  sync.Mutex
	b   []byte
}

func (w *tailWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b = append(w.b, p...)
	if over := len(w.b) - w.max; over > 0 {
		w.b = append(w.b[:0], w.b[over:]...)
	}
	return len(p), nil
}

func (w *tailWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return string(w.b)
}
