package ui

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/fsm"
	"github.com/skein-dev/skein/structs"
)

// Log tails: how much of a stream the job page shows, and how long it
// waits for the node that holds it (the API may fetch it from another
// node, which may not answer).
const (
	logTailBytes = 16 << 10
	logTailWait  = 2 * time.Second
)

// queueRow is one queued job, at its place in the queue, with its
// priority factors when the multifactor priority orders the queue.
type queueRow struct {
	Pos    int
	Job    *structs.Job
	Waited time.Duration
	Prio   *api.JobPriority
}

func (u *UI) queueRows(jobs []*structs.Job, offset int, v *view) []queueRow {
	rows := make([]queueRow, len(jobs))
	for i, j := range jobs {
		rows[i] = queueRow{Pos: offset + i + 1, Job: j, Waited: v.Now.Sub(j.SubmittedAt)}
	}
	return rows
}

// queuePage returns limit rows of the queue from offset and its size: in
// the scheduler's order with the factors when the multifactor priority is
// on, else in the order the state keeps. multifactor says which.
func (u *UI) queuePage(offset, limit int, v *view) (rows []queueRow, size int, multifactor bool) {
	if u.cfg.Priorities != nil {
		if info := u.cfg.Priorities(); info != nil && info.Weights != nil {
			for i := offset; i < len(info.Jobs) && len(rows) < limit; i++ {
				p := info.Jobs[i]
				if j, ok := u.cfg.FSM.Job(p.JobID); ok {
					rows = append(rows, queueRow{Pos: p.Position, Job: j, Waited: v.Now.Sub(j.SubmittedAt), Prio: &p})
				}
			}
			return rows, info.Total, true
		}
	}
	jobs, size := u.cfg.FSM.QueuePage(offset, limit)
	return u.queueRows(jobs, offset, v), size, false
}

type queueData struct {
	Rows             []queueRow
	Size             int
	Multifactor      bool
	Page, Pages      int
	PrevURL, NextURL string
}

func (u *UI) handleQueue(w http.ResponseWriter, r *http.Request, v *view) {
	v.Title, v.Nav, v.Refresh = "Queue", "queue", refreshSeconds
	page := 1
	if s := r.URL.Query().Get("page"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			u.fail(w, r, v, http.StatusBadRequest, fmt.Errorf("page %q: want a number from 1", s))
			return
		}
		page = n
	}
	offset := (page - 1) * queuePage
	rows, size, multifactor := u.queuePage(offset, queuePage, v)
	d := queueData{Rows: rows, Size: size, Multifactor: multifactor, Page: page, Pages: max(1, (size+queuePage-1)/queuePage)}
	if page > 1 {
		d.PrevURL = Prefix + "queue?page=" + strconv.Itoa(page-1)
	}
	if offset+len(rows) < size {
		d.NextURL = Prefix + "queue?page=" + strconv.Itoa(page+1)
	}
	u.render(w, http.StatusOK, "queue", v, d)
}

type jobsData struct {
	Jobs    []*structs.Job
	State   string
	States  []structs.JobState
	NextURL string
	// First is whether this is the list's first page.
	First bool
}

// handleJobs lists jobs in the order they were submitted, a page at a
// time (the API's cursor), of one state or all.
func (u *UI) handleJobs(w http.ResponseWriter, r *http.Request, v *view) {
	v.Title, v.Nav, v.Refresh = "Jobs", "jobs", refreshSeconds
	q := r.URL.Query()
	state := q.Get("state")
	if state != "" && !slices.Contains(structs.JobStates, structs.JobState(state)) {
		u.fail(w, r, v, http.StatusBadRequest, fmt.Errorf("state %q: want one of %v", state, structs.JobStates))
		return
	}
	after, err := fsm.ParseJobCursor(q.Get("after"))
	if err != nil {
		u.fail(w, r, v, http.StatusBadRequest, err)
		return
	}
	jobs, more := u.cfg.FSM.JobsPage(after, jobsPage, func(j *structs.Job) bool {
		return state == "" || j.State == structs.JobState(state)
	})
	d := jobsData{Jobs: jobs, State: state, States: structs.JobStates, First: q.Get("after") == ""}
	if more {
		next := url.Values{"after": {fsm.CursorOf(jobs[len(jobs)-1]).String()}}
		if state != "" {
			next.Set("state", state)
		}
		d.NextURL = Prefix + "jobs?" + next.Encode()
	}
	u.render(w, http.StatusOK, "jobs", v, d)
}

