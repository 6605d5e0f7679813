package cli

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/structs"
)

var updateGolden = flag.Bool("update-golden", false, "rewrite testdata/slurm's golden files from what the commands print")

// goldenNow is the fixed time the golden files are printed at.
var goldenNow = time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)

// goldenJobs are slurmJobs with their numbers, an array of five tasks
// (one running, four pending, at most two at once), a held job, one
// waiting for a dependency and a job without a name.
func goldenJobs(now time.Time) []structs.Job {
	jobs := slurmJobs(now)
	for i := range jobs {
		jobs[i].Number = uint64(i + 1)
	}
	arr := &structs.ArraySpec{Start: 0, End: 4, MaxRunning: 2}
	for i := range 5 {
		j := structs.Job{ID: "abcabcab7777-" + string(rune('0'+i)), ArrayID: "abcabcab7777", ArrayIndex: i,
			Number: uint64(7 + i), ArrayNumber: 7, Owner: "carol", State: structs.JobQueued,
			Reason: "array abcabcab runs its limit of 2 tasks", SubmittedAt: now.Add(-30 * time.Minute),
			Spec: structs.JobSpec{Name: "sweep", Nodes: 1, GPUs: 1, Array: arr, Partition: "gpu"}}
		if i == 0 {
			j.State, j.Reason, j.StartedAt = structs.JobRunning, "", now.Add(-20*time.Minute)
		}
		jobs = append(jobs, j)
	}
	return append(jobs,
		structs.Job{ID: "12121212aaaa", Number: 12, Owner: "alice", State: structs.JobQueued, Held: true,
			Reason: "held: scontrol release lets it run", SubmittedAt: now.Add(-5 * time.Minute),
			Spec: structs.JobSpec{Name: "later", Nodes: 1, TimeLimit: structs.Duration(30 * time.Minute)}},
		structs.Job{ID: "13131313bbbb", Number: 13, Owner: "bob", State: structs.JobQueued,
			Reason: "waiting for job 12121212 (queued)", SubmittedAt: now.Add(-4 * time.Minute),
			Spec: structs.JobSpec{Name: "after", Nodes: 1, Priority: 5}},
		structs.Job{ID: "14141414cccc", Number: 14, Owner: "bob", State: structs.JobQueued,
			Reason: "1 node: reserved for higher-priority job aaaaaaaa from ~13:00 UTC", SubmittedAt: now.Add(-3 * time.Minute),
			Spec: structs.JobSpec{Command: []string{"/usr/bin/python3", "eval.py"}, Nodes: 1, GPUs: 2}},
	)
}

// TestSlurmCommands_GoldenOutput prints squeue, sinfo, sacct, scontrol
// show partition and skein partition list, with
// their common options, over one fixed cluster at one fixed time, and
// compares each with its file in testdata/slurm (rewritten with
// -update-golden).
func TestSlurmCommands_GoldenOutput(t *testing.T) {
	was, zone := timeNow, slurmZone
	timeNow, slurmZone = func() time.Time { return goldenNow }, time.UTC
	t.Cleanup(func() { timeNow, slurmZone = was, zone })
	cases := []struct {
		name string
		args []string
	}{
		{"squeue", []string{"squeue"}},
		{"squeue_long", []string{"squeue", "-l"}},
		{"squeue_array", []string{"squeue", "-r"}},
		{"squeue_Format", []string{"squeue", "-O", "jobid,name:12,state,reason:20,partition"}},
		{"squeue_sort_partition", []string{"squeue", "-S", "P,-Q", "-p", "gpu,skein"}},
		{"squeue_name", []string{"squeue", "-n", "sweep,later", "-h"}},
		{"squeue_start", []string{"squeue", "--start"}},
		{"squeue_jobs", []string{"squeue", "-j", "7,12", "-o", "%i %t %r"}},
		{"sinfo", []string{"sinfo"}},
		{"sinfo_summarize", []string{"sinfo", "-s"}},
		{"sinfo_long", []string{"sinfo", "-l"}},
		{"sinfo_reasons", []string{"sinfo", "-R"}},
		{"sinfo_states", []string{"sinfo", "-t", "idle,alloc", "-N"}},
		{"sinfo_exact", []string{"sinfo", "-e", "-p", "skein"}},
		{"scontrol_partitions", []string{"scontrol", "show", "partition"}},
		{"partition_list", []string{"partition", "list"}},
		{"sacct", []string{"sacct", "-a", "-S", "now-1days"}},
		{"sacct_brief", []string{"sacct", "-b", "-j", "5,6"}},
		{"sacct_long", []string{"sacct", "-l", "-j", "3", "-P"}},
		{"sacct_name", []string{"sacct", "--name", "oom,cpu", "-j", "3,6", "-o", "JobID,JobName,NodeList,MaxRSS,AllocTRES%40"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := slurmAgentOf(t, goldenNow, goldenJobs)
			r := runCLI(t, append([]string{"--addr", f.URL}, tc.args...)...)
			got := "$ " + strings.Join(tc.args, " ") + "\n" + r.stdout + r.stderr
			if r.code != exitOK {
				t.Fatalf("exit %d:\n%s", r.code, got)
			}
			file := filepath.Join("testdata", "slurm", tc.name+".golden")
			if *updateGolden {
				if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("got\n%s\nwant\n%s", got, want)
			}
		})
	}
}
