package testutil

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

var workload struct {
	once sync.Once
	path string
	err  error
}

// Workload returns the path of skein-workload (chaos/workload), built
// static once per test binary where every user can run it: the tests'
// jobs and service replicas run it, as the job user.
func Workload(t testing.TB) string {
	t.Helper()
	workload.once.Do(func() {
		dir, err := os.MkdirTemp("", "skein-workload-")
		if err == nil {
			err = os.Chmod(dir, 0o755)
		}
		if err != nil {
			workload.err = err
			return
		}
		path := filepath.Join(dir, "skein-workload")
		build := exec.Command("go", "build", "-o", path, "github.com/skein-dev/skein/chaos/workload")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			workload.err = fmt.Errorf("build skein-workload: %v\n%s", err, out)
			return
		}
		workload.path = path
	})
	if workload.err != nil {
		t.Fatal(workload.err)
	}
	return workload.path
}
