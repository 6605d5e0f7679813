package runner

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
)

// How a job's output is kept. The job writes into one pipe per stream; the
// supervisor copies each pipe into <stream>.log and, when that file reaches
// a quarter of the allocation's log cap, renames it to <stream>.log.1 (the
// older .1 goes) and starts a new one. Each stream therefore keeps at most
// half the cap, its newest output, in two files, and an allocation never
// holds more than its cap on disk. What rotation discarded is counted in
// <stream>.log.meta, which the logs route reports.
const (
	// DefaultLogMax is an allocation's log cap when none is configured.
	DefaultLogMax = 100 << 20
	// MinLogMax is the smallest log cap a runner takes: 1 KiB per file.
	MinLogMax = 4 << 10

	rotatedSuffix = ".1"
	metaSuffix    = ".meta"
	// logChunk is how much the copier reads from a pipe at once, and
	// logBuffers how many chunks it may hold that the file has not taken
	// yet (1 MiB per stream).
	logChunk   = 32 << 10
	logBuffers = 32
	// logStall is how long the copier waits for the file to take a chunk
	// once its buffers are full. After that it discards output (counted as
	// skipped) until the file takes a chunk again, so a hung disk never
	// holds the job up for longer.
	logStall = 10 * time.Second
	// logDrain is how long the copier keeps reading, once the job is over,
	// a pipe that a process the job left outside its group holds open.
	logDrain = 2 * time.Second
	// maxMetaFile bounds what is read of a .meta file.
	maxMetaFile = 4 << 10
)

// logMeta is <stream>.log.meta: how much of a stream the supervisor did
// not keep. A stream that lost nothing has none.
type logMeta struct {
	// Dropped counts the bytes no longer kept: rotated out under the cap
	// or skipped.
	Dropped int64 `json:"dropped"`
	// Skipped counts the bytes discarded because the disk did not take
	// them (logStall, a full disk); they are part of Dropped.
	Skipped int64 `json:"skipped,omitempty"`
	// LogMax is the allocation's log cap, of which the stream keeps half.
	LogMax int64 `json:"log_max"`
}

// logName is the file an allocation keeps a stream in.
func logName(stream string) (string, error) {
	switch stream {
	case "stdout":
		return stdoutFile, nil
	case "stderr":
		return stderrFile, nil
	}
	return "", fmt.Errorf("%w %q: use stdout or stderr", ErrUnknownStream, stream)
}

// specLogMax is the log cap a spec gives its allocation: the default for a
// spec written before specs had one, and never under MinLogMax.
func specLogMax(sp spec) int64 {
	if sp.LogMax <= 0 {
		return DefaultLogMax
	}
	return max(sp.LogMax, MinLogMax)
}

