package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/skein-dev/skein/agent/cgroup"
	"github.com/skein-dev/skein/structs"
)

// Environment variables through which the runner hands a supervisor the
// descriptors it inherits: the write end of the ready pipe (closed once the
// job has started or failed to) and the already locked supervisor.lock.
const (
	readyFDEnv = "SKEIN_SUPERVISOR_READY_FD"
	lockFDEnv  = "SKEIN_SUPERVISOR_LOCK_FD"
)

// How often a supervisor reads the node's lease (checkLease), and what it
// says when the lease ran out.
const (
	// leasePoll is the wait before reading again a lease that could not
	// be read: not written yet, or read while the agent rewrote it.
	leasePoll = 100 * time.Millisecond
	// leaseRecheck is the longest wait between two reads of a lease that
	// has not run out. The agent only ever pushes the lease further
	// out, but one restarted with a shorter --stop-after writes a nearer
	// end, and a lease that vanishes has ended: this bounds how late the
	// supervisor learns of either.
	leaseRecheck = time.Second
	fencedReason = "node lease expired: lost contact with the leader"
)

// Supervise runs the allocation in allocDir to its end and records the
// outcome in status.json. It is meant to be the whole of a process (the
// hidden `skein supervise ALLOCDIR` command): it runs the job through the
// driver its spec names, which may make the process the job's (the process
// driver changes into the job's working directory), and it handles SIGTERM
// and SIGINT, which stop the job.
//
// It returns the supervisor's own exit code: 0 when an outcome is recorded,
// 1 when none could be (another supervisor holds the directory, or the
// directory cannot be written).
func Supervise(allocDir string) int {
	log := hclog.New(&hclog.LoggerOptions{Name: "supervisor", Output: os.Stderr})
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)

	dir, err := filepath.Abs(allocDir)
	if err != nil {
		log.Error("bad allocation directory", "dir", allocDir, "error", err)
		return 1
	}
	s := &supervisor{dir: dir, log: log.With("dir", dir), sigs: sigs}
	return s.run()
}

type supervisor struct {
	dir   string
	log   hclog.Logger
	sigs  chan os.Signal
	ready *os.File
	// sawLease is set once the node's lease file has been read.
	sawLease bool
}

func (s *supervisor) path(name string) string { return filepath.Join(s.dir, name) }

func (s *supervisor) run() int {
	lock, err := s.lock()
	if err != nil {
		s.log.Error("cannot supervise", "error", err)
		return 1
	}
	defer lock.Close()
	s.ready = inheritedFile(readyFDEnv, "ready")
	defer s.signalReady()

	var done status
	if found, err := readJSON(s.path(statusFile), &done); found || err != nil {
		s.log.Info("allocation already has a result; nothing to do")
		return 0
	}
	self, err := newProcRecord(os.Getpid(), time.Now().UTC())
	if err == nil {
		err = writeJSONAtomic(s.path(supervisorPIDFile), self)
	}
	if err != nil {
		s.log.Error("cannot record supervisor pid", "error", err)
		return 1
	}
	if _, err := os.Stat(s.path(jobPIDFile)); err == nil {
		// An earlier supervisor started the job and died; the runner kills
		// what it left and reports the allocation lost. Never run it twice.
		s.log.Error("job was started by an earlier supervisor; not starting it again")
		return 1
	}

	var sp spec
	found, err := readJSON(s.path(specFile), &sp)
	if err == nil && (!found || len(sp.Argv) == 0 || sp.Argv[0] == "") {
		err = ErrNoCommand
	}
	if err != nil {
		return s.record(startFailed(exitNotFound, fmt.Errorf("read spec: %w", err)))
	}
	d, err := driverNamed(sp.Driver)
	if err != nil {
		return s.record(startFailed(exitNotFound, err))
	}
	if req, ok := s.stopRequested(); ok {
		now := time.Now().UTC()
		return s.record(status{State: structs.AllocKilled, ExitCode: exitUnknown,
			Reason: "killed: " + req.Reason, FinishedAt: now})
	}
	return s.record(s.runJob(sp, d))
}

