package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/skein-dev/skein/agent/engine"
	"github.com/skein-dev/skein/structs"
)

// containerDriverName is the driver spec.json names for a job run in a
// container (a task whose job names an image).
const containerDriverName = "container"

// Bounds of the container driver's work with the engine.
const (
	// engineCallTimeout bounds each call to the engine but the pull and
	// the wait, which last as long as they must.
	engineCallTimeout = time.Minute
	// attachDrain is how long the container's output may trail its end
	// before the driver goes on without the rest.
	attachDrain = 10 * time.Second
	// pullWriteInterval is how often, at most, pull.json is rewritten
	// while an image is pulled.
	pullWriteInterval = time.Second
)

// containerName is the engine's name for an allocation's container.
func containerName(allocID string) string { return "skein-" + allocID }

// containerDriver runs a job in a container on the node's engine, as the
// spec's container section says: it pulls the image as the pull policy
// says (writing pull.json as the pull goes), opens the mounts' sources
// and stages them for the engine (container_mounts.go), creates the
// container labelled with its allocation and the runner's allocation
// directory, without privileges and held to the spec's limits (see
// engine.Docker.Create), attaches its output to the job's logs and
// starts it. Signals go to the container's main process; once it has
// ended and its output is in, the container is removed, unless it failed
// by itself and the spec keeps failed containers. A container the kernel
// killed for memory ends "out of memory".
type containerDriver struct{}

func (containerDriver) start(ctx context.Context, sp spec, in startArgs) (jobHandle, error) {
	if sp.Container == nil {
		return nil, errNoContainerSpec
	}
	d, err := engine.NewDocker(sp.Container.Socket)
	if err != nil {
		return nil, err
	}
	j, err := startContainer(ctx, d, sp, in)
	if err != nil {
		_ = d.Close()
		return nil, err
	}
	return j, nil
}

// startContainer pulls the image when it must, then creates, attaches to
// and starts the container. Only the pull gives up when ctx is done: once
// the image is here the start goes through, however short the moment a
// stop came in, so that a job that ran at all is stopped as one (the
// supervisor stops it with its grace).
func startContainer(ctx context.Context, d *engine.Docker, sp spec, in startArgs) (*containerJob, error) {
	c := sp.Container
	if c.User == "" {
		// The image's own user may be root.
		return nil, errNoAccount
	}
	if err := pullImage(ctx, d, c, in); err != nil {
		return nil, err
	}
	ctx = context.WithoutCancel(ctx)
	name := containerName(sp.AllocID)
	allocDir := filepath.Dir(in.dir)
	// A container of this name and allocation directory is a leftover of
	// this allocation's own: an earlier supervisor created (or even
	// started) it and died before it wrote job.pid. This supervisor holds
	// the allocation's lock, so no other creates one now, and job.pid is
	// absent (run refuses to start otherwise), so nobody ever recorded
	// that job as started, and its runner, which finds it by name, would
	// remove it as an orphan anyway. Removing it first keeps two copies
	// of the job from ever running side by side; one that is running when
	// removed had run for nothing.
	if err := removeByName(ctx, d, name, allocDir); err != nil {
		return nil, fmt.Errorf("remove the leftover container %s: %w", name, err)
	}
	// The sources stay open, and bound where the engine mounts them
	// from, until the container has started (or could not be).
	mounts, stage, err := prepareMounts(ctx, d, c.Mounts, mountStageDir(allocDir, sp.AllocID), in.log)
	if err != nil {
		return nil, err
	}
	defer stage.release()
	cs := engine.ContainerSpec{
		Name:     name,
		Labels:   map[string]string{engine.LabelAlloc: sp.AllocID, engine.LabelAllocDir: allocDir},
		Image:    c.Image,
		Cmd:      sp.Argv,
		Env:      sp.Env,
		Workdir:  sp.Workdir,
		User:     c.User,
		GroupAdd: c.Groups,
		Mounts:   mounts,
		ShmSize:  c.ShmSize,
		GPUs:     c.GPUs,
		GPUMode:  c.GPUMode,
		CapAdd:   c.Caps,
		Limits:   engineLimits(sp.Limits),
		Host:     c.Host,
	}
	var id string
	err = callEngine(ctx, func(ctx context.Context) error {
		var err error
		id, err = d.Create(ctx, cs)
		return err
	})
	if err != nil {
		return nil, err
	}
	j := &containerJob{d: d, id: id, name: name, keepFailed: c.KeepFailed, log: in.log,
		memLimit: cs.Limits.MemoryBytes, sent: make(map[syscall.Signal]bool)}
	// The stream outlives the start: it ends with the container.
	attachCtx, stopAttach := context.WithCancel(context.Background())
	j.stopAttach = stopAttach
	j.attached, err = d.Attach(attachCtx, id, in.stdout, in.stderr)
	if err != nil {
		j.discard()
		return nil, err
	}
	if err := callEngine(ctx, func(ctx context.Context) error { return d.Start(ctx, id) }); err != nil {
		j.discard()
		return nil, err
	}
	// The job started when the engine says it runs, not when it was asked.
	j.rec = jobRecord{ContainerID: id, ContainerName: name, StartedAt: time.Now().UTC()}
	return j, nil
}

