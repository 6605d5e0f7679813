package cli

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/structs"
)

// slurmJobs is a queue of every kind squeue tells apart; the running GPU
// job is on gpu01 and gpu02, the running CPU job on cpu1.
func slurmJobs(now time.Time) []structs.Job {
	return []structs.Job{
		{ID: "aaaaaaaa1111", Owner: "alice", State: structs.JobQueued, Reason: "not enough free GPUs",
			Spec: structs.JobSpec{Name: "wait", Nodes: 1, GPUs: 8, GPUModel: "h100", Partition: "gpu"}, SubmittedAt: now.Add(-time.Minute)},
		{ID: "bbbbbbbb2222", Owner: "bob", State: structs.JobRunning, StartedAt: now.Add(-time.Hour - 2*time.Minute - 3*time.Second),
			Spec: structs.JobSpec{Name: "a-very-long-name", Nodes: 2, GPUs: 4, CPUs: 8, TimeLimit: structs.Duration(2 * time.Hour)}, SubmittedAt: now.Add(-2 * time.Hour)},
		{ID: "cccccccc3333", Owner: "alice", State: structs.JobRunning, StartedAt: now.Add(-5 * time.Second),
			Spec: structs.JobSpec{Name: "cpu", Nodes: 1}, SubmittedAt: now.Add(-time.Minute)},
		{ID: "dddddddd4444", Owner: "alice", State: structs.JobRunning, StopRequested: true, StartedAt: now.Add(-3 * 24 * time.Hour),
			Spec: structs.JobSpec{Name: "stopping", Nodes: 1, GPUs: 1}, SubmittedAt: now.Add(-4 * 24 * time.Hour)},
		{ID: "eeeeeeee5555", Owner: "bob", State: structs.JobSucceeded, StartedAt: now.Add(-10 * time.Minute), FinishedAt: now.Add(-9 * time.Minute),
			Spec: structs.JobSpec{Name: "done", Nodes: 1}, SubmittedAt: now.Add(-10 * time.Minute)},
		{ID: "ffffffff6666", Owner: "bob", State: structs.JobFailed, ExitCode: 137, StartedAt: now.Add(-10 * time.Minute), FinishedAt: now.Add(-8 * time.Minute),
			Spec: structs.JobSpec{Name: "oom", Nodes: 1}, SubmittedAt: now.Add(-11 * time.Minute), Reason: "killed by signal SIGKILL"},
	}
}

// slurmAgent is a fake agent holding slurmJobs and the nodes they run on.
func slurmAgent(t *testing.T) *fakeAgent {
	t.Helper()
	return slurmAgentOf(t, time.Now(), slurmJobs)
}

