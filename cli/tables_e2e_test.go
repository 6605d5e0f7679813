package cli

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/agent"
	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

// eightGPUs gives the real agent 8 simulated GPUs.
func eightGPUs(c *agent.Config) { c.GPUs = "sim:8xH100-80" }

// submitID submits a job with skein submit args and returns its ID.
func submitID(t *testing.T, args ...string) string {
	t.Helper()
	r := runCLI(t, append([]string{"submit"}, args...)...)
	if r.code != exitOK {
		t.Fatalf("submit %v: %d %s", args, r.code, r.stderr)
	}
	return strings.TrimSpace(r.stdout)
}

// jobsJSON is what `skein jobs --json` lists now.
func jobsJSON(t *testing.T) ([]structs.Job, error) {
	t.Helper()
	r := runCLI(t, "jobs", "--json")
	var jobs []structs.Job
	if err := json.Unmarshal([]byte(r.stdout), &jobs); err != nil {
		return nil, fmt.Errorf("skein jobs --json: %v: %s", err, r.stderr)
	}
	return jobs, nil
}

// cancelAll cancels ids and waits until every job has ended: their
// supervisors write into the agent's data dir until then, and the test's
// cleanup removes it.
func cancelAll(t *testing.T, ids ...string) {
	t.Helper()
	for _, id := range ids {
		if r := runCLI(t, "cancel", id); r.code != exitOK {
			t.Errorf("cancel %s: %d %s", id, r.code, r.stderr)
		}
	}
	testutil.WaitFor(t, 20*time.Second, func() error {
		jobs, err := jobsJSON(t)
		if err != nil {
			return err
		}
		for _, j := range jobs {
			if !j.State.Terminal() {
				return fmt.Errorf("job %s is %s", j.ID, j.State)
			}
		}
		return nil
	})
}

// arrayJSON is `skein job --json ARRAY` decoded.
func arrayJSON(t *testing.T, id string) (arrayDetail, error) {
	t.Helper()
	r := runCLI(t, "job", "--json", id)
	if r.code != exitOK {
		return arrayDetail{}, fmt.Errorf("skein job --json %s: %d %s", id, r.code, r.stderr)
	}
	var a arrayDetail
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return arrayDetail{}, fmt.Errorf("skein job --json %s: %v:\n%s", id, err, r.stdout)
	}
	return a, nil
}

