package cli

import (
	"cmp"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/skein-dev/skein/structs"
)

// timeNow is the clock the Slurm commands read: the time now, and in
// their golden tests a fixed one.
var timeNow = time.Now

// Slurm's other squeue formats: -l (long) and --start.
const (
	squeueLongFormat  = "%.18i %.9P %.8j %.8u %.8T %.10M %.9l %.6D %R"
	squeueStartFormat = "%.18i %.9P %.8j %.8u %.2t %.19S %.6D %R"
)

// squeueLongFields are the names squeue -O takes, each a % letter of
// squeueFields, and its default width.
var squeueLongFields = map[string]struct {
	letter byte
	width  int
}{
	"jobid": {'i', 20}, "jobarrayid": {'i', 20}, "name": {'j', 20}, "username": {'u', 20}, "userid": {'u', 20},
	"statecompact": {'t', 20}, "state": {'T', 20}, "timeused": {'M', 20}, "timelimit": {'l', 20}, "timeleft": {'L', 20},
	"numnodes": {'D', 20}, "numcpus": {'C', 20}, "tres-per-node": {'b', 20}, "partition": {'P', 20},
	"nodelist": {'N', 20}, "reason": {'r', 20}, "reasonlist": {'R', 20}, "priority": {'Q', 20},
	"submittime": {'V', 20}, "starttime": {'S', 20}, "minmemory": {'m', 20},
}

// squeueFormatOf is the format -O asks for ("jobid,name:30,state"),
// each field left-aligned at its width, as Slurm's.
func squeueFormatOf(spec string) (string, error) {
	var b strings.Builder
	for _, item := range splitList(spec) {
		name, width, hasWidth := strings.Cut(item, ":")
		f, ok := squeueLongFields[strings.ToLower(name)]
		if !ok {
			return "", fmt.Errorf("unknown field %q: want some of %s", name, strings.Join(slices.Sorted(mapKeys(squeueLongFields)), ","))
		}
		w := f.width
		if hasWidth {
			n, err := strconv.Atoi(strings.TrimPrefix(width, "."))
			if err != nil || n < 1 || n > 1024 {
				return "", fmt.Errorf("field %s: width %q: want 1 to 1024", name, width)
			}
			w = n
		}
		fmt.Fprintf(&b, "%%%d%c ", w, f.letter)
	}
	if b.Len() == 0 {
		return "", fmt.Errorf("no field given")
	}
	return strings.TrimSuffix(b.String(), " "), nil
}

func mapKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// jobName is the name squeue and sacct show: the job's, else its
// command's file name, as Slurm shows a script's.
func jobName(j *structs.Job) string {
	if j.Spec.Name != "" {
		return j.Spec.Name
	}
	if len(j.Spec.Command) > 0 {
		return filepath.Base(j.Spec.Command[0])
	}
	return ""
}

// squeueSortKeys compare two rows by one squeue -S key.
var squeueSortKeys = map[byte]func(a, b squeueRow) int{
	'i': func(a, b squeueRow) int {
		return cmp.Or(cmp.Compare(cmp.Or(a.job.ArrayNumber, a.job.Number), cmp.Or(b.job.ArrayNumber, b.job.Number)),
			cmp.Compare(a.job.ArrayIndex, b.job.ArrayIndex))
	},
	'j': func(a, b squeueRow) int { return cmp.Compare(jobName(a.job), jobName(b.job)) },
	'u': func(a, b squeueRow) int { return cmp.Compare(a.job.Owner, b.job.Owner) },
	't': func(a, b squeueRow) int { return cmp.Compare(a.state.code, b.state.code) },
	'T': func(a, b squeueRow) int { return cmp.Compare(a.state.name, b.state.name) },
	'P': func(a, b squeueRow) int { return cmp.Compare(jobPartition(a.job), jobPartition(b.job)) },
	'p': func(a, b squeueRow) int { return cmp.Compare(a.job.Spec.Priority, b.job.Spec.Priority) },
	'Q': func(a, b squeueRow) int { return cmp.Compare(a.job.Spec.Priority, b.job.Spec.Priority) },
	'D': func(a, b squeueRow) int { return cmp.Compare(jobNodes(a.job), jobNodes(b.job)) },
	'C': func(a, b squeueRow) int {
		return cmp.Compare(jobNodes(a.job)*max(a.job.Spec.CPUs, 1), jobNodes(b.job)*max(b.job.Spec.CPUs, 1))
	},
	'M': func(a, b squeueRow) int { return cmp.Compare(elapsed(a.job, a.now), elapsed(b.job, b.now)) },
	'l': func(a, b squeueRow) int { return cmp.Compare(a.job.Spec.TimeLimit, b.job.Spec.TimeLimit) },
	'V': func(a, b squeueRow) int { return a.job.SubmittedAt.Compare(b.job.SubmittedAt) },
	'S': func(a, b squeueRow) int { return a.job.StartedAt.Compare(b.job.StartedAt) },
	'N': func(a, b squeueRow) int { return cmp.Compare(structs.HostList(a.nodes), structs.HostList(b.nodes)) },
	'r': func(a, b squeueRow) int { return cmp.Compare(squeueReason(a), squeueReason(b)) },
}

// squeueSorter reads -S: comma-separated keys, each a squeueSortKeys
// letter, - before one for descending order.
func squeueSorter(spec string) (func(a, b squeueRow) int, error) {
	var keys []func(a, b squeueRow) int
	for _, k := range splitList(spec) {
		desc := strings.HasPrefix(k, "-")
		k = strings.TrimPrefix(strings.TrimPrefix(k, "-"), "+")
		var f func(a, b squeueRow) int
		if len(k) == 1 {
			f = squeueSortKeys[k[0]]
		}
		if f == nil {
			letters := slices.Sorted(mapKeys(squeueSortKeys))
			var l []string
			for _, c := range letters {
				l = append(l, string(c))
			}
			return nil, fmt.Errorf("sort key %q: want one of %s, - before one for descending order", k, strings.Join(l, " "))
		}
		if desc {
			asc := f
			f = func(a, b squeueRow) int { return asc(b, a) }
		}
		keys = append(keys, f)
	}
	return func(a, b squeueRow) int {
		for _, f := range keys {
			if c := f(a, b); c != 0 {
				return c
			}
		}
		return 0
	}, nil
}

// foldArrays folds the pending tasks of each array into one row, as
// squeue does without -r: its ID is ARRAY_[INDEXES] (with %MAX when the
// array runs at most MAX tasks at once), in the place of its first.
func foldArrays(rows []squeueRow) []squeueRow {
	first := map[uint64]int{} // array number -> its row in out
	var out []squeueRow
	indexes := map[uint64][]int{}
	for _, r := range rows {
		n := r.job.ArrayNumber
		if n == 0 || r.state != statePending || r.job.Held {
			out = append(out, r)
			continue
		}
		indexes[n] = append(indexes[n], r.job.ArrayIndex)
		if _, ok := first[n]; !ok {
			first[n] = len(out)
			out = append(out, r)
		}
	}
	for n, i := range first {
		idx := indexes[n]
		if len(idx) < 2 {
			continue
		}
		slices.Sort(idx)
		id := fmt.Sprintf("%d_[%s", n, structs.NumberRanges(idx, 0))
		if a := out[i].job.Spec.Array; a != nil && a.MaxRunning > 0 {
			id += "%" + strconv.Itoa(a.MaxRunning)
		}
		out[i].idText = id + "]"
	}
	return out
}
