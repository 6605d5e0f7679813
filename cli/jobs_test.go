package cli

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

func TestJobs_TableShowsOneRowPerJob(t *testing.T) {
	now := time.Now()
	long := []string{"python", "train.py", "--data", "/datasets/" + strings.Repeat("x", 60)}
	jobs := []structs.Job{
		{ID: "11111111aaaa", Owner: "alice", Spec: structs.JobSpec{Name: "wait", Command: []string{"sleep", "1"}, Nodes: 1, GPUs: 8},
			State: structs.JobQueued, Reason: "no node has 8 free GPUs", SubmittedAt: now.Add(-3*time.Minute - time.Second)},
		{ID: "22222222bbbb", Spec: structs.JobSpec{Command: long, Nodes: 2, GPUs: 4},
			State: structs.JobRunning, SubmittedAt: now.Add(-2*time.Hour - time.Second)},
		{ID: "33333333cccc", Spec: structs.JobSpec{Name: "bad", Command: []string{"false"}, Nodes: 1},
			State: structs.JobFailed, Reason: "exit code 1", SubmittedAt: now.Add(-4*24*time.Hour - time.Second)},
	}
	f := newFakeAgent(t)
	f.reply("GET /v1/jobs", http.StatusOK, jobs)

	r := runCLI(t, "--addr", f.URL, "jobs")
	if r.code != exitOK {
		t.Fatalf("exit code %d: %s", r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if len(lines) != 4 {
		t.Fatalf("got %d lines, want header and 3 rows:\n%s", len(lines), r.stdout)
	}
	want := [][]string{
		{"ID", "NAME", "OWNER", "STATE", "GPUS", "AGE", "INFO"},
		{"11111111", "wait", "alice", "queued", "8", "3m", "no node has 8 free GPUs"},
		{"22222222", "-", "-", "running", "2x4", "2h", "python train.py --data /datasets/xxxxxxxxxxxxxx..."},
		{"33333333", "bad", "-", "failed", "0", "4d", "exit code 1"},
	}
	for i, w := range want {
		if got := strings.Fields(lines[i]); strings.Join(got, "|") != strings.Join(strings.Fields(strings.Join(w, " ")), "|") {
			t.Errorf("line %d = %q, want columns %q", i, lines[i], w)
		}
	}
	if info := lines[2][strings.Index(lines[0], "INFO"):]; len(info) != infoWidth {
		t.Errorf("INFO %q is %d characters, want it cut to %d", info, len(info), infoWidth)
	}
	if q := f.requests()[0].Query; q.Has("all") || q.Has("mine") || q.Has("owner") {
		t.Errorf("query = %v, want no all, mine or owner without their flags", q)
	}
}

func TestJobs_MineAndOwnerAreSentAndKeptInTheNextPageCommand(t *testing.T) {
	for _, tc := range []struct {
		flags []string
		query string
		more  string
	}{
		{[]string{"--mine"}, "mine=true", "More jobs follow: skein jobs --mine --after c1\n"},
		{[]string{"--owner", "bob", "--limit", "1"}, "limit=1&owner=bob", "More jobs follow: skein jobs --owner bob --limit 1 --after c1\n"},
	} {
		t.Run(strings.Join(tc.flags, " "), func(t *testing.T) {
			f := newFakeAgent(t)
			f.handle("GET /v1/jobs", func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set(api.NextCursorHeader, "c1")
				writeJSON(w, http.StatusOK, []structs.Job{{ID: testJobID, Owner: "bob", Spec: structs.JobSpec{Command: []string{"true"}, Nodes: 1}}})
			})
			r := runCLI(t, append([]string{"--addr", f.URL, "jobs"}, tc.flags...)...)
			if r.code != exitOK || !strings.HasSuffix(r.stderr, tc.more) || strings.Contains(r.stdout, "More") {
				t.Fatalf("exit %d, stdout %q, stderr %q; want stderr to end %q", r.code, r.stdout, r.stderr, tc.more)
			}
			if q := f.requests()[0].Query.Encode(); q != tc.query {
				t.Errorf("query %q, want %q", q, tc.query)
			}
		})
	}
}

func TestJobs_MineWithOwnerOrABadOwnerIsAUsageError(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		stderr string
	}{
		{[]string{"--mine", "--owner", "bob"}, "--mine and --owner: give one"},
		{[]string{"--owner", ""}, "--owner: empty: give a user name"},
		{[]string{"--owner", "b/b"}, `--owner: "b/b": use letters`},
	} {
		f := newFakeAgent(t)
		r := runCLI(t, append([]string{"--addr", f.URL, "jobs"}, tc.args...)...)
		if r.code != exitUsage || !strings.Contains(r.stderr, tc.stderr) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, r.code, r.stderr, tc.stderr)
		}
		if len(f.requests()) != 0 {
			t.Errorf("%v: a request was sent", tc.args)
		}
	}
}

