package cli

import (
	"bytes"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/skein-dev/skein/agent"
	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

func TestLogs_StreamsGoToMatchingWriters(t *testing.T) {
	cases := []struct {
		name   string
		args   []string
		rank   string
		follow bool
	}{
		{"defaults", []string{"abcdef01"}, "0", false},
		{"flags before ID", []string{"-f", "--rank", "1", "abcdef01"}, "1", true},
		{"flags after ID", []string{"abcdef01", "--follow", "--rank=2"}, "2", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeAgent(t)
			f.handle("GET /v1/jobs/{id}/logs", func(w http.ResponseWriter, r *http.Request) {
				fmt.Fprintf(w, "%s of %s\n", r.URL.Query().Get("stream"), r.PathValue("id"))
			})
			// -f asks how the job stands: it ended, after one attempt.
			f.reply("GET /v1/jobs/{id}", http.StatusOK, api.JobDetail{
				Job:         structs.Job{ID: "abcdef01", State: structs.JobSucceeded, Attempts: 1, Spec: structs.JobSpec{Nodes: 3}},
				Allocations: []structs.Allocation{{ID: "a0", Rank: 0, Attempt: 1}, {ID: "a1", Rank: 1, Attempt: 1}, {ID: "a2", Rank: 2, Attempt: 1}},
			})
			r := runCLI(t, append([]string{"--addr", f.URL, "logs"}, tc.args...)...)
			if r.code != exitOK {
				t.Fatalf("exit code %d: %s", r.code, r.stderr)
			}
			wantErr := "stderr of abcdef01\n"
			if tc.follow {
				wantErr += "job abcdef01 succeeded\n"
			}
			if r.stdout != "stdout of abcdef01\n" || r.stderr != wantErr {
				t.Errorf("stdout %q, stderr %q; want each stream on its own writer", r.stdout, r.stderr)
			}
			var reqs []recorded
			for _, req := range f.requests() {
				if strings.HasSuffix(req.Path, "/logs") {
					reqs = append(reqs, req)
				}
			}
			if len(reqs) != 2 {
				t.Fatalf("got %d requests for logs, want one per stream", len(reqs))
			}
			streams := map[string]bool{}
			for _, req := range reqs {
				q := req.Query
				streams[q.Get("stream")] = true
				if q.Get("rank") != tc.rank || (q.Get("follow") == "true") != tc.follow {
					t.Errorf("query %v, want rank=%s follow=%v", q, tc.rank, tc.follow)
				}
			}
			if !streams[api.StreamStdout] || !streams[api.StreamStderr] {
				t.Errorf("streams asked for: %v, want stdout and stderr", streams)
			}
		})
	}
}

func TestLogs_AgentErrorIsReportedOnce(t *testing.T) {
	f := newFakeAgent(t)
	f.fail("GET /v1/jobs/{id}/logs", http.StatusNotFound, `job "zz": not found`)
	r := runCLI(t, "--addr", f.URL, "logs", "zz")
	if r.code != exitError || r.stderr != "Error: job \"zz\": not found\n" {
		t.Fatalf("got code %d, stderr %q", r.code, r.stderr)
	}
}

func TestLogs_BadFlagsAreUsageErrorsAndAskNothing(t *testing.T) {
	f := newFakeAgent(t)
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--rank", "-1"}, "--rank -1: must not be negative"},
		{[]string{"--tail", "0"}, "--tail 0: want a number of lines in 1..100000"},
		{[]string{"--tail", "-3"}, "--tail -3: want a number of lines in 1..100000"},
		{[]string{"--tail", "100001"}, "--tail 100001: want a number of lines in 1..100000"},
		{[]string{"--attempt", "0"}, "--attempt 0: want an attempt number from 1 (the first) on"},
		{[]string{"--attempt", "-2"}, "--attempt -2: want an attempt number from 1 (the first) on"},
		{[]string{"--attempt", "2", "--all-attempts"}, "--attempt and --all-attempts cannot be used together"},
	}
	for _, tc := range cases {
		r := runCLI(t, append(append([]string{"--addr", f.URL, "logs"}, tc.args...), "abc")...)
		if want := "Error: " + tc.want + "\nRun 'skein logs --help' for usage.\n"; r.code != exitUsage || r.stderr != want {
			t.Errorf("%v: code %d, stderr %q, want %d, %q", tc.args, r.code, r.stderr, exitUsage, want)
		}
	}
	if n := len(f.requests()); n != 0 {
		t.Errorf("agent got %d requests, want none", n)
	}
}

