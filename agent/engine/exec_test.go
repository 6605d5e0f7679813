package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/skein-dev/skein/internal/testutil"
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

// processesIn returns the command lines the container runs now, as the
// engine's top lists them.
func processesIn(t *testing.T, d *Docker, id string) []string {
	t.Helper()
	top, err := d.c.ContainerTop(callCtx(t), id, nil)
	if err != nil {
		t.Fatal(err)
	}
	col := slices.Index(top.Titles, "CMD")
	if col < 0 {
		t.Fatalf("top has no CMD column: %v", top.Titles)
	}
	var out []string
	for _, p := range top.Processes {
		out = append(out, p[col])
	}
	return out
}

// waitGone waits until no process of the container has want in its
// command line.
func waitGone(t *testing.T, d *Docker, id, want string) {
	t.Helper()
	testutil.WaitFor(t, 15*time.Second, func() error {
		for _, cmd := range processesIn(t, d, id) {
			if strings.Contains(cmd, want) {
				return fmt.Errorf("%q still runs in the container: %q", want, processesIn(t, d, id))
			}
		}
		return nil
	})
}

// An exec past its context is killed with what it started: the engine
// has no call for it, so Exec does it.
func TestExec_EndsWithTheContextAndItsCommandIsKilledWithItsChildren(t *testing.T) {
	d := testDocker(t)
	id := running(t, d)
	ctx, cancel := context.WithTimeout(callCtx(t), 300*time.Millisecond)
	defer cancel()
	var out syncBuffer
	_, err := d.Exec(ctx, id, ExecSpec{Cmd: []string{"sh", "-c", "sleep 601 & sleep 602; wait"}}, &out)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("exec of a sleep past its deadline: %v, want the context's deadline", err)
	}
	if strings.Contains(err.Error(), "may run on") {
		t.Errorf("exec past its deadline: %v, want its command killed", err)
	}
	waitGone(t, d, id, "sleep 60")
	if st, err := d.Inspect(callCtx(t), id); err != nil || !st.Running {
		t.Errorf("after the exec was killed the container is %+v (%v), want it still running", st, err)
	}
}

// Where the host may not signal an exec's process, the kill is an exec
// of kill in the container, with the PID as the container sees it.
func TestExec_KillInTheContainerKillsByTheHostsPID(t *testing.T) {
	d := testDocker(t)
	id := running(t, d)
	created, err := d.c.ContainerExecCreate(callCtx(t), id, container.ExecOptions{Cmd: []string{"sleep", "603"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.c.ContainerExecStart(callCtx(t), created.ID, container.ExecStartOptions{Detach: true}); err != nil {
		t.Fatal(err)
	}
	var pid int
	testutil.WaitFor(t, 15*time.Second, func() error {
		st, err := d.c.ContainerExecInspect(callCtx(t), created.ID)
		if err != nil || !st.Running || st.Pid == 0 {
			return fmt.Errorf("exec %+v (%v), want it running", st, err)
		}
		pid = st.Pid
		return nil
	})
	if !inCgroupOf(pid, id) {
		t.Fatalf("the exec's process %d is not in the container's cgroup as the host sees it", pid)
	}
	if ns, ok := nsPID(pid); !ok || ns == pid {
		t.Fatalf("the container's PID of host process %d: %d, %v; want another", pid, ns, ok)
	}
	if err := d.killInContainer(callCtx(t), "kill", id, []int{pid}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, d, id, "sleep 603")
}

// An exec whose context ended while the engine was starting it has no
// process yet: the kill waits for it, and kills it once it is there.
func TestExec_KillWaitsForAnExecStillStarting(t *testing.T) {
	d := testDocker(t)
	id := running(t, d)
	created, err := d.c.ContainerExecCreate(callCtx(t), id, container.ExecOptions{Cmd: []string{"sleep", "604"}})
	if err != nil {
		t.Fatal(err)
	}
	killed := make(chan error, 1)
	go func() { killed <- d.killExec(created.ID) }()
	if err := d.c.ContainerExecStart(callCtx(t), created.ID, container.ExecStartOptions{Detach: true}); err != nil {
		t.Fatal(err)
	}
	if err := <-killed; err != nil {
		t.Fatal(err)
	}
	waitGone(t, d, id, "sleep 604")
}
