package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/skein-dev/skein/agent/cgroup"
)

// processDriver runs a job as a process of its own process group, which
// stands for the job: signals go to the whole group, and whatever is left
// in it when the leader exits is killed with it.
//
// The job runs as the account its spec names (when the supervisor is
// root, which stays root itself): its uid, primary group and supplementary
// groups. The supervisor is a process of its own for one job, so the
// driver makes it the job's: it changes into the job's working directory
// and takes the job's PATH to look the program up. The job then changes
// into that directory again as its own user, so a directory that user may
// not enter fails the start.
type processDriver struct{}

// start starts the process at once; it takes no context.
func (processDriver) start(_ context.Context, sp spec, in startArgs) (jobHandle, error) {
	asRoot := os.Geteuid() == 0
	if asRoot && sp.User == nil {
		return nil, &startError{code: exitCannotExec, err: errNoAccount}
	}
	// A relative workdir is the allocation directory's, where the
	// supervisor starts; the job needs it absolute.
	workdir, err := filepath.Abs(sp.Workdir)
	if err != nil {
		return nil, &startError{code: exitNotFound, err: fmt.Errorf("workdir %s: %w", sp.Workdir, err)}
	}
	if sp.Workdir != "" {
		if err := os.Chdir(workdir); err != nil {
			var pe *fs.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			return nil, &startError{code: exitNotFound, err: fmt.Errorf("workdir %s: %w", sp.Workdir, err)}
		}
	}
	// exec.Command looks the program up in this process's PATH: make it the
	// job's, so "python" means what it would mean to the job.
	if path, ok := lookupEnv(sp.Env, "PATH"); ok {
		_ = os.Setenv("PATH", path)
	} else {
		_ = os.Unsetenv("PATH")
	}
	cmd := exec.Command(sp.Argv[0], sp.Argv[1:]...)
	if cmd.Err != nil {
		return nil, &startError{code: execFailureCode(cmd.Err), err: cmd.Err}
	}
	cmd.Env = append([]string{}, sp.Env...)
	cmd.Dir = workdir
	cmd.Stdout = in.stdout
	cmd.Stderr = in.stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if asRoot {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: sp.User.UID, Gid: sp.User.GID, Groups: sp.User.Groups}
	}
	startedAt := time.Now().UTC()
	launch := cmd.Start
	if in.group != nil {
		launch = func() error { return in.group.Start(cmd) }
	}
	if err := launch(); err != nil {
		if asRoot && errors.Is(err, fs.ErrPermission) {
			if p, mode, owner := closedTo(workdir, *sp.User); p != "" {
				err = fmt.Errorf("workdir %s: %s (uid %d) may not enter %s (mode %04o, owner uid %d)",
					sp.Workdir, sp.User.Name, sp.User.UID, p, mode, owner)
				return nil, &startError{code: exitNotFound, err: err}
			}
		}
		return nil, &startError{code: execFailureCode(err), err: err}
	}
	j := &processJob{cmd: cmd, pgid: cmd.Process.Pid, group: in.group}
	_, start, err := procStat(j.pgid)
	if err != nil {
		_ = j.signal(syscall.SIGKILL)
		_ = cmd.Wait()
		return nil, &startError{code: exitUnknown, err: fmt.Errorf("record job pid: %w", err)}
	}
	j.rec = jobRecord{PID: j.pgid, PGID: j.pgid, StartTime: start, StartedAt: startedAt}
	return j, nil
}

// killOrphan kills the job's control group and everything in it, when it
// had one, and its process group, if its leader still runs; without a
// record nothing was started, but the group may have been made.
func (processDriver) killOrphan(sp spec, _ string, rec jobRecord) error {
	if g, err := specGroup(sp); err != nil {
		return err
	} else if g != nil {
		if err := g.Kill(); err != nil {
			return err
		}
		if err := g.Remove(); err != nil {
			return err
		}
	}
	leader := procRecord{PID: rec.PID, StartTime: rec.StartTime}
	if !leader.alive() {
		return nil
	}
	pgid := rec.PGID
	if pgid <= 0 {
		pgid = rec.PID
	}
	if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("kill process group %d: %w", pgid, err)
	}
	return nil
}

