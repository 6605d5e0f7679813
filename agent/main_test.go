package agent

import (
	"os"
	"testing"

	"github.com/skein-dev/skein/agent/runner"
	"github.com/skein-dev/skein/internal/testutil"
)

// superviseEnv makes the test binary act as an allocation's supervisor, the
// part `skein supervise` plays in production.
const superviseEnv = "SKEIN_TEST_SUPERVISE"

func TestMain(m *testing.M) {
	if os.Getenv(superviseEnv) != "" {
		os.Exit(runner.Supervise(os.Args[len(os.Args)-1]))
	}
	if os.Getenv(floodEnv) != "" {
		os.Exit(runFlood(os.Getenv(floodEnv)))
	}
	code := testutil.RunWithoutLeaks(m)
	testutil.RemoveCgroups()
	os.Exit(code)
}