// slurmAgentOf is a fake agent holding jobs(now) and the nodes
// slurmJobs run on.
func slurmAgentOf(t *testing.T, now time.Time, jobs func(time.Time) []structs.Job) *fakeAgent {
	t.Helper()
	f := newFakeAgent(t)
	f.reply("GET /v1/jobs", http.StatusOK, jobs(now))
	f.reply("GET /v1/nodes", http.StatusOK, []api.NodeInfo{
		{Node: structs.Node{Name: "gpu01", Status: structs.NodeReady, CPUs: 64, MemoryMiB: 512 * 1024, Partitions: []string{"gpu"},
			GPUs: []structs.GPU{{UUID: "g1", Model: "NVIDIA H100 80GB HBM3"}, {UUID: "g2", Model: "NVIDIA H100 80GB HBM3"}, {UUID: "g3", Model: "NVIDIA H100 80GB HBM3"}, {UUID: "g4", Model: "NVIDIA H100 80GB HBM3"}}},
			GPUsTotal: 4, GPUJobs: map[string]string{"g1": "bbbbbbbb2222", "g2": "bbbbbbbb2222", "g3": "bbbbbbbb2222", "g4": "bbbbbbbb2222"}, LiveAllocs: 1},
		{Node: structs.Node{Name: "gpu02", Status: structs.NodeReady, CPUs: 64, MemoryMiB: 512 * 1024, Partitions: []string{"gpu"},
			GPUs: []structs.GPU{{UUID: "h1", Model: "NVIDIA H100 80GB HBM3"}, {UUID: "h2", Model: "NVIDIA H100 80GB HBM3"}, {UUID: "h3", Model: "NVIDIA H100 80GB HBM3"}, {UUID: "h4", Model: "NVIDIA H100 80GB HBM3"}, {UUID: "h5", Model: "NVIDIA H100 80GB HBM3"}}},
			GPUsTotal: 5, GPUsFree: 0, GPUJobs: map[string]string{"h1": "bbbbbbbb2222", "h2": "bbbbbbbb2222", "h3": "bbbbbbbb2222", "h4": "bbbbbbbb2222", "h5": "dddddddd4444"}, LiveAllocs: 2},
		{Node: structs.Node{Name: "gpu03", Status: structs.NodeReady, CPUs: 32, MemoryMiB: 256 * 1024, Partitions: []string{"gpu"},
			GPUs: []structs.GPU{{UUID: "k1", Model: "NVIDIA H100 80GB HBM3"}, {UUID: "k2", Model: "NVIDIA H100 80GB HBM3"}}},
			GPUsTotal: 2, GPUsFree: 2},
		{Node: structs.Node{Name: "cpu1", Status: structs.NodeReady, CPUs: 16, MemoryMiB: 65536}, LiveAllocs: 1},
		{Node: structs.Node{Name: "cpu2", Status: structs.NodeDraining, StatusReason: "maintenance", CPUs: 16, MemoryMiB: 65536}},
		{Node: structs.Node{Name: "cpu3", Status: structs.NodeDown, CPUs: 16, MemoryMiB: 65536}},
	})
	f.reply("GET /v1/partitions", http.StatusOK, []api.PartitionInfo{
		{Partition: structs.Partition{Name: "gpu", MaxTime: structs.Duration(24 * time.Hour), DefaultTime: structs.Duration(time.Hour), MaxNodes: 2},
			Nodes: []string{"gpu01", "gpu02", "gpu03"}},
		{Partition: structs.Partition{Name: structs.DefaultPartition}, Default: true, Nodes: []string{"cpu1", "cpu2", "cpu3"}},
	})
	f.reply("GET /v1/jobs/{id}", http.StatusOK, api.JobDetail{
		Job:         jobs(now)[2],
		Allocations: []structs.Allocation{{NodeID: "n-cpu1", State: structs.AllocRunning}, {NodeID: "n-old", State: structs.AllocFailed}},
		Nodes:       map[string]string{"n-cpu1": "cpu1", "n-old": "cpu9"},
	})
	return f
}

// matchLines checks out line by line against regular expressions: a
// TIME cell may tick on while the test runs.
func matchLines(t *testing.T, out string, want []string) {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != len(want) {
		t.Fatalf("got %d lines, want %d:\n%s", len(lines), len(want), out)
	}
	for i, w := range want {
		if !regexp.MustCompile("^" + w + "$").MatchString(lines[i]) {
			t.Errorf("line %d:\n got %q\nwant %q", i, lines[i], w)
		}
	}
}

func TestSqueue_DefaultColumnsAsSlurm(t *testing.T) {
	f := slurmAgent(t)
	r := runCLI(t, "--addr", f.URL, "squeue")
	if r.code != exitOK {
		t.Fatalf("squeue: %d %s", r.code, r.stderr)
	}
	matchLines(t, r.stdout, []string{
		`             JOBID PARTITION     NAME     USER ST       TIME  NODES NODELIST\(REASON\)`,
		`          aaaaaaaa       gpu     wait    alice PD       0:00      1 \(Resources\)`,
		`          bbbbbbbb     skein a-very-l      bob  R    1:02:0[34]      2 gpu\[01-02\]`,
		`          cccccccc     skein      cpu    alice  R       0:0[56]      1 cpu1`,
		`          dddddddd     skein stopping    alice CG 3-00:00:0[01]      1 gpu02`,
	})
	// The GPU jobs' nodes come from the node list, the CPU job's from
	// its allocations: one request for it alone.
	var paths []string
	for _, req := range f.requests() {
		paths = append(paths, req.Path)
	}
	if strings.Join(paths, " ") != "/v1/jobs /v1/nodes /v1/jobs/cccccccc3333" {
		t.Errorf("requests %q", paths)
	}
	if q := f.requests()[0].Query; q.Get("all") != "" || q.Get("limit") != fmt.Sprint(api.MaxJobsPage) {
		t.Errorf("jobs query %v, want the recent jobs, by the largest page", q)
	}
}

