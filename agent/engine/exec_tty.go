package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"golang.org/x/sys/unix"
)

// Bounds of a command under a terminal in a container.
const (
	// ttyCallTimeout bounds each call to the engine about a terminal's
	// command (a resize, an inspect).
	ttyCallTimeout = 10 * time.Second
	// ttyCheck is how often the engine is asked whether a terminal's
	// command still runs, for one whose terminal something it started
	// still holds after it ended.
	ttyCheck = time.Second
	// ttyStartWait bounds the wait for a terminal's command to have a
	// process, which its first resize needs.
	ttyStartWait = 5 * time.Second
)

// TTYExec is a command ExecTTY runs under a terminal in a container: Read
// and Write are the terminal's (its output, its keys), Resize sets its
// size, Signal signals its process group, Done is closed once it has
// ended and Wait says how; Close ends the session.
type TTYExec struct {
	d    *Docker
	id   string // the exec's
	op   string
	resp types.HijackedResponse

	streamEnded chan struct{}
	endOnce     sync.Once
	done        chan struct{}
	code        int
	err         error
	closeOnce   sync.Once
	stopWatch   context.CancelFunc
}

// ExecTTY runs spec.Cmd in the running container id under a new
// terminal of rows by cols (an exec with Tty, attached to its input and
// output on a connection the engine hands over), as spec.User, and
// returns once it has started. An engine before API 1.42 takes no size
// at the start: the size is set by a resize as soon as the command has a
// process. A container that does not run is ErrNotRunning, one that does
// not exist ErrNoContainer.
func (d *Docker) ExecTTY(ctx context.Context, id string, spec ExecSpec, rows, cols uint16) (*TTYExec, error) {
	if len(spec.Cmd) == 0 || spec.Cmd[0] == "" {
		return nil, fmt.Errorf("exec in container %s: the command is empty", id)
	}
	op := fmt.Sprintf("exec %q under a terminal in container %s", spec.Cmd[0], id)
	var size *[2]uint
	if rows > 0 && cols > 0 {
		size = &[2]uint{uint(rows), uint(cols)}
	}
	created, err := d.c.ContainerExecCreate(ctx, id, container.ExecOptions{
		User:         spec.User,
		Env:          spec.Env,
		WorkingDir:   spec.Workdir,
		Cmd:          spec.Cmd,
		Tty:          true,
		ConsoleSize:  size,
		AttachStdin:  true,
		AttachStdout: true,
		AttachStderr: true,
	})
	if cerrdefs.IsConflict(err) {
		return nil, kind(ErrNotRunning, op, err)
	}
	if err != nil {
		return nil, d.containerErr(op, err)
	}
	resp, err := d.c.ContainerExecAttach(ctx, created.ID, container.ExecAttachOptions{Tty: true, ConsoleSize: size})
	if err != nil {
		if ctx.Err() != nil {
			return nil, d.endExec(op, created.ID, ctx.Err())
		}
		return nil, d.containerErr(op, err)
	}
	watchCtx, stop := context.WithCancel(context.Background())
	e := &TTYExec{d: d, id: created.ID, op: op, resp: resp, streamEnded: make(chan struct{}),
		done: make(chan struct{}), stopWatch: stop}
	go e.watch(watchCtx)
	if size != nil {
		if err := e.firstResize(rows, cols); err != nil {
			_ = e.Close()
			return nil, err
		}
	}
	return e, nil
}

// firstResize waits for the command to have a process, then sets the
// terminal's size: what an engine before API 1.42 did not at the start.
func (e *TTYExec) firstResize(rows, cols uint16) error {
	deadline := time.Now().Add(ttyStartWait)
	for {
		st, err := e.inspect()
		switch {
		case err != nil:
			return err
		case st.Pid > 0 || !st.Running && st.ExitCode != 0:
			// Started (or could not be: nothing to size).
			if err := e.Resize(rows, cols); err != nil && st.Running {
				return err
			}
			return nil
		case time.Now().After(deadline):
			return fmt.Errorf("%s: it had no process within %s", e.op, ttyStartWait)
		}
		select {
		case <-e.done:
			return nil
		case <-time.After(execPollInterval):
		}
	}
}

