package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

// TestProcess_FairShare_TheOtherUsersJobRunsNext is fair share through
// the real binary, as an admin and two users type it: two accounts of
// equal shares, alice in alpha floods the queue, bob in beta submits one
// job after all of hers; when her running job ends, bob's runs next. The
// accounts are named so that alice would win a tie: only the GPU time
// charged to alpha puts bob first. skein share, prio and job say why.
func TestProcess_FairShare_TheOtherUsersJobRunsNext(t *testing.T) {
	t.Parallel()
	const ip = "127.0.0.111"
	a := startAgent(t, ip, agentDir(t), freePort(t, ip), freePort(t, ip))
	admin := func(args ...string) string {
		t.Helper()
		out, err := a.skein(t, args...)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	admin("account", "create", "alpha", "--shares", "50")
	admin("account", "create", "beta", "--shares", "50")
	admin("account", "add-user", "alpha", "alice")
	admin("account", "add-user", "beta", "bob")
	as := func(user string) func(args ...string) (string, error) {
		tok := strings.TrimSpace(admin("acl", "token", "create", "--user", user, "--role", "submitter"))
		file := filepath.Join(t.TempDir(), user+".token")
		if err := os.WriteFile(file, []byte(tok), 0o600); err != nil {
			t.Fatal(err)
		}
		return func(args ...string) (string, error) {
			cmd := exec.Command(skeinBin, args...)
			// The last of a duplicated variable wins: the user's token.
			cmd.Env = append(append(append(os.Environ(), "SKEIN_ADDR="+a.addr), a.env...), "SKEIN_TOKEN_FILE="+file)
			out, err := cmd.Output()
			if ee, ok := err.(*exec.ExitError); ok {
				err = fmt.Errorf("skein %s: %v: %s", strings.Join(args, " "), err, ee.Stderr)
			}
			return strings.TrimSpace(string(out)), err
		}
	}
	alice, bob := as("alice"), as("bob")
	submit := func(who func(...string) (string, error), args ...string) string {
		t.Helper()
		id, err := who(append([]string{"submit", "--gpus", "4", "--"}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	// Alice's first job runs until the test ends it, and alpha is charged
	// for it before anything else is submitted. The leader charges usage
	// a second after the first account is made, then every 30 s: on a
	// loaded machine the first charge can come before the job started,
	// and a job of a few seconds could end before bob has submitted.
	release := filepath.Join(testutil.JobDir(t), "release")
	first := submit(alice, "sh", "-c", "while [ ! -e "+release+" ]; do sleep 0.05; done")
	a.waitJob(t, first, allocRunning)
	testutil.WaitFor(t, 45*time.Second, func() error {
		out, err := a.skein(t, "share", "--json")
		if err != nil {
			return err
		}
		var share api.ShareInfo
		if err := json.Unmarshal([]byte(out), &share); err != nil {
			return err
		}
		for _, r := range share.Rows {
			if r.Account == "alpha" && r.User == "" && r.NormUsage > 0 {
				return nil
			}
		}
		return fmt.Errorf("alpha has not been charged for alice's running job yet: %s", out)
	})
	var flood []string
	for range 4 {
		flood = append(flood, submit(alice, "sleep", "60"))
	}
	if _, err := bob("submit", "--account", "alpha", "--", "true"); err == nil || !strings.Contains(err.Error(), "bob is not a member of account alpha") {
		t.Fatalf("bob submitting to alpha: %v", err)
	}
	theirs := submit(bob, "sleep", "60")

	// While both wait, the queue says who goes first and why.
	testutil.WaitFor(t, 20*time.Second, func() error {
		out, err := a.skein(t, "job", flood[0])
		if err != nil {
			return err
		}
		if !strings.Contains(out, "behind job "+structs.ShortID(theirs)+" (bob in beta)") || !strings.Contains(out, "fair share 1.00 against 0.50") {
			return fmt.Errorf("alice's first queued job does not say it waits behind bob's:\n%s", out)
		}
		return nil
	})
	if err := os.WriteFile(release, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	d := a.waitJob(t, theirs, allocRunning)
	for _, id := range flood {
		if j := a.job(t, id); j.Job.State != structs.JobQueued {
			t.Fatalf("alice's job %s is %s while bob's started at %s: bob's should have run next", id, j.Job.State, d.Job.StartedAt)
		}
	}
	var share api.ShareInfo
	if err := json.Unmarshal([]byte(admin("share", "--json")), &share); err != nil {
		t.Fatal(err)
	}
	ranks := map[string]int{}
	for _, r := range share.Rows {
		if r.User != "" {
			ranks[r.User] = r.Rank
		}
	}
	if ranks["bob"] != 1 || ranks["alice"] != 2 {
		t.Fatalf("fair-share ranks %v, want bob 1 and alice 2", ranks)
	}
	if out := admin("prio"); !strings.Contains(out, "alice") || !strings.Contains(out, "alpha") {
		t.Fatalf("skein prio:\n%s", out)
	}
}
