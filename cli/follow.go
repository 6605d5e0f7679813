package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/structs"
)

// The exit statuses of a command that waits for a job (`submit --wait`,
// `submit --follow`, `logs -f`) when the job did not succeed and has no
// exit code of its own to give: 0 is for success alone, and a job that
// failed with an exit code gives that code.
const (
	exitTimedOut  = 124 // ran past its time limit, as timeout(1) exits
	exitNoCode    = 125 // failed without an exit code: lost with its node, never started
	exitCancelled = 143 // cancelled: 128 + SIGTERM, the signal a cancel sends
)

// waitInterval is how often a command that waits for a job polls it, and
// waitPatience how long it goes on polling when no agent answers.
const (
	waitInterval = 250 * time.Millisecond
	waitPatience = 2 * time.Minute
)

// stateLineNodes is how many nodes a state line names before "N more".
const stateLineNodes = 4

// endStatus is the exit status that says how a job or one of its
// allocations ended, from its state and exit code: 0 when it succeeded,
// the exit code when it failed with one (128+N for signal N), else one of
// the codes above.
func endStatus(state string, code int) int {
	switch state {
	case string(structs.JobSucceeded):
		return exitOK
	case string(structs.JobTimedOut):
		return exitTimedOut
	case string(structs.JobCancelled), string(structs.AllocKilled):
		return exitCancelled
	case string(structs.JobFailed):
		if code > 0 && code < 256 {
			return code
		}
	}
	return exitNoCode
}

// statusError is nil for exit status 0, else the error that makes skein
// exit with it; what happened was said already.
func statusError(status int) error {
	if status == exitOK {
		return nil
	}
	return exitStatus(status)
}

// jobWatch polls a job for a command that waits on it, and says on w how
// the job gets on while it waits: a line each time the job's state
// changes (stateLine), and how far its image pulls got.
type jobWatch struct {
	cl    *api.Client
	id    string
	w     io.Writer
	pulls *pullReporter
	said  string // the last state line
	// everyAttempt (submit --wait) names each attempt the job begins,
	// one that began and ended between two polls too; named is the
	// newest attempt named.
	everyAttempt bool
	named        int
}

func newJobWatch(cl *api.Client, id string, w io.Writer) *jobWatch {
	return &jobWatch{cl: cl, id: id, w: w, pulls: newPullReporter(w)}
}

// until polls the job until done is true of it, and returns what it
// found; it says how the job stands after each poll that found otherwise.
// A poll that no agent answered is tried again for up to waitPatience
// (an election, a node that died, a network that came back), said once
// on w; an answer that refuses the poll ends it.
func (jw *jobWatch) until(ctx context.Context, done func(*api.JobDetail) bool) (*api.JobDetail, error) {
	tick := time.NewTicker(waitInterval)
	defer tick.Stop()
	var failing time.Time // when polls began to fail; zero: they answer
	for {
		d, err := jw.cl.Job(ctx, jw.id)
		var apiErr *api.Error
		switch {
		case err == nil:
			failing = time.Time{}
		case ctx.Err() != nil || errors.As(err, &apiErr) && apiErr.StatusCode/100 == 4:
			return nil, err
		case failing.IsZero():
			failing = time.Now()
			fmt.Fprintf(jw.w, "skein: no answer from the cluster, still trying: %v\n", err)
		case time.Since(failing) > waitPatience:
			return nil, fmt.Errorf("no answer from the cluster for %s: %w", waitPatience, err)
		}
		if err == nil && done(d) {
			return d, nil
		}
		if err == nil {
			jw.say(d)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-tick.C:
		}
	}
}

// say says how the job stands, unless the last line said so; with
// everyAttempt, it first names the attempts begun since the last poll.
func (jw *jobWatch) say(d *api.JobDetail) {
	if jw.everyAttempt {
		jw.sayAttempts(d)
	}
	jw.line(stateLine(d))
	jw.pulls.report(d, time.Now())
}

// sayAttempts names each attempt of the job not named yet.
func (jw *jobWatch) sayAttempts(d *api.JobDetail) {
	for k := jw.named + 1; k <= d.Job.Attempts; k++ {
		jw.sayAttempt(d, k)
	}
}

