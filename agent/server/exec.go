package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/structs"
)

// Exec's bounds: the words and bytes of a command, and how long it may
// run.
const (
	maxExecArgs  = 256
	maxExecBytes = 64 << 10
	execTimeout  = 10 * time.Minute
	maxTermBytes = 64
)

// termChar reports whether c may be in a terminal's name (TERM).
func termChar(c rune) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("._+-", c)
}

// handleExec runs a command beside one rank of a running job (skein
// exec), on the node that runs that rank: here, or relayed to it. Only
// the job's owner, or one who may act on any job, may: the command runs
// as the job's account.
func (s *allocRoutes) handleExec(w http.ResponseWriter, r *http.Request) {
	var req api.ExecRequest
	body, err := readBody(w, r)
	if err == nil {
		err = decodeStrict(body, &req)
	}
	if err == nil {
		err = checkExec(req)
	}
	if err == nil && req.TTY && !strings.EqualFold(r.Header.Get("Upgrade"), api.PTYUpgrade) {
		err = &structs.FieldError{Field: "tty", Msg: "a terminal is asked on a connection upgraded to " + api.PTYUpgrade + " (skein exec -it)"}
	}
	if err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	st := s.fsm
	job, err := st.FindJob(r.PathValue("id"))
	if err != nil && s.cfg.View != nil && r.Header.Get(api.ForwardedHeader) != "" {
		// A worker that runs the job, asked by a server: it holds no
		// state but its own view, which holds the jobs it runs.
		if j, verr := s.cfg.View.FindJob(r.PathValue("id")); verr == nil {
			st, job, err = s.cfg.View, j, nil
		}
	}
	if err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	if !mayActOn(w, r, job, "run commands in") {
		return
	}
	if job.State != structs.JobRunning {
		writeError(w, http.StatusConflict, fmt.Errorf("job %s is %s: commands run only beside a running job", job.SlurmID(), job.State))
		return
	}
	if req.Rank < 0 || req.Rank >= job.Spec.Nodes {
		writeError(w, http.StatusBadRequest, &structs.FieldError{Field: "rank", Msg: fmt.Sprintf("%d: job %s has ranks 0..%d", req.Rank, job.SlurmID(), job.Spec.Nodes-1)})
		return
	}
	var alloc *structs.Allocation
	for _, a := range st.Allocs(job.ID) {
		if a.Rank == req.Rank && a.Live() && (alloc == nil || a.Attempt > alloc.Attempt) {
			alloc = a
		}
	}
	if alloc == nil || alloc.State != structs.AllocRunning {
		writeError(w, http.StatusConflict, fmt.Errorf("rank %d of job %s is not running yet", req.Rank, job.SlurmID()))
		return
	}
	if alloc.NodeID != s.cfg.NodeID {
		addr := s.cfg.Peers.HTTPAddrOf(alloc.NodeID)
		if addr == "" {
			writeError(w, http.StatusBadGateway, fmt.Errorf("rank %d of job %s runs on node %s, whose address is unknown", req.Rank, job.SlurmID(), structs.ShortID(alloc.NodeID)))
			return
		}
		if req.TTY {
			s.relayUpgrade(w, r, addr, body)
			return
		}
		s.proxy(w, r, addr, body)
		return
	}
	if req.TTY {
		s.servePTY(w, alloc.ID, req)
		return
	}
	if s.cfg.Exec == nil {
		writeError(w, http.StatusNotImplemented, errors.New("this node runs no jobs"))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), execTimeout)
	defer cancel()
	res, err := s.cfg.Exec(ctx, alloc.ID, req.Command)
	if err != nil {
		writeError(w, http.StatusConflict, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// checkExec bounds a command: at least its program, at most maxExecArgs
// words and maxExecBytes bytes.
func checkExec(req api.ExecRequest) error {
	n := 0
	for _, a := range req.Command {
		n += len(a)
	}
	switch {
	case len(req.Command) == 0 || req.Command[0] == "":
		return &structs.FieldError{Field: "command", Msg: "empty: give the program and its arguments"}
	case len(req.Command) > maxExecArgs:
		return &structs.FieldError{Field: "command", Msg: fmt.Sprintf("%d words, more than the limit of %d", len(req.Command), maxExecArgs)}
	case n > maxExecBytes:
		return &structs.FieldError{Field: "command", Msg: fmt.Sprintf("%d bytes, more than the limit of %d", n, maxExecBytes)}
	case len(req.Term) > maxTermBytes:
		return &structs.FieldError{Field: "term", Msg: fmt.Sprintf("%d bytes, more than the limit of %d", len(req.Term), maxTermBytes)}
	case strings.IndexFunc(req.Term, func(c rune) bool { return !termChar(c) }) >= 0:
		return &structs.FieldError{Field: "term", Msg: fmt.Sprintf("%q: only letters, digits and . _ + - make a terminal's name", req.Term)}
	}
	return nil
}
