package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/skein-dev/skein/agent/server/endpoint"
	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/structs"
)

// handleSignal sends a signal to every running rank of a job, or of each
// running task of an array, on the nodes that run them (scancel
// --signal): here, and relayed to the others, which each signal their
// own ranks (endpoint.Allocs.PlanSignal decides which). Nothing is
// written: the job goes on unless the signal ends its processes, as in
// Slurm.
func (s *allocRoutes) handleSignal(w http.ResponseWriter, r *http.Request) {
	var req api.SignalRequest
	body, err := readBody(w, r)
	if err == nil {
		err = decodeStrict(body, &req)
	}
	var plan endpoint.SignalPlan
	if err == nil {
		plan, err = s.allocs.PlanSignal(identityOf(r), r.PathValue("id"), req, r.Header.Get(api.ForwardedHeader) != "")
		if s.catchUpOnMiss(r, r.PathValue("id"), err) {
			plan, err = s.allocs.PlanSignal(identityOf(r), r.PathValue("id"), req, r.Header.Get(api.ForwardedHeader) != "")
		}
	}
	if err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	res := api.SignalResult{Signal: plan.Signal}
	var errs []error
	for _, t := range plan.Local {
		if s.cfg.Signal == nil {
			errs = append(errs, errors.New("this node runs no jobs"))
			break
		}
		if err := s.cfg.Signal(t.Alloc.ID, plan.Signal); err != nil {
			errs = append(errs, fmt.Errorf("rank %d on %s: %w", t.Alloc.Rank, s.cfg.NodeName, err))
			continue
		}
		res.Signalled = append(res.Signalled, t.As)
	}
	for _, node := range plan.Relay {
		got, err := s.signalOn(r, node, body)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		res.Signalled = append(res.Signalled, got.Signalled...)
	}
	if len(errs) > 0 {
		sent := ""
		if len(res.Signalled) > 0 {
			sent = fmt.Sprintf(" (sent to %d rank(s))", len(res.Signalled))
		}
		writeError(w, http.StatusBadGateway, fmt.Errorf("signal %s%s: %w", plan.Signal, sent, errors.Join(errs...)))
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// signalOn relays a signal request to a node that runs ranks of the
// job, marked forwarded, with the caller's credentials: that node
// authenticates it again and signals its own ranks only.
func (s *allocRoutes) signalOn(r *http.Request, node string, body []byte) (*api.SignalResult, error) {
	addr := s.cfg.Peers.HTTPAddrOf(node)
	if addr == "" {
		return nil, fmt.Errorf("node %s: its address is unknown", structs.ShortID(node))
	}
	req, err := s.onwardRequest(r.Context(), r, r.Method, addr+r.URL.RequestURI(), body)
	if err != nil {
		return nil, err
	}
	resp, err := s.cfg.Peers.Calls().Do(req)
	if err != nil {
		return nil, fmt.Errorf("reach the node at %s: %w", addr, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("node at %s: %w", addr, api.ReadError(resp))
	}
	var res api.SignalResult
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
		return nil, fmt.Errorf("node at %s: decode its answer: %w", addr, err)
	}
	return &res, nil
}
