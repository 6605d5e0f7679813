package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/fsm"
	"github.com/skein-dev/skein/structs"
)

// handleSignal sends a signal to every running rank of a job, or of each
// running task of an array, on the nodes that run them (scancel
// --signal): here, and relayed to the others, which each signal their
// own ranks. Nothing is written: the job goes on unless the signal ends
// its processes, as in Slurm. Only the job's owner, or one who may act on
// any job, may.
func (s *allocRoutes) handleSignal(w http.ResponseWriter, r *http.Request) {
	var req api.SignalRequest
	body, err := readBody(w, r)
	if err == nil {
		err = decodeStrict(body, &req)
	}
	var name string
	if err == nil {
		name, err = structs.ParseJobSignal(req.Signal)
	}
	if err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	forwarded := r.Header.Get(api.ForwardedHeader) != ""
	st := s.fsm
	jobs, err := signalTargets(st, r.PathValue("id"))
	if err != nil && s.cfg.View != nil && forwarded {
		// A worker asked by a server: its view holds the jobs it runs.
		if vj, verr := signalTargets(s.cfg.View, r.PathValue("id")); verr == nil {
			st, jobs, err = s.cfg.View, vj, nil
		}
	}
	if err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	if !mayActOn(w, r, jobs[0], "signal") {
		return
	}
	var mine, theirs []*structs.Allocation
	for _, job := range jobs {
		for _, a := range runningRanks(st, job) {
			switch {
			case a.NodeID == s.cfg.NodeID:
				mine = append(mine, a)
			case !forwarded:
				theirs = append(theirs, a)
			}
		}
	}
	if len(mine)+len(theirs) == 0 {
		what := "job " + jobs[0].SlurmID() + " is " + string(jobs[0].State)
		if len(jobs) > 1 {
			what = "no task of array " + r.PathValue("id") + " is running"
		}
		if forwarded {
			what = "no rank of job " + jobs[0].SlurmID() + " runs on node " + s.cfg.NodeName
		}
		writeError(w, http.StatusConflict, fmt.Errorf("%s: only a running job's processes can be signalled", what))
		return
	}
	res := api.SignalResult{Signal: name}
	var errs []error
	for _, a := range mine {
		if s.cfg.Signal == nil {
			errs = append(errs, errors.New("this node runs no jobs"))
			break
		}
		if err := s.cfg.Signal(a.ID, name); err != nil {
			errs = append(errs, fmt.Errorf("rank %d on %s: %w", a.Rank, s.cfg.NodeName, err))
			continue
		}
		res.Signalled = append(res.Signalled, signalled(st, a, s.cfg.NodeName))
	}
	for _, node := range nodesOf(theirs) {
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
		writeError(w, http.StatusBadGateway, fmt.Errorf("signal %s%s: %w", name, sent, errors.Join(errs...)))
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// signalTargets is the job id names, or the tasks of the array it names.
func signalTargets(st *fsm.FSM, id string) ([]*structs.Job, error) {
	if j, err := st.FindJob(id); err == nil {
		return []*structs.Job{j}, nil
	} else if tasks, aerr := st.ArrayTasks(id); aerr == nil {
		return tasks, nil
	} else {
		return nil, err
	}
}

// runningRanks are the running allocations of a running job, the
// newest attempt of each rank.
func runningRanks(st *fsm.FSM, job *structs.Job) []*structs.Allocation {
	if job.State != structs.JobRunning {
		return nil
	}
	newest := map[int]*structs.Allocation{}
	for _, a := range st.Allocs(job.ID) {
		if b := newest[a.Rank]; a.Live() && (b == nil || a.Attempt > b.Attempt) {
			newest[a.Rank] = a
		}
	}
	var out []*structs.Allocation
	for _, a := range newest {
		if a.State == structs.AllocRunning {
			out = append(out, a)
		}
	}
	slices.SortFunc(out, func(a, b *structs.Allocation) int { return a.Rank - b.Rank })
	return out
}

// nodesOf lists the nodes of allocs once each, sorted.
func nodesOf(allocs []*structs.Allocation) []string {
	var nodes []string
	for _, a := range allocs {
		nodes = append(nodes, a.NodeID)
	}
	slices.Sort(nodes)
	return slices.Compact(nodes)
}

// signalled names a rank a signal was sent to.
func signalled(st *fsm.FSM, a *structs.Allocation, node string) api.SignalledAlloc {
	out := api.SignalledAlloc{JobID: a.JobID, Rank: a.Rank, Node: node}
	if j, ok := st.Job(a.JobID); ok {
		out.SlurmID = j.SlurmID()
	}
	return out
}

// signalOn relays a signal request to a node that runs ranks of the
// job, marked forwarded, with the caller's credentials: that node
// authenticates it again and signals its own ranks only.
func (s *allocRoutes) signalOn(r *http.Request, node string, body []byte) (*api.SignalResult, error) {
	addr := s.cfg.Peers.HTTPAddrOf(node)
	if addr == "" {
		return nil, fmt.Errorf("node %s: its address is unknown", structs.ShortID(node))
	}
	req, err := http.NewRequestWithContext(r.Context(), r.Method, addr+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	copyHeaders(req.Header, r.Header, "Content-Type", api.TokenHeader, "Authorization")
	req.Header.Set(api.ForwardedHeader, s.cfg.NodeName)
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
