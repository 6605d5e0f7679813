package runner

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/skein-dev/skein/agent/engine"
)

// containerTerminal is a command ExecPTY runs under a terminal in a
// container job's container, through the engine (engine.TTYExec), with
// the engine's client it holds.
type containerTerminal struct {
	*engine.TTYExec
	d    *engine.Docker
	once sync.Once
}

// containerPTY runs argv under a terminal of rows by cols in the job's
// container, found by the ID job.pid records, as the job's account, with
// TERM term when it is not empty; the container's environment and
// working directory are the job's already. The session is closed when
// ctx ends or the job does (its container stops, and the command with
// it).
func containerPTY(ctx context.Context, sp spec, dir string, rec jobRecord, argv []string, term string, rows, cols uint16) (Terminal, error) {
	if sp.Container == nil {
		return nil, errNoContainerSpec
	}
	if rec.ContainerID == "" {
		return nil, fmt.Errorf("%w: job.pid names no container", ErrNotRunning)
	}
	d, err := engine.NewDocker(sp.Container.Socket)
	if err != nil {
		return nil, err
	}
	var env []string
	if term != "" {
		env = append(env, "TERM="+term)
	}
	start, cancel := context.WithTimeout(ctx, engineCallTimeout)
	defer cancel()
	e, err := d.ExecTTY(start, rec.ContainerID, engine.ExecSpec{Cmd: argv, User: sp.Container.User, Env: env}, rows, cols)
	if err != nil {
		_ = d.Close()
		return nil, err
	}
	t := &containerTerminal{TTYExec: e, d: d}
	go t.watch(ctx, dir)
	return t, nil
}

// watch closes the session when ctx ends or the allocation's supervisor
// lets it go (the job ended).
func (t *containerTerminal) watch(ctx context.Context, dir string) {
	tick := time.NewTicker(ptyWatch)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			_ = t.Close()
			return
		case <-t.Done():
			return
		case <-tick.C:
			if held, err := lockHeld(dir); err == nil && !held {
				_ = t.Close()
				return
			}
		}
	}
}

// Close ends the session (engine.TTYExec's Close) and lets the engine's
// client go.
func (t *containerTerminal) Close() error {
	t.once.Do(func() {
		_ = t.TTYExec.Close()
		_ = t.d.Close()
	})
	return nil
}
