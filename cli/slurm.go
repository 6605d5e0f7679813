package cli

import (
	"cmp"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	ucli "github.com/urfave/cli/v2"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/structs"
)

// What the Slurm habit commands (squeue, scancel, sinfo, sacct) share:
// skein's job states in Slurm's words, Slurm's time formats, `%` output
// formats, listing every job a filter may need, and running as the
// command a link is named after.

// slurmState is a Slurm job state: its long name and its compact code.
type slurmState struct {
	name string // RUNNING
	code string // R
}

// The Slurm job states a skein job can be in.
var (
	statePending    = slurmState{"PENDING", "PD"}
	stateRunning    = slurmState{"RUNNING", "R"}
	stateCompleting = slurmState{"COMPLETING", "CG"}
	statePreempted  = slurmState{"PREEMPTED", "PR"}
	stateCompleted  = slurmState{"COMPLETED", "CD"}
	stateFailed     = slurmState{"FAILED", "F"}
	stateCancelled  = slurmState{"CANCELLED", "CA"}
	stateTimeout    = slurmState{"TIMEOUT", "TO"}
)

// slurmStates lists them in the order errors name them.
var slurmStates = []slurmState{
	statePending, stateRunning, stateCompleting, statePreempted,
	stateCompleted, stateFailed, stateCancelled, stateTimeout,
}

// stateOf maps a job to Slurm's state: queued is PENDING; running is
// RUNNING, COMPLETING once a cancel is stopping it, PREEMPTED while it
// stops to make room for another job (it then queues again); succeeded
// is COMPLETED, failed FAILED, cancelled CANCELLED, timed_out TIMEOUT.
func stateOf(j *structs.Job) slurmState {
	switch j.State {
	case structs.JobQueued:
		return statePending
	case structs.JobRunning:
		switch {
		case j.PreemptedBy != "":
			return statePreempted
		case j.StopRequested:
			return stateCompleting
		}
		return stateRunning
	case structs.JobSucceeded:
		return stateCompleted
	case structs.JobCancelled:
		return stateCancelled
	case structs.JobTimedOut:
		return stateTimeout
	}
	return stateFailed
}

// active reports whether a job in this state is still going: what squeue
// shows without -t.
func (s slurmState) active() bool {
	return s == statePending || s == stateRunning || s == stateCompleting || s == statePreempted
}

// parseSlurmStates parses a comma-separated list of Slurm state names or
// codes, in any case; "all" is every state.
func parseSlurmStates(list string) ([]slurmState, error) {
	var out []slurmState
	for _, w := range strings.Split(list, ",") {
		w = strings.ToUpper(strings.TrimSpace(w))
		if w == "ALL" {
			return slices.Clone(slurmStates), nil
		}
		i := slices.IndexFunc(slurmStates, func(s slurmState) bool { return s.name == w || s.code == w })
		if i < 0 {
			names := make([]string, len(slurmStates))
			for k, s := range slurmStates {
				names[k] = s.name + " (" + s.code + ")"
			}
			return nil, fmt.Errorf("unknown state %q: want all or some of %s", w, strings.Join(names, ", "))
		}
		out = append(out, slurmStates[i])
	}
	return out, nil
}

// slurmDuration renders a duration as squeue's TIME does: M:SS,
// H:MM:SS, or D-HH:MM:SS from a day on.
func slurmDuration(d time.Duration) string {
	s := int64(max(d, 0) / time.Second)
	days, h, m, sec := s/86400, s/3600%24, s/60%60, s%60
	switch {
	case days > 0:
		return fmt.Sprintf("%d-%02d:%02d:%02d", days, h, m, sec)
	case h > 0:
		return fmt.Sprintf("%d:%02d:%02d", h, m, sec)
	}
	return fmt.Sprintf("%d:%02d", m, sec)
}

// slurmElapsed renders a duration as sacct's Elapsed does: HH:MM:SS, or
// D-HH:MM:SS from a day on.
func slurmElapsed(d time.Duration) string {
	s := int64(max(d, 0) / time.Second)
	if days := s / 86400; days > 0 {
		return fmt.Sprintf("%d-%02d:%02d:%02d", days, s/3600%24, s/60%60, s%60)
	}
	return fmt.Sprintf("%02d:%02d:%02d", s/3600, s/60%60, s%60)
}

// slurmTimeLimit renders a job's time limit; none is UNLIMITED.
func slurmTimeLimit(d structs.Duration) string {
	if d == 0 {
		return "UNLIMITED"
	}
	return slurmDuration(time.Duration(d))
}