func TestJob_ArrayByAnyPrefixSummarisesItsTasksByState(t *testing.T) {
	t.Parallel()
	startRealAgent(t) // 2 GPUs: tasks 2 and 3 hold them, 0 and 1 have ended
	arr := submitID(t, "--array", "0-3", "--gpus", "1", "--", "sh", "-c",
		`echo task $SKEIN_ARRAY_INDEX; case $SKEIN_ARRAY_INDEX in 0) exit 0;; 1) exit 3;; *) exec sleep 600;; esac`)
	defer cancelAll(t, arr)
	var a arrayDetail
	testutil.WaitFor(t, 20*time.Second, func() error {
		var err error
		if a, err = arrayJSON(t, arr); err != nil {
			return err
		}
		if want := map[structs.JobState]int{structs.JobSucceeded: 1, structs.JobFailed: 1, structs.JobRunning: 2}; fmt.Sprint(a.States) != fmt.Sprint(want) {
			return fmt.Errorf("states %v, want %v", a.States, want)
		}
		return nil
	})
	if a.ArrayID != arr || len(a.Tasks) != 4 {
		t.Fatalf("array %s with %d tasks, want %s with 4", a.ArrayID, len(a.Tasks), arr)
	}
	for i, task := range a.Tasks {
		if task.ArrayIndex != i || task.ID != structs.ArrayTaskID(arr, i) {
			t.Errorf("task %d is %s (index %d), want them in index order", i, task.ID, task.ArrayIndex)
		}
	}
	for _, i := range []int{2, 3} {
		if got := a.Nodes[structs.ArrayTaskID(arr, i)]; len(got) != 1 || got[0] != "e2e" {
			t.Errorf("nodes of running task %d = %v, want [e2e]", i, got)
		}
	}

	// The whole ID, the displayed prefix and a shorter one all name the array.
	for _, id := range []string{arr, structs.ShortID(arr), arr[:5]} {
		r := runCLI(t, "job", id)
		if r.code != exitOK {
			t.Fatalf("skein job %s: %d %s", id, r.code, r.stderr)
		}
		for _, want := range []string{
			`Array:\s+` + arr + `\n`,
			`Tasks:\s+4, indexes 0-3\n`,
			`States:\s+2 running, 1 succeeded, 1 failed\n`,
			`INDEX\s+STATE\s+NODE\s+EXIT\s+REASON\n`,
			`\n0\s+succeeded\s+-\s+0\s+-\n`,
			`\n1\s+failed\s+-\s+3\s+exited with code 3\n`,
			`\n2\s+running\s+e2e\s+-\s+-\n`,
			`\n3\s+running\s+e2e\s+-\s+-\n`,
		} {
			if !regexp.MustCompile(want).MatchString(r.stdout) {
				t.Errorf("skein job %s does not match %s:\n%s", id, want, r.stdout)
			}
		}
	}

	// A task by the displayed prefix, or a shorter one, and its index is
	// that task alone, to job, logs and cancel.
	for _, short := range []string{structs.ShortID(arr), arr[:5]} {
		r := runCLI(t, "job", short+"-1")
		if r.code != exitOK || !strings.Contains(r.stdout, "ID:        "+arr+"-1\n") || !strings.Contains(r.stdout, "Exit code: 3") {
			t.Errorf("skein job %s-1: %d\n%s%s", short, r.code, r.stdout, r.stderr)
		}
		if r := runCLI(t, "logs", short+"-1"); r.code != exitOK || r.stdout != "task 1\n" {
			t.Errorf("skein logs %s-1: %d stdout %q stderr %q, want task 1's output", short, r.code, r.stdout, r.stderr)
		}
	}
	r := runCLI(t, "cancel", arr[:5]+"-2")
	if want := "stopping " + structs.ShortID(arr) + "-2\n"; r.code != exitOK || r.stdout != want {
		t.Errorf("skein cancel %s-2: %d %q %q, want %q", arr[:5], r.code, r.stdout, r.stderr, want)
	}
	testutil.WaitFor(t, 20*time.Second, func() error {
		a, err := arrayJSON(t, arr)
		if err != nil {
			return err
		}
		if got := [2]structs.JobState{a.Tasks[2].State, a.Tasks[3].State}; got != [2]structs.JobState{structs.JobCancelled, structs.JobRunning} {
			return fmt.Errorf("tasks 2 and 3 are %v, want task 2 alone cancelled", got)
		}
		return nil
	})
	// --show-secrets is for one job: refused for an array, a usage error.
	r = runCLI(t, "job", "--show-secrets", arr)
	if r.code != exitUsage || !strings.Contains(r.stderr, "name a task of array "+structs.ShortID(arr)+" as "+structs.ShortID(arr)+"-INDEX") {
		t.Errorf("job --show-secrets ARRAY: %d %q, want exit 2 naming ARRAY-INDEX", r.code, r.stderr)
	}
}

func TestJob_ArrayOfOneTaskIsStillShownAsAnArray(t *testing.T) {
	t.Parallel()
	startRealAgent(t)
	arr := submitID(t, "--array", "5-5", "--", "true")
	testutil.WaitFor(t, 20*time.Second, func() error {
		a, err := arrayJSON(t, arr[:6])
		if err != nil {
			return err
		}
		if len(a.Tasks) != 1 || a.Tasks[0].ArrayIndex != 5 || a.States[structs.JobSucceeded] != 1 {
			return fmt.Errorf("array %+v, want task 5 succeeded", a)
		}
		return nil
	})
	if r := runCLI(t, "job", arr[:6]); !strings.Contains(r.stdout, "Tasks:     1, indexes 5\n") {
		t.Errorf("skein job %s:\n%s%s", arr[:6], r.stdout, r.stderr)
	}
	// The task by its own ID is the task.
	if r := runCLI(t, "job", arr+"-5"); !strings.Contains(r.stdout, "ID:        "+arr+"-5\n") {
		t.Errorf("skein job %s-5:\n%s%s", arr, r.stdout, r.stderr)
	}
}

func TestJob_EightGPUJobShowsIndexesInTheTableAndUUIDsWithWide(t *testing.T) {
	t.Parallel()
	startRealAgent(t, eightGPUs)
	id := submitID(t, "--gpus", "8", "--", "sleep", "600")
	defer cancelAll(t, id)
	d := waitJobState(t, id, structs.JobRunning)
	uuids := d.Allocations[0].GPUs
	if len(uuids) != 8 {
		t.Fatalf("GPUs %v, want 8", uuids)
	}

	r := runCLI(t, "job", id)
	row := allocRow(t, r.stdout)
	if f := strings.Fields(row); len(f) < 9 || f[len(f)-2] != "0-7" {
		t.Errorf("allocation row %q, want GPUS 0-7", row)
	}
	if strings.Contains(row, "GPU-") || len(row) > 120 {
		t.Errorf("allocation row is %d characters, with UUIDs: %q", len(row), row)
	}

	r = runCLI(t, "job", "--wide", id)
	if row := allocRow(t, r.stdout); !strings.Contains(row, " "+strings.Join(uuids, ",")+" ") {
		t.Errorf("--wide allocation row %q lacks the UUIDs %v", row, uuids)
	}
	r = runCLI(t, "job", "--json", id)
	var got api.JobDetail
	mustDecode(t, r.stdout, &got)
	if strings.Join(got.Allocations[0].GPUs, ",") != strings.Join(uuids, ",") {
		t.Errorf("--json GPUs %v, want %v", got.Allocations[0].GPUs, uuids)
	}
}

