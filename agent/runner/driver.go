package runner

import (
	"context"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/skein-dev/skein/agent/cgroup"
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
	processDriverName:   processDriver{},
	containerDriverName: containerDriver{},
}

// A driver runs one kind of job (a process, a container) for a supervisor.
// It knows how to start a job, signal it and wait for it (and, for the
// runner, how to run a command beside it: Runner.Exec); the supervisor
// keeps everything else (time limit, lease, stop requests and their grace,
// status.json), so a new kind of job is a new driver and nothing more.
type driver interface {
	// start starts the job sp describes. What takes long before the job
	// runs (a container's image is pulled first) gives up when ctx is
	// done: the supervisor cancels it when the job is stopped meanwhile. A job that
	// cannot be started is an error; a *startError says which exit code
	// to record for it (127 otherwise).
	start(ctx context.Context, sp spec, in startArgs) (jobHandle, error)
	// killOrphan kills whatever still runs of a job whose supervisor died,
	// found from the spec, the allocation's directory and the record
	// (job.pid) it was started with; the record is empty when the
	// supervisor died before it wrote one, perhaps while it was starting
	// the job. Finding nothing left is not an error.
	killOrphan(sp spec, dir string, rec jobRecord) error
	// exec runs argv beside the running job sp describes (found by its
	// record, job.pid), as the job itself would run it: its account, its
	// environment, its working directory. It writes the command's output
	// into out and returns its exit code; ctx bounds it (Runner.Exec).
	exec(ctx context.Context, sp spec, dir string, rec jobRecord, argv []string, out io.Writer) (int, error)
	// signalRunning sends sig to everything the running job sp describes
	// runs (found by its record), for Runner.Signal: the job goes on
	// unless the signal ends it. A job seen to have ended is
	// ErrNotRunning.
	signalRunning(sp spec, rec jobRecord, sig syscall.Signal) error
}

// startArgs is what a driver starts a job with besides its spec.
type startArgs struct {
	// dir is the allocation's directory, where a driver keeps its own
	// control files (the container driver's pull.json).
	dir string
	// stdout and stderr take the job's output.
	stdout, stderr *os.File
	// log is the supervisor's log, for what a driver cannot return.
	log hclog.Logger
	// group, when the job is confined, is the control group it starts in.
	group *cgroup.Group
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
	// A container job: the container's ID and name on the engine.
	ContainerID   string `json:"container_id,omitempty"`
	ContainerName string `json:"container_name,omitempty"`

	StartedAt time.Time `json:"started_at"`
}

// exit is how a job ended: killed by Signal, or else exited with Code.
// Reason, when set, says why in words where its driver knows more than
// the code or signal tells (out of memory: oomReason), and is the
// outcome's reason.
type exit struct {
	Code   int
	Signal syscall.Signal
	Reason string
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
