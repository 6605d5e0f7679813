package cli

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

func TestAccount_SetUpInAFewCommandsThroughARealAgent(t *testing.T) {
	t.Parallel()
	startRealAgent(t)
	run := func(args ...string) string {
		t.Helper()
		r := runCLI(t, args...)
		if r.code != exitOK {
			t.Fatalf("skein %s: exit %d: %s", strings.Join(args, " "), r.code, r.stderr)
		}
		return r.stdout
	}
	run("account", "create", "ml", "--shares", "70")
	run("account", "create", "cv", "--shares", "30", "--max-gpus", "16")
	run("account", "create", "nlp", "--parent", "ml", "--max-jobs", "4")
	run("account", "add-user", "ml", "alice")
	run("account", "add-user", "cv", "admin") // the token's user
	run("qos", "set", "low", "--max-wall", "4h")
	run("qos", "set", "high", "--priority", "500", "--max-gpus-per-user", "8", "--preempt", "low")
	out := run("account", "weights", "--age", "500")
	for _, want := range []string{"ml ", "  nlp", "cv ", "alice*", "high", "low", "4h0m0s",
		"Priority weights: fair share 10000, QoS 2000, age 500"} {
		if !strings.Contains(out, want) {
			t.Errorf("account list lacks %q:\n%s", want, out)
		}
	}
	var tab structs.AccountTable
	mustDecode(t, run("account", "list", "--json"), &tab)
	if a := tab.Accounts["cv"]; a == nil || a.Shares != 30 || a.MaxGPUs == nil || *a.MaxGPUs != 16 || tab.Accounts["nlp"].Parent != "ml" {
		t.Fatalf("accounts %+v", tab.Accounts)
	}

	// A job names its account and QoS; #SBATCH does too.
	r := runCLI(t, "submit", "--json", "--account", "cv", "--qos", "low", "--", "true")
	var j structs.Job
	if r.code != exitOK {
		t.Fatalf("submit --account cv: exit %d: %s", r.code, r.stderr)
	}
	mustDecode(t, r.stdout, &j)
	if j.Spec.Account != "cv" || j.Spec.QoS != "low" || j.Spec.TimeLimit != structs.Duration(4*60*60*1e9) {
		t.Fatalf("job %+v: want account cv, QoS low and its 4h wall time", j.Spec)
	}
	r = runCLI(t, "submit", "--account", "nope", "--", "true")
	if r.code == exitOK || !strings.Contains(r.stderr, "account: nope: no such account") {
		t.Fatalf("submit to an unknown account: exit %d, %q", r.code, r.stderr)
	}
	r = runCLI(t, "submit", "--account", "ml", "--", "true")
	if r.code == exitOK || !strings.Contains(r.stderr, "invalid request: account: admin is not a member of account ml") {
		t.Fatalf("submit to another's account: exit %d, %q", r.code, r.stderr)
	}
	r = runCLI(t, "account", "delete", "ml")
	if r.code == exitOK || !strings.Contains(r.stderr, "ml has sub-account nlp") {
		t.Fatalf("delete of a parent: exit %d, %q", r.code, r.stderr)
	}
	// The queue explains itself: share, prio, and job on a waiting job.
	var busy, next, last structs.Job
	mustDecode(t, run("submit", "--json", "--gpus", "2", "--", "sleep", "30"), &busy)
	// A new leader holds placements back a moment, until it has heard
	// from the nodes: wait until the queue ahead has run.
	testutil.WaitFor(t, 15*time.Second, func() error {
		var d api.JobDetail
		mustDecode(t, run("job", "--json", busy.ID), &d)
		if d.Job.State != structs.JobRunning {
			return fmt.Errorf("the busy job is %s", d.Job.State)
		}
		if out := run("jobs"); strings.Contains(out, "queued") {
			return fmt.Errorf("jobs still queued:\n%s", out)
		}
		return nil
	})
	mustDecode(t, run("submit", "--json", "--gpus", "2", "--", "true"), &next)
	mustDecode(t, run("submit", "--json", "--gpus", "2", "--qos", "high", "--", "true"), &last)
	out = run("share")
	for _, want := range []string{"ACCOUNT", "LEVEL FS", "FAIRSHARE", "cv", "admin", "alice", "  nlp"} {
		if !strings.Contains(out, want) {
			t.Errorf("share lacks %q:\n%s", want, out)
		}
	}
	out = run("prio")
	for _, want := range []string{"FAIRSHARE", "QOS PTS", structs.ShortID(next.ID), structs.ShortID(last.ID), "(weights: fair share 10000, QoS 2000, age 500, job size 0; 2 queued)"} {
		if !strings.Contains(out, want) {
			t.Errorf("prio lacks %q:\n%s", want, out)
		}
	}
	out = run("job", next.ID)
	for _, want := range []string{"Queue:", "2 of 2", "Factors:", "Behind:", "behind job " + structs.ShortID(last.ID), "QoS 0.50 against 0.00"} {
		if !strings.Contains(out, want) {
			t.Errorf("job lacks %q:\n%s", want, out)
		}
	}
	r = runCLI(t, "account", "create", "x", "--shares", "0")
	if r.code == exitOK || !strings.Contains(r.stderr, "shares: 0 is out of range 1..") {
		t.Fatalf("zero shares: exit %d, %q", r.code, r.stderr)
	}
}