// allocRow is the one allocation row of `skein job` output.
func allocRow(t *testing.T, out string) string {
	t.Helper()
	_, table, ok := strings.Cut(out, "\nAllocations:\n")
	lines := strings.Split(strings.TrimSpace(table), "\n")
	if !ok || len(lines) != 2 {
		t.Fatalf("no single allocation row in:\n%s", out)
	}
	return lines[1]
}

func TestJobs_WideShowsNodesUUIDsAndWholeReasons_TheSummaryGoesToStderr(t *testing.T) {
	t.Parallel()
	startRealAgent(t, eightGPUs)
	running := submitID(t, "--gpus", "8", "--name", "big", "--", "sleep", "600")
	waitJobState(t, running, structs.JobRunning)
	first := submitID(t, "--gpus", "8", "--name", "next", "--", "true")
	second := submitID(t, "--gpus", "4", "--name", "then", "--", "true")
	defer cancelAll(t, running, first, second)
	var jobs []structs.Job
	testutil.WaitFor(t, 20*time.Second, func() error {
		var err error
		if jobs, err = jobsJSON(t); err != nil {
			return err
		}
		if len(jobs) != 3 {
			return fmt.Errorf("%d jobs, want 3", len(jobs))
		}
		for _, j := range jobs[1:] {
			if !strings.Contains(j.Reason, "not enough free GPUs") {
				return fmt.Errorf("job %s waits %q: not yet for the GPUs", j.ID, j.Reason)
			}
		}
		return nil
	})
	if len(jobs[1].Reason) <= infoWidth {
		t.Fatalf("the first in line waits %q: not longer than INFO's %d characters", jobs[1].Reason, infoWidth)
	}
	d := waitJobState(t, running, structs.JobRunning)

	// The table alone on stdout: a header and a row per job, so that
	// `skein jobs | grep` and `| wc -l` see only jobs.
	r := runCLI(t, "jobs")
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if r.code != exitOK || len(lines) != 4 {
		t.Fatalf("skein jobs: %d, %d lines, want a header and 3 rows:\n%s", r.code, len(lines), r.stdout)
	}
	if r.stderr != "3 jobs: 2 queued, 1 running\n" {
		t.Errorf("stderr %q, want the summary line", r.stderr)
	}
	info := strings.Index(lines[0], "INFO")
	for i, j := range jobs[1:] {
		want := j.Reason
		if len(want) > infoWidth {
			want = want[:infoWidth-3] + "..."
		}
		if got := lines[i+2][info:]; got != want {
			t.Errorf("INFO of %s = %q, want %q: its reason cut to %d characters", j.ID, got, want, infoWidth)
		}
	}

	r = runCLI(t, "jobs", "--wide")
	lines = strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if r.code != exitOK || len(lines) != 4 || r.stderr != "3 jobs: 2 queued, 1 running\n" {
		t.Fatalf("skein jobs --wide: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if h := strings.Join(regexp.MustCompile(`\s{2,}`).Split(lines[0], -1), "|"); h != "ID|NAME|OWNER|STATE|GPUS|AGE|NODES|GPU UUIDS|INFO" {
		t.Errorf("header %q", h)
	}
	if f := strings.Fields(lines[1]); len(f) < 9 || f[0] != structs.ShortID(running) || f[6] != "e2e" || f[7] != strings.Join(d.Allocations[0].GPUs, ",") {
		t.Errorf("running row %q, want node e2e and its 8 UUIDs %v", lines[1], d.Allocations[0].GPUs)
	}
	info = strings.Index(lines[0], "INFO")
	for i, j := range jobs[1:] {
		if got := lines[i+2][info:]; got != j.Reason {
			t.Errorf("--wide INFO of %s = %q, want the whole reason %q", j.ID, got, j.Reason)
		}
		if f := strings.Fields(lines[i+2]); f[6] != "-" || f[7] != "-" {
			t.Errorf("queued row %q, want no node and no GPUs", lines[i+2])
		}
	}
}
