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