// createLog creates the file name in the allocation directory dir for one
// of the job's streams: its log, or what is recorded of it. The file is
// 0600, root's, and new: whatever has the name already (a file, a link
// someone left there) is unlinked, never followed. The job never holds
// its logs: its output reaches them only through the supervisor's pipes,
// so the log cap holds whatever the job does, and its owner reads them
// through the API.
func createLog(dir *os.File, name string) (*os.File, error) {
	const flags = syscall.O_WRONLY | syscall.O_CREAT | syscall.O_EXCL | syscall.O_NOFOLLOW | syscall.O_CLOEXEC
	dirfd := int(dir.Fd())
	fd, err := syscall.Openat(dirfd, name, flags, 0o600)
	if errors.Is(err, syscall.EEXIST) {
		if err = syscall.Unlinkat(dirfd, name); err == nil {
			fd, err = syscall.Openat(dirfd, name, flags, 0o600)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", name, err)
	}
	return os.NewFile(uintptr(fd), name), nil
}

// logFile writes one stream to its log in the allocation directory,
// rotating it at fileMax. Only the copier's writing goroutine calls write
// and close; skip may be called from any goroutine.
type logFile struct {
	dir     *os.File // the allocation directory, held open
	name    string
	sp      spec
	fileMax int64
	log     hclog.Logger

	f       *os.File // nil when no file could be made
	size    int64    // of f
	rotated int64    // size of <name>.1
	dropped int64    // rotated out
	skipped atomic.Int64
	saved   logMeta // what .meta holds
	failed  bool    // an error was logged: one is enough
}

// newLogFile creates the log name of a stream, which keeps half of its
// allocation's log cap (the spec's) in two files.
func newLogFile(dir *os.File, name string, sp spec, log hclog.Logger) (*logFile, error) {
	l := &logFile{dir: dir, name: name, sp: sp, fileMax: specLogMax(sp) / 4, log: log.With("log", name),
		saved: logMeta{LogMax: specLogMax(sp)}}
	f, err := createLog(dir, name)
	if err != nil {
		return nil, err
	}
	l.f = f
	return l, nil
}

// write appends p, rotating as often as the cap requires; what cannot be
// written is skipped.
func (l *logFile) write(p []byte) {
	for len(p) > 0 {
		if l.f == nil || l.size >= l.fileMax {
			if err := l.rotate(); err != nil {
				l.fail(err)
				l.skip(len(p))
				break
			}
		}
		n, err := l.f.Write(p[:min(int64(len(p)), l.fileMax-l.size)])
		l.size += int64(n)
		p = p[n:]
		if err != nil {
			l.fail(fmt.Errorf("write %s: %w", l.name, err))
			l.skip(len(p))
			break
		}
	}
	if l.skipped.Load() != l.saved.Skipped {
		l.saveMeta()
	}
}

// rotate renames a full log to <name>.1, replacing the older one, and
// starts a new log. What was dropped is recorded once the new log is
// there, so that a reader finds no log only for a moment.
func (l *logFile) rotate() error {
	if l.f != nil {
		dirfd := int(l.dir.Fd())
		// A log that is gone (the job removed it) needs no rename.
		err := syscall.Renameat(dirfd, l.name, dirfd, l.name+rotatedSuffix)
		if err != nil && !errors.Is(err, syscall.ENOENT) {
			return fmt.Errorf("rotate %s: %w", l.name, err)
		}
		_ = l.f.Close()
		l.f = nil
		l.dropped += l.rotated
		l.rotated, l.size = l.size, 0
	}
	f, err := createLog(l.dir, l.name)
	if err != nil {
		return err
	}
	l.f = f
	l.saveMeta()
	return nil
}

// skip counts n bytes of output that were not kept.
func (l *logFile) skip(n int) { l.skipped.Add(int64(n)) }

// saveMeta replaces <name>.meta with what was dropped, if that changed.
// The meta goes through a rename, so a reader sees one whole; it is not
// synced: after a crash of the machine it may be behind.
func (l *logFile) saveMeta() {
	skipped := l.skipped.Load()
	m := logMeta{Dropped: l.dropped + skipped, Skipped: skipped, LogMax: specLogMax(l.sp)}
	if m == l.saved {
		return
	}
	data, err := json.Marshal(m)
	if err != nil {
		l.fail(fmt.Errorf("encode %s%s: %w", l.name, metaSuffix, err))
		return
	}
	tmp := "." + l.name + metaSuffix + ".tmp"
	f, err := createLog(l.dir, tmp)
	if err != nil {
		l.fail(err)
		return
	}
	_, err = f.Write(append(data, '\n'))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	dirfd := int(l.dir.Fd())
	if err == nil {
		err = syscall.Renameat(dirfd, tmp, dirfd, l.name+metaSuffix)
	}
	if err != nil {
		_ = syscall.Unlinkat(dirfd, tmp)
		l.fail(fmt.Errorf("write %s%s: %w", l.name, metaSuffix, err))
		return
	}
	l.saved = m
}

// close records what was dropped for the last time and closes the log.
func (l *logFile) close() {
	l.saveMeta()
	if l.f != nil {
		_ = l.f.Close()
		l.f = nil
	}
}

func (l *logFile) fail(err error) {
	if !l.failed {
		l.failed = true
		l.log.Error("output not kept", "error", err)
	}
}

// logSink is where a logCopy puts a stream: a logFile, or a test's.
type logSink interface {
	write(p []byte)
	skip(n int)
	close()
}

// logCopy copies one of the job's streams from its pipe to a sink, in
// order. It reads ahead of the sink into up to logBuffers chunks, so a
// slow disk holds the job up only once they are full, and when the sink
// has taken nothing for stall it discards output (sink.skip) rather than
// hold the job up further, until the sink takes a chunk again.
type logCopy struct {
	// w is the pipe's write end, for the job: the driver hands it on, and
	// finish closes the copy's own.
	w     *os.File
	r     *os.File
	sink  logSink
	stall time.Duration
	free  chan []byte // buffers the sink is done with
	full  chan []byte // chunks read, for the sink, in order
	quit  chan struct{}
	done  chan struct{} // closed when the sink has everything read and is closed
}

// startCopy makes a stream's pipe and starts copying it to sink.
func startCopy(sink logSink, stall time.Duration) (*logCopy, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("make output pipe: %w", err)
	}
	c := &logCopy{w: w, r: r, sink: sink, stall: stall,
		free: make(chan []byte, logBuffers), full: make(chan []byte, logBuffers),
		quit: make(chan struct{}), done: make(chan struct{})}
	go c.read()
	go c.write()
	return c, nil
}

