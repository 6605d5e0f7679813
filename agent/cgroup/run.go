package cgroup

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// killWait bounds how long Kill waits for the group to empty: a process
// in uninterruptible sleep (a hung disk, a GPU driver call) dies only
// when the kernel lets it.
const killWait = 10 * time.Second

// Start starts cmd with its process inside the group, before it runs
// anything (see the package doc).
func (g *Group) Start(cmd *exec.Cmd) error {
	if g.version == V2 {
		fd, err := unix.Open(g.dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("open cgroup %s: %w", g.dir, err)
		}
		defer unix.Close(fd)
		if cmd.SysProcAttr == nil {
			cmd.SysProcAttr = &syscall.SysProcAttr{}
		}
		cmd.SysProcAttr.UseCgroupFD = true
		cmd.SysProcAttr.CgroupFD = fd
		return cmd.Start()
	}
	var err error
	onThreadOfItsOwn(func() {
		// "0" is the writing thread: this one. Named by its ID instead,
		// the thread is moved under the lock that holds every thread
		// group of the system still, and taking that lock waits out an
		// RCU grace period: about 10 ms on each job's start on a 2-core
		// VM, more when it is busy. A thread that moves itself needs no
		// such lock, and kernels since 2022 take none
		// (docs/benchmarks-history.md, "The lost 17 ms: two waits on every start").
		for _, c := range sortedControllers(g.dirs) {
			if err = writeFile(g.dirs[c], "tasks", "0"); err != nil {
				err = fmt.Errorf("join cgroup %s: %w", g.dirs[c], err)
				return
			}
		}
		err = cmd.Start()
	})
	return err
}

// onThreadOfItsOwn runs f on an OS thread that ends with it: no other
// goroutine ever runs on that thread, before f or after. The process's
// main thread cannot end (the runtime parks it instead), so f never runs
// there: a goroutine that finds itself on it holds it while another one,
// which must then run on another thread, calls f.
func onThreadOfItsOwn(f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Never unlocked where f ran: the thread ends with the goroutine.
		runtime.LockOSThread()
		if unix.Gettid() == unix.Getpid() {
			onThreadOfItsOwn(f)
			runtime.UnlockOSThread()
			return
		}
		f()
	}()
	<-done
}

// Signal sends sig to every process in the group.
func (g *Group) Signal(sig syscall.Signal) error {
	pids, err := g.Procs()
	if err != nil {
		return fmt.Errorf("list cgroup %s: %w", g.name, err)
	}
	return signalAll(pids, sig)
}

// Kill kills every process in the group and waits until none is left,
// killWait at most (ErrNotEmpty). A group that does not exist is empty.
func (g *Group) Kill() error {
	deadline := time.Now().Add(killWait)
	if g.version == V2 {
		err := writeFile(g.dir, "cgroup.kill", "1")
		switch {
		case err == nil:
			return g.waitEmpty(deadline)
		case errors.Is(err, fs.ErrNotExist) || isGone(g.dir):
			return nil
		case !errors.Is(err, ErrNoGroupFile):
			return fmt.Errorf("kill cgroup %s: %w", g.name, err)
		}
		// Before Linux 5.14: freeze, kill, thaw, as in v1.
	}
	for {
		pids, err := g.Procs()
		if err != nil {
			return fmt.Errorf("list cgroup %s: %w", g.name, err)
		}
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("kill cgroup %s: %d processes left (%v): %w", g.name, len(pids), pids, ErrNotEmpty)
		}
		if slices.Contains(pids, os.Getpid()) {
			// A thread of ours in the group: freezing it would freeze
			// this process, and the kills would take it too.
			return fmt.Errorf("kill cgroup %s: this process has a thread in it", g.name)
		}
		// Frozen, nothing in the group forks between the list and the
		// kill; the kills land when it is thawed.
		thaw, err := g.freeze()
		if err != nil {
			return err
		}
		if pids, err = g.Procs(); err == nil {
			err = signalAll(pids, syscall.SIGKILL)
		}
		if terr := thaw(); err == nil {
			err = terr
		}
		if err != nil {
			return fmt.Errorf("kill cgroup %s: %w", g.name, err)
		}
		_ = g.waitEmpty(time.Now().Add(100 * time.Millisecond))
	}
}

// freeze freezes the group where it can be frozen, and returns what
// thaws it.
func (g *Group) freeze() (func() error, error) {
	if g.version == V2 {
		if err := writeFile(g.dir, "cgroup.freeze", "1"); err != nil {
			if errors.Is(err, ErrNoGroupFile) {
				return func() error { return nil }, nil
			}
			return nil, err
		}
		return func() error { return writeFile(g.dir, "cgroup.freeze", "0") }, nil
	}
	d, ok := g.dirs["freezer"]
	if !ok {
		return func() error { return nil }, nil
	}
	if err := freeze(d, "FROZEN"); err != nil {
		return nil, err
	}
	return func() error { return freeze(d, "THAWED") }, nil
}

func signalAll(pids []int, sig syscall.Signal) error {
	for _, pid := range pids {
		if err := syscall.Kill(pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("signal %d: %w", pid, err)
		}
	}
	return nil
}

// waitEmpty waits until the group holds no process, or the deadline.
func (g *Group) waitEmpty(deadline time.Time) error {
	for {
		pids, err := g.Procs()
		if err != nil {
			return err
		}
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cgroup %s: %d processes left: %w", g.name, len(pids), ErrNotEmpty)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func isGone(dir string) bool {
	_, err := os.Stat(dir)
	return errors.Is(err, fs.ErrNotExist)
}

// Stats reads what the group's processes used since it was made.
func (g *Group) Stats() (Stats, error) {
	if g.version == V2 {
		return g.statsV2()
	}
	return g.statsV1()
}

// Exists reports whether the group's directory is there.
func (g *Group) Exists() bool {
	_, err := os.Stat(filepath.Join(g.procsDir(), "cgroup.procs"))
	return err == nil
}
