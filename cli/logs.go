package cli

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"sync"
	"unicode/utf8"

	ucli "github.com/urfave/cli/v2"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/structs"
)

func logsCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "logs",
		Usage: "print a job's output: its stdout on stdout, its stderr on stderr",
		Description: "Prints what the node keeps of each stream of the job's newest attempt: its newest output, up\n" +
			"to half of the agent's --log-max. When older output was dropped, a line on stderr says how\n" +
			"much, before the stream. With --tail N only the last N lines of each stream (of its last\n" +
			"1 MiB) are printed.\n\n" +
			"--attempt N prints attempt N (the job's first placement is attempt 1) and --all-attempts\n" +
			"every attempt in turn, each after a line on stderr that names it, its node and how it\n" +
			"ended: \"skein: attempt 1 on gpu-01: failed: exited with code 7\".\n\n" +
			"-f follows the job as it runs, through its restarts, until it ends; then a line on stderr\n" +
			"says how (\"job 3f2a1b0c failed: exited with code 7\") and the exit status is the job's:\n" +
			"0 succeeded, its exit code when it failed with one (128+N for signal N), 124 timed out,\n" +
			"143 cancelled, 125 failed without an exit code (lost with its node, never started).\n" +
			"With --attempt N, -f follows that attempt alone, and the status says how it ended (143\n" +
			"when it was stopped). Interrupted, -f exits 0 and the job goes on. Other errors exit 1,\n" +
			"usage errors 2.\n\n" +
			"--json prints one JSON object a line on stdout instead: {\"type\":\"attempt\",...} before\n" +
			"each attempt's output (job, attempt, rank, node, alloc, state, exit_code, reason),\n" +
			"{\"type\":\"output\",\"attempt\":1,\"rank\":0,\"stream\":\"stdout\",\"text\":\"...\\n\"} for each\n" +
			"line of output (a line longer than 64 KiB in several), {\"type\":\"dropped\",...} for what\n" +
			"the log cap dropped (stream, bytes, log_max), {\"type\":\"lost\",...} for the rest of a stream\n" +
			"on a node out of reach (stream, node, after: the bytes printed) and, with -f,\n" +
			"{\"type\":\"end\",...} (job, state, exit_code, reason, exit: the exit status).\n\n" +
			"A stream whose node dies, freezes or is cut off goes on through another node of --addr\n" +
			"from the byte it got to, none printed twice; when the node that holds the output is itself\n" +
			"out of reach once its attempt has ended, a line on stderr says so and the next attempt follows.",
		ArgsUsage: "ID",
		Flags: []ucli.Flag{
			&ucli.BoolFlag{Name: "follow", Aliases: []string{"f"}, Usage: "keep printing until the job ends, and exit with how it ended"},
			&ucli.IntFlag{Name: "rank", Usage: "rank of a multi-node job"},
			&ucli.IntFlag{Name: "tail", Usage: "print only the last `N` lines of each stream"},
			&ucli.IntFlag{Name: "attempt", Usage: "print attempt `N` (1 is the first) instead of the newest"},
			&ucli.BoolFlag{Name: "all-attempts", Usage: "print every attempt, each after a line naming it"},
			&ucli.BoolFlag{Name: "json", Usage: "print JSON objects, one a line, instead of the output"},
		},
		Action: logsAction,
	}
}

// logsRequest is what `skein logs` was asked for.
type logsRequest struct {
	id      string
	rank    int
	lines   int  // --tail; 0: all that is kept
	attempt int  // 0: the newest
	all     bool // --all-attempts
	follow  bool
	json    bool
}

