package server

import (
	"github.com/skein-dev/skein/agent/server/endpoint"
	"net/http"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/fsm"
	"github.com/skein-dev/skein/structs"
)

// handleSubmit submits a job (endpoint.Jobs.Submit): 201 with a new
// job, 200 with the one an earlier request with its request ID made.
func (s *jobRoutes) handleSubmit(w http.ResponseWriter, r *http.Request) {
	var req api.SubmitRequest
	body, err := readBody(w, r)
	if err == nil {
		err = decodeStrict(body, &req)
	}
	if err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	job, created, err := s.jobs.Submit(s.writer(w, r, body), identityOf(r), req)
	code := http.StatusOK
	if created {
		code = http.StatusCreated
	}
	answer(w, code, job, err)
}

// handleJobs answers one page of jobs, oldest first (see api.JobsQuery):
// at most limit, after the cursor, with the next page's cursor in a header
// when more follow.
func (s *jobRoutes) handleJobs(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, err := pageLimit(q.Get("limit"))
	var after fsm.JobCursor
	if err == nil {
		after, err = fsm.ParseJobCursor(q.Get("after"))
	}
	if err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	id := identityOf(r)
	sel := endpoint.JobsQuery{After: after, Limit: limit, All: q.Get("all") == "true", Owner: q.Get("owner"), ByOwner: q.Has("owner")}
	if q.Get("mine") == "true" {
		sel.Owner, sel.ByOwner = id.User, true
	}
	jobs, more := s.jobs.List(id, sel)
	if more {
		w.Header().Set(api.NextCursorHeader, fsm.CursorOf(jobs[len(jobs)-1]).String())
	}
	if jobs == nil {
		jobs = []*structs.Job{}
	}
	writeJSON(w, http.StatusOK, jobs)
}

// handleJob answers a job, its allocations and, while it is queued, its
// place in the queue.
func (s *jobRoutes) handleJob(w http.ResponseWriter, r *http.Request) {
	d, err := s.jobs.Detail(identityOf(r), r.PathValue("id"), r.URL.Query().Get("secrets") == "true")
	if s.leaderOnMiss(w, r, err) {
		return
	}
	answer(w, http.StatusOK, d, err)
}

// handleCancel cancels a job, or an array's tasks still going
// (endpoint.Jobs.Cancel).
func (s *jobRoutes) handleCancel(w http.ResponseWriter, r *http.Request) {
	s.write(w, r, nil, bodyRequired, func(wr endpoint.Writer) (any, error) {
		return s.jobs.Cancel(wr, identityOf(r), r.PathValue("id"))
	})
}

// handleJobUpdate holds, releases or changes a queued job, or every
// queued task of an array (endpoint.Jobs.Update).
func (s *jobRoutes) handleJobUpdate(w http.ResponseWriter, r *http.Request) {
	var u api.JobUpdate
	s.write(w, r, &u, bodyRequired, func(wr endpoint.Writer) (any, error) {
		return s.jobs.Update(wr, identityOf(r), r.PathValue("id"), u)
	})
}
