package cli

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/structs"
)

// sacctAgent is a fake agent holding jobs at fixed times: one that ended
// before today, and today's.
func sacctAgent(t *testing.T) (*fakeAgent, time.Time) {
	t.Helper()
	y, m, d := time.Now().Date()
	midnight := time.Date(y, m, d, 0, 0, 0, 0, time.Local)
	at := func(h, min, s int) time.Time {
		return midnight.Add(time.Duration(h)*time.Hour + time.Duration(min)*time.Minute + time.Duration(s)*time.Second)
	}
	jobs := []structs.Job{
		{ID: "0ld0ld0ld0", Owner: "alice", State: structs.JobSucceeded, Spec: structs.JobSpec{Name: "yesterday", Nodes: 1},
			SubmittedAt: at(-3, 0, 0), StartedAt: at(-3, 0, 0), FinishedAt: at(-1, 0, 0)},
		{ID: "1111111111", Owner: "alice", State: structs.JobSucceeded, Spec: structs.JobSpec{Name: "overnight", Nodes: 2, GPUs: 4},
			SubmittedAt: at(-2, 0, 0), StartedAt: at(-2, 0, 0), FinishedAt: at(0, 0, 5)},
		{ID: "2222222222", Owner: "bob", State: structs.JobFailed, ExitCode: 3, Spec: structs.JobSpec{Name: "broken-training-run", Nodes: 1, GPUs: 1},
			SubmittedAt: at(0, 0, 1), StartedAt: at(0, 1, 0), FinishedAt: at(0, 2, 30),
			Usage: &structs.AllocUsage{MemoryPeakBytes: 64 << 20, CPUTime: structs.Duration(83*time.Second + 456*time.Millisecond)}},
		{ID: "3333333333", Owner: "bob", State: structs.JobTimedOut, ExitCode: 143, Spec: structs.JobSpec{Name: "slow", Nodes: 1, TimeLimit: structs.Duration(time.Hour)},
			SubmittedAt: at(0, 0, 2), StartedAt: at(0, 3, 0), FinishedAt: at(1, 3, 0)},
		{ID: "4444444444", Owner: "alice", State: structs.JobCancelled, Spec: structs.JobSpec{Name: "never", Nodes: 1},
			SubmittedAt: at(0, 0, 3), FinishedAt: at(0, 0, 4), Reason: "cancelled while queued"},
		{ID: "5555555555", Owner: "dave", State: structs.JobSucceeded, Spec: structs.JobSpec{Name: "long", Nodes: 1},
			SubmittedAt: at(-30, 0, 0), StartedAt: at(-30, 0, 0), FinishedAt: at(-26, 0, 0),
			Usage: &structs.AllocUsage{MemoryPeakBytes: 1000, CPUTime: structs.Duration(26*time.Hour + 5*time.Second)}},
	}
	f := newFakeAgent(t)
	f.reply("GET /v1/jobs", http.StatusOK, jobs)
	return f, midnight
}

func TestSacct_DefaultIsTodaysJobs(t *testing.T) {
	f, midnight := sacctAgent(t)
	r := runCLI(t, "--addr", f.URL, "sacct")
	if r.code != exitOK {
		t.Fatalf("sacct: %d %s", r.code, r.stderr)
	}
	ts := func(d time.Duration) string { return midnight.Add(d).Format("2006-01-02T15:04:05") }
	want := "" +
		"JobID           JobName      State ExitCode    Elapsed               Start                 End   NNodes AllocGPUS \n" +
		"------------ ---------- ---------- -------- ---------- ------------------- ------------------- -------- --------- \n" +
		"11111111      overnight  COMPLETED      0:0   02:00:05 " + ts(-2*time.Hour) + " " + ts(5*time.Second) + "        2         8 \n" +
		"22222222     broken-tr+     FAILED      3:0   00:01:30 " + ts(time.Minute) + " " + ts(150*time.Second) + "        1         1 \n" +
		"33333333           slow    TIMEOUT     0:15   01:00:00 " + ts(3*time.Minute) + " " + ts(time.Hour+3*time.Minute) + "        1         0 \n" +
		"44444444          never  CANCELLED      0:0   00:00:00             Unknown " + ts(4*time.Second) + "        1         0 \n"
	if r.stdout != want {
		t.Fatalf("sacct:\n%s\nwant:\n%s", r.stdout, want)
	}
	if q := f.requests()[0].Query; q.Get("all") != "true" {
		t.Errorf("jobs query %v, want every job kept", q)
	}
}

