package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

// checkpointing is a job that leaves dir/ready.ALLOC once it handles
// SIGTERM; on SIGTERM it leaves dir/term.ALLOC, then waits for dir/release
// (its "checkpoint") and exits 0. Until then it runs forever.
func checkpointing(dir string) []string {
	return []string{"sh", "-c", fmt.Sprintf(
		`trap 'touch %[1]s/term.$SKEIN_ALLOC_ID; while [ ! -e %[1]s/release ]; do sleep 0.05; done; exit 0' TERM; `+
			`touch %[1]s/ready.$SKEIN_ALLOC_ID; while :; do sleep 0.05; done`, dir)}
}

// waitMarkers waits until n allocations left a marker ("ready", "term") in dir.
func waitMarkers(t *testing.T, dir, marker string, n int) {
	t.Helper()
	testutil.WaitFor(t, 15*time.Second, func() error {
		m, _ := filepath.Glob(filepath.Join(dir, marker+".*"))
		if len(m) != n {
			return fmt.Errorf("%d of %d allocations left %s in %s", len(m), n, marker, dir)
		}
		return nil
	})
}

// waitingFor is a job that runs until the file exists.
func waitingFor(file string) []string {
	return []string{"sh", "-c", fmt.Sprintf(`while [ ! -e %s ]; do sleep 0.05; done`, file)}
}

func submitSpec(t *testing.T, c *api.Client, spec structs.JobSpec) *structs.Job {
	t.Helper()
	job, err := c.SubmitJob(context.Background(), api.SubmitRequest{RequestID: structs.NewID(), Spec: spec})
	if err != nil {
		t.Fatalf("submit %v: %v", spec.Command, err)
	}
	return job
}

func TestAgent_PreemptedJobsSeeTermMakeRoomAndRunAgainAfter(t *testing.T) {
	t.Parallel()
	_, c := startAgent(t, testConfig(t, t.TempDir()))
	dir1, dir2 := testutil.SharedDir(t), testutil.SharedDir(t)
	preemptible := func(dir string) structs.JobSpec {
		return structs.JobSpec{Command: checkpointing(dir), GPUs: 2, Preemptible: true, PreemptGrace: structs.Duration(time.Minute)}
	}
	low1 := submitSpec(t, c, preemptible(dir1))
	low2 := submitSpec(t, c, preemptible(dir2))
	waitMarkers(t, dir1, "ready", 1)
	waitMarkers(t, dir2, "ready", 1)
	// Queued behind the urgent job: it must not take the GPUs freed for it.
	small := submitSpec(t, c, structs.JobSpec{Command: []string{"true"}, GPUs: 1})
	done := filepath.Join(dir1, "high-done")
	high := submitSpec(t, c, structs.JobSpec{Command: waitingFor(done), GPUs: 4, Priority: 10})

	waitMarkers(t, dir1, "term", 1)
	waitMarkers(t, dir2, "term", 1)
	for _, id := range []string{low1.ID, low2.ID} {
		d := waitJobState(t, c, id, structs.JobRunning)
		if d.Job.PreemptedBy != high.ID || d.Job.Preemptions != 1 {
			t.Fatalf("victim while it checkpoints: preempted by %q, %d preemptions", d.Job.PreemptedBy, d.Job.Preemptions)
		}
	}

	// One victim is done: two GPUs are free, enough for the small job, but
	// they are the urgent job's.
	if err := writeFile(filepath.Join(dir1, "release")); err != nil {
		t.Fatal(err)
	}
	d := waitJobState(t, c, low1.ID, structs.JobQueued)
	if d.Job.Preemptions != 1 || d.Job.PreemptReason != fmt.Sprintf("preempted by job %s (priority 10)", structs.ShortID(high.ID)) {
		t.Fatalf("victim back in the queue: %d preemptions, reason %q", d.Job.Preemptions, d.Job.PreemptReason)
	}
	if a := d.Allocations[0]; a.State != structs.AllocKilled || a.ExitCode != 0 {
		t.Fatalf("victim allocation ended %s with %d, want killed with the job's own 0", a.State, a.ExitCode)
	}
	testutil.WaitFor(t, 15*time.Second, func() error {
		d, err := c.Job(context.Background(), high.ID)
		if err != nil {
			return err
		}
		if d.Job.Reason != "waiting for 1 preempted job to stop" {
			return fmt.Errorf("urgent job: %s (%s)", d.Job.State, d.Job.Reason)
		}
		return nil
	})
	if d := waitJobState(t, c, small.ID, structs.JobQueued); d.Job.Attempts != 0 {
		t.Fatalf("the small job took GPUs freed for the urgent job")
	}

	if err := writeFile(filepath.Join(dir2, "release")); err != nil {
		t.Fatal(err)
	}
	waitJobState(t, c, high.ID, structs.JobRunning)
	waitJobState(t, c, low2.ID, structs.JobQueued)

	// The urgent job ends: the victims, first in line again, run, without
	// having used their (zero) restarts.
	for _, dir := range []string{dir1, dir2} {
		if err := os.Remove(filepath.Join(dir, "release")); err != nil {
			t.Fatal(err)
		}
	}
	if err := writeFile(done); err != nil {
		t.Fatal(err)
	}
	waitJobState(t, c, high.ID, structs.JobSucceeded)
	for _, id := range []string{low1.ID, low2.ID} {
		d := waitJobState(t, c, id, structs.JobRunning)
		if d.Job.Attempts != 2 || d.Job.Preemptions != 1 {
			t.Fatalf("victim running again: attempt %d, %d preemptions; want 2 and 1", d.Job.Attempts, d.Job.Preemptions)
		}
	}
}