// prepareMounts clears what an earlier supervisor of the allocation left
// in its mount stage dir, then stages the mounts (stageMounts): bound in
// dir where the engine is seen to see them, which needs the engine's
// process in this process's PID namespace.
func prepareMounts(ctx context.Context, d *engine.Docker, mounts []containerMount, dir string, log hclog.Logger) ([]structs.Mount, *mountStage, error) {
	if err := clearMountStage(dir); err != nil {
		return nil, nil, fmt.Errorf("clear the mount sources an earlier supervisor left: %w", err)
	}
	if len(mounts) == 0 {
		return nil, nil, nil
	}
	var pid int
	err := callEngine(ctx, func(ctx context.Context) error {
		var err error
		pid, err = d.ServerPID(ctx)
		return err
	})
	root, why := "", ""
	switch {
	case err != nil:
		why = err.Error()
	case pid == 0:
		why = "the engine's process is not to be seen from here (it runs in another PID namespace)"
	default:
		root = "/proc/" + strconv.Itoa(pid) + "/root"
	}
	return stageMounts(mounts, dir, root, why, log)
}

// engineLimits are the engine's limits for the spec's.
func engineLimits(l *limits) engine.Limits {
	if l == nil {
		return engine.Limits{}
	}
	return engine.Limits{MemoryBytes: l.MemoryBytes, CPUs: l.CPUs, Cpuset: l.Cpuset, Pids: l.PidsMax}
}

// pullImage makes sure the engine holds the image, pulling it as the
// policy says.
func pullImage(ctx context.Context, d *engine.Docker, c *containerSpec, in startArgs) error {
	switch c.Pull {
	case structs.PullAlways:
	case structs.PullIfNotPresent, structs.PullNever:
		var has bool
		err := callEngine(ctx, func(ctx context.Context) error {
			var err error
			has, err = d.HasImage(ctx, c.Image)
			return err
		})
		switch {
		case err != nil:
			return err
		case has:
			return nil
		case c.Pull == structs.PullNever:
			return fmt.Errorf("image %s is not on this node and --image-pull is never", c.Image)
		}
	default:
		return fmt.Errorf("pull policy %q: want %s, %s or %s", c.Pull,
			structs.PullIfNotPresent, structs.PullAlways, structs.PullNever)
	}
	w := &pullWriter{path: filepath.Join(in.dir, pullFile), image: c.Image, log: in.log}
	w.write()
	err := d.Pull(ctx, c.Image, w.update)
	w.finish()
	return err
}

// removeByName removes the container called name if it is one of the
// runner's whose allocation directory is allocDir; a container of that
// name that is not (another runner shares the engine) is an error, and
// none at all is fine.
func removeByName(ctx context.Context, d *engine.Docker, name, allocDir string) error {
	var st engine.ContainerState
	err := callEngine(ctx, func(ctx context.Context) error {
		var err error
		st, err = d.Inspect(ctx, name)
		return err
	})
	switch {
	case errors.Is(err, engine.ErrNoContainer):
		return nil
	case err != nil:
		return err
	case st.Labels[engine.LabelAllocDir] != allocDir:
		return fmt.Errorf("%w: container %s belongs to allocation directory %q, not %s",
			errForeignContainer, name, st.Labels[engine.LabelAllocDir], allocDir)
	}
	err = callEngine(ctx, func(ctx context.Context) error { return d.Remove(ctx, st.ID) })
	if errors.Is(err, engine.ErrNoContainer) {
		return nil
	}
	return err
}

