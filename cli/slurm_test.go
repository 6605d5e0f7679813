package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/structs"
)

func TestSlurmDuration_FormatsAsSqueueAndSacct(t *testing.T) {
	for _, tc := range []struct {
		d             time.Duration
		squeue, sacct string
	}{
		{0, "0:00", "00:00:00"},
		{5 * time.Second, "0:05", "00:00:05"},
		{12*time.Minute + 34*time.Second, "12:34", "00:12:34"},
		{time.Hour + 2*time.Minute + 3*time.Second, "1:02:03", "01:02:03"},
		{23*time.Hour + 59*time.Minute + 59*time.Second, "23:59:59", "23:59:59"},
		{2*24*time.Hour + 3*time.Hour + 4*time.Minute + 5*time.Second, "2-03:04:05", "2-03:04:05"},
		{-time.Second, "0:00", "00:00:00"},
	} {
		if got := slurmDuration(tc.d); got != tc.squeue {
			t.Errorf("slurmDuration(%v) = %q, want %q", tc.d, got, tc.squeue)
		}
		if got := slurmElapsed(tc.d); got != tc.sacct {
			t.Errorf("slurmElapsed(%v) = %q, want %q", tc.d, got, tc.sacct)
		}
	}
}

func TestStateOf_MapsEverySkeinStateToSlurms(t *testing.T) {
	for _, tc := range []struct {
		job  structs.Job
		want slurmState
	}{
		{structs.Job{State: structs.JobQueued}, statePending},
		{structs.Job{State: structs.JobRunning}, stateRunning},
		{structs.Job{State: structs.JobRunning, StopRequested: true}, stateCompleting},
		{structs.Job{State: structs.JobRunning, PreemptedBy: "x"}, statePreempted},
		{structs.Job{State: structs.JobSucceeded}, stateCompleted},
		{structs.Job{State: structs.JobFailed}, stateFailed},
		{structs.Job{State: structs.JobCancelled}, stateCancelled},
		{structs.Job{State: structs.JobTimedOut}, stateTimeout},
	} {
		if got := stateOf(&tc.job); got != tc.want {
			t.Errorf("%s (stop %v, preempted by %q) = %v, want %v", tc.job.State, tc.job.StopRequested, tc.job.PreemptedBy, got, tc.want)
		}
	}
	got, err := parseSlurmStates("pd, R,completing,TIMEOUT")
	if err != nil || len(got) != 4 || got[0] != statePending || got[1] != stateRunning || got[2] != stateCompleting || got[3] != stateTimeout {
		t.Fatalf("parseSlurmStates = %v, %v", got, err)
	}
	if all, err := parseSlurmStates("all"); err != nil || len(all) != len(slurmStates) {
		t.Fatalf("all = %v, %v", all, err)
	}
	if _, err := parseSlurmStates("R,SUSPENDED"); err == nil || !strings.Contains(err.Error(), `unknown state "SUSPENDED"`) || !strings.Contains(err.Error(), "PENDING (PD)") {
		t.Fatalf("an unknown state: %v", err)
	}
}

func TestIDMatches_PrefixesArraysAndTasks(t *testing.T) {
	plain := structs.Job{ID: "abcdef0123456789"}
	task1 := structs.Job{ID: "d7e40d7d99-1", ArrayID: "d7e40d7d99", ArrayIndex: 1}
	task10 := structs.Job{ID: "d7e40d7d99-10", ArrayID: "d7e40d7d99", ArrayIndex: 10}
	num7 := structs.Job{ID: "1234abcd", Number: 7}
	old := structs.Job{ID: "1234abcd"}
	arr12 := structs.Job{ID: "5678-3", ArrayID: "5678", ArrayIndex: 3, Number: 15, ArrayNumber: 12}
	for _, tc := range []struct {
		job  *structs.Job
		id   string
		want bool
	}{
		{&plain, "abcdef01", true},
		{&plain, "abcdef0123456789", true},
		{&plain, "bcdef", false},
		{&plain, "", false},
		{&task1, "d7e4", true}, // the array: every task
		{&task10, "d7e4", true},
		{&task1, "d7e40d7d-1", true},
		{&task10, "d7e40d7d-1", false},
		{&task10, "d7e40d7d-10", true},
		{&plain, "abcdef01-1", false},
		{&task1, "-1", false},
		{&num7, "7", true},
		{&num7, "7_0", false},
		{&num7, "70", false},
		{&num7, "1234", true}, // no job has number 1234: a prefix of an ID
		{&old, "1234", true},
		{&old, "7", false}, // job 7 has it: a number
		{&arr12, "12", true},
		{&arr12, "12_3", true},
		{&arr12, "12_4", false},
		{&arr12, "15", true}, // the task's own number
	} {
		if got := idMatcher([]structs.Job{plain, task1, task10, num7, old, arr12}, []string{tc.id})(tc.job); got != tc.want {
			t.Errorf("idMatches(%s, %q) = %v, want %v", tc.job.ID, tc.id, got, tc.want)
		}
	}
}

func TestParseFormat_WidthsAlignmentAndErrors(t *testing.T) {
	fields := map[byte]formatField[string]{
		'a': {"A", func(s string) string { return s }},
		'b': {"BEE", func(string) string { return "b" }},
	}
	items, err := parseFormat("%.5a|%3a|%b %% end", fields)
	if err != nil {
		t.Fatal(err)
	}
	if got := renderFormat(items, "", true); got != "    A|A  |BEE % end" {
		t.Errorf("header = %q", got)
	}
	if got := renderFormat(items, "abcdefg", false); got != "abcde|abc|b % end" {
		t.Errorf("row = %q", got)
	}
	for _, bad := range []string{"%z", "%.5", "%2000a"} {
		if _, err := parseFormat(bad, fields); err == nil {
			t.Errorf("format %q parsed", bad)
		}
	}
	if _, err := parseFormat("%z", fields); !strings.Contains(err.Error(), "unsupported field %z (supported: %a %b)") {
		t.Errorf("unsupported field: %v", err)
	}
}
