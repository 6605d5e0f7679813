// Package testutil holds helpers shared by skein's tests.
package testutil

import (
	"testing"
	"time"
)

// WaitFor polls cond until it returns nil, or fails the test with cond's
// last error once timeout has passed: tests wait on conditions, never on
// the clock alone.
func WaitFor(t testing.TB, timeout time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %s: %v", timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Holds checks cond every 10ms for d and fails at the first error: it
// shows that something does not happen over a window long enough for it
// to happen (several election timeouts, reconcile intervals or failure
// detections).
func Holds(t testing.TB, d time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if err := cond(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Long skips tb under `go test -short` (make test-short, the edit loop's
// tier), saying what makes it long; make test runs it.
func Long(tb testing.TB, what string) {
	tb.Helper()
	if testing.Short() {
		tb.Skipf("%s: skipped with -short (make test runs it)", what)
	}
}