func logsAction(c *ucli.Context) error {
	args, err := cmdArgs(c, "ID")
	if err != nil {
		return err
	}
	req := logsRequest{id: args[0], rank: c.Int("rank"), lines: c.Int("tail"), attempt: c.Int("attempt"),
		all: c.Bool("all-attempts"), follow: c.Bool("follow"), json: c.Bool("json")}
	switch {
	case req.rank < 0:
		return usagef(c, "--rank %d: must not be negative", req.rank)
	case c.IsSet("tail") && (req.lines < 1 || req.lines > api.MaxLogLines):
		return usagef(c, "--tail %d: want a number of lines in 1..%d", req.lines, api.MaxLogLines)
	case c.IsSet("attempt") && req.attempt < 1:
		return usagef(c, "--attempt %d: want an attempt number from 1 (the first) on", req.attempt)
	case c.IsSet("attempt") && req.all:
		return usagef(c, "--attempt and --all-attempts cannot be used together")
	}
	cl, err := newClient(c)
	if err != nil {
		return err
	}
	sigCtx, stop := signal.NotifyContext(c.Context, os.Interrupt)
	defer stop()
	p := &logPrinter{cl: cl, req: req, notes: c.App.ErrWriter}
	if req.json {
		p.out = newJSONLogs(c.App.Writer)
	} else {
		p.out = newTextLogs(c.App.Writer, c.App.ErrWriter)
	}
	err = p.print(sigCtx)
	if sigCtx.Err() != nil {
		return nil // interrupted: the user has seen what they wanted
	}
	return err
}

// logPrinter prints the output of a job's attempts, one rank's.
type logPrinter struct {
	cl    *api.Client
	req   logsRequest
	out   logOutput
	notes io.Writer // where a followed job's progress is said
	// states (submit --follow): the job's state lines name each attempt
	// where it runs before its output, in place of the lines that name
	// an attempt (attemptHeader).
	states bool
}

// attemptHeader is the line, if any, that goes before an attempt's output.
type attemptHeader int

const (
	noHeader      attemptHeader = iota
	nameAttempt                 // "skein: attempt 2 on gpu-01: failed: ..."
	earlierExists               // the newest of several is shown alone
)

// print prints what req asks for.
func (p *logPrinter) print(ctx context.Context) error {
	r := p.req
	if !r.json && !r.follow && !r.all && r.attempt == 0 {
		// The newest attempt, as its node has it: no need to ask more.
		return p.show(ctx, nil, 0, false, r.lines, earlierExists)
	}
	d, err := p.cl.Job(ctx, r.id)
	if err != nil {
		return err
	}
	p.req.id = d.Job.ID
	first, last := r.attempt, r.attempt
	if r.all {
		first, last = 1, d.Job.Attempts
	}
	if r.follow {
		jw := newJobWatch(p.cl, d.Job.ID, p.notes)
		return p.follow(ctx, jw, first, r.attempt > 0, d.Job.Attempts)
	}
	if last == 0 {
		// The newest; for a job that has not started the node says
		// why there is nothing.
		return p.show(ctx, d, 0, false, r.lines, earlierExists)
	}
	for k := first; k <= last; k++ {
		if err := p.show(ctx, d, k, false, r.lines, nameAttempt); err != nil {
			return err
		}
	}
	return nil
}

// follow prints the attempts of a job from next on (0: the newest) as the
// job makes them, and returns once it has ended, having said how; with
// only, it prints the attempt next alone and says how that ended. --tail
// applies to the attempts up to before, which had output before the
// following began; the later ones are printed whole. The exit status
// error says how the job, or the attempt, ended.
func (p *logPrinter) follow(ctx context.Context, jw *jobWatch, next int, only bool, before int) error {
	shown := 0
	for {
		want := max(next, 1)
		d, err := jw.until(ctx, func(d *api.JobDetail) bool {
			return d.Job.Attempts >= want || d.Job.State.Terminal()
		})
		if err != nil {
			return err
		}
		if next == 0 {
			next = max(d.Job.Attempts, 1)
		}
		if d.Job.Attempts < next && only {
			// The job ended without it: the node says so.
			return p.show(ctx, d, next, false, 0, nameAttempt)
		}
		if d.Job.Attempts < next {
			p.out.jobEnd(d)
			return statusError(endStatus(string(d.Job.State), d.Job.ExitCode))
		}
		lines := 0
		if next <= before {
			lines = p.req.lines
		}
		header := earlierExists
		switch {
		case p.states:
			header = noHeader
			jw.sayAttempt(d, next) // even one that has ended: its output follows
		case shown > 0 || p.req.all || only:
			header = nameAttempt
		}
		if err := p.show(ctx, d, next, true, lines, header); err != nil {
			return err
		}
		shown++
		if only {
			d, err = jw.until(ctx, func(d *api.JobDetail) bool {
				a := allocOf(d, p.req.rank, next)
				return a == nil || a.State.Terminal()
			})
			if err != nil {
				return err
			}
			a := allocOf(d, p.req.rank, next)
			if a == nil {
				return fmt.Errorf("job %s: attempt %d of rank %d is gone", structs.ShortID(d.Job.ID), next, p.req.rank)
			}
			status := endStatus(string(a.State), a.ExitCode)
			p.out.attemptEnd(d, a, status)
			return statusError(status)
		}
		next++
	}
}