func TestSqueue_FiltersAndFormat(t *testing.T) {
	for _, tc := range []struct {
		name  string
		args  []string
		query string // what the jobs request asks the agent for
		want  []string
	}{
		{"one user is asked of the agent", []string{"-u", "alice", "-h", "-o", "%i"}, "limit=10000&owner=alice",
			[]string{"aaaaaaaa", "cccccccc", "dddddddd"}},
		{"several users are filtered here", []string{"-u", "alice,bob", "-t", "PD,r", "-h", "-o", "%i %u"}, "limit=10000",
			[]string{"aaaaaaaa alice", "bbbbbbbb bob", "cccccccc alice"}},
		{"me", []string{"--me", "--noheader", "-o", "%i"}, "limit=10000&mine=true",
			[]string{"aaaaaaaa", "bbbbbbbb", "cccccccc", "dddddddd"}},
		{"finished states list every job kept", []string{"-t", "CD,FAILED", "-o", "%i %T %t"}, "all=true&limit=10000",
			[]string{"JOBID STATE ST", "eeeeeeee COMPLETED CD", "ffffffff FAILED F"}},
		{"ids in any state", []string{"-j", "ffff,aaaa", "-o", "%.10i|%P|%r"}, "all=true&limit=10000",
			[]string{"     JOBID|PARTITION|REASON", "  aaaaaaaa|gpu|not enough free GPUs", "  ffffffff||killed by signal SIGKILL"}},
		{"the other fields", []string{"-j", "bbbb", "-h", "-o", "%b %l %L %C %D %N %j %m %Q"}, "all=true&limit=10000",
			[]string{`gres/gpu:4 2:00:00 57:5[67] 16 2 gpu\[01-02\] a-very-long-name 0M 0`}},
		{"a model in the GRES", []string{"-j", "aaaa", "-h", "-o", "%b|%l|%N|%S"}, "all=true&limit=10000",
			[]string{"gres/gpu:h100:8|UNLIMITED||Unknown"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := slurmAgent(t)
			r := runCLI(t, append([]string{"--addr", f.URL, "squeue"}, tc.args...)...)
			if r.code != exitOK {
				t.Fatalf("squeue: %d %s", r.code, r.stderr)
			}
			if got := f.requests()[0].Query.Encode(); got != tc.query {
				t.Errorf("jobs query %q, want %q", got, tc.query)
			}
			matchLines(t, r.stdout, tc.want)
		})
	}
}

func TestSqueue_JSON(t *testing.T) {
	f := slurmAgent(t)
	r := runCLI(t, "--addr", f.URL, "squeue", "--json", "-t", "R")
	var jobs []squeueJob
	mustDecode(t, r.stdout, &jobs)
	if len(jobs) != 2 || jobs[0].JobID != "bbbbbbbb2222" || jobs[0].StateCode != "R" || jobs[0].State != "RUNNING" ||
		strings.Join(jobs[0].NodeList, ",") != "gpu01,gpu02" || jobs[0].TimeLimit != 7200 || jobs[0].Elapsed < 3723 || jobs[0].GPUs != 4 ||
		jobs[1].JobID != "cccccccc3333" || strings.Join(jobs[1].NodeList, ",") != "cpu1" {
		t.Fatalf("squeue --json = %+v", jobs)
	}
}

