package runner

import (
	"fmt"
	"os"
	"syscall"
	"time"
)

// processDriverName is the driver spec.json names for a job run as a
// process (driver_process.go).
const processDriverName = "process"

// Exit codes of a job that could not be started, as shells use them.
const (
	exitCannotExec = 126
	exitNotFound   = 127
)

// drivers are the drivers a supervisor and a runner know, by the name
// spec.json gives them.
var drivers = map[string]driver{
	processDriverName: processDriver{},
}

// A driver runs one kind of job (a process, a container) for a supervisor.
// It knows how to start a job, signal it and wait for it; the supervisor
// keeps everything else (time limit, lease, stop requests and their grace,
// status.json), so a new kind of job is a new driver and nothing more.
type driver interface {
	// start starts the job sp describes, its standard output and error
	// going to the given files. A job that cannot be started is an error;
	// a *startError says which exit code to record for it (127 otherwise).
	start(sp spec, stdout, stderr *os.File) (jobHandle, error)
	// killOrphan kills whatever still runs of a job whose supervisor died,
	// found from the spec and the record (job.pid) it was started with.
	// Finding nothing left is not an error.
	killOrphan(sp spec, rec jobRecord) error
}

// A jobHandle is a job its driver started, as the supervisor sees it.
type jobHandle interface {
	// signal sends sig to everything the job runs.
	signal(sig syscall.Signal) error
	// wait blocks until the job is over and returns how it ended; an error
	// means the driver cannot tell. It is called once, and once it has
	// returned, nothing the job ran is left.
	wait() (exit, error)
	// record is what job.pid keeps of the job: when it started, and what
	// the driver needs to find it again (killOrphan).
	record() jobRecord
}

// jobRecord is job.pid. Each driver fills StartedAt and the fields that
// name its jobs; the supervisor and the runner read only StartedAt.
type jobRecord struct {
	// A process job: the process group's leader, its start time in /proc
	// (so that a reused pid is never mistaken for it) and its group.
	PID       int    `json:"pid,omitempty"`
	PGID      int    `json:"pgid,omitempty"`
	StartTime uint64 `json:"start_time,omitempty"`

	StartedAt time.Time `json:"started_at"`
}

// exit is how a job ended: killed by Signal, or else exited with Code.
type exit struct {
	Code   int
	Signal syscall.Signal
}

// startError is a job its driver could not start, with the exit code to
// record for it, as a shell would: exitNotFound, exitCannotExec.
type startError struct {
	code int
	err  error
}

func (e *startError) Error() string { return e.err.Error() }
func (e *startError) Unwrap() error { return e.err }

// driverNamed returns the driver spec.json names. A spec without one was
// written before specs named their driver, when every job was a process.
func driverNamed(name string) (driver, error) {
	if name == "" {
		name = processDriverName
	}
	d, ok := drivers[name]
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrUnknownDriver, name)
	}
	return d, nil
}
