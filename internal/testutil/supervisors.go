package testutil

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// StopSupervisors stops every supervisor working in dir, as the agent's
// Shutdown deliberately does not, and waits for them to finish writing.
func StopSupervisors(t testing.TB, dir string) {
	find := func() []int {
		var pids []int
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == os.Getpid() {
				continue
			}
			cmd, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
			if err == nil && bytes.Contains(cmd, []byte(dir+"/")) {
				pids = append(pids, pid)
			}
		}
		return pids
	}
	for _, pid := range find() {
		_ = syscall.Kill(pid, syscall.SIGTERM) // the supervisor stops its job's group
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(find()) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	for _, pid := range find() {
		t.Logf("supervisor %d did not stop; killing it", pid)
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}
