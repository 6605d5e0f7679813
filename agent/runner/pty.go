package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ErrNoTTY refuses a terminal beside a job whose driver gives none.
var ErrNoTTY = errors.New("an interactive terminal is given beside process and container jobs only")

// Terminal is a command ExecPTY runs under a terminal: Read and Write
// are the terminal's (its output, its keys), Resize sets its size,
// Signal signals the command's process group, Done is closed once it
// has ended and Wait says how; Close ends the session.
type Terminal interface {
	io.ReadWriter
	Resize(rows, cols uint16) error
	Signal(sig syscall.Signal) error
	Done() <-chan struct{}
	Wait() (int, error)
	Close() error
}

// ptyWatch is how often a terminal session checks that its job's
// supervisor still holds the allocation: once it does not (the job
// ended), the session's command is killed.
const ptyWatch = time.Second

// PTY is a command that ExecPTY runs beside a process job under a
// pseudo-terminal of its own (a Terminal).
type PTY struct {
	master *os.File
	// pgid is the command's process group (its session); name its
	// program.
	pgid int
	name string
	done chan struct{}
	code int
	err  error
	stop context.CancelFunc
	once sync.Once
}

// ExecPTY runs argv beside a running allocation's job, as Exec does (the
// job's account, environment and working directory), in a session of
// its own whose controlling terminal is a new terminal of rows by cols,
// with TERM term when it is not empty: for a process job, a
// pseudo-terminal of the node's (PTY); for a container job, the engine's
// exec with a terminal, in the job's container (containerTerminal). The
// command is killed, with its session's process group, when ctx ends,
// when the allocation's supervisor no longer holds it (the job ended) or
// on Close.
func (r *Runner) ExecPTY(ctx context.Context, allocID string, argv []string, term string, rows, cols uint16) (Terminal, error) {
	if err := checkID(allocID); err != nil {
		return nil, err
	}
	if len(argv) == 0 || argv[0] == "" {
		return nil, fmt.Errorf("exec for allocation %s: %w", allocID, ErrNoCommand)
	}
	dir := filepath.Join(r.dir, allocID)
	if held, err := lockHeld(dir); err != nil || !held {
		return nil, fmt.Errorf("exec for allocation %s: %w: no supervisor holds it", allocID, ErrNotRunning)
	}
	var rec jobRecord
	if found, err := readJSON(filepath.Join(dir, jobPIDFile), &rec); err != nil {
		return nil, fmt.Errorf("exec for allocation %s: %w", allocID, err)
	} else if !found {
		return nil, fmt.Errorf("exec for allocation %s: %w: its job has not started", allocID, ErrNotRunning)
	}
	sp, d, err := specDriver(dir)
	if err != nil {
		return nil, fmt.Errorf("exec for allocation %s: %w", allocID, err)
	}
	switch d.(type) {
	case processDriver:
	case containerDriver:
		t, err := containerPTY(ctx, sp, dir, rec, argv, term, rows, cols)
		if err != nil {
			return nil, fmt.Errorf("exec %s for allocation %s: %w", argv[0], allocID, err)
		}
		return t, nil
	default:
		return nil, fmt.Errorf("exec for allocation %s: %w", allocID, ErrNoTTY)
	}
	ctx, stop := context.WithCancel(ctx)
	cmd, err := jobCommand(ctx, sp, dir, argv)
	if err != nil {
		stop()
		return nil, fmt.Errorf("exec %s for allocation %s: %w", argv[0], allocID, err)
	}
	if term != "" {
		cmd.Env = append(cmd.Env, "TERM="+term)
	}
	master, slave, err := openPTY()
	if err != nil {
		stop()
		return nil, fmt.Errorf("exec %s for allocation %s: %w", argv[0], allocID, err)
	}
	defer slave.Close()
	if cred := cmd.SysProcAttr.Credential; cred != nil {
		// The terminal is the user's, as login gives it.
		if err := slave.Chown(int(cred.Uid), -1); err != nil {
			master.Close()
			stop()
			return nil, fmt.Errorf("exec %s for allocation %s: give the terminal to uid %d: %w", argv[0], allocID, cred.Uid, err)
		}
	}
	p := &PTY{master: master, name: argv[0], done: make(chan struct{}), stop: stop}
	_ = p.Resize(rows, cols)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr.Setsid = true
	cmd.SysProcAttr.Setctty = true
	cmd.SysProcAttr.Ctty = 0
	if err := startBeside(sp, cmd); err != nil {
		master.Close()
		stop()
		return nil, fmt.Errorf("exec %s for allocation %s: %w", argv[0], allocID, err)
	}
	p.pgid = cmd.Process.Pid
	go func() {
		err := cmd.Wait()
		_ = syscall.Kill(-p.pgid, syscall.SIGKILL)
		p.code, p.err = exitCodeOf(cmd, argv[0], err)
		close(p.done)
	}()
	go p.watch(ctx, dir)
	return p, nil
}