// callEngine runs one call to the engine, bounded by engineCallTimeout.
// The engine's errors name the call and the container or image, so the
// driver returns them as they are.
func callEngine(ctx context.Context, call func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, engineCallTimeout)
	defer cancel()
	return call(ctx)
}

// killOrphan removes the job's container, found by the ID job.pid
// records or, when the supervisor died before it wrote one, by the name
// it would have had (and its allocation directory: dir is the
// allocation's), and undoes the bind mounts the supervisor may have left
// for the engine, which needs no engine.
func (containerDriver) killOrphan(sp spec, dir string, rec jobRecord) error {
	if sp.Container == nil {
		return errNoContainerSpec
	}
	var staged error
	if err := clearMountStage(mountStageDir(filepath.Dir(dir), filepath.Base(dir))); err != nil {
		staged = fmt.Errorf("undo the mount sources' bind mounts: %w", err)
	}
	return errors.Join(staged, removeOrphan(sp, dir, rec))
}

// removeOrphan removes the container killOrphan looks for.
func removeOrphan(sp spec, dir string, rec jobRecord) error {
	d, err := engine.NewDocker(sp.Container.Socket)
	if err != nil {
		return err
	}
	defer d.Close()
	ctx := context.Background()
	if rec.ContainerID == "" {
		name := containerName(sp.AllocID)
		if err := removeByName(ctx, d, name, filepath.Dir(dir)); err != nil {
			return fmt.Errorf("remove container %s: %w", name, err)
		}
		return nil
	}
	err = callEngine(ctx, func(ctx context.Context) error { return d.Remove(ctx, rec.ContainerID) })
	if err != nil && !errors.Is(err, engine.ErrNoContainer) {
		return fmt.Errorf("remove container %s: %w", rec.ContainerID, err)
	}
	return nil
}

// exec runs argv in the job's container, found by the ID job.pid
// records, as the job's account; the container's environment and
// working directory are the job's already. The engine cannot stop an
// exec: one that outlives ctx runs on until it ends by itself.
func (containerDriver) exec(ctx context.Context, sp spec, _ string, rec jobRecord, argv []string, out io.Writer) (int, error) {
	if sp.Container == nil {
		return 0, errNoContainerSpec
	}
	if rec.ContainerID == "" {
		return 0, fmt.Errorf("exec in the job's container: %w: job.pid names no container", ErrNotRunning)
	}
	d, err := engine.NewDocker(sp.Container.Socket)
	if err != nil {
		return 0, err
	}
	defer d.Close()
	return d.Exec(ctx, rec.ContainerID, engine.ExecSpec{Cmd: argv, User: sp.Container.User}, out)
}

// containerJob is a job started by containerDriver.
type containerJob struct {
	d          *engine.Docker
	id, name   string
	keepFailed bool
	memLimit   int64 // the container's memory limit, 0 for none
	log        hclog.Logger
	rec        jobRecord
	// attached gets the end of the output stream; stopAttach ends it.
	attached   <-chan error
	stopAttach context.CancelFunc

	mu   sync.Mutex
	sent map[syscall.Signal]bool // every signal the supervisor sent
}

func (j *containerJob) signal(sig syscall.Signal) error {
	// Noted before it goes: the container may end of it at once.
	j.mu.Lock()
	j.sent[sig] = true
	j.mu.Unlock()
	err := callEngine(context.Background(), func(ctx context.Context) error { return j.d.Signal(ctx, j.id, sig) })
	if err != nil {
		return fmt.Errorf("signal container %s: %w", j.name, err)
	}
	return nil
}

