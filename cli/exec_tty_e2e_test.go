package cli

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

// TestExecTTY_KeysGoInAndTheExitCodeComesOut: skein exec -it runs a
// command under a terminal beside a running job; input that is not a
// terminal goes in as it comes, the screen comes out, and skein exits
// with the command's exit code.
func TestExecTTY_KeysGoInAndTheExitCodeComesOut(t *testing.T) {
	startRealAgent(t)
	dir := testutil.SharedDir(t)
	t.Chdir(dir)
	writeTestFile(t, filepath.Join(dir, "hold.sh"), "#!/bin/sh\nwhile [ ! -e go ]; do sleep 0.05; done\n")
	r := runCLI(t, "sbatch", "--parsable", "hold.sh")
	id := strings.TrimSpace(r.stdout)
	if r.code != exitOK {
		t.Fatalf("sbatch: %d %q %q", r.code, r.stdout, r.stderr)
	}
	t.Cleanup(func() { writeTestFile(t, filepath.Join(dir, "go"), ""); waitJobState(t, id, structs.JobSucceeded) })
	waitJobState(t, id, structs.JobRunning)
	testutil.WaitFor(t, 15*time.Second, func() error {
		var out, errb bytes.Buffer
		app := NewApp(&out, &errb)
		app.Reader = strings.NewReader("abc\n")
		code := run(app, []string{"skein", "exec", "-it", id, "--", "sh", "-c", `read x; echo "got $x in $SLURM_JOB_ID on $(tty)"; exit 4`})
		if code != 4 || !strings.Contains(out.String(), "got abc in "+id+" on /dev/pts/") {
			return fmt.Errorf("exec -it: %d %q %q; want exit 4 and the line read back on a terminal", code, out.String(), errb.String())
		}
		return nil
	})
}