// watch kills the command once the allocation's supervisor lets it go.
func (p *PTY) watch(ctx context.Context, dir string) {
	t := time.NewTicker(ptyWatch)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.done:
			return
		case <-t.C:
			if held, err := lockHeld(dir); err == nil && !held {
				_ = p.Signal(syscall.SIGKILL)
				return
			}
		}
	}
}

// Read reads what the command wrote to the terminal; an error once
// nothing holds the terminal any more (the command and what it started
// ended).
func (p *PTY) Read(b []byte) (int, error) { return p.master.Read(b) }

// Write types b into the terminal.
func (p *PTY) Write(b []byte) (int, error) { return p.master.Write(b) }

// Resize sets the terminal's size; the command gets SIGWINCH.
func (p *PTY) Resize(rows, cols uint16) error {
	if rows == 0 || cols == 0 {
		return nil
	}
	return control(p.master, func(fd int) error {
		return unix.IoctlSetWinsize(fd, unix.TIOCSWINSZ, &unix.Winsize{Row: rows, Col: cols})
	})
}

// Signal sends sig to the command's process group.
func (p *PTY) Signal(sig syscall.Signal) error {
	if err := syscall.Kill(-p.pgid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signal %s's process group %d: %w", p.name, p.pgid, err)
	}
	return nil
}

// Done is closed when the command has ended.
func (p *PTY) Done() <-chan struct{} { return p.done }

// Wait waits for the command's end: its exit code, 128+N when signal N
// killed it.
func (p *PTY) Wait() (int, error) {
	<-p.done
	return p.code, p.err
}

// Close ends the session: the command's process group gets SIGHUP, as
// when a terminal hangs up, and SIGKILL a moment later if it is still
// there; the terminal is closed.
func (p *PTY) Close() error {
	p.once.Do(func() {
		_ = p.Signal(syscall.SIGHUP)
		select {
		case <-p.done:
		case <-time.After(execWaitDelay):
			_ = p.Signal(syscall.SIGKILL)
			<-p.done
		}
		p.stop()
		_ = p.master.Close()
	})
	return nil
}

// openPTY opens a new pseudo-terminal: its master and its slave end.
func openPTY() (master, slave *os.File, err error) {
	master, err = os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("open a pseudo-terminal: %w", err)
	}
	var n int
	err = control(master, func(fd int) error {
		if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
			return err
		}
		n, err = unix.IoctlGetInt(fd, unix.TIOCGPTN)
		return err
	})
	if err != nil {
		master.Close()
		return nil, nil, fmt.Errorf("unlock a pseudo-terminal: %w", err)
	}
	slave, err = os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		master.Close()
		return nil, nil, fmt.Errorf("open a pseudo-terminal: %w", err)
	}
	return master, slave, nil
}

// control runs f on f's descriptor, leaving the file in the poller.
func control(f *os.File, fn func(fd int) error) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = fn(int(fd)) }); err != nil {
		return err
	}
	return ferr
}
