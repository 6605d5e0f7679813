package cli

import (
	"strings"
	"testing"

	"github.com/skein-dev/skein/structs"
)

func TestAccount_SetUpInAFewCommandsThroughARealAgent(t *testing.T) {
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
	r = runCLI(t, "account", "create", "x", "--shares", "0")
	if r.code == exitOK || !strings.Contains(r.stderr, "shares: 0 is out of range 1..") {
		t.Fatalf("zero shares: exit %d, %q", r.code, r.stderr)
	}
}
