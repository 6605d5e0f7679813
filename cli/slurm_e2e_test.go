package cli

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

// TestCLI_SlurmHabitsAgainstARealAgent: squeue, scancel, sinfo and sacct
// on a real agent's jobs, from submission to history.
func TestCLI_SlurmHabitsAgainstARealAgent(t *testing.T) {
	t.Parallel()
	startRealAgent(t)
	submit := func(args ...string) string {
		t.Helper()
		r := runCLI(t, append([]string{"submit"}, args...)...)
		if r.code != exitOK {
			t.Fatalf("submit %q: %d %s", args, r.code, r.stderr)
		}
		return slurmIDOf(t, strings.TrimSpace(r.stdout))
	}
	ok := submit("--name", "ok", "--", "true")
	bad := submit("--name", "bad", "--", "sh", "-c", "exit 3")
	waitJobState(t, ok, structs.JobSucceeded)
	waitJobState(t, bad, structs.JobFailed)
	train := submit("--name", "train", "--gpus", "2", "--", "sleep", "60")
	waitJobState(t, train, structs.JobRunning)
	queued := submit("--name", "queued", "--gpus", "1", "--", "true")

	// The queued job waits for the GPUs train holds.
	testutil.WaitFor(t, 15*time.Second, func() error {
		r := runCLI(t, "squeue")
		want := []*regexp.Regexp{
			regexp.MustCompile(`^ +JOBID PARTITION +NAME +USER ST +TIME +NODES NODELIST\(REASON\)$`),
			regexp.MustCompile(`^ +` + train + ` +skein +train +admin +R +0:\d\d +1 e2e$`),
			regexp.MustCompile(`^ +` + queued + ` +skein +queued +admin +PD +0:00 +1 \(Resources\)$`),
		}
		lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
		if r.code != exitOK || len(lines) != len(want) {
			return fmt.Errorf("squeue: %d %q %q", r.code, r.stdout, r.stderr)
		}
		for i, re := range want {
			if !re.MatchString(lines[i]) {
				return fmt.Errorf("squeue line %d %q does not match %s", i, lines[i], re)
			}
		}
		return nil
	})
	r := runCLI(t, "sinfo")
	if r.code != exitOK || !regexp.MustCompile(`(?m)^skein\* +up +infinite +1 +alloc gpu:a100:2 e2e$`).MatchString(r.stdout) {
		t.Fatalf("sinfo: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := runCLI(t, "squeue", "-t", "CD,F", "-h", "-o", "%i %t"); r.code != exitOK || r.stdout != ok+" CD\n"+bad+" F\n" {
		t.Fatalf("squeue -t CD,F: %d %q %q", r.code, r.stdout, r.stderr)
	}

	r = runCLI(t, "scancel", "-n", "train", "-t", "R")
	if r.code != exitOK || r.stdout != "stopping "+train+"\n" {
		t.Fatalf("scancel -n train: %d %q %q", r.code, r.stdout, r.stderr)
	}
	waitJobState(t, train, structs.JobCancelled)
	waitJobState(t, queued, structs.JobSucceeded)
	if r := runCLI(t, "scancel", train); r.code != exitError || r.stderr != "scancel: error: job "+hexIDOf(t, train)+": job already finished (cancelled)\n" {
		t.Fatalf("scancel of a cancelled job: %d %q %q", r.code, r.stdout, r.stderr)
	}
	if r := runCLI(t, "scancel", "0000dead"); r.code != exitError || !strings.Contains(r.stderr, "0000dead") {
		t.Fatalf("scancel of no job: %d %q", r.code, r.stderr)
	}
	if r := runCLI(t, "squeue", "-h"); r.code != exitOK || r.stdout != "" {
		t.Fatalf("squeue of an empty queue: %d %q %q", r.code, r.stdout, r.stderr)
	}

	r = runCLI(t, "sacct", "-S", "now-1hours", "-P", "-o", "JobID,JobName,State,ExitCode,NNodes,AllocGPUS")
	// A cancelled job's exit code is SIGTERM's, or none when the node
	// stopped it before its process reported one.
	want := regexp.MustCompile("^JobID\\|JobName\\|State\\|ExitCode\\|NNodes\\|AllocGPUS\n" +
		ok + "\\|ok\\|COMPLETED\\|0:0\\|1\\|0\n" +
		bad + "\\|bad\\|FAILED\\|3:0\\|1\\|0\n" +
		train + "\\|train\\|CANCELLED\\|(0:15|-1:0)\\|1\\|2\n" +
		queued + "\\|queued\\|COMPLETED\\|0:0\\|1\\|1\n$")
	if r.code != exitOK || !want.MatchString(r.stdout) {
		t.Fatalf("sacct: %d\n%s\nwant:\n%s%s", r.code, r.stdout, want, r.stderr)
	}
}

// slurmIDOf is the job's ID as the Slurm commands show it: its number.
func slurmIDOf(t *testing.T, id string) string {
	t.Helper()
	var d api.JobDetail
	r := runCLI(t, "job", "--json", id)
	mustDecode(t, r.stdout, &d)
	if d.Job.Number == 0 {
		t.Fatalf("job %s has no number: %q", id, r.stdout)
	}
	return d.Job.SlurmID()
}

// hexIDOf is the job's skein ID, shortened, as reasons name it.
func hexIDOf(t *testing.T, id string) string {
	t.Helper()
	var d api.JobDetail
	r := runCLI(t, "job", "--json", id)
	mustDecode(t, r.stdout, &d)
	return structs.ShortID(d.Job.ID)
}