// attempt is one placement of a job: its allocations, by rank.
type attempt struct {
	N      int
	Allocs []allocRow
}

type allocRow struct {
	Alloc    *structs.Allocation
	NodeName string
}

// envVar is one variable of a job's environment as the viewer may see it.
type envVar struct {
	Name, Value string
	// Hidden is set when the value is not shown: a secret's always, any
	// other's to a viewer who may not act on the job.
	Hidden bool
	Secret bool
}

type jobData struct {
	Job      *structs.Job
	Command  string
	Env      []envVar
	Attempts []attempt
	// Current is the newest attempt's allocations, by rank.
	Current *attempt
	// MayAct shows the cancel button and the log tail.
	MayAct bool
	// MayCancel is MayAct on a job that has not ended.
	MayCancel bool
	// The log tail: which rank and stream, the ranks to pick from, and
	// what was read (LogError when it could not be).
	Rank     int
	Stream   string
	Ranks    []int
	Log      string
	LogCut   bool
	LogError string
	LogURL   string
	// Events are the job's latest events, oldest first.
	Events []structs.Event
	// Queue, on a queued job while the multifactor priority orders the
	// queue, is its place and factors (nil: none, or past the jobs the
	// UI orders).
	Queue *queuePlace
}

// queuePlace is a queued job's place in the queue and its factors.
type queuePlace struct {
	api.JobPriority
	Total int
}