// read reads the pipe until it ends or finish gives up on it.
func (c *logCopy) read() {
	defer close(c.full)
	defer c.r.Close()
	made := 0
	stalled := false
	var scratch []byte // what skipped output is read into
	timer := time.NewTimer(c.stall)
	timer.Stop()
	for {
		var buf []byte
		select {
		case buf = <-c.free:
		default:
			switch {
			case made < logBuffers:
				buf = make([]byte, logChunk)
				made++
			case !stalled:
				timer.Reset(c.stall)
				select {
				case buf = <-c.free:
				case <-timer.C:
				case <-c.quit:
				}
				timer.Stop()
			}
		}
		stalled = buf == nil
		if stalled {
			if scratch == nil {
				scratch = make([]byte, logChunk)
			}
			n, err := c.r.Read(scratch)
			c.sink.skip(n)
			if err != nil {
				return
			}
			continue
		}
		n, err := c.r.Read(buf)
		if n > 0 {
			c.full <- buf[:n]
		} else {
			c.free <- buf
		}
		if err != nil {
			return
		}
	}
}

// write hands the chunks read to the sink, then closes it.
func (c *logCopy) write() {
	defer close(c.done)
	for buf := range c.full {
		c.sink.write(buf)
		c.free <- buf[:cap(buf)]
	}
	c.sink.close()
}

// finish ends the copy once the job is over: it closes the copy's write
// end, reads what is left until the pipe ends, or for at most drain when
// something still holds it open, and returns when the sink has taken
// everything read.
func (c *logCopy) finish(drain time.Duration) {
	_ = c.w.Close()
	t := time.AfterFunc(drain, func() {
		close(c.quit)
		_ = c.r.SetReadDeadline(time.Now())
	})
	defer t.Stop()
	<-c.done
}

// logReader reads what an allocation keeps of a stream: <name>.1, then
// <name>. At the end of what is written it returns io.EOF. A reader that
// follows returns what was written since on a later Read, and moves on to
// the new file when the stream was rotated; one that falls more than a
// whole file behind loses the files rotated out meanwhile, as the cap
// dropped them. One that does not follow reads the files kept when it was
// opened, to their end, and no further: a job writing faster than the
// reader reads cannot make its answer endless.
type logReader struct {
	dir, name string
	follow    bool
	f         *os.File
	// final is set once f is no longer the current file: it grows no
	// more, and its end is the start of the next.
	final bool
	// next is the file after f when f was opened final (nil: none, or it
	// was read on to), and nextFinal its final.
	next      *os.File
	nextFinal bool
}