// watch settles the command's end: when its output ends (its terminal
// closed), or at a check, the engine is asked whether it still runs.
func (e *TTYExec) watch(ctx context.Context) {
	t := time.NewTicker(ttyCheck)
	defer t.Stop()
	defer close(e.done)
	for {
		select {
		case <-ctx.Done():
			e.err = fmt.Errorf("%s: the session was closed before its end was known", e.op)
			return
		case <-e.streamEnded:
			// Its output is over: it ends now, if it has not.
			for {
				st, err := e.inspect()
				if err != nil || !st.Running {
					e.code, e.err = st.ExitCode, err
					return
				}
				select {
				case <-ctx.Done():
					e.err = fmt.Errorf("%s: the session was closed before its end was known", e.op)
					return
				case <-time.After(execPollInterval):
				}
			}
		case <-t.C:
			if st, err := e.inspect(); err == nil && !st.Running && (st.Pid > 0 || st.ExitCode != 0) {
				e.code = st.ExitCode
				return
			}
		}
	}
}

func (e *TTYExec) inspect() (container.ExecInspect, error) {
	ctx, cancel := context.WithTimeout(context.Background(), ttyCallTimeout)
	defer cancel()
	st, err := e.d.c.ContainerExecInspect(ctx, e.id)
	if err != nil {
		return st, e.d.fail(e.op+": inspect", err)
	}
	return st, nil
}

// Read reads what the command wrote to the terminal; an error once the
// terminal closed (the command and what it started ended) or the session
// did.
func (e *TTYExec) Read(b []byte) (int, error) {
	n, err := e.resp.Reader.Read(b)
	if err != nil {
		e.endOnce.Do(func() { close(e.streamEnded) })
	}
	return n, err
}

// Write types b into the terminal.
func (e *TTYExec) Write(b []byte) (int, error) { return e.resp.Conn.Write(b) }

// Resize sets the terminal's size; the command gets SIGWINCH.
func (e *TTYExec) Resize(rows, cols uint16) error {
	if rows == 0 || cols == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), ttyCallTimeout)
	defer cancel()
	if err := e.d.c.ContainerExecResize(ctx, e.id, container.ResizeOptions{Height: uint(rows), Width: uint(cols)}); err != nil {
		return e.d.fail(e.op+": resize", err)
	}
	return nil
}

// Signal sends sig to the command's process group: the engine starts it
// in a session of its own, whose leader it is. The engine has no call
// for it, so the process is signalled from the host, once it is seen in
// the container's cgroup; where the host may not, by kill in the
// container, as its root (which needs kill in the image).
func (e *TTYExec) Signal(sig syscall.Signal) error {
	st, err := e.inspect()
	switch {
	case err != nil:
		return err
	case !st.Running || st.Pid <= 0:
		return nil
	case !inCgroupOf(st.Pid, st.ContainerID):
		return fmt.Errorf("%s: signal: process %d is not in container %s as this host sees it (is the agent in the engine's PID namespace?)", e.op, st.Pid, st.ContainerID)
	}
	err = syscall.Kill(-st.Pid, sig)
	switch {
	case err == nil, errors.Is(err, syscall.ESRCH):
		return nil
	case errors.Is(err, syscall.EPERM):
		ctx, cancel := context.WithTimeout(context.Background(), execKillTimeout)
		defer cancel()
		return e.d.signalInContainer(ctx, e.op+": signal", st.ContainerID, strings.TrimPrefix(unix.SignalName(sig), "SIG"), []int{st.Pid}, true)
	}
	return fmt.Errorf("%s: signal process group %d: %w", e.op, st.Pid, err)
}

// Done is closed once the command has ended.
func (e *TTYExec) Done() <-chan struct{} { return e.done }

// Wait waits for the command's end: its exit code, 128+N when signal N
// killed it.
func (e *TTYExec) Wait() (int, error) {
	<-e.done
	return e.code, e.err
}

// Close ends the session: the command's process group gets SIGHUP, as
// when a terminal hangs up, and it and everything it started SIGKILL a
// moment later if it is still there (Wait then says how it ended, once
// the engine does); the connection is closed.
func (e *TTYExec) Close() error {
	e.closeOnce.Do(func() {
		select {
		case <-e.done:
		default:
			_ = e.Signal(syscall.SIGHUP)
			select {
			case <-e.done:
			case <-time.After(time.Second):
				_ = e.d.killExec(e.id)
				// Its end, and its exit code, are seen at the next check.
				select {
				case <-e.done:
				case <-time.After(2 * ttyCheck):
				}
			}
		}
		e.resp.Close()
		e.stopWatch()
		<-e.done
	})
	return nil
}
