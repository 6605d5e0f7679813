package testutil

import (
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// RunWithoutLeaks runs a package's tests and then fails the package if
// any goroutine its tests started is still running 15 s after they
// passed: one on its way out gets that long (memberlist's probe of a
// member, for one, waits out its timeouts after a shutdown). Every
// package whose code starts goroutines calls it from its TestMain.
func RunWithoutLeaks(m *testing.M) int {
	code := m.Run()
	if code != 0 {
		return code
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		err := goleak.Find()
		if err == nil {
			return 0
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(os.Stderr, "goroutines left running 15 s after the tests passed:\n%s\n", clip(err.Error(), 20000))
			return 1
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// clip keeps the first n bytes of s, saying how much it left out.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return fmt.Sprintf("%s\n... (%d more bytes)", s[:n], len(s)-n)
}
