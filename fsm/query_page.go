package fsm

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/skein-dev/skein/structs"
)

// JobCursor is a place in the list of jobs, which is ordered by the index
// that created each job, then by array index (the tasks of an array are
// created by one entry). A job created later always sorts after every
// cursor handed out before, so a client that pages through the list while
// jobs are submitted sees every job once. The zero cursor is the start.
type JobCursor struct {
	CreateIndex uint64
	ArrayIndex  int
	ID          string
}

// CursorOf is the cursor just past job j.
func CursorOf(j *structs.Job) JobCursor {
	return JobCursor{CreateIndex: j.CreateIndex, ArrayIndex: j.ArrayIndex, ID: j.ID}
}

// String encodes the cursor for a URL: "INDEX.ARRAYINDEX.ID".
func (c JobCursor) String() string {
	if c == (JobCursor{}) {
		return ""
	}
	return fmt.Sprintf("%d.%d.%s", c.CreateIndex, c.ArrayIndex, c.ID)
}

// ParseJobCursor reads what String wrote; "" is the start.
func ParseJobCursor(s string) (JobCursor, error) {
	if s == "" {
		return JobCursor{}, nil
	}
	bad := &structs.FieldError{Field: "after", Msg: fmt.Sprintf("%q is not a cursor this agent handed out", s)}
	idx, rest, ok1 := strings.Cut(s, ".")
	arr, id, ok2 := strings.Cut(rest, ".")
	if !ok1 || !ok2 || id == "" || len(s) > 256 {
		return JobCursor{}, bad
	}
	ci, err1 := strconv.ParseUint(idx, 10, 64)
	ai, err2 := strconv.Atoi(arr)
	if err1 != nil || err2 != nil {
		return JobCursor{}, bad
	}
	return JobCursor{CreateIndex: ci, ArrayIndex: ai, ID: id}, nil
}

// compare orders a job against the cursor: < 0 when it sorts before.
func (c JobCursor) compare(j *structs.Job) int {
	return cmp.Or(cmp.Compare(j.CreateIndex, c.CreateIndex), cmp.Compare(j.ArrayIndex, c.ArrayIndex),
		cmp.Compare(j.ID, c.ID))
}

// JobsPage returns copies of at most limit jobs after the cursor for which
// keep is true, in list order, and whether more such jobs follow. keep is
// called under the read lock with the state's own jobs: it must not change
// them nor keep them. It copies only the page, so a client that pages
// through a long list never makes the agent copy all of it at once.
func (f *FSM) JobsPage(after JobCursor, limit int, keep func(*structs.Job) bool) ([]*structs.Job, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var found []*structs.Job
	for _, j := range f.st.jobs {
		if after.compare(j) > 0 && (keep == nil || keep(j)) {
			found = append(found, j)
		}
	}
	slices.SortFunc(found, func(a, b *structs.Job) int { return CursorOf(b).compare(a) })
	more := len(found) > limit
	found = found[:min(len(found), limit)]
	out := make([]*structs.Job, len(found))
	for i, j := range found {
		out[i] = j.Copy()
	}
	return out, more
}
