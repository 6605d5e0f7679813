package testutil

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// RunWithoutLeaks runs a package's tests and then fails the package if
// any goroutine its tests started is still running (goleak retries for a
// few seconds, so one that is on its way out is given the time to go).
// Every package whose code starts goroutines calls it from its TestMain;
// extra names functions whose goroutines the package leaves by design.
func RunWithoutLeaks(m *testing.M, extra ...goleak.Option) int {
	code := m.Run()
	if code != 0 {
		return code
	}
	opts := append([]goleak.Option{
		// os/signal's, kept for the process's life once a test used it.
		goleak.IgnoreAnyFunction("os/signal.signal_recv"),
	}, extra...)
	if err := goleak.Find(opts...); err != nil {
		fmt.Fprintf(os.Stderr, "goroutines left running after the tests passed:\n%s\n", clip(err.Error(), 20000))
		return 1
	}
	return 0
}

// clip keeps the first n bytes of s, saying how much it left out.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return fmt.Sprintf("%s\n... (%d more bytes)", s[:n], len(s)-n)
}