// sayAttempt says where the job ran attempt k, as the state line said
// it while the attempt ran ("job 3f2a1b0c running on gpu-01 (attempt
// 2)"), whether or not it still runs: a job whose attempt began and ended
// between two polls was running all the same.
func (jw *jobWatch) sayAttempt(d *api.JobDetail, k int) {
	if d.Job.State == structs.JobRunning && d.Job.Attempts == k {
		jw.line(stateLine(d)) // with its reason, if it has one
	} else {
		jw.line(runningLine(d, k))
	}
	jw.named = max(jw.named, k)
}

// line writes a state line, unless it is empty or the last one said.
func (jw *jobWatch) line(line string) {
	if line != "" && line != jw.said {
		fmt.Fprintln(jw.w, printable(line))
		jw.said = line
	}
}

// stateLine says where a job that has not ended is: "job 3f2a1b0c
// queued: not enough free GPUs ...", "job 3f2a1b0c running on gpu-01
// (attempt 1)". It is empty for a job that ended (endLine says how), and
// for a queued one without a reason: one the scheduler has not yet
// looked at, which is where every job starts, not a change to say.
func stateLine(d *api.JobDetail) string {
	j := &d.Job
	reason := strings.TrimPrefix(j.Reason, string(j.State)+": ")
	var line string
	switch j.State {
	case structs.JobQueued:
		if reason == "" {
			return ""
		}
		line = fmt.Sprintf("job %s %s", structs.ShortID(j.ID), j.State)
	case structs.JobRunning:
		line = runningLine(d, j.Attempts)
	default:
		return ""
	}
	if reason != "" {
		line += ": " + reason
	}
	return line
}

// runningLine is the state line of the job running attempt k, without
// its reason: "job 3f2a1b0c running on gpu-01 (attempt 1)".
func runningLine(d *api.JobDetail, k int) string {
	line := fmt.Sprintf("job %s %s", structs.ShortID(d.Job.ID), structs.JobRunning)
	var nodes []string
	for _, a := range attemptAllocs(d, k) {
		nodes = append(nodes, nodeNameOf(d, a.NodeID))
	}
	if len(nodes) > stateLineNodes {
		nodes = append(nodes[:stateLineNodes], fmt.Sprintf("%d more", len(nodes)-stateLineNodes))
	}
	if len(nodes) > 0 {
		line += " on " + strings.Join(nodes, ", ")
	}
	return line + fmt.Sprintf(" (attempt %d)", k)
}

// endLine says how a job ended: "job 3f2a1b0c failed: exited with code 7".
func endLine(j *structs.Job) string {
	line := fmt.Sprintf("job %s %s", structs.ShortID(j.ID), j.State)
	if j.Reason != "" {
		line += ": " + j.Reason
	}
	return line
}

// attemptLine names one rank's allocation in an attempt, its node and how
// it ended: "attempt 2 on gpu-01: failed: exited with code 7", "attempt 1,
// rank 1, on gpu-02: running".
func attemptLine(d *api.JobDetail, a *structs.Allocation) string {
	line := fmt.Sprintf("attempt %d", a.Attempt)
	if d.Job.Spec.Nodes > 1 {
		line += fmt.Sprintf(", rank %d,", a.Rank)
	}
	line += fmt.Sprintf(" on %s: %s", nodeNameOf(d, a.NodeID), a.State)
	if why := allocWhy(a); why != "" {
		line += ": " + why
	}
	return line
}

// allocWhy says why an allocation that ended did not succeed; it is empty
// for one that succeeded or has not ended.
func allocWhy(a *structs.Allocation) string {
	if !a.State.Terminal() || a.State == structs.AllocSucceeded {
		return ""
	}
	return cmp.Or(a.GPUFault, a.Reason)
}

// attemptAllocs returns the allocations of an attempt, by rank.
func attemptAllocs(d *api.JobDetail, attempt int) []*structs.Allocation {
	var as []*structs.Allocation
	for i := range d.Allocations {
		if a := &d.Allocations[i]; a.Attempt == attempt {
			as = append(as, a)
		}
	}
	slices.SortFunc(as, func(a, b *structs.Allocation) int { return a.Rank - b.Rank })
	return as
}

// allocOf returns the allocation of a rank in an attempt, or nil.
func allocOf(d *api.JobDetail, rank, attempt int) *structs.Allocation {
	for _, a := range attemptAllocs(d, attempt) {
		if a.Rank == rank {
			return a
		}
	}
	return nil
}

// nodeNameOf is the name of a node of a job's allocations, or its short
// ID when the answer did not name it.
func nodeNameOf(d *api.JobDetail, nodeID string) string {
	return cmp.Or(d.Nodes[nodeID], structs.ShortID(nodeID))
}