func TestLogs_TailAsksForTheLastLinesOfEachStream(t *testing.T) {
	f := newFakeAgent(t)
	f.handle("GET /v1/jobs/{id}/logs", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "last of %s\n", r.URL.Query().Get("stream"))
	})
	r := runCLI(t, "--addr", f.URL, "logs", "--tail", "25", "abcdef01")
	if r.code != exitOK || r.stdout != "last of stdout\n" || r.stderr != "last of stderr\n" {
		t.Fatalf("exit code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	reqs := f.requests()
	if len(reqs) != 2 {
		t.Fatalf("got %d requests, want one per stream", len(reqs))
	}
	for _, req := range reqs {
		if q := req.Query; q.Get("lines") != "25" || q.Has("tail") {
			t.Errorf("query %v, want lines=25, no byte tail", q)
		}
	}
}

func TestLogs_TailOfACappedJobIsTheEndOfEachStream(t *testing.T) {
	t.Parallel()
	startRealAgent(t, capped)
	// 588,895 bytes a stream: more than the 512 KiB kept of each, so both
	// were rotated and the cap dropped some.
	r := runCLI(t, "submit", "--", "sh", "-c", "seq 1 100000; seq 1 100000 | sed s/^/e/ >&2")
	if r.code != 0 {
		t.Fatalf("submit: %d %s", r.code, r.stderr)
	}
	id := strings.TrimSpace(r.stdout)
	waitJobState(t, id, structs.JobSucceeded)
	for _, args := range [][]string{{"logs", "--tail", "3", id}, {"logs", "-f", "--tail", "3", id}} {
		r = runCLI(t, args...)
		wantErr := "e99998\ne99999\ne100000\n"
		if args[1] == "-f" {
			wantErr += "job " + structs.ShortID(id) + " succeeded\n"
		}
		if r.code != 0 || r.stdout != "99998\n99999\n100000\n" || r.stderr != wantErr {
			t.Errorf("%v: code %d, stdout %q, stderr %q; want the last 3 lines of each, and no word of what was dropped", args, r.code, r.stdout, r.stderr)
		}
	}
	// More lines than the current file holds (64,607 bytes, after two of
	// 256 KiB): the tail begins in the rotated one.
	const n = 20000 // 120,001 bytes
	r = runCLI(t, "logs", "--tail", strconv.Itoa(n), id)
	if want := seqText(100000)[len(seqText(100000-n)):]; r.code != 0 || r.stdout != want {
		t.Errorf("logs --tail %d: code %d, %d bytes of stdout, want the %d of its last lines", n, r.code, len(r.stdout), len(want))
	}
}

func TestLogs_DroppedOutputIsSaidBeforeTheStream(t *testing.T) {
	f := newFakeAgent(t)
	f.handle("GET /v1/jobs/{id}/logs", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("stream") == api.StreamStdout {
			w.Header().Set(api.LogDroppedHeader, strconv.FormatInt(2576980378, 10)) // 2.4 GiB
			w.Header().Set(api.LogMaxHeader, strconv.FormatInt(100<<20, 10))
			fmt.Fprint(w, "kept\n")
		}
	})
	r := runCLI(t, "--addr", f.URL, "logs", "abcdef01")
	if r.code != exitOK || r.stdout != "kept\n" {
		t.Fatalf("exit code %d, stdout %q: %s", r.code, r.stdout, r.stderr)
	}
	if want := "skein: 2.4 GiB of earlier stdout was dropped (log cap 100 MiB, --log-max)\n"; r.stderr != want {
		t.Errorf("stderr %q, want %q", r.stderr, want)
	}
}

