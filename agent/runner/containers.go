package runner

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/skein-dev/skein/agent/engine"
	"github.com/skein-dev/skein/structs"
)

// The runner's side of jobs in containers: what it writes into spec.json
// for the container driver (driver_container.go), and the cleanup of
// containers that no supervisor looks after.

// containerSpec is the container section of a task's spec: the node's
// engine, the job's image, pull policy, checked mounts and shm size, its
// GPUs and capabilities (each one the node allows), and the account it
// runs as by number (the image need not know the account).
func (r *Runner) containerSpec(t Task, acct Account) (*containerSpec, error) {
	js := t.Job.Spec
	if r.socket == "" {
		return nil, fmt.Errorf("%w (--container-socket none): cannot run image %s", ErrNoEngine, js.Image)
	}
	if err := checkCaps(js.Caps, r.allowCaps); err != nil {
		return nil, err
	}
	mounts, err := checkMounts(js.Mounts, r.allowMounts)
	if err != nil {
		return nil, err
	}
	shm := r.shmSize
	if js.ShmSizeMiB != 0 {
		if js.ShmSizeMiB < 0 || int64(js.ShmSizeMiB) > math.MaxInt64>>20 {
			return nil, fmt.Errorf("shm size %d MiB: out of range", js.ShmSizeMiB)
		}
		shm = int64(js.ShmSizeMiB) << 20
	}
	pull := js.ImagePull
	if pull == "" {
		pull = structs.PullIfNotPresent
	}
	c := &containerSpec{
		Socket:     r.socket,
		Image:      js.Image,
		Pull:       pull,
		Mounts:     mounts,
		ShmSize:    shm,
		GPUs:       slices.Clone(t.Alloc.GPUs),
		GPUMode:    r.gpuMode,
		Caps:       slices.Clone(js.Caps),
		Host:       r.host,
		KeepFailed: r.keepFailed,
		User:       strconv.FormatUint(uint64(acct.UID), 10) + ":" + strconv.FormatUint(uint64(acct.GID), 10),
	}
	for _, g := range acct.Groups {
		if g != acct.GID {
			c.Groups = append(c.Groups, strconv.FormatUint(uint64(g), 10))
		}
	}
	return c, nil
}

// checkCaps checks that the node allows every capability of caps.
func checkCaps(caps, allow []string) error {
	for _, c := range caps {
		if !slices.Contains(allow, c) {
			allowed := "none"
			if len(allow) > 0 {
				allowed = strings.Join(allow, ", ")
			}
			return fmt.Errorf("%w: %s is not allowed on this node (skein agent --allow-cap; it allows %s)", ErrCapRefused, c, allowed)
		}
	}
	return nil
}

// CleanContainers removes the containers this runner's supervisors left
// on the engine: every container labelled with this runner's allocation
// directory whose allocation is not live here (its directory is gone,
// records an outcome, or no supervisor holds it). A container of another
// runner sharing the engine (another allocation directory) is never
// touched. With Config.KeepFailed, a container that has stopped stays as
// long as its allocation's directory does, with the logs. The agent
// calls it after Restore and from its periodic sweep; it returns how
// many containers it removed and the first error.
func (r *Runner) CleanContainers(ctx context.Context) (int, error) {
	if r.socket == "" {
		return 0, nil
	}
	d, err := engine.NewDocker(r.socket)
	if err != nil {
		return 0, err
	}
	defer d.Close()
	list, err := d.List(ctx, engine.LabelAllocDir, r.dir)
	if err != nil {
		return 0, fmt.Errorf("list this runner's containers: %w", err)
	}
	removed := 0
	var first error
	for _, c := range list {
		if c.Labels[engine.LabelAllocDir] != r.dir {
			continue
		}
		id := c.Labels[engine.LabelAlloc]
		live, dirExists := r.allocLive(id)
		if live || r.keepFailed && !c.Running && dirExists {
			continue
		}
		if err := d.Remove(ctx, c.ID); err != nil && !errors.Is(err, engine.ErrNoContainer) {
			r.log.Warn("cannot remove a container no supervisor looks after", "alloc", id, "container", c.Name, "error", err)
			if first == nil {
				first = fmt.Errorf("remove container %s of allocation %s: %w", c.Name, id, err)
			}
			continue
		}
		r.log.Info("removed a container no supervisor looks after", "alloc", id, "container", c.Name, "running", c.Running)
		removed++
	}
	return removed, first
}

// allocLive reports whether a supervisor looks after the allocation: its
// directory exists, records no outcome, and its lock is held; and
// whether its directory exists at all. What cannot be found out counts
// as live, so that a running job is never removed by mistake.
func (r *Runner) allocLive(id string) (live, dirExists bool) {
	if checkID(id) != nil {
		return false, false
	}
	dir := filepath.Join(r.dir, id)
	if _, err := os.Stat(dir); err != nil {
		return !errors.Is(err, fs.ErrNotExist), !errors.Is(err, fs.ErrNotExist)
	}
	_, err := os.Stat(filepath.Join(dir, statusFile))
	switch {
	case err == nil:
		return false, true
	case !errors.Is(err, fs.ErrNotExist):
		return true, true
	}
	held, _ := lockHeld(dir)
	return held, true
}