func TestAgent_PreemptedJobThatIgnoresTheWarningIsKilledAfterItsGrace(t *testing.T) {
	t.Parallel()
	_, c := startAgent(t, testConfig(t, t.TempDir()))
	dir := testutil.SharedDir(t)
	low := submitSpec(t, c, structs.JobSpec{
		Command: []string{"sh", "-c", fmt.Sprintf(`trap '' TERM; touch %s/ready.$SKEIN_ALLOC_ID; while :; do sleep 0.05; done`, dir)},
		GPUs:    4, Preemptible: true, PreemptGrace: structs.Duration(200 * time.Millisecond)})
	waitMarkers(t, dir, "ready", 1)
	high := submitSpec(t, c, structs.JobSpec{Command: []string{"true"}, GPUs: 2, Priority: 1})
	waitJobState(t, c, high.ID, structs.JobSucceeded)
	d := waitJobState(t, c, low.ID, structs.JobRunning)
	if d.Job.Attempts != 2 || d.Job.Preemptions != 1 {
		t.Fatalf("victim: attempt %d, %d preemptions; want 2 and 1", d.Job.Attempts, d.Job.Preemptions)
	}
	if a := d.Allocations[0]; a.State != structs.AllocKilled || a.ExitCode != 128+9 {
		t.Fatalf("victim's first allocation ended %s with %d, want killed by SIGKILL", a.State, a.ExitCode)
	}
}

func TestCluster_LeaderKilledMidPreemption_OnePreemptionAndTheUrgentJobRuns(t *testing.T) {
	t.Parallel()
	tc := startCluster(t, 3)
	dir := testutil.SharedDir(t)
	lead := tc.leader()
	// A gang on every node's GPUs, so whichever node leads runs a rank.
	gang := tc.submit(tc.agents[lead], structs.JobSpec{Command: checkpointing(dir), Nodes: 3, GPUs: 4,
		Preemptible: true, PreemptGrace: structs.Duration(time.Minute)})
	waitMarkers(t, dir, "ready", 3)
	high := tc.submit(tc.agents[lead], structs.JobSpec{Command: []string{"sleep", "1000"}, GPUs: 4, Priority: 10})
	waitMarkers(t, dir, "term", 3)

	// The ranks are checkpointing: the leader dies in the middle of it.
	tc.kill(lead)
	next := tc.leader()
	a := tc.agents[next]
	if j, _ := a.fsm.Job(gang.ID); j.PreemptedBy != high.ID || j.Preemptions != 1 {
		t.Fatalf("new leader's view of the victim: preempted by %q, %d preemptions", j.PreemptedBy, j.Preemptions)
	}
	if err := writeFile(filepath.Join(dir, "release")); err != nil {
		t.Fatal(err)
	}

	waitJob(t, a, high.ID, runningAlloc)
	waitJob(t, a, gang.ID, jobState(structs.JobQueued))
	g, _ := a.fsm.Job(gang.ID)
	h, _ := a.fsm.Job(high.ID)
	if g.Preemptions != 1 || g.Attempts != 1 || g.PreemptedBy != "" || h.Attempts != 1 {
		t.Fatalf("gang: %d preemptions, %d attempts, preempted by %q; urgent job: %d attempts; want 1, 1, none, 1",
			g.Preemptions, g.Attempts, g.PreemptedBy, h.Attempts)
	}
	for _, al := range a.fsm.Allocs(gang.ID) {
		if al.State.Terminal() && al.State != structs.AllocLost && al.ExitCode != 0 {
			t.Errorf("rank %d ended %s with %d: the SIGKILL came before the grace was over", al.Rank, al.State, al.ExitCode)
		}
	}
	tc.checkInvariants()
}
