package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

// TestCluster_LogsFromAnyNodeSayWhatTheCapDropped: each rank of a gang
// writes more than the smallest log cap; read through one node, both the
// local rank and the one proxied from the other node come with what the
// cap dropped, and hold only the newest output.
func TestCluster_LogsFromAnyNodeSayWhatTheCapDropped(t *testing.T) {
	t.Parallel()
	tc := startClusterWith(t, 2, func(_ int, cfg *Config) { cfg.LogMaxMiB = MinLogMaxMiB })
	// 3,000,000 bytes: eleven full files of 256 KiB and 116,416 bytes more.
	job := tc.submit(tc.agents[0], structs.JobSpec{Nodes: 2, Command: []string{"sh", "-c", "yes | head -c 3000000"}})
	waitJob(t, tc.agents[0], job.ID, jobState(structs.JobSucceeded))
	for rank := range 2 {
		ls, err := tc.client(tc.agents[1]).OpenLogs(context.Background(), job.ID, api.LogOptions{Rank: rank, Stream: api.StreamStdout})
		if err != nil {
			t.Fatal(err)
		}
		out, err := io.ReadAll(ls)
		ls.Close()
		if err != nil {
			t.Fatal(err)
		}
		if ls.Dropped != 3000000-262144-116416 || ls.LogMax != 1<<20 {
			t.Errorf("rank %d: dropped %d bytes under a cap of %d, want 2621440 under 1048576", rank, ls.Dropped, ls.LogMax)
		}
		if len(out) != 262144+116416 || strings.Trim(string(out), "y\n") != "" {
			t.Errorf("rank %d: read %d bytes, want the newest 378560 of yes", rank, len(out))
		}
	}
	tc.checkInvariants()
}