// openLogReader opens a stream's logs in an allocation directory.
// fs.ErrNotExist means the stream has none.
func openLogReader(dir, name string, follow bool) (*logReader, error) {
	lr := &logReader{dir: dir, name: name, follow: follow}
	f, final, err := lr.after(nil)
	if err == nil && f == nil {
		err = fs.ErrNotExist
	}
	if err != nil {
		return nil, err
	}
	lr.f, lr.final = f, final
	if final {
		held, err := f.Stat()
		if err == nil {
			lr.next, lr.nextFinal, err = lr.after(held)
		}
		if err != nil {
			f.Close()
			return nil, err
		}
	}
	return lr, nil
}

func (lr *logReader) Read(p []byte) (int, error) {
	for {
		n, err := lr.f.Read(p)
		if n > 0 || err != io.EOF {
			return n, err
		}
		if lr.next != nil {
			lr.f.Close()
			lr.f, lr.final, lr.next = lr.next, lr.nextFinal, nil
			continue
		}
		if !lr.final {
			// The end of the current file, unless the stream was
			// rotated: then read what was written before the rename.
			cur, err := os.Lstat(lr.path(""))
			held, ferr := lr.f.Stat()
			if ferr != nil {
				return 0, ferr
			}
			if err == nil && os.SameFile(cur, held) {
				return 0, io.EOF
			}
			lr.final = true
			continue
		}
		if !lr.follow {
			return 0, io.EOF
		}
		held, err := lr.f.Stat()
		if err != nil {
			return 0, err
		}
		f, final, err := lr.after(held)
		if err != nil {
			return 0, err
		}
		if f == nil {
			return 0, io.EOF // the next file is not there yet
		}
		lr.f.Close()
		lr.f, lr.final = f, final
	}
}

// seekTail moves a reader just opened to the start of the end of what it
// holds: at most maxBytes before the end, and with lines >= 0 no more than
// that many lines, found by reading back from the end in blocks. A line is
// what ends with a newline, and what follows the last one. It returns how
// many bytes that end holds.
func (lr *logReader) seekTail(maxBytes int64, lines int) (int64, error) {
	files := []*os.File{lr.f}
	if lr.next != nil {
		files = append(files, lr.next)
	}
	var total int64
	sizes := make([]int64, len(files))
	for i, f := range files {
		fi, err := f.Stat()
		if err != nil {
			return 0, err
		}
		sizes[i] = fi.Size()
		total += sizes[i]
	}
	start := max(0, total-maxBytes)
	if lines >= 0 {
		ls, err := lineStart(files, sizes, start, total-1, lines)
		if err != nil {
			return 0, err
		}
		start = ls
	}
	if len(files) == 2 && start >= sizes[0] {
		lr.f.Close()
		lr.f, lr.final, lr.next = lr.next, lr.nextFinal, nil
		start -= sizes[0]
		total -= sizes[0]
	}
	if _, err := lr.f.Seek(start, io.SeekStart); err != nil {
		return 0, err
	}
	return total - start, nil
}

// lineStart reads files, sizes long, one after the other, back from end
// and no further than from, in blocks, and returns where the line begins
// that has lines newlines between it and end (from, when fewer do).
func lineStart(files []*os.File, sizes []int64, from, end int64, lines int) (int64, error) {
	if lines == 0 {
		return max(from, end+1), nil
	}
	buf := make([]byte, logChunk)
	pos := end
	for pos > from {
		// The file that holds the byte before pos, and where it begins.
		i, base := len(files)-1, int64(0)
		for j := range i {
			base += sizes[j]
		}
		for pos <= base {
			i--
			base -= sizes[i]
		}
		lo := max(from, base, pos-int64(len(buf)))
		b := buf[:pos-lo]
		if _, err := files[i].ReadAt(b, lo-base); err != nil {
			return 0, err
		}
		for k := len(b) - 1; k >= 0; k-- {
			if b[k] == '\n' {
				if lines--; lines == 0 {
					return lo + int64(k) + 1, nil
				}
			}
		}
		pos = lo
	}
	return from, nil
}

