package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/skein-dev/skein/agent/engine"
)

// fakeDriverName is the driver of jobs that run inside the supervisor
// itself (fakeDriver); TestMain makes it known.
const fakeDriverName = "fake"

// orphanMarker is the file fakeDriver.killOrphan leaves in the job's
// workdir to show that it was asked.
const orphanMarker = "orphan-killed"

// Modes of a fake job, its argv[0].
const (
	fakeUntilTerm   = "until-term"   // ends on SIGTERM, killed by it
	fakeUntilKill   = "until-kill"   // ends on SIGKILL only
	fakeCannotStart = "cannot-start" // fails to start, as a program that may not be run
	fakeExitPrefix  = "exit:"        // "exit:N" ends at once with code N
	// fakePulling starts as a container whose image is pulled: it
	// records a growing pull progress until fakeRelease appears in its
	// workdir, when it goes on as fakeUntilTerm, or until its start is
	// cancelled, when it fails to start.
	fakePulling = "pulling"
	// fakeSlowStart is fakePulling deaf to the cancel: it starts once
	// released, whatever happened meanwhile.
	fakeSlowStart = "slow-start"
	fakeRelease   = "release"
)

var errFakeOver = errors.New("fake job is over")

// fakeDriver runs a job that is nothing but the supervisor's calls: it
// writes the name of every signal it gets to its stdout, one a line, and
// ends as its mode says. It shows what the supervisor does with a job it
// reaches only through the driver interface.
type fakeDriver struct{}

func (fakeDriver) start(ctx context.Context, sp spec, in startArgs) (jobHandle, error) {
	mode := sp.Argv[0]
	if mode == fakeCannotStart {
		return nil, &startError{code: exitCannotExec, err: errors.New("fake: cannot start")}
	}
	if mode == fakePulling || mode == fakeSlowStart {
		if err := fakePull(ctx, sp, in, mode == fakePulling); err != nil {
			return nil, err
		}
		mode = fakeUntilTerm
	}
	j := &fakeJob{mode: mode, out: in.stdout, ended: make(chan exit, 1),
		rec: jobRecord{StartedAt: time.Now().UTC()}}
	if s, ok := strings.CutPrefix(mode, fakeExitPrefix); ok {
		code, err := strconv.Atoi(s)
		if err != nil {
			return nil, fmt.Errorf("fake mode %q: %w", mode, err)
		}
		j.end(exit{Code: code})
	}
	return j, nil
}

// fakePull records a pull's progress in pull.json, a byte more every few
// milliseconds, until fakeRelease appears in the job's workdir or, when
// cancellable, ctx is done.
func fakePull(ctx context.Context, sp spec, in startArgs, cancellable bool) error {
	w := &pullWriter{path: filepath.Join(in.dir, pullFile), image: "fake:pulled", log: in.log}
	w.write()
	defer w.finish()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	done := ctx.Done()
	if !cancellable {
		done = nil
	}
	for n := int64(1); ; n++ {
		if _, err := os.Stat(filepath.Join(sp.Workdir, fakeRelease)); err == nil {
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("fake pull: %w", ctx.Err())
		case <-tick.C:
			w.update(engine.PullProgress{Bytes: n, Total: 1 << 20})
		}
	}
}

// killOrphan leaves orphanMarker in the job's workdir, when the job was
// started.
func (fakeDriver) killOrphan(sp spec, _ string, rec jobRecord) error {
	if rec.StartedAt.IsZero() {
		return nil
	}
	return os.WriteFile(filepath.Join(sp.Workdir, orphanMarker),
		[]byte(rec.StartedAt.Format(time.RFC3339Nano)), 0o600)
}

// exec refuses: a fake job is the supervisor itself, with nothing to run
// a command beside.
func (fakeDriver) exec(context.Context, spec, string, jobRecord, []string, io.Writer) (int, error) {
	return 0, errors.New("fake jobs run no commands")
}

// signalRunning refuses: a fake job is reached only through its
// supervisor.
func (fakeDriver) signalRunning(spec, jobRecord, syscall.Signal) error {
	return errors.New("fake jobs are signalled by their supervisor only")
}

type fakeJob struct {
	mode  string
	out   *os.File
	rec   jobRecord
	ended chan exit // holds the exit once the job is over

	mu   sync.Mutex
	over bool
}

func (j *fakeJob) end(e exit) {
	j.over = true
	j.ended <- e
}

func (j *fakeJob) signal(sig syscall.Signal) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.over {
		return errFakeOver
	}
	if _, err := fmt.Fprintln(j.out, signalName(sig)); err != nil {
		return err
	}
	if sig == syscall.SIGKILL || sig == syscall.SIGTERM && j.mode == fakeUntilTerm {
		j.end(exit{Signal: sig})
	}
	return nil
}

func (j *fakeJob) wait() (exit, error) { return <-j.ended, nil }

func (j *fakeJob) record() jobRecord { return j.rec }