// lock takes supervisor.lock: the inherited, already locked descriptor when
// the runner started us, otherwise the file itself.
func (s *supervisor) lock() (*os.File, error) {
	f := inheritedFile(lockFDEnv, lockFile)
	if f == nil {
		var err error
		f, err = os.OpenFile(s.path(lockFile), os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return nil, fmt.Errorf("open lock: %w", err)
		}
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", s.path(lockFile), ErrSupervised)
	}
	return f, nil
}

// inheritedFile returns the descriptor named by an environment variable,
// made close-on-exec so that the job does not inherit it, or nil.
func inheritedFile(envName, name string) *os.File {
	fd, err := strconv.Atoi(os.Getenv(envName))
	if err != nil || fd < 3 {
		return nil
	}
	var st syscall.Stat_t
	if syscall.Fstat(fd, &st) != nil {
		return nil
	}
	syscall.CloseOnExec(fd)
	return os.NewFile(uintptr(fd), name)
}

// signalReady tells the runner that job.pid or status.json is written.
func (s *supervisor) signalReady() {
	if s.ready != nil {
		_ = s.ready.Close()
		s.ready = nil
	}
}

// checkLease reports whether the node's lease has run out and, when it
// has not, fires when the supervisor is to read it again: when it runs
// out, or after leaseRecheck if sooner. A supervisor thus reads the lease
// about once a second, and at the very moment it would run out, instead
// of polling it (ten reads a second from each of a node's supervisors,
// most of an idle supervisor's work).
//
// A lease that was never written never fences (the agent has not been in
// contact yet), but one that disappears does: the agent rewrites it in
// place, so it vanishes only with the node's data directory. One read
// while the agent rewrote it (readLease) decides nothing: it is read again
// after leasePoll.
func (s *supervisor) checkLease(path string) (expired bool, again <-chan time.Time) {
	l, found, err := readLease(path)
	switch {
	case !found && s.sawLease:
		return true, nil
	case !found, err != nil:
		return false, time.After(leasePoll)
	}
	s.sawLease = true
	if l.ExpiresAt.IsZero() {
		return false, time.After(leaseRecheck)
	}
	left := time.Until(l.ExpiresAt)
	if left < 0 {
		return true, nil
	}
	return false, time.After(min(left, leaseRecheck))
}

// stopRequested reads stop.json, and whether there is one: why the job is
// to stop (never empty), the kill grace the request asks for (0: the
// spec's), whether that grace applies even when longer than the spec's,
// and the signal to send first (empty: SIGTERM).
func (s *supervisor) stopRequested() (stopRequest, bool) {
	var req stopRequest
	found, err := readJSON(s.path(stopFile), &req)
	if err != nil {
		s.log.Warn("unreadable stop request", "error", err)
		return stopRequest{Reason: "stop requested"}, true
	}
	if !found {
		return stopRequest{}, false
	}
	if req.Reason == "" {
		req.Reason = "stop requested"
	}
	return req, true
}

func (s *supervisor) record(st status) int {
	if err := writeJSONAtomic(s.path(statusFile), st); err != nil {
		s.log.Error("cannot record the outcome", "error", err)
		return 1
	}
	s.log.Info("job over", "state", st.State, "exit_code", st.ExitCode, "reason", st.Reason)
	return 0
}

// userName names the account a spec runs its job as, for the log.
func userName(a *Account) string {
	if a == nil {
		return "(the supervisor's)"
	}
	return fmt.Sprintf("%s (uid %d)", a.Name, a.UID)
}

func startFailed(code int, err error) status {
	return status{State: structs.AllocFailed, ExitCode: code,
		Reason: "start failed: " + err.Error(), FinishedAt: time.Now().UTC()}
}