func TestSacct_Options(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"ids reach past today", []string{"-j", "0ld,1111"}, "0ld0ld0l|COMPLETED\n11111111|COMPLETED\n"},
		{"a window", []string{"-S", "00:01:00", "-E", "00:02:00"}, "22222222|FAILED\n33333333|TIMEOUT\n"},
		{"states", []string{"-s", "F,timeout", "-X"}, "22222222|FAILED\n33333333|TIMEOUT\n"},
		{"users", []string{"-u", "bob,carol", "--starttime", "now-7days"}, "22222222|FAILED\n33333333|TIMEOUT\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, _ := sacctAgent(t)
			r := runCLI(t, append([]string{"--addr", f.URL, "sacct", "-P", "-n", "-o", "jobid,state"}, tc.args...)...)
			if r.code != exitOK || r.stdout != tc.want {
				t.Fatalf("sacct %q: %d %q %q, want %q", tc.args, r.code, r.stdout, r.stderr, tc.want)
			}
		})
	}
	f, _ := sacctAgent(t)
	r := runCLI(t, "--addr", f.URL, "sacct", "-j", "2222", "--format", "JobName%25,User,Reason%6,Timelimit,Submit%10")
	want := "" +
		"                  JobName      User Reason  Timelimit     Submit \n" +
		"------------------------- --------- ------ ---------- ---------- \n" +
		"      broken-training-run       bob   None  UNLIMITED " + "" // the Submit cell follows
	if r.code != exitOK || !strings.HasPrefix(r.stdout, want) || !strings.HasSuffix(r.stdout, "+ \n") {
		t.Fatalf("sacct --format:\n%s\nwant it to start:\n%s", r.stdout, want)
	}
	r = runCLI(t, "--addr", f.URL, "sacct", "-P", "-j", "3333", "-o", "Elapsed,ExitCode,AllocCPUS,Partition")
	if r.code != exitOK || r.stdout != "Elapsed|ExitCode|AllocCPUS|Partition\n01:00:00|0:15|1|skein\n" {
		t.Fatalf("sacct -P: %d %q", r.code, r.stdout)
	}
	// What the jobs used, as their nodes' cgroups counted: nothing for a
	// job no node counted.
	r = runCLI(t, "--addr", f.URL, "sacct", "-P", "-n", "-j", "2222,3333,5555", "-o", "JobID,MaxRSS,TotalCPU")
	if want := "22222222|65536K|01:23.456\n33333333||\n55555555|1K|1-02:00:05\n"; r.code != exitOK || r.stdout != want {
		t.Fatalf("sacct -o MaxRSS,TotalCPU: %d %q, want %q", r.code, r.stdout, want)
	}
}

func TestSacct_JSONAndErrors(t *testing.T) {
	f, midnight := sacctAgent(t)
	r := runCLI(t, "--addr", f.URL, "sacct", "--json", "-s", "F")
	var jobs []sacctJob
	mustDecode(t, r.stdout, &jobs)
	if len(jobs) != 1 || jobs[0].JobID != "2222222222" || jobs[0].State != "FAILED" || jobs[0].ExitCode != 3 || jobs[0].Elapsed != 90 ||
		!jobs[0].Ended.Equal(midnight.Add(150*time.Second)) || jobs[0].GPUs != 1 || jobs[0].MaxRSS != 64<<20 || jobs[0].TotalCPU != 83.456 {
		t.Fatalf("sacct --json = %+v", jobs)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-S", "yesterday-ish"}, `Error: -S: time "yesterday-ish": want YYYY-MM-DD`},
		{[]string{"-E", "25:00"}, `Error: -E: time "25:00"`},
		{[]string{"-s", "BOOT_FAIL"}, `Error: -s: unknown state "BOOT_FAIL"`},
		{[]string{"-o", "JobID,MaxVMSize"}, `Error: --format: unknown column "MaxVMSize": want some of JobID JobName`},
		{[]string{"-o", "JobID%0"}, `Error: --format: column JobID: width "0": want 1 to 1024`},
		{[]string{"-u", "No Such!"}, "Error: --user: "},
	} {
		r := runCLI(t, append([]string{"--addr", f.URL, "sacct"}, tc.args...)...)
		if r.code != exitUsage || !strings.HasPrefix(r.stderr, tc.want) {
			t.Errorf("sacct %q: %d %q, want 2 %q", tc.args, r.code, r.stderr, tc.want)
		}
	}
}
