package runner

import (
	"bytes"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/skein-dev/skein/structs"
)

// readUntil reads a terminal's output until it shows want, and returns
// what it read; at most 15 s, after which the session is closed.
func readUntil(t *testing.T, p Terminal, want string) string {
	t.Helper()
	late := time.AfterFunc(15*time.Second, func() { _ = p.Close() })
	defer late.Stop()
	var b bytes.Buffer
	buf := make([]byte, 1024)
	for !strings.Contains(b.String(), want) {
		n, err := p.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			t.Fatalf("the terminal showed %.200q and ended (%v), want %q", b.String(), err, want)
		}
	}
	return b.String()
}

// A command under a terminal runs as the job's account on a terminal of
// its own, which that account owns, of the size asked; a signal reaches
// its process group, and its exit code is a shell's.
func TestExecPTY_RunsAsTheJobOnATerminalItOwnsAndTakesSignals(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r, rec := e.runner(t)
	tk := sh("sleep 3600")
	mustStart(t, r, tk)
	waitState(t, rec, tk.Alloc.ID, structs.AllocRunning)
	waitExec(t, r, tk.Alloc.ID, "true")
	p, err := r.ExecPTY(execCtx(t), tk.Alloc.ID, []string{"sh", "-c", `echo "$(id -u) $(stat -c %u "$(tty)") $(stty size) $TERM"; exec sleep 600`}, "vt100", 33, 77)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	uid := os.Geteuid()
	if uid == 0 {
		uid = int(jobUser(t).UID)
	}
	want := strconv.Itoa(uid) + " " + strconv.Itoa(uid) + " 33 77 vt100"
	readUntil(t, p, want) // uid, the terminal's owner, its size, TERM
	if err := p.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	code, err := p.Wait()
	if err != nil || code != 128+int(syscall.SIGINT) {
		t.Errorf("a command interrupted: code %d, %v; want 130", code, err)
	}
}

// A command under a terminal in a container job's container runs as the
// job's account, with TERM, on a terminal its resize reaches; a signal
// reaches it, and its exit code is the command's; closing the session
// ends what it runs.
func TestExecPTY_InAContainerJobThroughTheEngine(t *testing.T) {
	t.Parallel()
	e := newContainerEnv(t)
	r, rec := e.runner(t)
	tk := e.sh("sleep 3600")
	mustStart(t, r, tk)
	waitState(t, rec, tk.Alloc.ID, structs.AllocRunning)
	waitExec(t, r, tk.Alloc.ID, "true")
	p, err := r.ExecPTY(execCtx(t), tk.Alloc.ID, []string{"sh"}, "vt100", 24, 80)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Resize(33, 77); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(p, `echo "$(id -u) $(stty size) $TERM"; exit 3`+"\n"); err != nil {
		t.Fatal(err)
	}
	want := strconv.Itoa(int(jobUser(t).UID)) + " 33 77 vt100"
	readUntil(t, p, want)
	if code, err := p.Wait(); err != nil || code != 3 {
		t.Errorf("a shell that exits 3: code %d, %v", code, err)
	}

	// A signal reaches the command's process group.
	p, err = r.ExecPTY(execCtx(t), tk.Alloc.ID, []string{"sh", "-c", "echo ready; exec sleep 600"}, "", 24, 80)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	readUntil(t, p, "ready")
	if err := p.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code, err := p.Wait(); err != nil || code != 128+int(syscall.SIGINT) {
		t.Errorf("a command interrupted: code %d, %v; want 130", code, err)
	}

	// Closed while it runs: it is hung up on, and gone.
	p, err = r.ExecPTY(execCtx(t), tk.Alloc.ID, []string{"sh", "-c", "echo ready; sleep 600"}, "", 24, 80)
	if err != nil {
		t.Fatal(err)
	}
	readUntil(t, p, "ready")
	sleeps := func() string {
		res := waitExec(t, r, tk.Alloc.ID, "sh", "-c", "ps -o args | grep -c '^sleep 600'")
		return strings.TrimSpace(res.Output)
	}
	if n := sleeps(); n != "1" {
		t.Fatalf("the session's sleep 600 runs %s times in the container, want once", n)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Done():
	case <-time.After(15 * time.Second):
		t.Fatal("a closed session's command is still running")
	}
	if code, err := p.Wait(); err != nil || code != 128+int(syscall.SIGHUP) && code != 128+int(syscall.SIGKILL) {
		t.Errorf("a session closed: code %d, %v; want the command hung up on (129) or killed (137)", code, err)
	}
	if n := sleeps(); n != "0" {
		t.Errorf("after the session closed, sleep 600 still runs %s times in the container", n)
	}
}
