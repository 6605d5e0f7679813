package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/skein-dev/skein/agent/server/endpoint"
	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/structs"
)

// execTimeout bounds how long a command may run.
const execTimeout = 10 * time.Minute

// handleExec runs a command beside one rank of a running job (skein
// exec), on the node that runs that rank: here, or relayed to it
// (endpoint.Allocs.PlanExec decides where).
func (s *allocRoutes) handleExec(w http.ResponseWriter, r *http.Request) {
	var req api.ExecRequest
	body, err := readBody(w, r)
	if err == nil {
		err = decodeStrict(body, &req)
	}
	var plan endpoint.ExecPlan
	planExec := func() (endpoint.ExecPlan, error) {
		return s.allocs.PlanExec(identityOf(r), r.PathValue("id"), req,
			strings.EqualFold(r.Header.Get("Upgrade"), api.PTYUpgrade), r.Header.Get(api.ForwardedHeader) != "")
	}
	if err == nil {
		plan, err = planExec()
		if s.catchUpOnMiss(r, r.PathValue("id"), err) {
			plan, err = planExec()
		}
	}
	if err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	if !plan.Local {
		addr := s.cfg.Peers.HTTPAddrOf(plan.Alloc.NodeID)
		if addr == "" {
			writeError(w, http.StatusBadGateway, fmt.Errorf("rank %d of job %s runs on node %s, whose address is unknown", req.Rank, plan.Job.SlurmID(), structs.ShortID(plan.Alloc.NodeID)))
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
		s.servePTY(w, plan.Alloc.ID, req)
		return
	}
	if s.cfg.Exec == nil {
		writeError(w, http.StatusNotImplemented, errors.New("this node runs no jobs"))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), execTimeout)
	defer cancel()
	res, err := s.cfg.Exec(ctx, plan.Alloc.ID, req.Command)
	if err != nil {
		writeError(w, http.StatusConflict, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}
