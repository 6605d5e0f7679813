package engine

import (
	"context"
	"fmt"
	"io"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"
)

// execPollInterval is how often Exec asks again for an exec's exit code
// when the engine closed its output before it marked the exec ended.
const execPollInterval = 10 * time.Millisecond

// ExecSpec is a command to run in a running container, beside its main
// process.
type ExecSpec struct {
	Cmd []string
	// User is "UID:GID" ("": the container's user); Env is added to the
	// container's environment; Workdir "" keeps the container's.
	User    string
	Env     []string
	Workdir string
}

// Exec runs spec.Cmd in the running container id (create, attach and
// start an exec, then inspect it), copies its standard output and error,
// interleaved, into out, and returns its exit code once it has ended: a
// program the container does not have is the engine's 126 or 127. A
// container that does not run is ErrNotRunning, and one that does not
// exist ErrNoContainer.
//
// ctx bounds it: when ctx ends, Exec kills what the command still runs in
// the container (killExec) and returns ctx's error, joined with why the
// kill failed if it did.
func (d *Docker) Exec(ctx context.Context, id string, spec ExecSpec, out io.Writer) (int, error) {
	if len(spec.Cmd) == 0 || spec.Cmd[0] == "" {
		return 0, fmt.Errorf("exec in container %s: the command is empty", id)
	}
	op := fmt.Sprintf("exec %q in container %s", spec.Cmd[0], id)
	created, err := d.c.ContainerExecCreate(ctx, id, container.ExecOptions{
		User:         spec.User,
		Env:          spec.Env,
		WorkingDir:   spec.Workdir,
		Cmd:          spec.Cmd,
		AttachStdout: true,
		AttachStderr: true,
	})
	if cerrdefs.IsConflict(err) {
		return 0, kind(ErrNotRunning, op, err)
	}
	if err != nil {
		return 0, d.containerErr(op, err)
	}
	resp, err := d.c.ContainerExecAttach(ctx, created.ID, container.ExecAttachOptions{})
	if err != nil {
		if ctx.Err() != nil {
			return 0, d.endExec(op, created.ID, ctx.Err())
		}
		return 0, d.containerErr(op, err)
	}
	stop := context.AfterFunc(ctx, resp.Close)
	_, err = stdcopy.StdCopy(out, out, resp.Reader)
	ended := !stop()
	resp.Close()
	if ended {
		return 0, d.endExec(op, created.ID, ctx.Err())
	}
	if err != nil {
		return 0, d.fail(op, err)
	}
	for {
		st, err := d.c.ContainerExecInspect(ctx, created.ID)
		switch {
		case ctx.Err() != nil:
			return 0, d.endExec(op, created.ID, ctx.Err())
		case err != nil:
			return 0, d.fail(op, err)
		case !st.Running:
			return st.ExitCode, nil
		}
		select {
		case <-ctx.Done():
		case <-time.After(execPollInterval):
		}
	}
}

// endExec kills the exec execID, whose context ended with cause, and
// says so.
func (d *Docker) endExec(op, execID string, cause error) error {
	if err := d.killExec(execID); err != nil {
		return fmt.Errorf("%s: %w; its command may run on: %w", op, cause, err)
	}
	return fmt.Errorf("%s: %w", op, cause)
}
