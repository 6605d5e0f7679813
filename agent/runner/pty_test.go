package runner

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/skein-dev/skein/structs"
)

// readUntil reads a PTY's output until it shows want, and returns what
// it read; at most 15 s.
func readUntil(t *testing.T, p *PTY, want string) string {
	t.Helper()
	late := time.AfterFunc(15*time.Second, func() { _ = p.master.Close() })
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

// An image job gives no terminal yet: it says so, and runs nothing.
func TestExecPTY_AnImageJobIsRefusedSayingWhy(t *testing.T) {
	t.Parallel()
	e := newContainerEnv(t)
	r, rec := e.runner(t)
	tk := e.sh("sleep 3600")
	mustStart(t, r, tk)
	waitState(t, rec, tk.Alloc.ID, structs.AllocRunning)
	waitExec(t, r, tk.Alloc.ID, "true")
	if p, err := r.ExecPTY(execCtx(t), tk.Alloc.ID, []string{"sh"}, "", 24, 80); !errors.Is(err, ErrNoTTY) {
		if p != nil {
			_ = p.Close()
		}
		t.Fatalf("a terminal in an image job: %v, want ErrNoTTY", err)
	}
}