// slurmTimestamp renders a time as Slurm does, local and to the second;
// a zero time is Unknown.
func slurmTimestamp(t time.Time) string {
	if t.IsZero() {
		return "Unknown"
	}
	return t.In(slurmZone).Format("2006-01-02T15:04:05")
}

// slurmZone is the time zone the Slurm look-alikes show and read times
// in: the local one, as Slurm's (the golden tests fix it without
// changing time.Local, which other goroutines read).
var slurmZone = time.Local

// elapsed is how long a job has run: until it finished, or until now.
func elapsed(j *structs.Job, now time.Time) time.Duration {
	switch {
	case j.StartedAt.IsZero():
		return 0
	case !j.FinishedAt.IsZero():
		return j.FinishedAt.Sub(j.StartedAt)
	}
	return now.Sub(j.StartedAt)
}

// jobNodes is the number of nodes a job asks for (at least 1).
func jobNodes(j *structs.Job) int { return max(j.Spec.Nodes, 1) }

// jobPartition is the partition a job asked for, the default one when
// none.
func jobPartition(j *structs.Job) string { return cmp.Or(j.Spec.Partition, structs.DefaultPartition) }

// gresOf renders a job's GPUs per node as Slurm's TRES_PER_NODE,
// gres/gpu[:MODEL]:N, or N/A without GPUs.
func gresOf(s structs.JobSpec) string {
	switch {
	case s.GPUs == 0:
		return "N/A"
	case s.GPUModel != "":
		return fmt.Sprintf("gres/gpu:%s:%d", s.GPUModel, s.GPUs)
	}
	return fmt.Sprintf("gres/gpu:%d", s.GPUs)
}

// formatField is one `%` field of an output format: its header and how
// to render it for a row.
type formatField[T any] struct {
	header string
	value  func(T) string
}

// formatItem is one piece of a parsed output format: literal text, or a
// field with a width (0: as wide as its value) and alignment.
type formatItem[T any] struct {
	literal string
	field   *formatField[T]
	letter  byte
	width   int
	right   bool
}

// parseFormat parses a Slurm output format, "%.18i %.9P %j", of the
// fields given by letter: %[.][WIDTH]LETTER, where . aligns right and a
// width pads the value and cuts it to that many characters; %% is a %.
func parseFormat[T any](format string, fields map[byte]formatField[T]) ([]formatItem[T], error) {
	var items []formatItem[T]
	var lit strings.Builder
	for i := 0; i < len(format); i++ {
		if format[i] != '%' {
			lit.WriteByte(format[i])
			continue
		}
		i++
		if i < len(format) && format[i] == '%' {
			lit.WriteByte('%')
			continue
		}
		var it formatItem[T]
		if i < len(format) && format[i] == '.' {
			it.right = true
			i++
		}
		start := i
		for i < len(format) && format[i] >= '0' && format[i] <= '9' {
			i++
		}
		if i > start {
			w, err := strconv.Atoi(format[start:i])
			if err != nil || w > 1024 {
				return nil, fmt.Errorf("format %q: width %s: want at most 1024", format, format[start:i])
			}
			it.width = w
		}
		if i == len(format) {
			return nil, fmt.Errorf("format %q ends inside a %% field", format)
		}
		f, ok := fields[format[i]]
		if !ok {
			return nil, fmt.Errorf("format %q: unsupported field %%%c (supported: %s)", format, format[i], fieldLetters(fields))
		}
		if lit.Len() > 0 {
			items = append(items, formatItem[T]{literal: lit.String()})
			lit.Reset()
		}
		it.field, it.letter = &f, format[i]
		items = append(items, it)
	}
	if lit.Len() > 0 {
		items = append(items, formatItem[T]{literal: lit.String()})
	}
	return items, nil
}

// fieldLetters lists the letters of fields as "%a %b ...".
func fieldLetters[T any](fields map[byte]formatField[T]) string {
	var ls []string
	for l := range fields {
		ls = append(ls, "%"+string(l))
	}
	slices.Sort(ls)
	return strings.Join(ls, " ")
}

// renderFormat renders one line of a format: the headers when header is
// set, else row's values.
func renderFormat[T any](items []formatItem[T], row T, header bool) string {
	var b strings.Builder
	for _, it := range items {
		if it.field == nil {
			b.WriteString(it.literal)
			continue
		}
		v := it.field.header
		if !header {
			v = printable(it.field.value(row))
		}
		b.WriteString(fitWidth(v, it.width, it.right))
	}
	return strings.TrimRight(b.String(), " ")
}