func (j *containerJob) wait() (exit, error) {
	defer j.d.Close()
	code, err := j.d.Wait(context.Background(), j.id)
	oom := false
	if err != nil {
		// The engine lost track of the wait; it may still know the end.
		var st engine.ContainerState
		ierr := callEngine(context.Background(), func(ctx context.Context) error {
			var err error
			st, err = j.d.Inspect(ctx, j.id)
			return err
		})
		if ierr != nil || st.Running {
			// Nothing may be left once wait has returned.
			j.drain()
			j.remove()
			return exit{}, fmt.Errorf("wait for container %s: %w", j.name, err)
		}
		code, oom = st.ExitCode, st.OOMKilled
	} else if code != 0 && j.memLimit > 0 {
		oom = j.oomKilled()
	}
	j.drain()
	j.mu.Lock()
	e := containerExit(code, j.sent)
	stopped := j.sent[syscall.SIGTERM] || j.sent[syscall.SIGKILL]
	j.mu.Unlock()
	if oom && !stopped && e.Signal == 0 && e.Code != 0 {
		// The engine knows no peak: the kernel killed at the limit.
		e.Reason = oomReason(j.memLimit, j.memLimit)
	}
	if j.keepFailed && e.Signal == 0 && e.Code != 0 && !stopped {
		j.log.Info("keeping the failed job's container", "container", j.name, "id", j.id)
		return e, nil
	}
	j.remove()
	return e, nil
}

func (j *containerJob) record() jobRecord { return j.rec }

// oomKilled reports whether the engine says the kernel killed in the
// container for memory; what cannot be found out is no. A container the
// supervisor killed was not.
func (j *containerJob) oomKilled() bool {
	j.mu.Lock()
	killed := j.sent[syscall.SIGKILL]
	j.mu.Unlock()
	if killed {
		return false
	}
	var oom bool
	err := callEngine(context.Background(), func(ctx context.Context) error {
		var err error
		oom, err = j.d.KilledForMemory(ctx, j.id)
		return err
	})
	if err != nil {
		j.log.Warn("cannot tell whether the container was killed for memory", "container", j.name, "error", err)
	}
	return oom
}

// containerExit is how a container ended whose main process exited with
// code, given the signals the supervisor sent it. The engine gives only a
// code, 128+N for a process killed by signal N: when the supervisor sent
// that signal, the job was killed by it, and is reported so, as a process
// would be; otherwise the code is the job's own.
func containerExit(code int, sent map[syscall.Signal]bool) exit {
	if sig := syscall.Signal(code - 128); code > 128 && sent[sig] {
		return exit{Signal: sig}
	}
	return exit{Code: code}
}

// drain waits, for at most attachDrain, for the container's output to be
// in the job's pipes, then ends the stream.
func (j *containerJob) drain() {
	t := time.NewTimer(attachDrain)
	defer t.Stop()
	select {
	case err := <-j.attached:
		if err != nil {
			j.log.Warn("the container's output stream broke", "container", j.name, "error", err)
		}
	case <-t.C:
		j.log.Warn("the container's output did not end with it; going on without the rest", "container", j.name)
	}
	j.stopAttach()
}

// discard ends the stream and removes the container of a job that could
// not be started.
func (j *containerJob) discard() {
	j.stopAttach()
	j.remove()
}

// remove removes the container; what cannot be removed is left to the
// runner's orphan cleanup (CleanContainers).
func (j *containerJob) remove() {
	if err := callEngine(context.Background(), func(ctx context.Context) error { return j.d.Remove(ctx, j.id) }); err != nil {
		j.log.Warn("cannot remove the job's container", "container", j.name, "error", err)
	}
}

// pullWriter records a pull's progress in pull.json, for the runner to
// report: at once, then at most once per pullWriteInterval, and the last
// progress when the pull is over.
type pullWriter struct {
	path, image string
	log         hclog.Logger

	mu      sync.Mutex
	last    engine.PullProgress
	written time.Time
	dirty   bool
	failed  bool // a write failed and was logged: once is enough
}

// update takes the engine's latest report.
func (w *pullWriter) update(p engine.PullProgress) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.last, w.dirty = p, true
	if time.Since(w.written) >= pullWriteInterval {
		w.writeLocked()
	}
}

// write records the latest progress now.
func (w *pullWriter) write() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writeLocked()
}

// finish records the last progress, unless it is recorded already.
func (w *pullWriter) finish() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.dirty {
		w.writeLocked()
	}
}

func (w *pullWriter) writeLocked() {
	w.written, w.dirty = time.Now(), false
	p := structs.PullProgress{Image: w.image, Bytes: w.last.Bytes, Total: w.last.Total, At: w.written.UTC()}
	if err := writeJSONAtomic(w.path, p); err != nil && !w.failed {
		w.failed = true
		w.log.Warn("cannot record the pull's progress", "error", err)
	}
}