// runJob starts the job through its driver, waits for it and stops it when
// asked or when its time is up.
func (s *supervisor) runJob(sp spec, d driver) status {
	out, err := captureOutput(s.dir, sp, s.log)
	if err != nil {
		return startFailed(exitNotFound, err)
	}
	// The output is all in its logs before the outcome is recorded.
	defer out.finish()

	group, err := s.confine(sp)
	if err != nil {
		return startFailed(exitCannotExec, err)
	}
	var leaseCheck <-chan time.Time
	if sp.LeasePath != "" {
		// Read the lease before the job exists, so that a lease removed
		// from then on counts as vanished (start and wait check expiry).
		_, leaseCheck = s.checkLease(sp.LeasePath)
	}
	job, stopped, err := s.start(d, sp, out, group, leaseCheck)
	if err != nil {
		s.release(group, sp, nil)
		if stopped != "" {
			return status{State: structs.AllocKilled, ExitCode: exitUnknown,
				Reason: "killed: " + stopped, FinishedAt: time.Now().UTC()}
		}
		code := exitNotFound
		var se *startError
		if errors.As(err, &se) {
			code = se.code
		}
		return startFailed(code, err)
	}
	rec := job.record()
	if err := writeJSONAtomic(s.path(jobPIDFile), rec); err != nil {
		s.signal(job, syscall.SIGKILL)
		_, _ = job.wait()
		s.release(group, sp, nil)
		return startFailed(exitUnknown, fmt.Errorf("record job pid: %w", err))
	}
	s.signalReady()
	s.log.Info("job started", "driver", sp.Driver, "pid", rec.PID, "container", rec.ContainerName,
		"argv0", sp.Argv[0], "user", userName(sp.User))

	st := s.wait(job, sp)
	st.StartedAt = rec.StartedAt
	s.release(group, sp, &st)
	return st
}

// confine makes the allocation's control group, when its spec names a
// hierarchy, with the spec's limits; the job starts in it.
func (s *supervisor) confine(sp spec) (*cgroup.Group, error) {
	if sp.Cgroup == nil {
		return nil, nil
	}
	g, err := sp.Cgroup.Create(sp.AllocID, sp.Limits.cgroupLimits())
	if err != nil {
		return nil, fmt.Errorf("confine the job: %w", err)
	}
	return g, nil
}

// release is the end of the allocation's group: whatever the job left in
// it is killed (the driver's wait did so already, unless the job never
// started), what it used is recorded in st (when given), and the group
// goes. A job the memory limit stopped says so.
func (s *supervisor) release(g *cgroup.Group, sp spec, st *status) {
	if g == nil {
		return
	}
	if err := g.Kill(); err != nil {
		s.log.Error("cannot empty the job's cgroup", "error", err)
	}
	if st != nil {
		if stats, err := g.Stats(); err != nil {
			s.log.Warn("cannot read what the job used", "error", err)
		} else {
			st.Usage = usage(stats, sp.Limits)
			if stats.OOMKills > 0 && st.State == structs.AllocFailed {
				st.Reason = oomReason(stats.MemoryPeakBytes, st.Usage.MemoryLimitBytes)
			}
		}
	}
	if err := g.Remove(); err != nil {
		s.log.Error("cannot remove the job's cgroup", "error", err)
	}
}

// start starts the job through its driver. A start can take long (the
// container driver pulls the image first), so a stop request or an
// expired lease meanwhile cancels it: when the start then fails, stopped
// says why the job was stopped, and the job is recorded as killed rather
// than failed. A stop signal that came too late to cancel the start is
// put back for wait, which stops the job as usual. leaseCheck fires when
// the lease is to be read again (checkLease).
func (s *supervisor) start(d driver, sp spec, out *jobOutput, group *cgroup.Group, leaseCheck <-chan time.Time) (jobHandle, string, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stopped string
	var caught os.Signal
	started := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			select {
			case <-started:
				return
			case caught = <-s.sigs:
				req, _ := s.stopRequested()
				stopped = req.Reason
				cancel()
				return
			case <-leaseCheck:
				var expired bool
				if expired, leaseCheck = s.checkLease(sp.LeasePath); expired {
					stopped = fencedReason
					cancel()
					return
				}
			}
		}
	}()
	job, err := d.start(ctx, sp, startArgs{dir: s.dir, stdout: out.stdout.w, stderr: out.stderr.w, log: s.log, group: group})
	close(started)
	<-watched
	if err == nil && caught != nil {
		select {
		case s.sigs <- caught:
		default: // full: a stop signal is waiting already
		}
	}
	return job, stopped, err
}

