package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/fsm"
	"github.com/skein-dev/skein/sched"
	"github.com/skein-dev/skein/structs"
)

// recentWindow is how long a finished job stays in `skein jobs` without --all.
const recentWindow = time.Hour

func (s *Server) handleSubmit(w http.ResponseWriter, r *http.Request) {
	var req api.SubmitRequest
	body, err := readBody(w, r)
	if err == nil {
		err = decodeStrict(body, &req)
	}
	if err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	if err := structs.ValidateRequestID(req.RequestID); err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	req.Spec.Normalize()
	if err := req.Spec.Validate(); err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	id := identityOf(r)
	if err := checkLoaderEnv(id, &req.Spec); err != nil {
		writeError(w, http.StatusForbidden, err)
		return
	}
	for i, d := range req.Spec.After {
		dep, err := s.fsm.FindJob(d.JobID)
		if errors.Is(err, fsm.ErrJobNotFound) && !s.cfg.Raft.IsLeader() {
			// Submitted a moment ago through another node, perhaps, and
			// not applied here yet: the leader, which committed it, says.
			continue
		}
		if err != nil {
			writeError(w, http.StatusBadRequest, &structs.FieldError{Field: "after", Msg: err.Error()})
			return
		}
		req.Spec.After[i].JobID = dep.ID // prefixes resolved once, here
	}
	if p, ok := s.fsm.Partition(structs.PartitionOf(&req.Spec)); ok {
		if err := p.Fit(&req.Spec); err != nil { // its limits, its default time limit
			writeError(w, http.StatusBadRequest, err)
			return
		}
	}
	// With no node registered yet (a cluster still forming) the job waits.
	if err := sched.CheckFits(s.fsm.Nodes(), req.Spec); err != nil && !errors.Is(err, sched.ErrNoNodes) {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	if req.RequestID != "" {
		if job, ok := s.fsm.JobByRequestID(req.RequestID); ok {
			writeJSON(w, http.StatusOK, redact(id, job, false))
			return
		}
	}
	if !s.cfg.Raft.IsLeader() {
		if req.RequestID == "" {
			// Forwarding may be retried; a request ID keeps it to one job.
			req.RequestID = structs.NewID()
		}
		if body, err = json.Marshal(req); err != nil {
			writeError(w, http.StatusInternalServerError, err)
			return
		}
		if s.forward(w, r, body) {
			return
		}
	}
	jobID := structs.NewID()
	sub := structs.JobSubmitRequest{RequestID: req.RequestID, JobID: jobID, Spec: req.Spec, SubmittedAt: now(), Owner: id.User}
	if u, ok := s.fsm.ACLUser(id.User); ok && id.ACL {
		sub.AllowRoot = u.AllowRoot
	}
	// A submit over a limit, or to an account that is not the user's,
	// costs no log entry; Apply checks again.
	if err := s.fsm.CheckSubmitLimits(sub.Owner, sub.Spec); err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	if err := s.fsm.CheckSubmitAccount(sub.Owner, sub.Spec); err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	resp, err := s.cfg.Apply(structs.JobSubmitType, sub)
	if err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	job, ok := resp.(*structs.Job)
	if !ok {
		writeError(w, http.StatusInternalServerError, fmt.Errorf("submit: unexpected answer %T from the state machine", resp))
		return
	}
	code := http.StatusCreated
	if job.ID != jobID {
		code = http.StatusOK // an earlier request with this ID won
	}
	writeJSON(w, code, redact(id, job, false))
}

// handleJobs answers one page of jobs, oldest first (see api.JobsQuery):
// at most limit, after the cursor, with the next page's cursor in a header
// when more follow.
func (s *Server) handleJobs(w http.ResponseWriter, r *http.Request) {
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
	all := q.Get("all") == "true"
	id := identityOf(r)
	owner, byOwner := q.Get("owner"), q.Has("owner")
	if q.Get("mine") == "true" {
		owner, byOwner = id.User, true
	}
	cutoff := now().Add(-recentWindow)
	jobs, more := s.fsm.JobsPage(after, limit, func(j *structs.Job) bool {
		return (!byOwner || j.Owner == owner) && (all || !j.State.Terminal() || j.FinishedAt.After(cutoff))
	})
	for _, j := range jobs {
		redact(id, j, false)
	}
	if more {
		w.Header().Set(api.NextCursorHeader, fsm.CursorOf(jobs[len(jobs)-1]).String())
	}
	if jobs == nil {
		jobs = []*structs.Job{}
	}
	writeJSON(w, http.StatusOK, jobs)
}

func (s *Server) handleJob(w http.ResponseWriter, r *http.Request) {
	job, err := s.fsm.FindJob(r.PathValue("id"))
	if err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	d := api.JobDetail{Job: *redact(identityOf(r), job, r.URL.Query().Get("secrets") == "true"), Allocations: []structs.Allocation{}, Nodes: map[string]string{}}
	if job.State == structs.JobQueued {
		d.Queue = s.queuePlace(job.ID)
	}
	for _, alloc := range s.fsm.Allocs(job.ID) {
		d.Allocations = append(d.Allocations, *alloc)
		if n, ok := s.fsm.Node(alloc.NodeID); ok {
			d.Nodes[alloc.NodeID] = n.Name
		}
	}
	writeJSON(w, http.StatusOK, d)
}

// jobOrArray finds the job or the array the request's {id} names (a job
// first) and checks the caller may act on it (verb says how): the job's
// ID, or the array's, and true; or false once it answered the request.
// An array's tasks have one owner, so its first task answers for all.
func (s *Server) jobOrArray(w http.ResponseWriter, r *http.Request, verb string) (jobID, arrayID string, ok bool) {
	id := r.PathValue("id")
	var job *structs.Job
	if j, err := s.fsm.FindJob(id); err == nil {
		jobID, job = j.ID, j
	} else if tasks, aerr := s.fsm.ArrayTasks(id); aerr == nil {
		arrayID, job = tasks[0].ArrayID, tasks[0]
	} else {
		writeError(w, statusOf(err), err)
		return "", "", false
	}
	return jobID, arrayID, mayActOn(w, r, job, verb)
}

func (s *Server) handleCancel(w http.ResponseWriter, r *http.Request) {
	// One entry cancels every task of an array still going.
	var req structs.JobCancelRequest
	var ok bool
	if req.JobID, req.ArrayID, ok = s.jobOrArray(w, r, "cancel"); !ok {
		return
	}
	if !s.cfg.Raft.IsLeader() && s.forward(w, r, nil) {
		return
	}
	req.At = now()
	resp, err := s.cfg.Apply(structs.JobCancelType, req)
	if err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	switch v := resp.(type) {
	case *structs.Job:
		resp = redact(identityOf(r), v, false)
	case []*structs.Job: // an array's tasks
		tasks := make([]*structs.Job, len(v))
		for i, j := range v {
			tasks[i] = redact(identityOf(r), j, false)
		}
		resp = tasks
	}
	writeJSON(w, http.StatusOK, resp)
}
