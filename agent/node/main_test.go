package node

import (
	"os"
	"testing"

	"github.com/skein-dev/skein/agent/runner"

	"github.com/skein-dev/skein/internal/testutil"
)

// superviseEnv makes the test binary act as an allocation's supervisor,
// for the tests that run jobs under a real runner.
const superviseEnv = "SKEIN_TEST_SUPERVISE"

func TestMain(m *testing.M) {
	if os.Getenv(superviseEnv) != "" {
		os.Exit(runner.Supervise(os.Args[len(os.Args)-1]))
	}
	os.Exit(testutil.RunWithoutLeaks(m))
}
