package runner

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/skein-dev/skein/structs"
)

// TestRunner_ExpiredLeaseStopsJobsWithoutTheAgent: a node whose agent is
// frozen or dead cannot stop its jobs; the supervisors do it themselves once
// the lease the agent last renewed has run out.
func TestRunner_ExpiredLeaseStopsJobsWithoutTheAgent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.grace = time.Hour
	e.leasePath = filepath.Join(t.TempDir(), "lease.json")
	e.fenceGrace = 200 * time.Millisecond
	r, _ := e.runner(t)
	if err := r.RenewLease(time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	tk := sh(`trap '' TERM; echo ready; while :; do sleep 0.05; done`)
	mustStart(t, r, tk)
	waitFile(t, filepath.Join(e.allocDir, tk.Alloc.ID, stdoutFile), "ready")
	r.Shutdown() // the agent is gone; nothing renews the lease now

	if err := writeJSONAtomic(e.leasePath, lease{ExpiresAt: time.Now().Add(-time.Millisecond)}); err != nil {
		t.Fatal(err)
	}
	var st status
	waitFor(t, 10*time.Second, "the job to stop itself", func() (bool, string) {
		found, err := readJSON(filepath.Join(e.allocDir, tk.Alloc.ID, statusFile), &st)
		return found && err == nil, fmt.Sprintf("no status.json yet (%v)", err)
	})
	if st.Reason != "killed: "+fencedReason || st.Signal != "SIGKILL" {
		t.Fatalf("status = %+v, want killed by SIGKILL for the expired lease", st)
	}
}

// TestRunner_LeaseThatNeverExpiresNeverFences: a one-node cluster writes a
// zero expiry; the job runs to its end.
func TestRunner_LeaseThatNeverExpiresNeverFences(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.leasePath = filepath.Join(t.TempDir(), "lease.json")
	r, rec := e.runner(t)
	if err := r.RenewLease(time.Time{}); err != nil {
		t.Fatal(err)
	}
	tk := sh(`sleep 0.5; exit 0`)
	mustStart(t, r, tk)
	if u := waitTerminal(t, rec, tk.Alloc.ID); u.State != structs.AllocSucceeded {
		t.Fatalf("got %+v, want the job to finish undisturbed", u)
	}
}

// TestRunner_VanishedLeaseFences: the lease disappears only with the node's
// data directory; its jobs must not outlive it.
func TestRunner_VanishedLeaseFences(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.leasePath = filepath.Join(t.TempDir(), "lease.json")
	e.fenceGrace = 200 * time.Millisecond
	r, rec := e.runner(t)
	if err := r.RenewLease(time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	tk := sh(`echo ready; while :; do sleep 0.05; done`)
	mustStart(t, r, tk)
	waitFile(t, filepath.Join(e.allocDir, tk.Alloc.ID, stdoutFile), "ready")
	if err := os.Remove(e.leasePath); err != nil {
		t.Fatal(err)
	}
	if u := waitTerminal(t, rec, tk.Alloc.ID); u.State != structs.AllocKilled || u.Reason != "killed: "+fencedReason {
		t.Fatalf("got %+v, want the job stopped for its vanished lease", u)
	}
}

// TestSupervisor_ReadsTheLeaseWhenItEndsNotTenTimesASecond: a supervisor
// reads a live lease again when it runs out, or after leaseRecheck if that
// comes first, instead of polling it; what it cannot read yet it reads
// again soon.
func TestSupervisor_ReadsTheLeaseWhenItEndsNotTenTimesASecond(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "lease.json")
	s := &supervisor{}
	expired, again := s.checkLease(path)
	if expired || again == nil {
		t.Fatalf("no lease written yet: expired=%v, again=%v; want not expired and a read again", expired, again)
	}

	r := &Runner{leasePath: path}
	if err := r.RenewLease(time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	expired, again = s.checkLease(path)
	if expired {
		t.Fatal("a lease an hour ahead counted as expired")
	}
	select {
	case <-again:
		t.Fatalf("a live lease was to be read again within %s (leaseRecheck %s)", 3*leasePoll, leaseRecheck)
	case <-time.After(3 * leasePoll):
	}
	select {
	case <-again:
	case <-time.After(10 * leaseRecheck):
		t.Fatalf("a live lease was not read again within %s", 10*leaseRecheck)
	}

	if err := r.RenewLease(time.Now().Add(200 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	expired, again = s.checkLease(path)
	if expired {
		t.Fatal("a lease 200 ms ahead counted as expired")
	}
	// Read again when it runs out (or a hair before, by the wall clock
	// the lease is written in, which may drift from the timer's).
	for gaveUp := time.After(5 * time.Second); !expired; {
		select {
		case <-again:
		case <-gaveUp:
			t.Fatal("a lease 200 ms ahead had not run out for the supervisor 5 s later")
		}
		expired, again = s.checkLease(path)
	}

	if err := r.RenewLease(time.Time{}); err != nil {
		t.Fatal(err)
	}
	if expired, again = s.checkLease(path); expired || again == nil {
		t.Fatalf("a lease that never runs out: expired=%v, again=%v; want not expired and a read again", expired, again)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if expired, _ = s.checkLease(path); !expired {
		t.Fatal("a lease that vanished after it was read did not count as expired")
	}
}