// fitWidth pads s to width characters, or cuts it to them; width 0
// leaves s as it is.
func fitWidth(s string, width int, right bool) string {
	if width == 0 {
		return s
	}
	if n := utf8.RuneCountInString(s); n > width {
		return string([]rune(s)[:width])
	} else if right {
		return strings.Repeat(" ", width-n) + s
	}
	return s + strings.Repeat(" ", width-utf8.RuneCountInString(s))
}

// idMatcher reports whether a job is one of those ids name (idMatches),
// an id of digits being a job number when one of jobs has that number,
// else a prefix of an ID.
func idMatcher(jobs []structs.Job, ids []string) func(*structs.Job) bool {
	numbered := map[string]bool{}
	for _, id := range ids {
		if n, _, ok := structs.ParseJobNumber(id); ok {
			numbered[id] = slices.ContainsFunc(jobs, func(j structs.Job) bool { return j.Number == n || j.ArrayNumber == n })
		}
	}
	return func(j *structs.Job) bool {
		return slices.ContainsFunc(ids, func(id string) bool { return idMatches(j, id, numbered[id]) })
	}
}

// idMatches reports whether a job is the one a user named with id: a
// prefix of its ID, which names a job or every task of an array, or a
// prefix of an array (or service) followed by a task's -SUFFIX, which
// names that task alone ("d7e40d7d-1" is not "d7e40d7d-10"); or, with
// number, its number or its array's ("120" is every task of array 120,
// "120_3" one).
func idMatches(j *structs.Job, id string, number bool) bool {
	if n, index, ok := structs.ParseJobNumber(id); ok && number {
		switch {
		case j.ArrayNumber == n:
			return index < 0 || j.ArrayIndex == index
		case j.Number == n:
			return index < 0
		}
		return false
	}
	base, suffix, tagged := cutSuffix(id)
	if !tagged {
		return id != "" && strings.HasPrefix(j.ID, id)
	}
	jobBase, jobSuffix, ok := cutSuffix(j.ID)
	return ok && base != "" && strings.HasPrefix(jobBase, base) && jobSuffix == suffix
}

// cutSuffix splits "BASE-SUFFIX" at its last dash.
func cutSuffix(id string) (base, suffix string, ok bool) {
	i := strings.LastIndexByte(id, '-')
	if i < 0 {
		return id, "", false
	}
	return id[:i], id[i+1:], true
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, w := range strings.Split(s, ",") {
		if w = strings.TrimSpace(w); w != "" {
			out = append(out, w)
		}
	}
	return out
}

// runningNodes maps each running job among jobs to the names of the nodes
// its live allocations are on (see runningPlacements).
func runningNodes(ctx context.Context, cl *api.Client, jobs []structs.Job) (map[string][]string, error) {
	places, err := runningPlacements(ctx, cl, jobs)
	if err != nil {
		return nil, err
	}
	out := make(map[string][]string, len(places))
	for id, ps := range places {
		for _, p := range ps {
			out[id] = append(out[id], p.node)
		}
	}
	return out, nil
}

// slurmNames are the commands skein runs when called by their name,
// through the links `make install SLURM_LINKS=1` makes. Inside a job, the
// job's own srun and scontrol come first on its PATH (package slurm).
var slurmNames = []string{"squeue", "scancel", "sinfo", "sacct", "sbatch", "scontrol", "salloc", "srun"}

// noHeaderCommands are the commands whose -h is Slurm's --noheader.
var noHeaderCommands = []string{"squeue", "sinfo"}

// commandArgs turns os.Args-style args into skein's: called as squeue
// (a link named like a Slurm command), skein runs `skein squeue ARGS`;
// the -h of squeue and sinfo becomes --noheader.
func commandArgs(app *ucli.App, args []string) []string {
	if len(args) == 0 {
		return args
	}
	if name := filepath.Base(args[0]); slices.Contains(slurmNames, name) {
		args = append([]string{"skein", name}, args[1:]...)
	}
	// Find the command after the global flags and their values.
	i := 1
	for i < len(args) && strings.HasPrefix(args[i], "-") && args[i] != "--" {
		name, _, inline := strings.Cut(strings.TrimLeft(args[i], "-"), "=")
		if f := commandFlagOf(app.Flags, name); !inline && (f == nil || !isBoolFlag(f)) {
			i++ // its value
		}
		i++
	}
	if i >= len(args) || !slices.Contains(noHeaderCommands, args[i]) {
		return args
	}
	out := slices.Clone(args)
	for k := i + 1; k < len(out) && out[k] != "--"; k++ {
		if out[k] == "-h" {
			out[k] = "--noheader"
		}
	}
	return out
}
