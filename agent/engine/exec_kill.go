package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/docker/docker/api/types/container"
)

// execKillTimeout bounds the calls to the engine that kill an exec whose
// context ended.
const execKillTimeout = 5 * time.Second

// procDir is where the host's processes are seen.
const procDir = "/proc"

// killExec kills what the exec execID still runs, or runs once its
// start is through: its process and every process it started (SIGKILL). The engine has no call that stops an exec
// (Docker 20.10's API has none: an exec ends when its process does), so
// its process is found by the exec's PID, which the engine gives as the
// host sees it, and killed from the host. The PID is trusted only if the
// process is in the container's cgroup: an agent in another PID
// namespace than the engine's, or a PID reused since, is refused rather
// than a stranger killed. Where the host may not signal the process (an
// agent that is not root, the exec running as root in the container) the
// kill is sent by a second exec as the container's root, `kill -KILL`
// with the PIDs as the container sees them, which needs a kill program in
// the image.
func (d *Docker) killExec(execID string) error {
	ctx, cancel := context.WithTimeout(context.Background(), execKillTimeout)
	defer cancel()
	op := "kill exec " + execID
	st, err := d.c.ContainerExecInspect(ctx, execID)
	// An exec whose start is still under way (its context ended while
	// the engine started it) has no process yet, though the engine may
	// say it runs, and would run on once it has one: it is waited for.
	// One that ran has its process's PID, and one that could not start
	// its exit code (126, 127).
	for err == nil && st.Pid <= 0 && (st.Running || st.ExitCode == 0) {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: it had no process within %s, and may yet start", op, execKillTimeout)
		case <-time.After(execPollInterval):
		}
		st, err = d.c.ContainerExecInspect(ctx, execID)
	}
	if err != nil {
		return d.fail(op, err)
	}
	if !st.Running {
		return nil
	}
	if !inCgroupOf(st.Pid, st.ContainerID) {
		return fmt.Errorf("%s: process %d is not in container %s as this host sees it (is the agent in the engine's PID namespace?)", op, st.Pid, st.ContainerID)
	}
	pids := append([]int{st.Pid}, descendants(st.Pid)...)
	var denied []int
	for _, pid := range pids {
		err := syscall.Kill(pid, syscall.SIGKILL)
		switch {
		case errors.Is(err, syscall.EPERM):
			denied = append(denied, pid)
		case err != nil && !errors.Is(err, syscall.ESRCH):
			return fmt.Errorf("%s: kill process %d: %w", op, pid, err)
		}
	}
	if len(denied) == 0 {
		return nil
	}
	return d.killInContainer(ctx, op, st.ContainerID, denied)
}

// killInContainer sends SIGKILL to the host's pids from inside the
// container, as its root.
func (d *Docker) killInContainer(ctx context.Context, op, containerID string, pids []int) error {
	return d.signalInContainer(ctx, op, containerID, "KILL", pids, false)
}

// signalInContainer sends the signal named sig (KILL, HUP) to the host's
// pids from inside the container, as its root: to their process groups
// when groups is set.
func (d *Docker) signalInContainer(ctx context.Context, op, containerID, sig string, pids []int, groups bool) error {
	cmd := []string{"kill", "-" + sig}
	if groups {
		cmd = append(cmd, "--")
	}
	given := len(cmd)
	for _, pid := range pids {
		if ns, ok := nsPID(pid); ok && groups {
			cmd = append(cmd, "-"+strconv.Itoa(ns))
		} else if ok {
			cmd = append(cmd, strconv.Itoa(ns))
		}
	}
	if len(cmd) == given {
		return nil // they ended meanwhile
	}
	created, err := d.c.ContainerExecCreate(ctx, containerID, container.ExecOptions{User: "0", Cmd: cmd})
	if err != nil {
		return d.fail(op+": exec kill in the container", err)
	}
	if err := d.c.ContainerExecStart(ctx, created.ID, container.ExecStartOptions{Detach: true}); err != nil {
		return d.fail(op+": exec kill in the container", err)
	}
	for {
		st, err := d.c.ContainerExecInspect(ctx, created.ID)
		switch {
		case err != nil:
			return d.fail(op+": exec kill in the container", err)
		case !st.Running && st.ExitCode != 0:
			return fmt.Errorf("%s: the host may not signal it and kill in the container exited with code %d (does the image have kill?)", op, st.ExitCode)
		case !st.Running:
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: exec kill in the container: %w", op, ctx.Err())
		case <-time.After(execPollInterval):
		}
	}
}

// inCgroupOf reports whether process pid is in a cgroup of the container
// whose full ID is containerID (the cgroupfs driver's /docker/ID, the
// systemd driver's docker-ID.scope).
func inCgroupOf(pid int, containerID string) bool {
	if containerID == "" {
		return false
	}
	b, err := os.ReadFile(filepath.Join(procDir, strconv.Itoa(pid), "cgroup"))
	return err == nil && bytes.Contains(b, []byte(containerID))
}

// descendants returns the processes that pid started, and those they
// started, as /proc shows them now.
func descendants(pid int) []int {
	entries, err := os.ReadDir(procDir)
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if pp, ok := parentPID(p); ok {
			children[pp] = append(children[pp], p)
		}
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		next := queue[0]
		queue = queue[1:]
		out = append(out, children[next]...)
		queue = append(queue, children[next]...)
	}
	return out
}

// parentPID reads a process's parent from /proc/PID/stat, whose second
// field (the command, in parentheses) may hold spaces and parentheses.
func parentPID(pid int) (int, bool) {
	b, err := os.ReadFile(filepath.Join(procDir, strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return 0, false
	}
	pp, err := strconv.Atoi(f[1])
	return pp, err == nil
}

// nsPID returns the PID of a host's process as its innermost PID
// namespace (its container's) sees it: the last of /proc/PID/status's
// NSpid.
func nsPID(pid int) (int, bool) {
	b, err := os.ReadFile(filepath.Join(procDir, strconv.Itoa(pid), "status"))
	if err != nil {
		return 0, false
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "NSpid:"); ok {
			f := strings.Fields(rest)
			if len(f) == 0 {
				return 0, false
			}
			ns, err := strconv.Atoi(f[len(f)-1])
			return ns, err == nil
		}
	}
	return 0, false
}