func TestLogs_BytesAreShownInBinaryUnits(t *testing.T) {
	cases := []struct {
		n    int64
		want string
	}{
		{0, "0 B"},
		{1023, "1023 B"},
		{1536, "1.5 KiB"},
		{100 << 20, "100 MiB"},
		{2576980378, "2.4 GiB"},
		{math.MaxInt64, "8 EiB"},
	}
	for _, tc := range cases {
		if got := formatBytes(tc.n); got != tc.want {
			t.Errorf("formatBytes(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}

// capped is a real agent's configuration with the smallest log cap: 1 MiB
// per allocation, so 256 KiB per file.
func capped(cfg *agent.Config) { cfg.LogMaxMiB = agent.MinLogMaxMiB }

func TestLogs_ACappedJobSaysWhatWasDropped(t *testing.T) {
	t.Parallel()
	startRealAgent(t, capped)
	// 3,000,000 bytes: eleven full files of 262,144 and 116,416 more, so
	// the current file and the one before it are kept.
	r := runCLI(t, "submit", "--", "sh", "-c", "yes | head -c 3000000")
	if r.code != 0 {
		t.Fatalf("submit: %d %s", r.code, r.stderr)
	}
	id := strings.TrimSpace(r.stdout)
	waitJobState(t, id, structs.JobSucceeded)
	r = runCLI(t, "logs", id)
	if r.code != 0 {
		t.Fatalf("logs: %d %s", r.code, r.stderr)
	}
	if len(r.stdout) != 262144+116416 || strings.Trim(r.stdout, "y\n") != "" {
		t.Errorf("stdout holds %d bytes, want the newest 378560 of yes", len(r.stdout))
	}
	if want := "skein: 2.5 MiB of earlier stdout was dropped (log cap 1 MiB, --log-max)\n"; r.stderr != want {
		t.Errorf("stderr %q, want %q", r.stderr, want)
	}
	// As JSON: the attempt, what was dropped, then each line kept.
	r = runCLI(t, "logs", "--json", id)
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("logs --json: %d %s", r.code, r.stderr)
	}
	recs := decodeLogRecords(t, r.stdout)
	if len(recs) != 2+378560/2 || recs[0].Type != "attempt" || recs[0].Attempt != 1 {
		t.Fatalf("logs --json printed %d objects, first %+v; want the attempt, what was dropped and 189280 lines", len(recs), recs[0])
	}
	if d := recs[1]; d.Type != "dropped" || d.Stream != "stdout" || d.Attempt != 1 || d.Bytes != 3000000-378560 || d.LogMax != 1<<20 {
		t.Errorf("second object %+v, want 2621440 bytes of stdout dropped under a cap of 1 MiB", d)
	}
	for _, o := range recs[2:] {
		if o.Type != "output" || o.Stream != "stdout" || o.Text != "y\n" {
			t.Fatalf("an output object is %+v, want a line of yes", o)
		}
	}
}

func TestLogs_FollowingACappedJobReadsOnAcrossRotations(t *testing.T) {
	t.Parallel()
	startRealAgent(t, capped)
	const n = 400000 // 2.7 MB: ten rotations and more
	gate := filepath.Join(t.TempDir(), "gate")
	r := runCLI(t, "submit", "--", "sh", "-c", `echo ready; until [ -e "$0" ]; do sleep 0.01; done; seq 1 "$1"`, gate, strconv.Itoa(n))
	if r.code != 0 {
		t.Fatalf("submit: %d %s", r.code, r.stderr)
	}
	id := strings.TrimSpace(r.stdout)
	var out syncBuffer
	var errb bytes.Buffer
	code := make(chan int, 1)
	go func() { code <- run(NewApp(&out, &errb), cliArgs(t, "logs", "-f", id)) }()
	// Once the follower has printed the first line, it holds the first
	// file: let the job write the rest.
	testutil.WaitFor(t, 15*time.Second, func() error {
		if !strings.HasPrefix(out.String(), "ready\n") {
			return fmt.Errorf("logs -f printed %q", out.String())
		}
		return nil
	})
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	select {
	case c := <-code:
		if c != 0 {
			t.Fatalf("logs -f: %d %s", c, errb.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("logs -f did not end with the job")
	}
	// What a follower gets is pieces of the output in order: the start,
	// then, each time it fell a whole file behind (a slow machine may make
	// it fall behind more than once), from a later point on, to the end;
	// never a line twice or out of order.
	got, want := out.String(), "ready\n"+seqText(n)
	first, ok := inOrderPieces(got, want)
	if !ok {
		t.Fatalf("logs -f printed %d bytes in order, then bytes that are not a later piece of the output, or not up to its end", first)
	}
	// It read the first file to its end, and what is kept at the end.
	if first < 1<<18 || len(got) <= 1<<19 {
		t.Errorf("logs -f printed %d bytes, %d from the start: it did not follow the job across rotations", len(got), first)
	}
}

// inOrderPieces says whether got is pieces of want, each from further on
// than the one before, the last ending where want ends; and how long the
// first piece, from want's start, is.
func inOrderPieces(got, want string) (first int, ok bool) {
	i, pos := 0, 0
	for piece := 0; ; piece++ {
		for i < len(got) && pos < len(want) && got[i] == want[pos] {
			i, pos = i+1, pos+1
		}
		if piece == 0 {
			first = i
		}
		if i == len(got) {
			return first, pos == len(want)
		}
		// A gap: the next piece begins where its first bytes (unique in
		// a count's output) are found further on.
		next := got[i:min(i+64, len(got))]
		j := strings.Index(want[pos:], next)
		if j < 0 {
			return first, false
		}
		pos += j
	}
}

// syncBuffer is a buffer that one goroutine writes while another reads.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// seqText is what seq 1 n prints.
func seqText(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		b.WriteString(strconv.Itoa(i))
		b.WriteByte('\n')
	}
	return b.String()
}

// attemptsScript fails twice with exit code 7, each attempt printing its
// number on both streams, and succeeds on its third attempt.
const attemptsScript = `echo out $SKEIN_ATTEMPT; echo err $SKEIN_ATTEMPT >&2; [ "$SKEIN_ATTEMPT" -ge 3 ] || exit 7`

func TestLogs_EachAttemptsOutputCanBeRead(t *testing.T) {
	t.Parallel()
	startRealAgent(t)
	r := runCLI(t, "submit", "--restarts", "2", "--", "sh", "-c", attemptsScript)
	if r.code != 0 {
		t.Fatalf("submit: %d %s", r.code, r.stderr)
	}
	id := strings.TrimSpace(r.stdout)
	waitJobState(t, id, structs.JobSucceeded)
	failed := func(n int) string { return fmt.Sprintf("skein: attempt %d on e2e: failed: exited with code 7\n", n) }
	all := failed(1) + "err 1\n" + failed(2) + "err 2\nskein: attempt 3 on e2e: succeeded\nerr 3\n"
	cases := []struct {
		args           []string
		code           int
		stdout, stderr string
	}{
		{[]string{id}, 0, "out 3\n", "skein: attempt 3; --attempt N or --all-attempts prints the earlier ones\nerr 3\n"},
		{[]string{"--attempt", "1", id}, 0, "out 1\n", failed(1) + "err 1\n"},
		{[]string{id[:8], "--attempt=2"}, 0, "out 2\n", failed(2) + "err 2\n"},
		{[]string{"--all-attempts", id}, 0, "out 1\nout 2\nout 3\n", all},
		{[]string{"--all-attempts", "--tail", "1", id}, 0, "out 1\nout 2\nout 3\n", all},
		// Followed, an attempt that ended says so once, and the exit
		// status is its own; the whole job's is 0.
		{[]string{"-f", "--attempt", "1", id}, 7, "out 1\n", failed(1) + "err 1\n"},
		{[]string{"-f", "--all-attempts", id}, 0, "out 1\nout 2\nout 3\n", all + "job " + structs.ShortID(id) + " succeeded\n"},
	}
	for _, tc := range cases {
		r := runCLI(t, append([]string{"logs"}, tc.args...)...)
		if r.code != tc.code || r.stdout != tc.stdout || r.stderr != tc.stderr {
			t.Errorf("logs %v: code %d, stdout %q, stderr %q\nwant %d, %q, %q", tc.args, r.code, r.stdout, r.stderr, tc.code, tc.stdout, tc.stderr)
		}
	}
	for _, args := range [][]string{{"logs", "--attempt", "4", id}, {"logs", "-f", "--attempt", "4", id}} {
		r = runCLI(t, args...)
		if want := fmt.Sprintf("Error: job %s has no attempt 4: its attempts are 1..3\n", structs.ShortID(id)); r.code != exitError || r.stderr != want {
			t.Errorf("%v: code %d, stderr %q, want %q", args, r.code, r.stderr, want)
		}
	}
	r = runCLI(t, "logs", "--rank", "1", "--attempt", "1", id)
	if want := fmt.Sprintf("Error: rank 1: job %s has ranks 0..0\n", structs.ShortID(id)); r.code != exitError || r.stderr != want {
		t.Errorf("logs --rank 1: code %d, stderr %q, want %q", r.code, r.stderr, want)
	}
}

// logRecord is any object `skein logs --json` prints.
type logRecord struct {
	Type     string `json:"type"`
	Job      string `json:"job"`
	Attempt  int    `json:"attempt"`
	Rank     int    `json:"rank"`
	Node     string `json:"node"`
	Alloc    string `json:"alloc"`
	State    string `json:"state"`
	ExitCode *int   `json:"exit_code"`
	Reason   string `json:"reason"`
	Exit     *int   `json:"exit"`
	Stream   string `json:"stream"`
	Text     string `json:"text"`
	Bytes    int64  `json:"bytes"`
	LogMax   int64  `json:"log_max"`
}

// decodeLogRecords decodes the objects of `skein logs --json`, one a line.
func decodeLogRecords(t *testing.T, out string) []logRecord {
	t.Helper()
	var recs []logRecord
	for line := range strings.Lines(out) {
		var rec logRecord
		mustDecode(t, line, &rec)
		recs = append(recs, rec)
	}
	return recs
}

func TestLogs_JSONSaysWhichAttemptRankAndStreamEachLineIs(t *testing.T) {
	t.Parallel()
	startRealAgent(t)
	r := runCLI(t, "submit", "--restarts", "2", "--", "sh", "-c", attemptsScript)
	if r.code != 0 {
		t.Fatalf("submit: %d %s", r.code, r.stderr)
	}
	id := strings.TrimSpace(r.stdout)
	d := waitJobState(t, id, structs.JobSucceeded)
	for _, args := range [][]string{{"logs", "--json", "--all-attempts", id}, {"logs", "--json", "-f", "--all-attempts", id}} {
		r = runCLI(t, args...)
		if r.code != 0 || r.stderr != "" {
			t.Fatalf("%v: code %d, stderr %q", args, r.code, r.stderr)
		}
		recs := decodeLogRecords(t, r.stdout)
		follow := args[2] == "-f"
		if want := 9 + map[bool]int{true: 1}[follow]; len(recs) != want {
			t.Fatalf("%v printed %d objects, want %d:\n%s", args, len(recs), want, r.stdout)
		}
		for n := 1; n <= 3; n++ {
			head, outs := recs[(n-1)*3], recs[(n-1)*3+1:n*3]
			alloc := allocOf(&d, 0, n)
			state, code := "failed", 7
			if n == 3 {
				state, code = "succeeded", 0
			}
			if head.Type != "attempt" || head.Job != id || head.Attempt != n || head.Node != "e2e" || head.Alloc != alloc.ID ||
				head.State != state || head.ExitCode == nil || *head.ExitCode != code {
				t.Errorf("attempt %d: %+v, want it %s with exit code %d on e2e", n, head, state, code)
			}
			// The two streams come in the order the node sent them.
			got := map[string]logRecord{}
			for _, o := range outs {
				got[o.Stream] = o
			}
			for _, stream := range []string{"stdout", "stderr"} {
				o := got[stream]
				if want := fmt.Sprintf("%s %d\n", stream[3:], n); o.Type != "output" || o.Attempt != n || o.Rank != 0 || o.Text != want {
					t.Errorf("attempt %d's %s: %+v, want its line %q", n, stream, o, want)
				}
			}
		}
		if follow {
			end := recs[9]
			if end.Type != "end" || end.Job != id || end.State != "succeeded" || end.Exit == nil || *end.Exit != 0 {
				t.Errorf("the last object is %+v, want the job's end, succeeded, exit 0", end)
			}
		}
	}
}

func TestLogsJSON_ALongLineIsCutBetweenCharacters(t *testing.T) {
	var out bytes.Buffer
	w := newJSONLogs(&out).stream(2, api.StreamStderr)
	long := strings.Repeat("é", maxJSONText) // two bytes each
	text := "short\n" + long + "\nno newline"
	for chunk := range slices.Chunk([]byte(text), 1000) {
		if _, err := w.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	var got strings.Builder
	recs := decodeLogRecords(t, out.String())
	for _, rec := range recs {
		if rec.Type != "output" || rec.Attempt != 2 || rec.Stream != api.StreamStderr || len(rec.Text) > maxJSONText || !utf8.ValidString(rec.Text) {
			t.Errorf("record %+v (%d bytes): want output of attempt 2's stderr, at most %d bytes of whole characters", rec.Type, len(rec.Text), maxJSONText)
		}
		got.WriteString(rec.Text)
	}
	if got.String() != text {
		t.Errorf("the records hold %d bytes, not the %d written", got.Len(), len(text))
	}
	if len(recs) != 5 || recs[0].Text != "short\n" || recs[4].Text != "no newline" {
		t.Errorf("got %d records, want 5: the short line, the long one in 3, the last without a newline", len(recs))
	}
}

func TestLogs_FollowSaysHowTheJobEndedAndExitsWithIt(t *testing.T) {
	t.Parallel()
	startRealAgent(t)
	r := runCLI(t, "submit", "--", "sh", "-c", "echo ready; exec sleep 60")
	if r.code != 0 {
		t.Fatalf("submit: %d %s", r.code, r.stderr)
	}
	id := strings.TrimSpace(r.stdout)
	waitJobState(t, id, structs.JobRunning)
	var out, errb syncBuffer
	code := make(chan int, 1)
	go func() { code <- run(NewApp(&out, &errb), cliArgs(t, "logs", "-f", id)) }()
	testutil.WaitFor(t, 15*time.Second, func() error {
		if out.String() != "ready\n" {
			return fmt.Errorf("logs -f printed %q", out.String())
		}
		return nil
	})
	if r := runCLI(t, "cancel", id); r.code != 0 {
		t.Fatalf("cancel: %d %s", r.code, r.stderr)
	}
	select {
	case c := <-code:
		if want := "job " + structs.ShortID(id) + " cancelled: cancelled by user\n"; c != exitCancelled || errb.String() != want {
			t.Errorf("logs -f of a cancelled job: code %d, stderr %q; want %d, %q", c, errb.String(), exitCancelled, want)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("logs -f did not end with the job")
	}

	r = runCLI(t, "submit", "--", "sh", "-c", "echo bye; exit 7")
	id = strings.TrimSpace(r.stdout)
	waitJobState(t, id, structs.JobFailed)
	r = runCLI(t, "logs", "-f", id)
	if want := "job " + structs.ShortID(id) + " failed: exited with code 7\n"; r.code != 7 || r.stdout != "bye\n" || r.stderr != want {
		t.Errorf("logs -f of a failed job: code %d, stdout %q, stderr %q; want 7, \"bye\\n\", %q", r.code, r.stdout, r.stderr, want)
	}
}

func TestLogs_FollowGoesOnThroughTheRestarts(t *testing.T) {
	t.Parallel()
	startRealAgent(t)
	gate := filepath.Join(testutil.SharedDir(t), "gate")
	r := runCLI(t, "submit", "--restarts", "1", "--", "sh", "-c",
		`echo out $SKEIN_ATTEMPT; until [ -e "$0" ]; do sleep 0.01; done; exit 7`, gate)
	if r.code != 0 {
		t.Fatalf("submit: %d %s", r.code, r.stderr)
	}
	id := strings.TrimSpace(r.stdout)
	short := structs.ShortID(id)
	waitJobState(t, id, structs.JobRunning)
	var out, errb syncBuffer
	code := make(chan int, 1)
	go func() { code <- run(NewApp(&out, &errb), cliArgs(t, "logs", "-f", id)) }()
	testutil.WaitFor(t, 15*time.Second, func() error {
		if out.String() != "out 1\n" {
			return fmt.Errorf("logs -f printed %q", out.String())
		}
		return nil
	})
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case c := <-code:
		if c != 7 || out.String() != "out 1\nout 2\n" {
			t.Fatalf("logs -f: code %d, stdout %q; want 7 and both attempts' output", c, out.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("logs -f did not end with the job")
	}
	// While the job waited for its restart, -f said so (unless a slow
	// machine's poll came only after the second second, when it ran
	// again); then it named the attempt that followed (as it stood
	// then), then the end.
	lines := strings.Split(strings.TrimSuffix(errb.String(), "\n"), "\n")
	if len(lines) == 3 && lines[0] == "job "+short+" queued: restarting in 1s after failure: exited with code 7 (attempt 2 of 2)" {
		lines = lines[1:]
	}
	if len(lines) != 2 ||
		!strings.HasPrefix(lines[0], "skein: attempt 2 on e2e: ") ||
		lines[1] != "job "+short+" failed: exited with code 7" {
		t.Errorf("logs -f said %q; want the restart, the second attempt and the end", errb.String())
	}
}
