package cli

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skein-dev/skein/api"
)

// backupText is a small backup in the snapshot format: one node, one
// running job.
const backupText = `{"version":1,"index":42}
{"type":"node","node":{"id":"n1","name":"gpu-01","gpus":[]}}
{"type":"job","job":{"id":"j1","state":"running","spec":{"command":["x"],"nodes":1}}}
`

func TestSnapshotSave_WritesTheFile0600AndSaysItHoldsSecrets(t *testing.T) {
	f := newFakeAgent(t)
	f.handle("GET /v1/snapshot", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(api.SnapshotIndexHeader, "42")
		_, _ = w.Write([]byte(backupText))
	})
	path := filepath.Join(t.TempDir(), "backup.snap")
	r := runCLI(t, "--addr", f.URL, "snapshot", "save", path)
	if r.code != exitOK {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	info, err := os.Stat(path)
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("backup file: %v, %v; want mode 0600", info, err)
	}
	if b, _ := os.ReadFile(path); string(b) != backupText {
		t.Fatalf("file holds %q", b)
	}
	if !strings.Contains(r.stdout, "index 42") || !strings.Contains(r.stdout, "holds secrets") {
		t.Fatalf("stdout %q: want the index and that the file holds secrets", r.stdout)
	}
}

func TestSnapshotInspect_SaysWhatABackupHoldsAndRefusesADamagedOne(t *testing.T) {
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "good.snap"), filepath.Join(dir, "bad.snap")
	if err := os.WriteFile(good, []byte(backupText), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte(backupText[:len(backupText)-20]), 0o600); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, "snapshot", "inspect", good)
	if r.code != exitOK || !strings.Contains(r.stdout, "1 running") || !strings.Contains(r.stdout, "42") {
		t.Fatalf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, "snapshot", "inspect", bad)
	if r.code != exitError || !strings.Contains(r.stderr, "invalid snapshot: record 2") {
		t.Fatalf("a damaged backup: exit %d, stderr %q", r.code, r.stderr)
	}
	// restore checks the file before it sends anything.
	f := newFakeAgent(t)
	r = runCLI(t, "--addr", f.URL, "snapshot", "restore", bad)
	if r.code != exitError || len(f.requests()) != 0 {
		t.Fatalf("restore of a damaged backup: exit %d, %d requests sent", r.code, len(f.requests()))
	}
}
