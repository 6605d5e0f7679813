package runner

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/skein-dev/skein/structs"
)

func TestSignal_ReachesTheJobWhichGoesOn(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r, rec := e.runner(t)
	// The trap runs between sleeps: the shell waits for none longer
	// than a short one.
	tk := sh(`trap 'echo got >> usr1' USR1; echo ready > ready; while :; do sleep 0.1; done`)
	mustStart(t, r, tk)
	waitState(t, rec, tk.Alloc.ID, structs.AllocRunning)
	work := filepath.Join(e.allocDir, tk.Alloc.ID, workDirName)
	waitFor(t, 15*time.Second, "the job's trap to be set", func() (bool, string) {
		_, err := os.Stat(filepath.Join(work, "ready"))
		return err == nil, errString(err)
	})
	if err := r.Signal(tk.Alloc.ID, syscall.SIGUSR1); err != nil {
		t.Fatalf("signal USR1: %v", err)
	}
	waitFor(t, 15*time.Second, "the job's trap to run", func() (bool, string) {
		b, err := os.ReadFile(filepath.Join(work, "usr1"))
		return string(b) == "got\n", errString(err)
	})
	if n := len(rec.of(tk.Alloc.ID)) - rec.count(tk.Alloc.ID, structs.AllocRunning); n != 0 {
		t.Errorf("after USR1 the allocation has reports %s, want it still running", rec)
	}
	// A signal the job does not trap ends it as any death by signal.
	if err := r.Signal(tk.Alloc.ID, syscall.SIGUSR2); err != nil {
		t.Fatalf("signal USR2: %v", err)
	}
	if got := waitTerminal(t, rec, tk.Alloc.ID); got.State != structs.AllocFailed || got.ExitCode != 128+int(syscall.SIGUSR2) {
		t.Errorf("after USR2 the allocation ended %s with code %d, want failed with %d", got.State, got.ExitCode, 128+int(syscall.SIGUSR2))
	}
}

func TestSignal_AnAllocationNotRunningIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r, _ := e.runner(t)
	if err := r.Signal("nosuchalloc", syscall.SIGUSR1); !errors.Is(err, ErrNotRunning) {
		t.Errorf("signal an allocation nobody runs: %v, want %v", err, ErrNotRunning)
	}
	if err := r.Signal("../x", syscall.SIGUSR1); !errors.Is(err, ErrInvalidAllocID) {
		t.Errorf("signal a bad ID: %v, want %v", err, ErrInvalidAllocID)
	}
}

func TestSignal_ReachesAContainerJobThroughTheEngine(t *testing.T) {
	t.Parallel()
	e := newContainerEnv(t)
	r, rec := e.runner(t)
	tk := e.sh(`trap 'echo got' USR1; echo ready; while :; do sleep 0.1; done`)
	mustStart(t, r, tk)
	waitState(t, rec, tk.Alloc.ID, structs.AllocRunning)
	out := filepath.Join(e.allocDir, tk.Alloc.ID, stdoutFile)
	waitFor(t, 15*time.Second, "the job's trap to be set", func() (bool, string) {
		b, err := os.ReadFile(out)
		return strings.Contains(string(b), "ready\n"), errString(err)
	})
	if err := r.Signal(tk.Alloc.ID, syscall.SIGUSR1); err != nil {
		t.Fatalf("signal USR1: %v", err)
	}
	waitFor(t, 15*time.Second, "the job's trap to run", func() (bool, string) {
		b, err := os.ReadFile(out)
		return strings.Contains(string(b), "got\n"), fmt.Sprintf("%q %v", b, err)
	})
	if n := len(rec.of(tk.Alloc.ID)) - rec.count(tk.Alloc.ID, structs.AllocRunning); n != 0 {
		t.Errorf("after USR1 the allocation has reports %s, want it still running", rec)
	}
}
