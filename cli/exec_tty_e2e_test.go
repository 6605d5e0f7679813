package cli

import (
	"bytes"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
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
	waitJobState(t, id, structs.JobRunning)
	testutil.WaitFor(t, 15*time.Second, func() error {
		var out, errb bytes.Buffer
		app := NewApp(&out, &errb)
		app.Reader = strings.NewReader("abc\n")
		code := run(app, cliArgs(t, "exec", "-it", id, "--", "sh", "-c", `read x; echo "got $x in $SLURM_JOB_ID on $(tty)"; exit 4`))
		if code != 4 || !strings.Contains(out.String(), "got abc in "+id+" on /dev/pts/") {
			return fmt.Errorf("exec -it: %d %q %q; want exit 4 and the line read back on a terminal", code, out.String(), errb.String())
		}
		return nil
	})
	// A session beside a job that ends is killed with the job.
	keys, _ := io.Pipe()
	defer keys.Close()
	screen := &syncBuffer{}
	ended := make(chan int, 1)
	go func() {
		app := NewApp(screen, io.Discard)
		app.Reader = keys
		ended <- run(app, cliArgs(t, "exec", "-it", id, "--", "sh", "-c", "echo started; exec sleep 300"))
	}()
	testutil.WaitFor(t, 15*time.Second, func() error {
		if !strings.Contains(screen.String(), "started") {
			return fmt.Errorf("the session has not started: %q", screen.String())
		}
		return nil
	})
	writeTestFile(t, filepath.Join(dir, "go"), "")
	waitJobState(t, id, structs.JobSucceeded)
	select {
	case code := <-ended:
		if code != 128+9 {
			t.Errorf("a session killed with its job exited %d, want 137 (SIGKILL)", code)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a session beside a job that ended still runs")
	}
}

// TestRunIT_HoldsANodeForATerminalSessionThenLetsItGo: skein run -it and
// srun --pty outside a job submit a job that holds a node, run the
// command there under a terminal, exit with its exit code and cancel the
// job.
func TestRunIT_HoldsANodeForATerminalSessionThenLetsItGo(t *testing.T) {
	startRealAgent(t)
	t.Chdir(testutil.SharedDir(t))
	for _, args := range [][]string{{"run", "-it", "--gpus=1", "--"}, {"srun", "--pty", "-G", "1"}} {
		var out, errb bytes.Buffer
		app := NewApp(&out, &errb)
		app.Reader = strings.NewReader("abc\n")
		code := run(app, cliArgs(t, append(args, "sh", "-c", `read x; echo "got $x in $SLURM_JOB_ID on $(tty)"; exit 5`)...))
		m := regexp.MustCompile(`Relinquishing job allocation (\S+)`).FindStringSubmatch(errb.String())
		if code != 5 || !strings.Contains(out.String(), "got abc in ") || !strings.Contains(out.String(), " on /dev/pts/") || m == nil {
			t.Fatalf("%s: %d %q %q; want exit 5, the line read back on a terminal, the job let go", args[0], code, out.String(), errb.String())
		}
		waitJobState(t, m[1], structs.JobCancelled)
	}
	if r := runCLI(t, "run", "--", "true"); r.code != exitUsage {
		t.Errorf("skein run without -it: %d %q", r.code, r.stderr)
	}
}
