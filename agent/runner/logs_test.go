package runner

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

// logSizes measures a stream's two files, the rotated one first: a
// rotation between the two looks then counts a file once, never twice.
func logSizes(dir, name string) (rotated, current int64) {
	if fi, err := os.Lstat(filepath.Join(dir, name+rotatedSuffix)); err == nil {
		rotated = fi.Size()
	}
	if fi, err := os.Lstat(filepath.Join(dir, name)); err == nil {
		current = fi.Size()
	}
	return rotated, current
}

// withinCap checks that an allocation's logs hold no more than logMax, and
// no file more than its quarter.
func withinCap(dir string, logMax int64) error {
	var total int64
	for _, name := range []string{stdoutFile, stderrFile} {
		rotated, current := logSizes(dir, name)
		if rotated > logMax/4 || current > logMax/4 {
			return fmt.Errorf("%s: files of %d and %d bytes, over a quarter of the cap %d", name, rotated, current, logMax)
		}
		total += rotated + current
	}
	if total > logMax {
		return fmt.Errorf("logs hold %d bytes, over the cap %d", total, logMax)
	}
	return nil
}

// seqOutput is what seq 1 n prints.
func seqOutput(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		b.WriteString(strconv.Itoa(i))
		b.WriteByte('\n')
	}
	return b.String()
}

func TestLogs_YesJobStaysWithinItsCap(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.logMax = 256 << 10
	r, rec := e.runner(t)
	tk := task("yes")
	mustStart(t, r, tk)
	id := tk.Alloc.ID
	dir := filepath.Join(e.allocDir, id)
	waitState(t, rec, id, structs.AllocRunning)

	var dropped int64
	observe := func() {
		t.Helper()
		if err := withinCap(dir, e.logMax); err != nil {
			t.Fatal(err)
		}
		d, logMax, err := r.LogDropped(id, "stdout")
		if err != nil {
			t.Fatalf("LogDropped: %v", err)
		}
		if d < dropped {
			t.Fatalf("dropped went from %d to %d bytes", dropped, d)
		}
		if d > 0 && logMax != e.logMax {
			t.Fatalf("meta says the cap is %d, want %d", logMax, e.logMax)
		}
		dropped = d
	}
	grew := 0
	waitFor(t, 30*time.Second, "the logs to rotate many times", func() (bool, string) {
		before := dropped
		observe()
		if dropped > before {
			grew++
		}
		return grew >= 5 && dropped >= 20*e.logMax, fmt.Sprintf("dropped %d bytes, grew %d times", dropped, grew)
	})
	r.Stop(id, "enough")
	if u := waitTerminal(t, rec, id); u.State != structs.AllocKilled {
		t.Fatalf("yes ended %+v, want killed", u)
	}
	observe()
	if d, _, err := r.LogDropped(id, "stderr"); err != nil || d != 0 {
		t.Errorf("stderr dropped %d (%v), want nothing: yes writes none", d, err)
	}
	out := readAll(t, r, id, "stdout")
	if len(out) < int(e.logMax/4) || strings.Trim(out, "y\n") != "" {
		t.Errorf("kept %d bytes of stdout, want at least a full file of y lines", len(out))
	}
}

func TestLogs_RotationKeepsTheNewestOutputInOrder(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.logMax = 64 << 10
	r, rec := e.runner(t)
	const n = 100000
	tk := task("seq", "1", strconv.Itoa(n))
	mustStart(t, r, tk)
	if u := waitTerminal(t, rec, tk.Alloc.ID); u.State != structs.AllocSucceeded {
		t.Fatalf("seq ended %+v", u)
	}
	want := seqOutput(n)
	kept := readAll(t, r, tk.Alloc.ID, "stdout")
	dropped, logMax, err := r.LogDropped(tk.Alloc.ID, "stdout")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(want, kept) {
		t.Errorf("the %d bytes kept are not the end of the output", len(kept))
	}
	if dropped+int64(len(kept)) != int64(len(want)) {
		t.Errorf("dropped %d + kept %d bytes, want the %d written", dropped, len(kept), len(want))
	}
	if len(kept) <= int(e.logMax/4) || len(kept) > int(e.logMax/2) || logMax != e.logMax {
		t.Errorf("kept %d bytes under cap %d (meta %d), want more than a quarter and at most half", len(kept), e.logMax, logMax)
	}
	if err := withinCap(filepath.Join(e.allocDir, tk.Alloc.ID), e.logMax); err != nil {
		t.Error(err)
	}
}