// Close closes the files being read.
func (lr *logReader) Close() error {
	if lr.next != nil {
		lr.next.Close()
	}
	return lr.f.Close()
}

// after opens the file that follows prev (nil: the oldest kept):
// <name>.1 when it is newer than prev, else <name>; final says it is the
// former. It returns no file when the next one is not there yet.
func (lr *logReader) after(prev os.FileInfo) (*os.File, bool, error) {
	for range 4 {
		rot, err := lstatLog(lr.path(rotatedSuffix))
		if err != nil {
			return nil, false, err
		}
		if rot != nil && (prev == nil || !os.SameFile(rot, prev)) {
			f, err := openLogFile(lr.path(rotatedSuffix))
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return nil, false, err
			}
			return f, true, nil
		}
		f, err := openLogFile(lr.path(""))
		if errors.Is(err, fs.ErrNotExist) && rot != nil {
			continue // between a rotation's rename and its new file
		}
		if errors.Is(err, fs.ErrNotExist) {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, err
		}
		// A rotation between the look at <name>.1 and the open would
		// have put the file that follows prev there.
		again, err := lstatLog(lr.path(rotatedSuffix))
		if err == nil && (again == nil) == (rot == nil) && (rot == nil || os.SameFile(again, rot)) {
			return f, false, nil
		}
		f.Close()
		if err != nil {
			return nil, false, err
		}
	}
	return nil, false, nil
}

func (lr *logReader) path(suffix string) string {
	return filepath.Join(lr.dir, lr.name+suffix)
}

// lstatLog is os.Lstat with a missing file as nil.
func lstatLog(path string) (os.FileInfo, error) {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return fi, err
}

// openLogFile opens a log for reading, never through a link and never
// anything but a plain file (a FIFO left in its place would block).
func openLogFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, syscall.ELOOP) {
		return nil, fmt.Errorf("open %s: %w", path, errNotPlainFile)
	}
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("open %s: %w", path, errNotPlainFile)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// readLogMeta reads what a stream's .meta file records; none is zero.
func readLogMeta(path string) (logMeta, error) {
	var m logMeta
	f, err := openLogFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return m, nil
	}
	if err != nil {
		return m, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxMetaFile))
	if err == nil {
		err = json.Unmarshal(data, &m)
	}
	if err != nil {
		return logMeta{}, fmt.Errorf("read %s: %w", path, err)
	}
	return m, nil
}

// OpenLog opens what an allocation keeps of a stream ("stdout" or
// "stderr"): the output rotated out last, then the current file. Reading
// it at its end returns io.EOF. With follow, reading again returns what
// was written since, across rotations; without, the reader ends with the
// files kept when it was opened. ErrNoLogs means the job has written no
// such stream (yet, or ever).
func (r *Runner) OpenLog(allocID, stream string, follow bool) (io.ReadCloser, error) {
	dir, name, err := r.logDir(allocID, stream)
	if err != nil {
		return nil, err
	}
	lr, err := openLogReader(dir, name, follow)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("allocation %s %s: %w", allocID, stream, ErrNoLogs)
	}
	if err != nil {
		return nil, fmt.Errorf("allocation %s %s: %w", allocID, stream, err)
	}
	return lr, nil
}