func TestSqueue_Errors(t *testing.T) {
	f := slurmAgent(t)
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"-t", "SUSPENDED"}, exitUsage, `Error: -t: unknown state "SUSPENDED": want all or some of PENDING (PD), RUNNING (R),`},
		{[]string{"-o", "%i %Z"}, exitUsage, `Error: -o: format "%i %Z": unsupported field %Z (supported: %C %D`},
		{[]string{"-u", "alice", "--me"}, exitUsage, "Error: --me and -u: give one"},
		{[]string{"-u", "Not A User!"}, exitUsage, "Error: --user: "},
		{[]string{"extra"}, exitUsage, `Error: unexpected argument "extra"`},
		{[]string{"-j", "aaaa,0000"}, exitError, "Error: -j 0000: no such job\n"},
	} {
		r := runCLI(t, append([]string{"--addr", f.URL, "squeue"}, tc.args...)...)
		if r.code != tc.code || !strings.HasPrefix(r.stderr, tc.want) || r.stdout != "" {
			t.Errorf("squeue %q: %d %q %q, want %d %q", tc.args, r.code, r.stdout, r.stderr, tc.code, tc.want)
		}
	}
	if r := runCLI(t, "--addr", f.URL, "squeue", "--help"); r.code != exitOK || !strings.Contains(r.stdout, "CG completing") {
		t.Errorf("squeue --help: %d %q", r.code, r.stdout)
	}
}

func TestSlurmLinks_RunTheirCommand(t *testing.T) {
	f := slurmAgent(t)
	t.Setenv("SKEIN_ADDR", f.URL)
	var out, errb strings.Builder
	code := run(NewApp(&out, &errb), []string{"/usr/local/bin/squeue", "-h", "-o", "%i", "-t", "PD"})
	if code != exitOK || out.String() != "aaaaaaaa\n" {
		t.Fatalf("squeue link: %d %q %q", code, out.String(), errb.String())
	}
	out.Reset()
	code = run(NewApp(&out, &errb), []string{"sinfo", "-h", "-o", "%P"})
	if code != exitOK || out.String() != "skein*\nskein*\nskein*\ngpu\ngpu\ngpu\n" {
		t.Fatalf("sinfo link: %d %q %q", code, out.String(), errb.String())
	}
	// -h stays --help where skein means that, and a skein called
	// anything else is skein.
	out.Reset()
	if code := run(NewApp(&out, &errb), []string{"/opt/x/skein", "cancel", "-h"}); code != exitOK || !strings.Contains(out.String(), "skein cancel - cancel a job") {
		t.Fatalf("skein cancel -h: %d %q", code, out.String())
	}
	out.Reset()
	if code := run(NewApp(&out, &errb), []string{"squeue-not", "version"}); code != exitOK || !strings.Contains(out.String(), structs.Version) {
		t.Fatalf("skein by another name: %d %q %q", code, out.String(), errb.String())
	}
}

func TestCommandArgs_LinksAndSlurmsDashH(t *testing.T) {
	app := NewApp(nil, nil)
	for _, tc := range []struct{ in, want string }{
		{"/usr/bin/squeue -h -u alice", "skein squeue --noheader -u alice"},
		{"sacct -j 3f2a", "skein sacct -j 3f2a"},
		{"/usr/local/bin/srun --pty bash", "skein srun --pty bash"},
		{"skein --addr http://x:7470 sinfo -N -h", "skein --addr http://x:7470 sinfo -N --noheader"},
		{"skein --addr=http://x:7470 --token-file f squeue -o %i -h", "skein --addr=http://x:7470 --token-file f squeue -o %i --noheader"},
		{"skein squeue -- -h", "skein squeue -- -h"},
		{"skein jobs -h", "skein jobs -h"},
		{"skein --help", "skein --help"},
		{"skein", "skein"},
	} {
		if got := strings.Join(commandArgs(app, strings.Fields(tc.in)), " "); got != tc.want {
			t.Errorf("commandArgs(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