func TestLogs_BelowTheCapNothingIsLost(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.logMax = 256 << 10
	r, rec := e.runner(t)
	const n = 5000 // about 24 KB on each stream
	tk := task("/bin/sh", "-c", `seq 1 "$1"; seq 1 "$1" >&2`, "job", strconv.Itoa(n))
	mustStart(t, r, tk)
	if u := waitTerminal(t, rec, tk.Alloc.ID); u.State != structs.AllocSucceeded {
		t.Fatalf("job ended %+v", u)
	}
	dir := filepath.Join(e.allocDir, tk.Alloc.ID)
	for _, stream := range []string{"stdout", "stderr"} {
		if got := readAll(t, r, tk.Alloc.ID, stream); got != seqOutput(n) {
			t.Errorf("%s: kept %d bytes, want all %d in order", stream, len(got), len(seqOutput(n)))
		}
		if d, _, err := r.LogDropped(tk.Alloc.ID, stream); d != 0 || err != nil {
			t.Errorf("%s: dropped %d (%v), want 0", stream, d, err)
		}
		if _, err := os.Lstat(filepath.Join(dir, stream+".log"+rotatedSuffix)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s was rotated under its cap (%v)", stream, err)
		}
	}
}

// A process the job started in a session of its own survives the job's
// process group and holds the output pipe open: the supervisor still
// records the outcome, with the output written before.
func TestLogs_AnEscapedChildHoldingThePipeDoesNotHoldTheOutcome(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// Unconfined: a confined job's cgroup takes the escaped child with it
	// (TestConfine_SetsidDaemonDiesWithItsJob).
	r, rec := e.runner(t, unconfined)
	work := testutil.SharedDir(t)
	tk := sh(`setsid sh -c 'echo $$ > escaped; exec sleep 60' & until [ -s escaped ]; do sleep 0.01; done; echo done`)
	tk.Job.Spec.Workdir = work
	mustStart(t, r, tk)
	escaped := filepath.Join(work, "escaped")
	waitFile(t, escaped, "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(readFile(t, escaped)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	child, err := newProcRecord(pid, time.Now())
	if err != nil {
		t.Fatalf("the escaped child is not running: %v", err)
	}
	if u := waitTerminal(t, rec, tk.Alloc.ID); u.State != structs.AllocSucceeded {
		t.Fatalf("job ended %+v", u)
	}
	if !child.alive() {
		t.Fatal("the escaped child is gone: the pipe was not held open")
	}
	if got := readAll(t, r, tk.Alloc.ID, "stdout"); got != "done\n" {
		t.Errorf("stdout %q, want done", got)
	}
}

// blockedSink takes nothing until released, as a hung disk would.
type blockedSink struct {
	release chan struct{}
	got     bytes.Buffer
	skipped atomic.Int64
}

func (s *blockedSink) write(p []byte) {
	<-s.release
	s.got.Write(p)
}
func (s *blockedSink) skip(n int) { s.skipped.Add(int64(n)) }
func (s *blockedSink) close()     {}

func TestLogCopy_AHungDiskDoesNotHoldTheJobUp(t *testing.T) {
	t.Parallel()
	sink := &blockedSink{release: make(chan struct{})}
	c, err := startCopy(sink, 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("0123456789abcdef"), 4<<20/16) // 4 MiB, more than the buffers and the pipe hold
	wrote := make(chan error, 1)
	go func() {
		_, err := c.w.Write(data)
		wrote <- err
	}()
	select {
	case err := <-wrote:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the job's write still blocks while the disk takes nothing")
	}
	close(sink.release)
	c.finish(time.Second)
	got, skipped := int64(sink.got.Len()), sink.skipped.Load()
	if skipped == 0 || got+skipped != int64(len(data)) {
		t.Errorf("wrote %d and skipped %d bytes, want %d in all with some skipped", got, skipped, len(data))
	}
	if !bytes.HasPrefix(data, sink.got.Bytes()[:min(got, logChunk)]) {
		t.Error("what the disk took first is not the start of the output")
	}
}

// newTestLog makes a stream log of 1 KiB files in a directory of its own.
func newTestLog(t *testing.T) (*logFile, string) {
	t.Helper()
	dir := t.TempDir()
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	lf, err := newLogFile(d, stdoutFile, spec{LogMax: MinLogMax}, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lf.close)
	return lf, dir
}

// lineSource writes numbered lines, one after the other.
type lineSource struct {
	lf      *logFile
	next    int
	written strings.Builder
}

// write writes at least n bytes of whole lines.
func (s *lineSource) write(n int) {
	var b strings.Builder
	for b.Len() < n {
		fmt.Fprintf(&b, "%06d\n", s.next)
		s.next++
	}
	s.lf.write([]byte(b.String()))
	s.written.WriteString(b.String())
}

func TestLogReader_FollowsAcrossRotations(t *testing.T) {
	t.Parallel()
	lf, dir := newTestLog(t)
	fileMax := int(lf.fileMax)
	src := &lineSource{lf: lf}
	lr, err := openLogReader(dir, stdoutFile, true)
	if err != nil {
		t.Fatal(err)
	}
	defer lr.Close()
	var got strings.Builder
	readOn := func() {
		t.Helper()
		b, err := io.ReadAll(lr)
		if err != nil {
			t.Fatal(err)
		}
		got.Write(b)
	}

	// A reader that keeps up sees every byte once, across rotations.
	for range 20 {
		src.write(300)
		readOn()
	}
	if got.String() != src.written.String() {
		t.Fatalf("a reader that kept up read %d bytes, want the %d written", got.Len(), src.written.Len())
	}
	// Two rotations while it does not read: the rotated file is still
	// there, so nothing is lost.
	src.write(fileMax - int(lf.size) + fileMax + 10)
	readOn()
	if got.String() != src.written.String() {
		t.Fatalf("a reader two rotations behind read %d bytes, want the %d written", got.Len(), src.written.Len())
	}
	// Further behind, it loses what the cap dropped, and nothing else:
	// what it reads is the output up to some point, then the output from a
	// later one to the end, once each.
	src.write(4 * fileMax)
	readOn()
	want, read := src.written.String(), got.String()
	upTo := 0
	for upTo < len(read) && read[upTo] == want[upTo] {
		upTo++
	}
	if !strings.HasSuffix(want, read[upTo:]) {
		t.Fatalf("a reader that fell behind read %d bytes in order, then %d that are not the end of the output", upTo, len(read)-upTo)
	}
	if lost := int64(len(want) - len(read)); lost <= 0 || lost > lf.dropped {
		t.Errorf("a reader that fell behind lost %d bytes, want some, at most the %d the cap dropped", lost, lf.dropped)
	}

	// A new reader starts at the oldest file kept.
	fresh, err := openLogReader(dir, stdoutFile, true)
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	kept, err := io.ReadAll(fresh)
	if err != nil {
		t.Fatal(err)
	}
	if want := src.written.String(); int64(len(kept))+lf.dropped != int64(len(want)) || !strings.HasSuffix(want, string(kept)) {
		t.Errorf("a new reader read %d bytes, %d dropped, want the end of the %d written", len(kept), lf.dropped, len(want))
	}
}

func TestLogReader_WithoutFollowingReadsTheFilesKeptWhenOpened(t *testing.T) {
	t.Parallel()
	lf, dir := newTestLog(t)
	fileMax := int(lf.fileMax)
	src := &lineSource{lf: lf}
	src.write(fileMax + fileMax/2) // a full .1, and half the current file
	snap, err := openLogReader(dir, stdoutFile, false)
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	// Much more output while it reads: it reads the two files it opened
	// to their end, the current one as it filled, and nothing after.
	start := src.written.Len() - int(lf.rotated+lf.size)
	src.write(3 * fileMax)
	got, err := io.ReadAll(snap)
	if err != nil {
		t.Fatal(err)
	}
	if want := src.written.String()[start : start+2*fileMax]; string(got) != want {
		t.Errorf("read %d bytes, want the %d of the two files kept when it opened them", len(got), len(want))
	}
}

func TestLogs_LinksLeftInPlaceAreNeverFollowed(t *testing.T) {
	t.Parallel()
	target := filepath.Join(t.TempDir(), "target")
	if err := os.WriteFile(target, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, name := range []string{stdoutFile, stdoutFile + rotatedSuffix, stdoutFile + metaSuffix} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	lf, err := newLogFile(d, stdoutFile, spec{LogMax: MinLogMax}, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	(&lineSource{lf: lf}).write(3 * int(lf.fileMax))
	lf.close()
	if got := readFile(t, target); got != "keep" {
		t.Errorf("the link's target holds %q: the logs wrote through a link", got)
	}
	for _, name := range []string{stdoutFile, stdoutFile + rotatedSuffix, stdoutFile + metaSuffix} {
		if fi, err := os.Lstat(filepath.Join(dir, name)); err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v (%v), want a plain 0600 file", name, fi.Mode(), err)
		}
	}

	// Reading never follows one either.
	if err := os.Remove(filepath.Join(dir, stdoutFile+rotatedSuffix)); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{stdoutFile, stdoutFile + metaSuffix} {
		if err := os.Remove(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := openLogReader(dir, stdoutFile, true); !errors.Is(err, errNotPlainFile) {
		t.Errorf("reading a log that is a link: %v, want %v", err, errNotPlainFile)
	}
	if _, err := readLogMeta(filepath.Join(dir, stdoutFile+metaSuffix)); !errors.Is(err, errNotPlainFile) {
		t.Errorf("reading a meta that is a link: %v, want %v", err, errNotPlainFile)
	}
}

func TestRunner_LogCapBelowTheMinimumIsRefused(t *testing.T) {
	t.Parallel()
	_, err := New(Config{AllocDir: t.TempDir(), SupervisorCmd: []string{"true"}, LogMax: MinLogMax - 1})
	if err == nil || !strings.Contains(err.Error(), "log cap") {
		t.Fatalf("New with a %d-byte log cap: %v, want an error naming the cap", MinLogMax-1, err)
	}
}

// readAll reads what an allocation keeps of a stream.
func readAll(t *testing.T, r *Runner, allocID, stream string) string {
	t.Helper()
	rd, err := r.OpenLog(allocID, stream, false)
	if err != nil {
		t.Fatalf("OpenLog(%s): %v", stream, err)
	}
	defer rd.Close()
	b, err := io.ReadAll(rd)
	if err != nil {
		t.Fatalf("read %s: %v", stream, err)
	}
	return string(b)
}

// wholeTail is more bytes than a test's log holds.
const wholeTail = 1 << 20

// lastLines is the last n lines of s, as tail -n prints them.
func lastLines(s string, n int) string {
	lines := strings.SplitAfter(s, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return strings.Join(lines[max(0, len(lines)-n):], "")
}

// readTail reads the end of a stream log that is not followed.
func readTail(t *testing.T, dir string, maxBytes int64, lines int) string {
	t.Helper()
	rd, err := openLogTail(dir, stdoutFile, false, maxBytes, lines)
	if err != nil {
		t.Fatalf("openLogTail(%d bytes, %d lines): %v", maxBytes, lines, err)
	}
	defer rd.Close()
	b, err := io.ReadAll(rd)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestLogTail_ReadsTheEndAcrossARotation(t *testing.T) {
	t.Parallel()
	lf, dir := newTestLog(t)
	fileMax := int(lf.fileMax)
	src := &lineSource{lf: lf}
	src.write(3*fileMax + fileMax/2) // rotated twice: a full .1, and half the current file
	if lf.dropped == 0 || lf.rotated != lf.fileMax || lf.size == 0 {
		t.Fatalf("the log holds %d + %d bytes, %d dropped: want a full .1 and some of the current file", lf.rotated, lf.size, lf.dropped)
	}
	written := src.written.String()
	kept := written[len(written)-int(lf.rotated+lf.size):]
	cur := int(lf.size)
	const line = len("000000\n")
	for _, tc := range []struct {
		name     string
		maxBytes int64
		lines    int
		want     string
	}{
		{"bytes within the current file", int64(cur - 5), -1, kept[len(kept)-(cur-5):]},
		{"bytes into the rotated file", int64(cur + 100), -1, kept[len(kept)-(cur+100):]},
		{"bytes of both files exactly", int64(len(kept)), -1, kept},
		{"more bytes than kept", wholeTail, -1, kept},
		{"no bytes", 0, -1, ""},
		{"lines within the current file", wholeTail, 3, lastLines(kept, 3)},
		{"lines into the rotated file", wholeTail, cur/line + 10, lastLines(kept, cur/line+10)},
		{"more lines than kept", wholeTail, 1000, kept},
		{"no lines", wholeTail, 0, ""},
		{"lines within fewer bytes", 20, 10, kept[len(kept)-20:]},
	} {
		if got := readTail(t, dir, tc.maxBytes, tc.lines); got != tc.want {
			t.Errorf("%s: read %d bytes %.20q..., want %d %.20q...", tc.name, len(got), got, len(tc.want), tc.want)
		}
	}

	// A last line that is still being written counts as a line.
	lf.write([]byte("half a line"))
	if got, want := readTail(t, dir, wholeTail, 2), lastLines(kept, 1)+"half a line"; got != want {
		t.Errorf("the last 2 lines, the last unfinished: %q, want %q", got, want)
	}
}

func TestLogTail_LinesAreFoundAcrossReadBlocks(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	lf, err := newLogFile(d, stdoutFile, spec{LogMax: 1 << 20}, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer lf.close()
	// Lines of several blocks each, then short ones: the newlines sought
	// lie in blocks read before.
	var all strings.Builder
	for i := range 5 {
		all.WriteString(strings.Repeat(strconv.Itoa(i), 3*logChunk/2) + "\n")
	}
	all.WriteString("a\nb\n")
	lf.write([]byte(all.String()))
	for _, n := range []int{1, 2, 3, 4, 7} {
		if got, want := readTail(t, dir, wholeTail, n), lastLines(all.String(), n); got != want {
			t.Errorf("the last %d lines: %d bytes, want %d", n, len(got), len(want))
		}
	}
}

func TestLogTail_WithoutFollowingEndsWhereTheLogEndedWhenOpened(t *testing.T) {
	t.Parallel()
	lf, dir := newTestLog(t)
	fileMax := int(lf.fileMax)
	src := &lineSource{lf: lf}
	src.write(fileMax + fileMax/2)
	rd, err := openLogTail(dir, stdoutFile, false, int64(fileMax), -1)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	want := src.written.String()[src.written.Len()-fileMax:]
	src.write(3 * fileMax) // rotates the files it holds away
	got, err := io.ReadAll(rd)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("read %d bytes, want the %d that ended the log when it was opened", len(got), len(want))
	}
}

func TestLogTail_FollowingStartsAtTheEndAndReadsOnAcrossRotations(t *testing.T) {
	t.Parallel()
	lf, dir := newTestLog(t)
	fileMax := int(lf.fileMax)
	src := &lineSource{lf: lf}
	src.write(2*fileMax + fileMax/2)
	const line = len("000000\n")
	lr, err := openLogTail(dir, stdoutFile, true, wholeTail, 5)
	if err != nil {
		t.Fatal(err)
	}
	defer lr.Close()
	from := src.written.Len() - 5*line
	var got strings.Builder
	for range 10 {
		b, err := io.ReadAll(lr)
		if err != nil {
			t.Fatal(err)
		}
		got.Write(b)
		src.write(fileMax / 2) // a rotation every other round
	}
	b, err := io.ReadAll(lr)
	if err != nil {
		t.Fatal(err)
	}
	got.Write(b)
	if want := src.written.String()[from:]; got.String() != want {
		t.Errorf("a follower from the last 5 lines read %d bytes, want the %d from there on", got.Len(), len(want))
	}
}

func TestLogTail_AStreamWithoutOutputHasNone(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r, rec := e.runner(t)
	tk := task("true")
	mustStart(t, r, tk)
	waitTerminal(t, rec, tk.Alloc.ID)
	rd, err := r.OpenLogTail(tk.Alloc.ID, "stdout", false, 10, -1)
	if err != nil {
		t.Fatalf("the tail of an empty stdout: %v", err)
	}
	defer rd.Close()
	if b, err := io.ReadAll(rd); err != nil || len(b) != 0 {
		t.Errorf("the tail of an empty stdout: %q %v, want nothing", b, err)
	}
	if _, err := r.OpenLogTail(tk.Alloc.ID, "stdin", false, 10, -1); !errors.Is(err, ErrUnknownStream) {
		t.Errorf("the tail of stdin: %v, want %v", err, ErrUnknownStream)
	}
	if _, err := r.OpenLogTail("no-such-alloc", "stdout", false, 10, -1); !errors.Is(err, ErrNoLogs) {
		t.Errorf("the tail of an unknown allocation: %v, want %v", err, ErrNoLogs)
	}
}

func TestRunner_TailOfBothStreamsOfARotatedJob(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.logMax = 64 << 10
	r, rec := e.runner(t)
	const n = 30000 // 169 KB a stream: rotated several times under 16 KiB files
	tk := task("/bin/sh", "-c", `seq 1 "$1"; seq 1 "$1" | sed s/^/e/ >&2`, "job", strconv.Itoa(n))
	mustStart(t, r, tk)
	if u := waitTerminal(t, rec, tk.Alloc.ID); u.State != structs.AllocSucceeded {
		t.Fatalf("job ended %+v", u)
	}
	out := seqOutput(n)
	errOut := strings.ReplaceAll(out, "\n", "\ne")
	errOut = "e" + errOut[:len(errOut)-1]
	for _, s := range []struct {
		stream, written string
	}{{"stdout", out}, {"stderr", errOut}} {
		rotated, current := logSizes(filepath.Join(e.allocDir, tk.Alloc.ID), s.stream+".log")
		if rotated == 0 {
			t.Fatalf("%s was not rotated", s.stream)
		}
		for _, lines := range []int{1, 10, int(current)/5 + 100} {
			rd, err := r.OpenLogTail(tk.Alloc.ID, s.stream, false, wholeTail, lines)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(rd)
			rd.Close()
			if err != nil {
				t.Fatal(err)
			}
			if want := lastLines(s.written, lines); string(got) != want {
				t.Errorf("%s, last %d lines: %d bytes %.20q..., want %d %.20q...", s.stream, lines, len(got), got, len(want), want)
			}
		}
	}
}

// BenchmarkLogTail reads the end of a stream whose logs are full under
// the default cap (a .1 of 25 MiB and a current file of half that): the
// last 16 KiB, the last 100 lines, and for comparison the whole log kept.
func BenchmarkLogTail(b *testing.B) {
	dir := b.TempDir()
	d, err := os.Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	lf, err := newLogFile(d, stdoutFile, spec{LogMax: DefaultLogMax}, hclog.NewNullLogger())
	if err != nil {
		b.Fatal(err)
	}
	line := []byte(strings.Repeat("x", 99) + "\n")
	chunk := bytes.Repeat(line, logChunk/len(line))
	for lf.size < lf.fileMax/2 || lf.rotated == 0 {
		lf.write(chunk)
	}
	lf.close()
	for _, bc := range []struct {
		name     string
		maxBytes int64
		lines    int
		whole    bool
	}{
		{"bytes=16KiB", 16 << 10, -1, false},
		{"lines=100", wholeTail, 100, false},
		{"whole", 0, 0, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var n int64
			for b.Loop() {
				var rd io.ReadCloser
				if bc.whole {
					rd, err = openLogReader(dir, stdoutFile, false)
				} else {
					rd, err = openLogTail(dir, stdoutFile, false, bc.maxBytes, bc.lines)
				}
				if err != nil {
					b.Fatal(err)
				}
				n, err = io.Copy(io.Discard, rd)
				rd.Close()
				if err != nil {
					b.Fatal(err)
				}
			}
			b.SetBytes(n)
		})
	}
}