func (u *UI) handleJob(w http.ResponseWriter, r *http.Request, v *view) {
	job, err := u.cfg.FSM.FindJob(r.PathValue("id"))
	if err != nil {
		u.fail(w, r, v, http.StatusNotFound, err)
		return
	}
	v.Title, v.Nav = "Job "+structs.ShortID(job.ID), "jobs"
	if !job.State.Terminal() {
		v.Refresh = refreshSeconds
	}
	d := jobData{Job: job, Command: shellJoin(job.Spec.Command), MayAct: v.Viewer.MayActFor(job.Owner),
		Events: u.cfg.FSM.RecentEvents(job.ID, "", recentEvents)}
	d.MayCancel = d.MayAct && !job.State.Terminal()
	if job.State == structs.JobQueued && u.cfg.Priorities != nil {
		if info := u.cfg.Priorities(); info != nil && info.Weights != nil {
			for _, p := range info.Jobs {
				if p.JobID == job.ID {
					d.Queue = &queuePlace{JobPriority: p, Total: info.Total}
					break
				}
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(job.Spec.Env)) {
		d.Env = append(d.Env, envVar{Name: k, Value: job.Spec.Env[k], Hidden: !d.MayAct})
	}
	for _, k := range slices.Sorted(maps.Keys(job.Spec.SecretEnv)) {
		d.Env = append(d.Env, envVar{Name: k, Hidden: true, Secret: true})
	}
	names := map[string]string{}
	for _, a := range u.cfg.FSM.Allocs(job.ID) { // by attempt, then rank
		name, ok := names[a.NodeID]
		if !ok {
			if n, found := u.cfg.FSM.Node(a.NodeID); found {
				name = n.Name
			}
			names[a.NodeID] = name
		}
		if len(d.Attempts) == 0 || d.Attempts[len(d.Attempts)-1].N != a.Attempt {
			d.Attempts = append(d.Attempts, attempt{N: a.Attempt})
		}
		last := &d.Attempts[len(d.Attempts)-1]
		last.Allocs = append(last.Allocs, allocRow{Alloc: a, NodeName: name})
	}
	slices.Reverse(d.Attempts) // newest first
	if len(d.Attempts) > 0 {
		// After the reverse: a pointer taken before it would hold the
		// first attempt, which the reverse moved to where the newest was.
		d.Current = &d.Attempts[0]
	}
	for i := range job.Spec.Nodes {
		d.Ranks = append(d.Ranks, i)
	}
	d.Rank, d.Stream, err = logChoice(r.URL.Query(), job)
	if err != nil {
		u.fail(w, r, v, http.StatusBadRequest, err)
		return
	}
	if d.MayAct && d.Current != nil {
		d.LogURL = fmt.Sprintf("%sjobs/%s/log?rank=%d&stream=%s", Prefix, job.ID, d.Rank, d.Stream)
		d.Log, d.LogCut, d.LogError = u.logTail(r, job.ID, d.Rank, d.Stream)
	}
	u.render(w, http.StatusOK, "job", v, d)
}

// shellJoin writes a command as a shell would read it back: arguments
// that hold spaces or quotes are quoted.
func shellJoin(argv []string) string {
	out := make([]string, len(argv))
	for i, a := range argv {
		if a == "" || strings.ContainsAny(a, " \t\n'\"\\$`;&|<>*?()[]{}#~") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		out[i] = a
	}
	return strings.Join(out, " ")
}

// logChoice reads which rank and stream a log request asks for.
func logChoice(q url.Values, job *structs.Job) (int, string, error) {
	rank := 0
	if s := q.Get("rank"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 || n >= job.Spec.Nodes {
			return 0, "", fmt.Errorf("rank %q: job %s has ranks 0..%d", s, structs.ShortID(job.ID), job.Spec.Nodes-1)
		}
		rank = n
	}
	stream := q.Get("stream")
	switch stream {
	case "":
		stream = "stdout"
	case "stdout", "stderr":
	default:
		return 0, "", fmt.Errorf("stream %q: want stdout or stderr", stream)
	}
	return rank, stream, nil
}

// logTail reads the last logTailBytes of one stream of a rank through the
// API, which reads them from the end of the log on the node that ran it.
// It asks for a byte more, to tell whether the start is cut.
func (u *UI) logTail(r *http.Request, jobID string, rank int, stream string) (string, bool, string) {
	ctx, cancel := context.WithTimeout(r.Context(), u.logWait)
	defer cancel()
	path := fmt.Sprintf("/v1/jobs/%s/logs?rank=%d&stream=%s&tail=%d", url.PathEscape(jobID), rank, stream, logTailBytes+1)
	status, body, err := u.callAPI(ctx, r, http.MethodGet, path, nil, logTailBytes+1)
	switch {
	case errors.Is(err, errTooLong):
		return "", false, "the node that holds the log sent more than its end (is it an older skein?): stream it instead"
	case err != nil:
		return "", false, err.Error()
	case ctx.Err() != nil: // what was read may not be the end
		return "", false, fmt.Sprintf("the node that holds the log did not answer within %s: stream it instead", u.logWait)
	case status != http.StatusOK:
		return "", false, apiError(status, body).Error()
	}
	b, cut := tail(body, logTailBytes)
	return strings.ToValidUTF8(string(b), "\uFFFD"), cut, ""
}

// handleLogStream streams a rank's log as it is written, through the API.
func (u *UI) handleLogStream(w http.ResponseWriter, r *http.Request, v *view) {
	job, err := u.cfg.FSM.FindJob(r.PathValue("id"))
	if err != nil {
		u.fail(w, r, v, http.StatusNotFound, err)
		return
	}
	rank, stream, err := logChoice(r.URL.Query(), job)
	if err != nil {
		u.fail(w, r, v, http.StatusBadRequest, err)
		return
	}
	req, err := http.NewRequestWithContext(r.Context(), http.MethodGet,
		fmt.Sprintf("/v1/jobs/%s/logs?rank=%d&stream=%s&follow=true", url.PathEscape(job.ID), rank, stream), nil)
	if err != nil {
		u.fail(w, r, v, http.StatusInternalServerError, err)
		return
	}
	req.Header = r.Header.Clone()
	req.RemoteAddr, req.Host = r.RemoteAddr, r.Host
	// The API answers text/plain (or a JSON error): never HTML.
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	u.srv.API.ServeHTTP(w, req)
}

// handleCancel cancels a job through the API (which passes it to the
// leader), then shows the job again.
func (u *UI) handleCancel(w http.ResponseWriter, r *http.Request, v *view) {
	job, err := u.cfg.FSM.FindJob(r.PathValue("id"))
	if err == nil {
		err = u.act(r, http.MethodDelete, "/v1/jobs/"+url.PathEscape(job.ID), nil)
	} else {
		err = &actionError{status: http.StatusNotFound, err: err}
	}
	if err != nil {
		u.fail(w, r, v, statusOf(err), err)
		return
	}
	http.Redirect(w, r, Prefix+"jobs/"+job.ID, http.StatusSeeOther)
}