// show prints both streams of one attempt (0: the newest) and, when d is
// given, begins with what it says of the attempt; with follow it returns
// when the attempt is over and all its output was printed. A stream whose
// answer breaks off, or whose agent stops answering, is resumed through
// any agent from where it got to; one whose node is out of reach once
// its allocation ended is said to be, and the attempt's end is taken.
func (p *logPrinter) show(ctx context.Context, d *api.JobDetail, attempt int, follow bool, lines int, header attemptHeader) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var streams [2]*resumable
	names := [2]string{api.StreamStdout, api.StreamStderr}
	for i, name := range names {
		opts := api.LogOptions{Rank: p.req.rank, Attempt: attempt, Stream: name, Follow: follow, Lines: lines}
		ls, err := p.cl.OpenLogs(ctx, p.req.id, opts)
		if err != nil {
			return err
		}
		// Both streams of one attempt, even if a newer one begins now.
		attempt = cmp.Or(attempt, ls.Attempt)
		streams[i] = newResumable(ctx, p.cl, p.req.id, opts, ls, func(n int64) {
			p.out.dropped(attempt, name, n, 0)
		})
		defer streams[i].Close()
	}
	served := streams[0].opts.Attempt
	var a *structs.Allocation
	if d != nil {
		a = allocOf(d, p.req.rank, served)
	}
	p.out.begin(d, a, served, header)
	if follow {
		go watchStreams(ctx, streams[:]...)
	}
	var (
		wg    sync.WaitGroup
		errMu sync.Mutex
		first error // the first failure; later ones follow from cancel
	)
	for i, name := range names {
		r := streams[i]
		if ls := r.ls; ls.Dropped > 0 {
			p.out.dropped(served, name, ls.Dropped, ls.LogMax)
		}
		wg.Go(func() {
			w := p.out.stream(served, name)
			_, err := io.Copy(w, r)
			if cerr := w.Close(); err == nil {
				err = cerr
			}
			if errors.Is(err, errStreamLost) {
				p.out.lost(d, a, served, name, r.offset())
				err = nil
			}
			if err != nil && ctx.Err() == nil {
				errMu.Lock()
				if first == nil {
					first = fmt.Errorf("read logs: %w", err)
				}
				errMu.Unlock()
				cancel() // no point going on with one stream when the other failed
			}
		})
	}
	wg.Wait()
	return first
}

// logOutput is how `skein logs` prints: as text or as JSON.
type logOutput interface {
	// begin comes before an attempt's output: served is the attempt, a
	// its allocation of the rank (nil: not known), and header what the
	// text says first.
	begin(d *api.JobDetail, a *structs.Allocation, served int, header attemptHeader)
	// dropped says how much of a stream the node's log cap dropped.
	dropped(attempt int, stream string, n, logMax int64)
	// lost says that the rest of a stream, after byte have, is on a
	// node out of reach.
	lost(d *api.JobDetail, a *structs.Allocation, attempt int, stream string, have int64)
	// stream is where a stream's output goes; Close flushes it.
	stream(attempt int, stream string) io.WriteCloser
	// jobEnd says how a followed job ended, attemptEnd how a followed
	// attempt did and the exit status that says so.
	jobEnd(d *api.JobDetail)
	attemptEnd(d *api.JobDetail, a *structs.Allocation, status int)
}

// textLogs prints the output as it is, the job's stdout on stdout and its
// stderr on stderr, and skein's own lines on stderr.
type textLogs struct {
	mu             sync.Mutex // one for both: they may be one terminal or buffer
	stdout, stderr io.Writer
	named          string // the last line that named an attempt
}