// TestCluster_LogTailFromAnyNode: read through one node, the end of each
// rank's streams, the local rank's and the one proxied from the other
// node, holds only the bytes or lines asked for, with no word of what the
// cap dropped; followed, it goes on to what the job writes next; and a
// tail out of bounds is refused, naming its limit.
func TestCluster_LogTailFromAnyNode(t *testing.T) {
	t.Parallel()
	tc := startClusterWith(t, 2, func(_ int, cfg *Config) { cfg.LogMaxMiB = MinLogMaxMiB })
	gate := testutil.JobDir(t) + "/gate"
	// 588,895 bytes a stream, more than the 512 KiB kept of each.
	job := tc.submit(tc.agents[0], structs.JobSpec{Nodes: 2, Command: []string{"sh", "-c",
		`seq 1 100000; seq 1 100000 | sed s/^/e/ >&2; until [ -e "$0" ]; do sleep 0.01; done; echo end`, gate}})
	waitJob(t, tc.agents[0], job.ID, jobState(structs.JobRunning))
	local := 0
	for _, a := range tc.agents[0].fsm.Allocs(job.ID) {
		if a.NodeID == tc.agents[1].nodeID {
			local++
		}
	}
	if local != 1 {
		t.Fatalf("%d of the 2 ranks ran on the node read through, want 1: one is proxied", local)
	}
	cl := tc.client(tc.agents[1])
	tail := func(opts api.LogOptions) (*api.LogStream, string, error) {
		return readLogs(cl, job.ID, opts)
	}
	for rank := range 2 {
		// Once the last line of stderr is there, both streams are whole.
		testutil.WaitFor(t, 30*time.Second, func() error {
			_, got, err := tail(api.LogOptions{Rank: rank, Stream: api.StreamStderr, Lines: 1})
			if err == nil && got != "e100000\n" {
				err = fmt.Errorf("the last line of rank %d's stderr is %q", rank, got)
			}
			return err
		})
		for _, c := range []struct {
			opts api.LogOptions
			want string
		}{
			{api.LogOptions{Rank: rank, Stream: api.StreamStdout, Tail: 13}, "99999\n100000\n"},
			{api.LogOptions{Rank: rank, Stream: api.StreamStderr, Lines: 3}, "e99998\ne99999\ne100000\n"},
			{api.LogOptions{Rank: rank, Stream: api.StreamStderr, Lines: 3, Tail: 10}, "9\ne100000\n"},
		} {
			ls, got, err := tail(c.opts)
			if err != nil {
				t.Fatalf("%+v: %v", c.opts, err)
			}
			if got != c.want || ls.Dropped != 0 || ls.LogMax != 0 {
				t.Errorf("%+v: %q, dropped %d of %d; want %q and no word of the cap", c.opts, got, ls.Dropped, ls.LogMax, c.want)
			}
		}
	}

	// Followed from its last 2 lines, each rank's stdout goes on to what
	// the job writes once the gate opens, and ends with it.
	var follows []*api.LogStream
	for rank := range 2 {
		ls, err := cl.OpenLogs(context.Background(), job.ID, api.LogOptions{Rank: rank, Stream: api.StreamStdout, Follow: true, Lines: 2})
		if err != nil {
			t.Fatal(err)
		}
		defer ls.Close()
		first := make([]byte, len("99999\n100000\n"))
		if _, err := io.ReadFull(ls, first); err != nil || string(first) != "99999\n100000\n" {
			t.Fatalf("rank %d followed from its last 2 lines: %q (%v)", rank, first, err)
		}
		follows = append(follows, ls)
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for rank, ls := range follows {
		if rest, err := io.ReadAll(ls); err != nil || string(rest) != "end\n" {
			t.Errorf("rank %d, followed on: %q (%v), want the end line", rank, rest, err)
		}
	}
	waitJob(t, tc.agents[0], job.ID, jobState(structs.JobSucceeded))

	for _, bad := range []struct {
		opts api.LogOptions
		want string
	}{
		{api.LogOptions{Rank: 1, Tail: api.MaxLogTail + 1}, `tail "1048577": want a number of bytes in 0..1048576`},
		{api.LogOptions{Rank: 1, Lines: api.MaxLogLines + 1}, `lines "100001": want a number of lines in 0..100000`},
	} {
		var ae *api.Error
		if _, _, err := tail(bad.opts); !errors.As(err, &ae) || ae.StatusCode != http.StatusBadRequest || ae.Message != bad.want {
			t.Errorf("%+v: %v, want 400 %s", bad.opts, err, bad.want)
		}
	}
	// What the client never sends, a client of its own may.
	for query, want := range map[string]string{
		"tail=-1":         `tail "-1": want a number of bytes in 0..1048576`,
		"tail=16k":        `tail "16k": want a number of bytes in 0..1048576`,
		"lines=-5":        `lines "-5": want a number of lines in 0..100000`,
		"lines=1&tail=x1": `tail "x1": want a number of bytes in 0..1048576`,
	} {
		tc.wantBadLogQuery(tc.agents[1], job.ID, "rank=1&"+query, want)
	}
	tc.checkInvariants()
}

// TestCluster_LogsOfEachAttemptFromAnyNode: a gang that failed once and
// then succeeded keeps both attempts' output; read through one node, each
// rank's attempt, local or proxied, is the one asked for and says which
// it is, the newest by default; an attempt the job never had, or one
// given badly, is refused, saying why.
func TestCluster_LogsOfEachAttemptFromAnyNode(t *testing.T) {
	t.Parallel()
	tc := startCluster(t, 2)
	// Each rank prints, then waits for the other to have printed: the
	// first to fail would have the other stopped.
	job := tc.submit(tc.agents[0], structs.JobSpec{Nodes: 2, Restarts: 1, Command: []string{"sh", "-c",
		`echo attempt $SKEIN_ATTEMPT rank $SKEIN_RANK; touch "$0/$SKEIN_ATTEMPT.$SKEIN_RANK"
		until [ -e "$0/$SKEIN_ATTEMPT.0" ] && [ -e "$0/$SKEIN_ATTEMPT.1" ]; do sleep 0.01; done
		[ "$SKEIN_ATTEMPT" -ge 2 ] || exit 7`, testutil.SharedDir(t)}})
	waitJob(t, tc.agents[0], job.ID, jobState(structs.JobSucceeded))
	read := func(opts api.LogOptions) (*api.LogStream, string, error) {
		return readLogs(tc.client(tc.agents[1]), job.ID, opts)
	}
	for rank := range 2 {
		for _, attempt := range []int{1, 2, 0} {
			ls, got, err := read(api.LogOptions{Rank: rank, Attempt: attempt, Stream: api.StreamStdout})
			if err != nil {
				t.Fatalf("rank %d, attempt %d: %v", rank, attempt, err)
			}
			served := attempt
			if attempt == 0 {
				served = 2 // the newest
			}
			if want := fmt.Sprintf("attempt %d rank %d\n", served, rank); got != want || ls.Attempt != served {
				t.Errorf("rank %d, attempt %d: %q of attempt %d, want %q of attempt %d", rank, attempt, got, ls.Attempt, want, served)
			}
		}
	}
	var ae *api.Error
	want := fmt.Sprintf("job %s has no attempt 3: its attempts are 1..2", structs.ShortID(job.ID))
	if _, _, err := read(api.LogOptions{Rank: 1, Attempt: 3}); !errors.As(err, &ae) || ae.StatusCode != http.StatusNotFound || ae.Message != want {
		t.Errorf("attempt 3: %v, want 404 %s", err, want)
	}
	for _, bad := range []string{"0", "-1", "x"} {
		tc.wantBadLogQuery(tc.agents[1], job.ID, "attempt="+bad, fmt.Sprintf("attempt %q: want a number from 1 (the first attempt) on", bad))
	}
	tc.checkInvariants()
}

// readLogs reads one stream of a job's logs whole through c.
func readLogs(c *api.Client, jobID string, opts api.LogOptions) (*api.LogStream, string, error) {
	ls, err := c.OpenLogs(context.Background(), jobID, opts)
	if err != nil {
		return nil, "", err
	}
	defer ls.Close()
	b, err := io.ReadAll(ls)
	return ls, string(b), err
}

// wantBadLogQuery fails the test unless a's logs route answers a query
// (one the client never sends) with 400 and want.
func (tc *testCluster) wantBadLogQuery(a *Agent, jobID, query, want string) {
	tc.t.Helper()
	token := tc.admin
	if token == "" {
		token = clusterToken
	}
	req, err := http.NewRequest(http.MethodGet, a.HTTPAddr()+"/v1/jobs/"+jobID+"/logs?"+query, nil)
	if err != nil {
		tc.t.Fatal(err)
	}
	req.Header.Set(api.TokenHeader, token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tc.t.Fatal(err)
	}
	err = api.ReadError(resp) // closes the body
	var ae *api.Error
	if !errors.As(err, &ae) || ae.StatusCode != http.StatusBadRequest || ae.Message != want {
		tc.t.Errorf("?%s: %v, want 400 %s", query, err, want)
	}
}

// TestCluster_LogsResumeFromAnOffsetThroughAnyNode: read through one node,
// each rank's stream, the local one and the one proxied from the other
// node, says where it begins (api.LogOffsetHeader) and goes on from the
// ?offset asked: all of it from 0, the rest from the middle; followed
// from its end (?lines), its offset is where that end begins; followed
// from an offset, it goes on to what the job writes next. An offset out
// of bounds, or with a tail, is refused.
func TestCluster_LogsResumeFromAnOffsetThroughAnyNode(t *testing.T) {
	t.Parallel()
	tc := startCluster(t, 2)
	gate := testutil.JobDir(t) + "/gate"
	job := tc.submit(tc.agents[0], structs.JobSpec{Nodes: 2, Command: []string{"sh", "-c",
		`seq 1 1000; until [ -e "$0" ]; do sleep 0.01; done; echo end`, gate}})
	waitJob(t, tc.agents[0], job.ID, jobState(structs.JobRunning))
	cl := tc.client(tc.agents[1])
	var whole strings.Builder
	for i := 1; i <= 1000; i++ {
		fmt.Fprintf(&whole, "%d\n", i)
	}
	all := whole.String()
	var follows []*api.LogStream
	for rank := range 2 {
		testutil.WaitFor(t, 30*time.Second, func() error {
			_, got, err := readLogs(cl, job.ID, api.LogOptions{Rank: rank})
			if err == nil && got != all {
				err = fmt.Errorf("rank %d has written %d bytes so far", rank, len(got))
			}
			return err
		})
		for _, from := range []int64{0, 1234, int64(len(all))} {
			ls, got, err := readLogs(cl, job.ID, api.LogOptions{Rank: rank, Offset: from})
			if err != nil {
				t.Fatal(err)
			}
			if ls.Offset != from || got != all[from:] {
				t.Errorf("rank %d from %d: begins at %d with %d bytes, want %d bytes from %d", rank, from, ls.Offset, len(got), len(all)-int(from), from)
			}
		}
		// Followed from its last 2 lines: where they begin.
		ls, err := cl.OpenLogs(context.Background(), job.ID, api.LogOptions{Rank: rank, Follow: true, Lines: 2})
		if err != nil {
			t.Fatal(err)
		}
		first := make([]byte, len("999\n1000\n"))
		if _, err := io.ReadFull(ls, first); err != nil || string(first) != "999\n1000\n" || ls.Offset != int64(len(all)-len(first)) {
			t.Errorf("rank %d followed from its last 2 lines: %q (%v) at %d, want them at %d", rank, first, err, ls.Offset, len(all)-len(first))
		}
		ls.Close()
		// Followed from an offset: what is left, then what comes.
		if ls, err = cl.OpenLogs(context.Background(), job.ID, api.LogOptions{Rank: rank, Follow: true, Offset: int64(len(all) - 5)}); err != nil {
			t.Fatal(err)
		}
		defer ls.Close()
		follows = append(follows, ls)
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for rank, ls := range follows {
		if rest, err := io.ReadAll(ls); err != nil || string(rest) != "1000\nend\n" {
			t.Errorf("rank %d followed from 5 bytes before the end: %q (%v)", rank, rest, err)
		}
	}
	for query, want := range map[string]string{
		"offset=-1":         `offset "-1": want a number of bytes from 0 on`,
		"offset=1k":         `offset "1k": want a number of bytes from 0 on`,
		"offset=3&lines=2":  "offset goes with neither tail nor lines",
		"offset=3&tail=100": "offset goes with neither tail nor lines",
	} {
		tc.wantBadLogQuery(tc.agents[1], job.ID, "rank=1&"+query, want)
	}
	waitJob(t, tc.agents[0], job.ID, jobState(structs.JobSucceeded))
	tc.checkInvariants()
}
