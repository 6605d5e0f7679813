package engine

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// running is a started container of the test image that sleeps.
func running(t *testing.T, d *Docker) string {
	t.Helper()
	c := start(t, d, testSpec(t, "sleep", "3600"))
	return c.id
}

func TestExec_RunsBesideTheMainProcessWithItsOutputAndExitCode(t *testing.T) {
	d := testDocker(t)
	id := running(t, d)
	var out syncBuffer
	code, err := d.Exec(callCtx(t), id, ExecSpec{
		Cmd:  []string{"sh", "-c", "echo out; echo err >&2; echo $CHECK as $(id -u):$(id -g) in $PWD; exit 3"},
		User: "4321:4322", Env: []string{"CHECK=hello"}, Workdir: "/bin",
	}, &out)
	if err != nil {
		t.Fatal(err)
	}
	if code != 3 {
		t.Errorf("exit code = %d, want 3", code)
	}
	for _, want := range []string{"out\n", "err\n", "hello as 4321:4322 in /bin\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output %q lacks %q", out.String(), want)
		}
	}
	if st, err := d.Inspect(callCtx(t), id); err != nil || !st.Running {
		t.Errorf("after the exec the container is %+v (%v), want it still running", st, err)
	}
}

func TestExec_AMissingProgramIsTheEnginesNotFoundCode(t *testing.T) {
	d := testDocker(t)
	id := running(t, d)
	var out syncBuffer
	code, err := d.Exec(callCtx(t), id, ExecSpec{Cmd: []string{"/no/such/program"}}, &out)
	if err != nil {
		t.Fatal(err)
	}
	if code != 126 && code != 127 {
		t.Errorf("exit code = %d (output %q), want 126 or 127", code, out.String())
	}
}

func TestExec_AStoppedContainerIsNotRunningAndAnUnknownOneIsNoContainer(t *testing.T) {
	d := testDocker(t)
	stopped := create(t, d, testSpec(t, "true"))
	var out syncBuffer
	if _, err := d.Exec(callCtx(t), stopped, ExecSpec{Cmd: []string{"true"}}, &out); !errors.Is(err, ErrNotRunning) {
		t.Errorf("exec in a container never started: %v, want ErrNotRunning", err)
	}
	if _, err := d.Exec(callCtx(t), uniqueName("skein-engine-test-none"), ExecSpec{Cmd: []string{"true"}}, &out); !errors.Is(err, ErrNoContainer) {
		t.Errorf("exec in no container: %v, want ErrNoContainer", err)
	}
}

func TestExec_EndsWithTheContext(t *testing.T) {
	d := testDocker(t)
	id := running(t, d)
	ctx, cancel := context.WithTimeout(callCtx(t), 300*time.Millisecond)
	defer cancel()
	var out syncBuffer
	_, err := d.Exec(ctx, id, ExecSpec{Cmd: []string{"sleep", "600"}}, &out)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("exec of a sleep past its deadline: %v, want the context's deadline", err)
	}
}