func newTextLogs(stdout, stderr io.Writer) *textLogs {
	return &textLogs{stdout: stdout, stderr: stderr}
}

func (t *textLogs) note(format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	fmt.Fprintln(t.stderr, printable(fmt.Sprintf(format, args...)))
}

func (t *textLogs) begin(d *api.JobDetail, a *structs.Allocation, served int, header attemptHeader) {
	switch {
	case header == nameAttempt && a != nil:
		t.named = "skein: " + attemptLine(d, a)
		t.note("%s", t.named)
	case header == earlierExists && served > 1:
		t.note("skein: attempt %d; --attempt N or --all-attempts prints the earlier ones", served)
	}
}

func (t *textLogs) dropped(_ int, stream string, n, logMax int64) {
	capped := "log cap"
	if logMax > 0 {
		capped += " " + formatBytes(logMax)
	}
	t.note("skein: %s of earlier %s was dropped (%s, --log-max)", formatBytes(n), stream, capped)
}

func (t *textLogs) lost(d *api.JobDetail, a *structs.Allocation, _ int, stream string, have int64) {
	t.note("%s", lostLine(d, a, stream, have))
}

func (t *textLogs) stream(_ int, stream string) io.WriteCloser {
	w := t.stdout
	if stream == api.StreamStderr {
		w = t.stderr
	}
	return &lockedWriter{mu: &t.mu, w: w}
}

func (t *textLogs) jobEnd(d *api.JobDetail) { t.note("%s", endLine(&d.Job)) }

// attemptEnd says how the attempt ended, unless its header said so.
func (t *textLogs) attemptEnd(d *api.JobDetail, a *structs.Allocation, _ int) {
	if line := "skein: " + attemptLine(d, a); line != t.named {
		t.note("%s", line)
	}
}

// lockedWriter serialises writes to w with a lock shared between writers.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (l *lockedWriter) Close() error { return nil }

// maxJSONText is the most output one "output" object of `logs --json`
// holds: a longer line comes in several.
const maxJSONText = 64 << 10

// The objects of `skein logs --json`, one a line.
type (
	logAttemptJSON struct {
		Type     string `json:"type"` // "attempt"
		Job      string `json:"job"`
		Attempt  int    `json:"attempt"`
		Rank     int    `json:"rank"`
		Node     string `json:"node,omitempty"`
		Alloc    string `json:"alloc,omitempty"`
		State    string `json:"state,omitempty"`
		ExitCode *int   `json:"exit_code,omitempty"` // once it ended
		Reason   string `json:"reason,omitempty"`
		// Exit, on the attempt that -f --attempt N followed, is the
		// exit status that says how it ended.
		Exit *int `json:"exit,omitempty"`
	}
	logOutputJSON struct {
		Type    string `json:"type"` // "output"
		Attempt int    `json:"attempt"`
		Rank    int    `json:"rank"`
		Stream  string `json:"stream"`
		Text    string `json:"text"`
	}
	logDroppedJSON struct {
		Type    string `json:"type"` // "dropped"
		Attempt int    `json:"attempt"`
		Rank    int    `json:"rank"`
		Stream  string `json:"stream"`
		Bytes   int64  `json:"bytes"`
		LogMax  int64  `json:"log_max,omitempty"`
	}
	logLostJSON struct {
		Type    string `json:"type"` // "lost"
		Attempt int    `json:"attempt"`
		Rank    int    `json:"rank"`
		Stream  string `json:"stream"`
		Node    string `json:"node,omitempty"`
		After   int64  `json:"after"`
	}
	logEndJSON struct {
		Type     string `json:"type"` // "end"
		Job      string `json:"job"`
		State    string `json:"state"`
		ExitCode int    `json:"exit_code"`
		Reason   string `json:"reason,omitempty"`
		Exit     int    `json:"exit"`
	}
)

// jsonLogs prints `skein logs --json`.
type jsonLogs struct {
	mu   sync.Mutex
	enc  *json.Encoder
	rank int
}

func newJSONLogs(w io.Writer) *jsonLogs { return &jsonLogs{enc: json.NewEncoder(w)} }