// signal sends sig to the job; a signal that cannot be sent is logged, and
// the job's end (or the kill grace) decides what happens next.
func (s *supervisor) signal(job jobHandle, sig syscall.Signal) {
	if err := job.signal(sig); err != nil {
		s.log.Warn("cannot signal the job", "signal", signalName(sig), "error", err)
	}
}

func (s *supervisor) wait(job jobHandle, sp spec) status {
	exited := make(chan struct{})
	var end exit
	var endErr error
	go func() {
		end, endErr = job.wait()
		close(exited)
	}()
	grace := time.Duration(sp.KillGrace)
	// The limit counts from the job's start, in this process, which
	// outlives agent restarts and leader changes: neither can reset it.
	var limit, warn <-chan time.Time
	if sp.TimeLimit > 0 {
		t := time.NewTimer(time.Duration(sp.TimeLimit))
		defer t.Stop()
		limit = t.C
	}
	warnSig, warnOK := timeSignals[sp.Signal]
	if warnOK && sp.SignalBefore > 0 && sp.SignalBefore < sp.TimeLimit {
		t := time.NewTimer(time.Duration(sp.TimeLimit - sp.SignalBefore))
		defer t.Stop()
		warn = t.C
	}
	var signalledAt time.Time
	var kill <-chan time.Time
	var stopped, timedOut bool
	var why string
	terminate := func(reason string, first syscall.Signal) {
		why = reason
		s.log.Info("stopping job", "reason", reason, "signal", signalName(first), "grace", grace)
		s.signal(job, first)
		t := time.NewTimer(grace)
		kill = t.C
	}
	// fence stops the job when the node's lease has run out, with the
	// (usually shorter) fence grace.
	fence := func() {
		stopped = true
		if g := time.Duration(sp.FenceGrace); g > 0 && g < grace {
			grace = g
		}
		terminate("killed: "+fencedReason, syscall.SIGTERM)
	}
	var leaseCheck <-chan time.Time
	if sp.LeasePath != "" {
		var expired bool
		if expired, leaseCheck = s.checkLease(sp.LeasePath); expired {
			fence()
		}
	}
	for done := false; !done; {
		select {
		case <-exited:
			done = true
		case <-s.sigs:
			if why == "" {
				req, _ := s.stopRequested()
				if g := time.Duration(req.Grace); g > 0 && (g < grace || req.Exact) {
					grace = g
				}
				first, ok := timeSignals[req.Signal]
				if !ok {
					first = syscall.SIGTERM
				}
				stopped = true
				terminate("killed: "+req.Reason, first)
			}
		case <-leaseCheck:
			var expired bool
			if expired, leaseCheck = s.checkLease(sp.LeasePath); expired && why == "" {
				fence()
			}
		case <-warn:
			if why == "" {
				s.log.Info("time limit near; signalling the job", "signal", sp.Signal, "before", sp.SignalBefore)
				s.signal(job, warnSig)
				signalledAt = time.Now().UTC()
			}
		case <-limit:
			if why == "" {
				timedOut = true
				terminate(fmt.Sprintf("time limit %s exceeded", sp.TimeLimit), syscall.SIGTERM)
			}
		case <-kill:
			s.log.Info("kill grace over; killing the job")
			s.signal(job, syscall.SIGKILL)
		}
	}

	st := status{FinishedAt: time.Now().UTC(), SignalledAt: signalledAt}
	switch {
	case endErr != nil:
		s.log.Warn("cannot tell how the job ended", "error", endErr)
		st.ExitCode = exitUnknown
		st.Reason = "exit status unknown"
	case end.Signal != 0:
		st.ExitCode = 128 + int(end.Signal)
		st.Signal = signalName(end.Signal)
		st.Reason = "killed by signal " + st.Signal
	default:
		st.ExitCode = end.Code
		st.Reason = "exited with code " + strconv.Itoa(st.ExitCode)
	}
	if endErr == nil && end.Reason != "" {
		st.Reason = end.Reason
	}
	switch {
	case stopped:
		st.State, st.Reason = structs.AllocKilled, why
	case timedOut:
		st.State, st.Reason = structs.AllocTimedOut, why
	case st.ExitCode == 0:
		st.State = structs.AllocSucceeded
	default:
		st.State = structs.AllocFailed
	}
	return st
}
