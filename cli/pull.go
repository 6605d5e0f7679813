package cli

import (
	"fmt"
	"io"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/structs"
)

// How often `submit --wait` says how far a pull got: when it has moved on
// by pullStep percent, or by any bytes after pullEvery.
const (
	pullStep  = 5
	pullEvery = 5 * time.Second
)

// pulling reports whether an allocation waits for its image pull.
func pulling(a *structs.Allocation) bool {
	return a.State == structs.AllocPending && a.Pull != nil
}

// pullState is the state of a pending allocation that pulls its image, as
// `skein job` shows it: "pulling 42% (1.1 GiB of 2.6 GiB)", or "pulling
// (300 MiB so far)" while the engine has not said how big the image is.
func pullState(p *structs.PullProgress) string {
	return "pulling " + pullDone(p)
}

// pullDone says how far a pull got: "42% (1.1 GiB of 2.6 GiB)", or
// "(300 MiB so far)" without a total.
func pullDone(p *structs.PullProgress) string {
	if p.Total <= 0 {
		return "(" + formatBytes(p.Bytes) + " so far)"
	}
	return fmt.Sprintf("%d%% (%s of %s)", pullPercent(p), formatBytes(p.Bytes), formatBytes(p.Total))
}

// pullPercent is how much of a pull with a known total is done, 0 to 100.
func pullPercent(p *structs.PullProgress) int {
	return int(min(max(p.Bytes, 0)*100/p.Total, 100))
}

// pullReporter writes, for `submit --wait`, a line when an allocation of
// the job starts pulling its image and then one each time the pull moves
// on by pullStep percent, or after pullEvery when it moved at all.
type pullReporter struct {
	w    io.Writer
	last map[string]pullLine // by allocation ID
}

// pullLine is what the last line said of one allocation's pull, and when.
type pullLine struct {
	at    time.Time
	pct   int // -1 without a total
	bytes int64
}

func newPullReporter(w io.Writer) *pullReporter {
	return &pullReporter{w: w, last: make(map[string]pullLine)}
}

// report writes the lines the job's allocations call for at now.
func (r *pullReporter) report(d *api.JobDetail, now time.Time) {
	for i := range d.Allocations {
		a := &d.Allocations[i]
		if !pulling(a) {
			continue
		}
		p, pct := a.Pull, -1
		if p.Total > 0 {
			pct = pullPercent(p)
		}
		if l, ok := r.last[a.ID]; ok && !l.due(pct, p.Bytes, now) {
			continue
		}
		r.last[a.ID] = pullLine{at: now, pct: pct, bytes: p.Bytes}
		node := nodeNameOf(d, a.NodeID)
		where := "on " + node
		if d.Job.Spec.Nodes > 1 {
			where = fmt.Sprintf("rank %d on %s", a.Rank, node)
		}
		fmt.Fprintln(r.w, printable(fmt.Sprintf("job %s %s: pulling %s %s",
			structs.ShortID(d.Job.ID), where, p.Image, pullDone(p))))
	}
}

// due reports whether a pull that got to pct percent (-1: the total is
// not known) and bytes at now calls for a line after l: it moved on by a
// step, its size became known, or it moved at all and l is pullEvery old.
func (l pullLine) due(pct int, bytes int64, now time.Time) bool {
	switch {
	case bytes == l.bytes && pct == l.pct:
		return false
	case pct >= 0 && l.pct < 0, pct >= l.pct+pullStep:
		return true
	}
	return now.Sub(l.at) >= pullEvery
}