func (j *jsonLogs) put(v any) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := j.enc.Encode(v); err != nil {
		return fmt.Errorf("write json: %w", err)
	}
	return nil
}

func (j *jsonLogs) begin(d *api.JobDetail, a *structs.Allocation, served int, _ attemptHeader) {
	j.rank = 0
	if a != nil {
		j.rank = a.Rank
	}
	_ = j.put(attemptJSON(d, a, served))
}

// attemptJSON is the "attempt" object of an attempt's allocation a (nil:
// only its number is known).
func attemptJSON(d *api.JobDetail, a *structs.Allocation, attempt int) *logAttemptJSON {
	rec := &logAttemptJSON{Type: "attempt", Attempt: attempt}
	if d != nil {
		rec.Job = d.Job.ID
	}
	if a != nil {
		rec.Rank, rec.Node, rec.Alloc, rec.State = a.Rank, nodeNameOf(d, a.NodeID), a.ID, string(a.State)
		if a.State.Terminal() {
			rec.ExitCode, rec.Reason = &a.ExitCode, allocWhy(a)
		}
	}
	return rec
}

func (j *jsonLogs) dropped(attempt int, stream string, n, logMax int64) {
	_ = j.put(logDroppedJSON{Type: "dropped", Attempt: attempt, Rank: j.rank, Stream: stream, Bytes: n, LogMax: logMax})
}

func (j *jsonLogs) lost(d *api.JobDetail, a *structs.Allocation, attempt int, stream string, have int64) {
	rec := logLostJSON{Type: "lost", Attempt: attempt, Rank: j.rank, Stream: stream, After: have}
	if a != nil {
		rec.Node = nodeNameOf(d, a.NodeID)
	}
	_ = j.put(rec)
}

func (j *jsonLogs) stream(attempt int, stream string) io.WriteCloser {
	return &jsonLines{out: j, rec: logOutputJSON{Type: "output", Attempt: attempt, Rank: j.rank, Stream: stream}}
}

func (j *jsonLogs) jobEnd(d *api.JobDetail) {
	_ = j.put(logEndJSON{Type: "end", Job: d.Job.ID, State: string(d.Job.State), ExitCode: d.Job.ExitCode,
		Reason: d.Job.Reason, Exit: endStatus(string(d.Job.State), d.Job.ExitCode)})
}

func (j *jsonLogs) attemptEnd(d *api.JobDetail, a *structs.Allocation, status int) {
	rec := attemptJSON(d, a, a.Attempt)
	rec.Exit = &status
	_ = j.put(rec)
}

// jsonLines cuts a stream into lines, each an "output" object.
type jsonLines struct {
	out *jsonLogs
	rec logOutputJSON
	buf []byte
}

func (l *jsonLines) Write(p []byte) (int, error) {
	l.buf = append(l.buf, p...)
	for {
		n := bytes.IndexByte(l.buf, '\n') + 1
		if n == 0 && len(l.buf) <= maxJSONText {
			return len(p), nil // the rest of the line is to come
		}
		if n == 0 || n > maxJSONText {
			n = maxJSONText
			for n > maxJSONText-utf8.UTFMax && !utf8.RuneStart(l.buf[n]) {
				n-- // cut between characters, not inside one
			}
		}
		if err := l.emit(n); err != nil {
			return 0, err
		}
	}
}

// emit puts out the first n bytes held.
func (l *jsonLines) emit(n int) error {
	l.rec.Text = string(l.buf[:n])
	l.buf = append(l.buf[:0], l.buf[n:]...)
	return l.out.put(l.rec)
}

// Close puts out the last line, which did not end with a newline.
func (l *jsonLines) Close() error {
	if len(l.buf) == 0 {
		return nil
	}
	return l.emit(len(l.buf))
}

// formatBytes renders a count of bytes for people: "512 B", "2.4 GiB",
// "100 MiB".
func formatBytes(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	v, i := float64(n), 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	if v == math.Trunc(v) {
		return fmt.Sprintf("%d %s", int64(v), units[i])
	}
	return fmt.Sprintf("%.1f %s", v, units[i])
}
