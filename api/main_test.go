package api

import (
	"os"
	"testing"

	"github.com/skein-dev/skein/internal/testutil"
)

func TestMain(m *testing.M) {
	os.Exit(testutil.RunWithoutLeaks(m))
}
