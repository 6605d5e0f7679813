package cli

import (
	"bytes"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

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
			r := runCLI(t, append([]string{"--addr", f.URL, "logs"}, tc.args...)...)
			if r.code != exitOK {
				t.Fatalf("exit code %d: %s", r.code, r.stderr)
			}
			if r.stdout != "stdout of abcdef01\n" || r.stderr != "stderr of abcdef01\n" {
				t.Errorf("stdout %q, stderr %q; want each stream on its own writer", r.stdout, r.stderr)
			}
			reqs := f.requests()
			if len(reqs) != 2 {
				t.Fatalf("got %d requests, want one per stream", len(reqs))
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

func TestLogs_NegativeRankIsError(t *testing.T) {
	f := newFakeAgent(t)
	r := runCLI(t, "--addr", f.URL, "logs", "--rank", "-1", "abc")
	if r.code != exitError || r.stderr != "Error: --rank -1: must not be negative\n" {
		t.Fatalf("got code %d, stderr %q", r.code, r.stderr)
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
	r := runCLI(t, "--addr", f.URL, "logs", "--tail", "25", "-f", "abcdef01")
	if r.code != exitOK || r.stdout != "last of stdout\n" || r.stderr != "last of stderr\n" {
		t.Fatalf("exit code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	reqs := f.requests()
	if len(reqs) != 2 {
		t.Fatalf("got %d requests, want one per stream", len(reqs))
	}
	for _, req := range reqs {
		if q := req.Query; q.Get("lines") != "25" || q.Get("follow") != "true" || q.Has("tail") {
			t.Errorf("query %v, want lines=25 and follow, no byte tail", q)
		}
	}
}

func TestLogs_TailOutOfBoundsIsError(t *testing.T) {
	f := newFakeAgent(t)
	for _, n := range []string{"0", "-3", "100001"} {
		r := runCLI(t, "--addr", f.URL, "logs", "--tail", n, "abc")
		if want := "Error: --tail " + n + ": want a number of lines in 1..100000\n"; r.code != exitError || r.stderr != want {
			t.Errorf("--tail %s: code %d, stderr %q, want %q", n, r.code, r.stderr, want)
		}
	}
	if n := len(f.requests()); n != 0 {
		t.Errorf("agent got %d requests, want none", n)
	}
}

func TestLogs_TailOfACappedJobIsTheEndOfEachStream(t *testing.T) {
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
		if r.code != 0 || r.stdout != "99998\n99999\n100000\n" || r.stderr != "e99998\ne99999\ne100000\n" {
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
}

func TestLogs_FollowingACappedJobReadsOnAcrossRotations(t *testing.T) {
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
	go func() { code <- run(NewApp(&out, &errb), []string{"skein", "logs", "-f", id}) }()
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
	// What a follower gets is the output up to a point, then from a later
	// point to the end (a follower that fell a whole file behind loses
	// what the cap dropped), never a line twice or out of order.
	got, want := out.String(), "ready\n"+seqText(n)
	upTo := 0
	for upTo < len(got) && got[upTo] == want[upTo] {
		upTo++
	}
	if !strings.HasSuffix(want, got[upTo:]) {
		t.Fatalf("logs -f printed %d bytes in order, then %d that are not the end of the output", upTo, len(got)-upTo)
	}
	// It read the first file to its end, and what is kept at the end.
	if upTo < 1<<18 || len(got) <= 1<<19 {
		t.Errorf("logs -f printed %d bytes, %d from the start: it did not follow the job across rotations", len(got), upTo)
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
