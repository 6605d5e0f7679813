package runner

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"syscall"

	"github.com/skein-dev/skein/agent/engine"
)

// Signal sends sig to everything a running allocation's job runs, and
// nothing else: the job goes on unless the signal ends it (scancel
// --signal). A process job's control group gets it, every process in it,
// when the job is confined, else the job's process group, once its
// leader is seen to be the process job.pid recorded; a container job's
// main process gets it from the engine. An allocation whose supervisor
// does not hold it, or whose job has not started or has ended, is
// ErrNotRunning.
func (r *Runner) Signal(allocID string, sig syscall.Signal) error {
	if err := checkID(allocID); err != nil {
		return err
	}
	dir := filepath.Join(r.dir, allocID)
	if held, err := lockHeld(dir); err != nil || !held {
		return fmt.Errorf("signal allocation %s: %w: no supervisor holds it", allocID, ErrNotRunning)
	}
	var rec jobRecord
	if found, err := readJSON(filepath.Join(dir, jobPIDFile), &rec); err != nil {
		return fmt.Errorf("signal allocation %s: %w", allocID, err)
	} else if !found {
		return fmt.Errorf("signal allocation %s: %w: its job has not started", allocID, ErrNotRunning)
	}
	sp, d, err := specDriver(dir)
	if err != nil {
		return fmt.Errorf("signal allocation %s: %w", allocID, err)
	}
	if err := d.signalRunning(sp, rec, sig); err != nil {
		return fmt.Errorf("signal allocation %s: %w", allocID, err)
	}
	r.log.Info("signalled allocation", "alloc", allocID, "signal", signalName(sig))
	return nil
}

// signalRunning sends sig to the job's control group when it is
// confined, else to its process group while its leader runs.
func (processDriver) signalRunning(sp spec, rec jobRecord, sig syscall.Signal) error {
	if g, err := specGroup(sp); err != nil {
		return err
	} else if g != nil {
		return g.Signal(sig)
	}
	if !(procRecord{PID: rec.PID, StartTime: rec.StartTime}).alive() {
		return fmt.Errorf("%w: its process %d has ended", ErrNotRunning, rec.PID)
	}
	pgid := rec.PGID
	if pgid <= 0 {
		pgid = rec.PID
	}
	if err := syscall.Kill(-pgid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signal process group %d: %w", pgid, err)
	}
	return nil
}

// signalRunning has the engine send sig to the container's main process.
func (containerDriver) signalRunning(sp spec, rec jobRecord, sig syscall.Signal) error {
	if sp.Container == nil {
		return errNoContainerSpec
	}
	if rec.ContainerID == "" {
		return fmt.Errorf("%w: job.pid names no container", ErrNotRunning)
	}
	d, err := engine.NewDocker(sp.Container.Socket)
	if err != nil {
		return err
	}
	defer d.Close()
	err = callEngine(context.Background(), func(ctx context.Context) error { return d.Signal(ctx, rec.ContainerID, sig) })
	if errors.Is(err, engine.ErrNotRunning) || errors.Is(err, engine.ErrNoContainer) {
		return fmt.Errorf("%w: %v", ErrNotRunning, err)
	}
	return err
}
