package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/structs"
)

// How `skein logs` keeps a stream going when the agent that sends it
// dies, freezes or is cut off: it asks again, through any agent, from the
// byte it got to (api.LogOffsetHeader).
const (
	// logIdle is how long a followed stream may be silent before the
	// agent that sends it is asked whether it still answers (a quiet job
	// sends nothing, and neither does a frozen agent).
	logIdle = 3 * time.Second
	// logProbeWait is how long that agent has to answer.
	logProbeWait = 1500 * time.Millisecond
	// logDrain is how long a stream whose allocation has ended may stay
	// silent before it is taken for broken: its node sends the last of
	// the output at once, unless it froze or was cut off.
	logDrain = 5 * time.Second
	// Waits between tries to resume a stream: from resumeMin, doubled
	// after each failed try, up to resumeMax.
	resumeMin = 200 * time.Millisecond
	resumeMax = 2 * time.Second
)

// errStreamLost is a stream whose rest is out of reach: its allocation
// ended and its node does not answer.
var errStreamLost = errors.New("out of reach")

// resumable is one stream of one attempt as `skein logs` reads it: an
// answer that breaks off, or that watch closed, is asked again from the
// byte it got to.
type resumable struct {
	ctx  context.Context
	cl   *api.Client
	id   string
	opts api.LogOptions // Attempt set: the attempt the first answer served
	// gap is told of output lost between two answers (the cap dropped
	// it meanwhile).
	gap func(n int64)

	mu sync.Mutex
	ls *api.LogStream
	// have is where in the stream the next byte read is; -1 when not
	// known (an end without follow), and then a break is not resumed.
	have int64
	// heard is when the stream last gave something, or was resumed.
	heard time.Time
	// ended is when check first found the allocation ended (zero: not
	// yet), probed when it last asked the agent, and shut the answer
	// check closed.
	ended  time.Time
	probed time.Time
	shut   *api.LogStream
}

func newResumable(ctx context.Context, cl *api.Client, id string, opts api.LogOptions, ls *api.LogStream, gap func(int64)) *resumable {
	opts.Attempt = ls.Attempt
	return &resumable{ctx: ctx, cl: cl, id: id, opts: opts, ls: ls, have: ls.Offset, heard: time.Now(), gap: gap}
}

// offset is where in the stream the next byte read is (-1: not known).
func (r *resumable) offset() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.have
}

// Read reads the stream, resuming it (resume) where its answer broke off.
func (r *resumable) Read(p []byte) (int, error) {
	for {
		r.mu.Lock()
		ls := r.ls
		r.mu.Unlock()
		n, err := ls.Read(p)
		r.mu.Lock()
		if n > 0 {
			if r.have >= 0 {
				r.have += int64(n)
			}
			r.heard = time.Now()
		}
		have, closed := r.have, r.shut == ls
		r.mu.Unlock()
		if n > 0 || err == nil {
			return n, nil // an error comes again on the next read
		}
		if errors.Is(err, io.EOF) && !closed {
			return 0, io.EOF // the whole stream
		}
		if have < 0 {
			return 0, err
		}
		if err := r.resume(); err != nil {
			return 0, err
		}
	}
}

// Close closes the answer being read.
func (r *resumable) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ls.Close()
}

// resume asks for the stream again from the byte it got to, through any
// agent, until one answers, the allocation has ended with its node out
// of reach (errStreamLost), or ctx ends. A 4xx answer other than the
// proxy's own ends it.
func (r *resumable) resume() error {
	r.Close()
	ctx := r.ctx
	wait := resumeMin
	for {
		r.mu.Lock()
		opts := r.opts
		opts.Offset, opts.Tail, opts.Lines = r.have, 0, 0
		r.mu.Unlock()
		ls, err := r.cl.OpenLogs(ctx, r.id, opts)
		if err == nil {
			if err = r.align(ls); err == nil {
				return nil
			}
			ls.Close()
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var apiErr *api.Error
		if errors.As(err, &apiErr) && apiErr.StatusCode/100 == 4 && apiErr.StatusCode != http.StatusNotFound {
			return err
		}
		if r.allocEnded(ctx) {
			return fmt.Errorf("%w: %w", errStreamLost, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, resumeMax)
	}
}

// align makes ls, a new answer, the one read: it skips what was read
// already, and tells gap of what was lost in between.
func (r *resumable) align(ls *api.LogStream) error {
	r.mu.Lock()
	have := r.have
	r.mu.Unlock()
	switch {
	case ls.Offset < 0:
		return fmt.Errorf("the agent at %s does not say where its answer begins in the stream: cannot resume it", ls.Host)
	case ls.Offset < have:
		if _, err := io.CopyN(io.Discard, ls, have-ls.Offset); err != nil {
			return fmt.Errorf("skip to byte %d of the stream: %w", have, err)
		}
	case ls.Offset > have:
		r.gap(ls.Offset - have)
		have = ls.Offset
	}
	r.mu.Lock()
	r.ls, r.have, r.heard, r.ended = ls, have, time.Now(), time.Time{}
	r.mu.Unlock()
	return nil
}

// allocEnded reports whether the allocation the stream is of has ended,
// as any agent tells (false when none does).
func (r *resumable) allocEnded(ctx context.Context) bool {
	d, err := r.cl.Job(ctx, r.id)
	if err != nil {
		return false
	}
	a := allocOf(d, r.opts.Rank, r.opts.Attempt)
	return a == nil || a.State.Terminal()
}

// check looks at a followed stream that has been silent for logIdle (at
// most once every logIdle, but every second once its allocation ended):
// it closes the answer, to be resumed elsewhere, when the agent sending
// it does not answer, or when its allocation ended logDrain ago and still
// the stream has not.
func (r *resumable) check(ctx context.Context, now time.Time) {
	r.mu.Lock()
	ls, heard, ended, probed := r.ls, r.heard, r.ended, r.probed
	if now.Sub(heard) < logIdle || now.Sub(probed) < logIdle && ended.IsZero() {
		r.mu.Unlock()
		return // a quiet stream is asked about every logIdle, no more
	}
	r.probed = now
	r.mu.Unlock()
	probe := r.cl.Only(ls.Host)
	if probe == nil {
		return
	}
	pctx, cancel := context.WithTimeout(ctx, logProbeWait)
	defer cancel()
	d, err := probe.WithTimeouts(0, 0).Job(pctx, r.id)
	if ctx.Err() != nil {
		return
	}
	broken := err != nil
	if err == nil {
		if a := allocOf(d, r.opts.Rank, r.opts.Attempt); a == nil || a.State.Terminal() {
			if ended.IsZero() {
				r.mu.Lock()
				r.ended = now
				r.mu.Unlock()
			} else {
				broken = now.Sub(ended) >= logDrain
			}
		}
	}
	if broken {
		r.mu.Lock()
		r.shut = ls
		r.mu.Unlock()
		ls.Close()
	}
}

// watchStreams checks the followed streams every second until ctx ends.
func watchStreams(ctx context.Context, streams ...*resumable) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			for _, r := range streams {
				r.check(ctx, now)
			}
		}
	}
}

// lostLine says that the rest of a stream is out of reach.
func lostLine(d *api.JobDetail, a *structs.Allocation, stream string, have int64) string {
	where := "its node"
	if a != nil {
		where = "node " + nodeNameOf(d, a.NodeID)
	}
	return fmt.Sprintf("skein: the %s of this attempt after byte %d is on %s, which does not answer", stream, have, where)
}