// exec runs argv as the job's account, with its environment, in its
// working directory, the program looked up in the job's PATH, in a
// process group of its own: killed, group and all, when ctx ends, and
// whatever it left in the group when it exits.
func (processDriver) exec(ctx context.Context, sp spec, dir string, _ jobRecord, argv []string, out io.Writer) (int, error) {
	cmd, err := jobCommand(ctx, sp, dir, argv)
	if err != nil {
		return 0, err
	}
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.SysProcAttr.Setpgid = true
	if err := startBeside(sp, cmd); err != nil {
		return 0, err
	}
	err = cmd.Wait()
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	if ctx.Err() != nil {
		return 0, ctx.Err()
	}
	return exitCodeOf(cmd, argv[0], err)
}

// jobCommand is argv as the job would run it: as the job's account,
// with its environment, in its working directory, the program looked up
// in the job's PATH; killed, with the process group it leads, when ctx
// ends. The caller sets its input and output and how it groups.
func jobCommand(ctx context.Context, sp spec, dir string, argv []string) (*exec.Cmd, error) {
	asRoot := os.Geteuid() == 0
	if asRoot && sp.User == nil {
		return nil, errNoAccount
	}
	workdir := sp.Workdir
	if !filepath.IsAbs(workdir) {
		workdir = filepath.Join(dir, workdir)
	}
	path, _ := lookupEnv(sp.Env, "PATH")
	prog, err := lookPathIn(argv[0], path)
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, prog, argv[1:]...)
	cmd.Args[0] = argv[0]
	cmd.Env = append([]string{}, sp.Env...)
	cmd.Dir = workdir
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	if asRoot {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: sp.User.UID, Gid: sp.User.GID, Groups: sp.User.Groups}
	}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = execWaitDelay
	return cmd, nil
}

// exitCodeOf is how a command that was waited for ended, as a shell
// says it: its exit code, or 128+N when signal N killed it.
func exitCodeOf(cmd *exec.Cmd, name string, waitErr error) (int, error) {
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	switch {
	case !ok:
		return 0, fmt.Errorf("wait for %s: %w", name, waitErr)
	case ws.Signaled():
		return 128 + int(ws.Signal()), nil
	}
	return ws.ExitStatus(), nil
}

// execWaitDelay bounds how long an exec's output may stay open after
// the command exited (something it started still holds it).
const execWaitDelay = time.Second

// lookPathIn finds a program as a shell with PATH path would: a name with
// a slash as it is, any other in the first directory of path that holds
// an executable file of that name.
func lookPathIn(name, path string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: %w in the job's PATH %q", name, exec.ErrNotFound, path)
}

// processJob is a job started by processDriver: its process group, and
// its control group when it is confined.
type processJob struct {
	cmd   *exec.Cmd
	pgid  int
	rec   jobRecord
	group *cgroup.Group
}

// signal sends sig to everything the job runs: every process in its
// control group when it is confined, those that left its process group
// (a daemon's setsid) too; else its process group.
func (j *processJob) signal(sig syscall.Signal) error {
	if j.group != nil {
		return j.group.Signal(sig)
	}
	if err := syscall.Kill(-j.pgid, sig); err != nil {
		return fmt.Errorf("signal process group %d: %w", j.pgid, err)
	}
	return nil
}

func (j *processJob) wait() (exit, error) {
	err := j.cmd.Wait()
	// The leader is gone; take whatever it left in its groups with it.
	_ = syscall.Kill(-j.pgid, syscall.SIGKILL)
	if j.group != nil {
		_ = j.group.Kill() // the supervisor tries again, and says why it cannot
	}
	ps := j.cmd.ProcessState
	if ps == nil {
		return exit{}, fmt.Errorf("wait for process %d: %w", j.pgid, err)
	}
	ws, _ := ps.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		return exit{Signal: ws.Signal()}, nil
	}
	return exit{Code: ws.ExitStatus()}, nil
}

func (j *processJob) record() jobRecord { return j.rec }

// execFailureCode is 126 when the program exists but may not be run, else 127.
func execFailureCode(err error) int {
	if errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.ENOEXEC) {
		return exitCannotExec
	}
	return exitNotFound
}

// lookupEnv finds the last value of name in env.
func lookupEnv(env []string, name string) (string, bool) {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], name+"="); ok {
			return v, true
		}
	}
	return "", false
}