func TestJobs_AllFlagAsksForEveryJobAndSaysHowFarBackItReaches(t *testing.T) {
	now := time.Now()
	jobs := []structs.Job{
		{ID: "11111111aaaa", Spec: structs.JobSpec{Command: []string{"true"}, Nodes: 1}, State: structs.JobSucceeded,
			SubmittedAt: now.Add(-5 * time.Hour), FinishedAt: now.Add(-5*time.Hour + time.Minute)},
		{ID: "22222222bbbb", Spec: structs.JobSpec{Command: []string{"false"}, Nodes: 1}, State: structs.JobFailed,
			SubmittedAt: now.Add(-2 * time.Hour), FinishedAt: now.Add(-2 * time.Hour)},
		{ID: "33333333cccc", Spec: structs.JobSpec{Command: []string{"sleep", "9"}, Nodes: 1}, State: structs.JobRunning,
			SubmittedAt: now.Add(-time.Minute)},
	}
	for _, tc := range []struct {
		name string
		jobs []structs.Job
		want string
	}{
		{"finished jobs", jobs, "Finished jobs are kept for 24h (--job-retention); the oldest here finished 4h ago.\n"},
		{"none finished", jobs[2:], "Finished jobs are kept for 24h (--job-retention).\n"},
		{"no jobs", []structs.Job{}, "Finished jobs are kept for 24h (--job-retention).\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeAgent(t)
			f.reply("GET /v1/jobs", http.StatusOK, tc.jobs)
			f.reply("GET /v1/status", http.StatusOK, api.Status{JobRetention: structs.Duration(24 * time.Hour)})
			r := runCLI(t, "--addr", f.URL, "jobs", "--all")
			if r.code != exitOK {
				t.Fatalf("exit code %d: %s", r.code, r.stderr)
			}
			if !strings.HasSuffix(r.stderr, tc.want) || strings.Contains(r.stdout, "kept for") {
				t.Errorf("stdout %q, stderr %q; want stderr to end %q", r.stdout, r.stderr, tc.want)
			}
			if q := f.requests()[0].Query; q.Get("all") != "true" {
				t.Errorf("query = %v, want all=true", q)
			}
		})
	}
}

func TestJobs_EmptyList(t *testing.T) {
	cases := []struct {
		name  string
		args  []string
		reply any
		want  string
	}{
		{"human", nil, []structs.Job{}, "No jobs.\n"},
		{"json", []string{"--json"}, []structs.Job{}, "[]\n"},
		{"json from null", []string{"--json"}, nil, "[]\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeAgent(t)
			f.reply("GET /v1/jobs", http.StatusOK, tc.reply)
			r := runCLI(t, append([]string{"--addr", f.URL, "jobs"}, tc.args...)...)
			if r.code != exitOK || r.stdout != tc.want {
				t.Fatalf("got code %d, stdout %q; want 0, %q", r.code, r.stdout, tc.want)
			}
		})
	}
}

func TestJobs_JSONParsesBack(t *testing.T) {
	jobs := []structs.Job{{ID: testJobID, Spec: structs.JobSpec{Command: []string{"true"}, Nodes: 1}, State: structs.JobSucceeded}}
	f := newFakeAgent(t)
	f.reply("GET /v1/jobs", http.StatusOK, jobs)
	r := runCLI(t, "--addr", f.URL, "jobs", "--json")
	if r.code != exitOK {
		t.Fatalf("exit code %d: %s", r.code, r.stderr)
	}
	var got []structs.Job
	mustDecode(t, r.stdout, &got)
	if len(got) != 1 || got[0].ID != testJobID || got[0].State != structs.JobSucceeded {
		t.Errorf("jobs = %+v, want the agent's list", got)
	}
}

func TestJobs_LongListSaysHowToSeeMore(t *testing.T) {
	t.Parallel()
	startRealAgent(t)
	r := runCLI(t, "submit", "--array", "0-4", "--", "true")
	if r.code != exitOK {
		t.Fatalf("submit: %d %s", r.code, r.stderr)
	}
	seen := map[string]int{}
	args := []string{"jobs", "--limit", "2"}
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatal("paging does not end")
		}
		r := runCLI(t, args...)
		if r.code != exitOK {
			t.Fatalf("skein %v: %d %s", args, r.code, r.stderr)
		}
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		said := strings.Split(strings.TrimSpace(r.stderr), "\n")
		next, more := strings.CutPrefix(said[len(said)-1], "More jobs follow: skein jobs --limit 2 --after ")
		if !more {
			next = ""
		}
		for _, row := range lines[1:] {
			seen[strings.Fields(row)[0]]++
		}
		if next == "" {
			break
		}
		args = []string{"jobs", "--limit", "2", "--after", next}
	}
	if len(seen) != 5 {
		t.Fatalf("listed %v, want the 5 tasks", seen)
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("task %s listed %d times", id, n)
		}
	}
	r = runCLI(t, "jobs", "--limit", "0")
	if r.code != exitUsage || !strings.Contains(r.stderr, "--limit 0: want 1 to") {
		t.Fatalf("--limit 0: exit %d, stderr %q", r.code, r.stderr)
	}
	// The tasks' supervisors write into the agent's data dir until the
	// tasks end: the test's cleanup removes it only then.
	testutil.WaitFor(t, 15*time.Second, func() error {
		r := runCLI(t, "jobs", "--json")
		var jobs []structs.Job
		if err := json.Unmarshal([]byte(r.stdout), &jobs); err != nil {
			return fmt.Errorf("skein jobs --json: %v: %s", err, r.stderr)
		}
		for _, j := range jobs {
			if !j.State.Terminal() {
				return fmt.Errorf("task %s is %s", j.ID, j.State)
			}
		}
		return nil
	})
}