// OpenLogTail opens the end of what an allocation keeps of a stream, as
// OpenLog opens all of it: at most maxBytes, across the rotated file when
// the end begins there, and with lines >= 0 no more than that many lines
// (a line ends with a newline; so does the last, unless the job is still
// writing it). It reads back from the end of the files, never from their
// start. Without follow the reader ends with that end, as it was when
// opened; with follow it reads on to what is written since.
func (r *Runner) OpenLogTail(allocID, stream string, follow bool, maxBytes int64, lines int) (io.ReadCloser, error) {
	dir, name, err := r.logDir(allocID, stream)
	if err != nil {
		return nil, err
	}
	rd, err := openLogTail(dir, name, follow, maxBytes, lines)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("allocation %s %s: %w", allocID, stream, ErrNoLogs)
	}
	if err != nil {
		return nil, fmt.Errorf("allocation %s %s: %w", allocID, stream, err)
	}
	return rd, nil
}

// openLogTail opens the end of a stream's logs in an allocation directory
// (OpenLogTail).
func openLogTail(dir, name string, follow bool, maxBytes int64, lines int) (io.ReadCloser, error) {
	lr, err := openLogReader(dir, name, follow)
	if err != nil {
		return nil, err
	}
	n, err := lr.seekTail(max(maxBytes, 0), lines)
	if err != nil {
		lr.Close()
		return nil, fmt.Errorf("find the end of %s: %w", name, err)
	}
	if follow {
		return lr, nil
	}
	return limitedLog{Reader: io.LimitReader(lr, n), Closer: lr}, nil
}

// limitedLog is the end of a log, read to where it was when opened.
type limitedLog struct {
	io.Reader
	io.Closer
}

// LogDropped says how many bytes of an allocation's stream its log cap
// dropped, or its supervisor could not write, and that cap (0 when
// nothing was dropped).
func (r *Runner) LogDropped(allocID, stream string) (dropped, logMax int64, err error) {
	dir, name, err := r.logDir(allocID, stream)
	if err != nil {
		return 0, 0, err
	}
	m, err := readLogMeta(filepath.Join(dir, name+metaSuffix))
	if err != nil {
		return 0, 0, fmt.Errorf("allocation %s %s: %w", allocID, stream, err)
	}
	return max(m.Dropped, 0), max(m.LogMax, 0), nil
}

// logDir checks an allocation ID and a stream, and names the directory and
// the file that keep that stream.
func (r *Runner) logDir(allocID, stream string) (dir, name string, err error) {
	if name, err = logName(stream); err != nil {
		return "", "", err
	}
	if err := checkID(allocID); err != nil {
		return "", "", err
	}
	return filepath.Join(r.dir, allocID), name, nil
}

// jobOutput is a job's stdout and stderr on their way to their logs.
type jobOutput struct {
	dir            *os.File
	stdout, stderr *logCopy
}

// captureOutput creates the logs of the allocation in dir and the pipes
// the job writes them through.
func captureOutput(dir string, sp spec, log hclog.Logger) (*jobOutput, error) {
	d, err := os.OpenFile(dir, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, fmt.Errorf("open allocation directory: %w", err)
	}
	o := &jobOutput{dir: d}
	for _, s := range []struct {
		name string
		c    **logCopy
	}{{stdoutFile, &o.stdout}, {stderrFile, &o.stderr}} {
		var lf *logFile
		lf, err = newLogFile(d, s.name, sp, log)
		if err == nil {
			*s.c, err = startCopy(lf, logStall)
			if err != nil {
				lf.close()
			}
		}
		if err != nil {
			o.finish()
			return nil, err
		}
	}
	return o, nil
}

// finish ends both copies once the job is over (logCopy.finish) and
// closes the directory.
func (o *jobOutput) finish() {
	var wg sync.WaitGroup
	for _, c := range []*logCopy{o.stdout, o.stderr} {
		if c != nil {
			wg.Go(func() { c.finish(logDrain) })
		}
	}
	wg.Wait()
	_ = o.dir.Close()
}
