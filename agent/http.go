package agent

import (
	"bytes"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/cluster"
	"github.com/skein-dev/skein/fsm"
	"github.com/skein-dev/skein/sched"
	"github.com/skein-dev/skein/structs"
)

// recentWindow is how long a finished job stays in `skein jobs` without --all.
const recentWindow = time.Hour

func (a *Agent) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/jobs", a.handleSubmit)
	mux.HandleFunc("GET /v1/jobs", a.handleJobs)
	mux.HandleFunc("GET /v1/jobs/{id}", a.handleJob)
	mux.HandleFunc("DELETE /v1/jobs/{id}", a.handleCancel)
	mux.HandleFunc("GET /v1/jobs/{id}/logs", a.handleLogs)
	mux.HandleFunc("GET /v1/nodes", a.handleNodes)
	mux.HandleFunc("GET /v1/status", a.handleStatus)
	mux.HandleFunc("GET /v1/members", a.handleMembers)
	mux.HandleFunc("GET /v1/raft/peers", a.handleRaftPeers)
	mux.HandleFunc("POST /v1/join", a.handleJoin)
	mux.HandleFunc("POST /v1/leave", a.handleLeave)
	mux.HandleFunc("POST /v1/internal/heartbeat", a.handleHeartbeat)
	mux.HandleFunc("POST /v1/internal/register", a.handleRegister)
	mux.HandleFunc("POST /v1/internal/alloc-updates", a.handleAllocUpdates)
	mux.HandleFunc("POST /v1/internal/gpu-health", a.handleGPUHealth)
	mux.HandleFunc("GET /v1/gpus", a.handleGPUs)
	mux.HandleFunc("POST /v1/gpus/cordon", a.handleGPUCordon)
	mux.HandleFunc("POST /v1/gpus/uncordon", a.handleGPUCordon)
	mux.HandleFunc("POST /v1/gpus/fault", a.handleGPUFault)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Errorf("no such endpoint: %s %s", r.Method, r.URL.Path))
	})
	return a.authenticate(mux)
}

// authenticate requires the configured token on every request.
func (a *Agent) authenticate(next http.Handler) http.Handler {
	if a.cfg.Token == "" {
		return next
	}
	want := []byte(a.cfg.Token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := r.Header.Get(api.TokenHeader)
		if got == "" {
			got = strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		}
		if subtle.ConstantTimeCompare([]byte(got), want) != 1 {
			writeError(w, http.StatusUnauthorized, errors.New("missing or wrong API token: set --token or SKEIN_TOKEN"))
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (a *Agent) handleSubmit(w http.ResponseWriter, r *http.Request) {
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
	for i, d := range req.Spec.After {
		dep, err := a.fsm.FindJob(d.JobID)
		if err != nil {
			writeError(w, http.StatusBadRequest, &structs.FieldError{Field: "after", Msg: err.Error()})
			return
		}
		req.Spec.After[i].JobID = dep.ID // prefixes resolved once, here
	}
	// With no node registered yet (a cluster still forming) the job waits.
	if err := sched.CheckFits(a.fsm.Nodes(), req.Spec); err != nil && !errors.Is(err, sched.ErrNoNodes) {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	if req.RequestID != "" {
		if job, ok := a.fsm.JobByRequestID(req.RequestID); ok {
			writeJSON(w, http.StatusOK, job)
			return
		}
	}
	if !a.raft.IsLeader() {
		if req.RequestID == "" {
			// Forwarding may be retried; a request ID keeps it to one job.
			req.RequestID = structs.NewID()
		}
		if body, err = json.Marshal(req); err != nil {
			writeError(w, http.StatusInternalServerError, err)
			return
		}
		if a.forward(w, r, body) {
			return
		}
	}
	id := structs.NewID()
	resp, err := a.apply(structs.JobSubmitType, structs.JobSubmitRequest{
		RequestID: req.RequestID, JobID: id, Spec: req.Spec, SubmittedAt: now(),
	})
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
	if job.ID != id {
		code = http.StatusOK // an earlier request with this ID won
	}
	writeJSON(w, code, job)
}

func (a *Agent) handleJobs(w http.ResponseWriter, r *http.Request) {
	all := r.URL.Query().Get("all") == "true"
	cutoff := now().Add(-recentWindow)
	jobs := []*structs.Job{}
	for _, j := range a.fsm.Jobs() {
		if all || !j.State.Terminal() || j.FinishedAt.After(cutoff) {
			jobs = append(jobs, j)
		}
	}
	writeJSON(w, http.StatusOK, jobs)
}

func (a *Agent) handleJob(w http.ResponseWriter, r *http.Request) {
	job, err := a.fsm.FindJob(r.PathValue("id"))
	if err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	d := api.JobDetail{Job: *job, Allocations: []structs.Allocation{}, Nodes: map[string]string{}}
	for _, alloc := range a.fsm.Allocs(job.ID) {
		d.Allocations = append(d.Allocations, *alloc)
		if n, ok := a.fsm.Node(alloc.NodeID); ok {
			d.Nodes[alloc.NodeID] = n.Name
		}
	}
	writeJSON(w, http.StatusOK, d)
}

func (a *Agent) handleCancel(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	jobs := []*structs.Job{}
	job, err := a.fsm.FindJob(id)
	if err == nil {
		jobs = append(jobs, job)
	} else if tasks, aerr := a.fsm.ArrayTasks(id); aerr == nil {
		jobs = tasks // cancelling an array cancels every task still going
	} else {
		writeError(w, statusOf(err), err)
		return
	}
	if !a.raft.IsLeader() && a.forward(w, r, nil) {
		return
	}
	var last any
	for _, j := range jobs {
		if len(jobs) > 1 && j.State.Terminal() {
			continue
		}
		resp, err := a.apply(structs.JobCancelType, structs.JobCancelRequest{JobID: j.ID, At: now()})
		if err != nil {
			writeError(w, statusOf(err), err)
			return
		}
		last = resp
	}
	if last == nil {
		writeError(w, http.StatusConflict, fmt.Errorf("job array %s: %w", id, fsm.ErrJobFinished))
		return
	}
	writeJSON(w, http.StatusOK, last)
}

func (a *Agent) handleNodes(w http.ResponseWriter, r *http.Request) {
	view := a.fsm.State()
	inUse := map[string]string{} // GPU UUID -> job ID
	live := map[string]int{}     // node ID -> live allocations
	for _, alloc := range view.LiveAllocs {
		live[alloc.NodeID]++
		for _, g := range alloc.GPUs {
			inUse[g] = alloc.JobID
		}
	}
	roles := a.roles()
	out := make([]api.NodeInfo, 0, len(view.Nodes))
	for _, n := range view.Nodes {
		info := api.NodeInfo{Node: *n, GPUsTotal: len(n.GPUs), LiveAllocs: live[n.ID]}
		info.Role = roles[n.ID]
		for _, g := range n.GPUs {
			switch job, used := inUse[g.UUID]; {
			case used:
				if info.GPUJobs == nil {
					info.GPUJobs = map[string]string{}
				}
				info.GPUJobs[g.UUID] = job
			case !g.Healthy:
				info.GPUsUnhealthy++
			case g.HealthState() != structs.GPUHealthy:
				info.GPUsHeldBack++
			default:
				info.GPUsFree++
			}
		}
		out = append(out, info)
	}
	writeJSON(w, http.StatusOK, out)
}

// roles maps node IDs to their place in the Raft configuration.
func (a *Agent) roles() map[string]structs.NodeRole {
	roles := map[string]structs.NodeRole{}
	servers, err := a.raft.Servers()
	if err != nil {
		return roles
	}
	_, leaderID := a.raft.Leader()
	for _, s := range servers {
		switch {
		case s.ID == leaderID:
			roles[s.ID] = structs.RoleLeader
		case s.Voter:
			roles[s.ID] = structs.RoleVoter
		default:
			roles[s.ID] = structs.RoleNonvoter
		}
	}
	return roles
}

func (a *Agent) handleStatus(w http.ResponseWriter, r *http.Request) {
	view := a.fsm.State()
	used := map[string]bool{}
	for _, alloc := range view.LiveAllocs {
		for _, g := range alloc.GPUs {
			used[g] = true
		}
	}
	s := api.Status{Node: a.cfg.Name, Jobs: map[structs.JobState]int{}, RaftIndex: view.Index, Version: structs.Version}
	_, s.LeaderID = a.raft.Leader()
	for _, n := range view.Nodes {
		s.Nodes++
		if n.Status == structs.NodeReady {
			s.NodesReady++
		}
		if n.ID == s.LeaderID {
			s.Leader = n.Name
		}
		if n.GPUSource == "simulated" {
			s.GPUsSimulated = true
		}
		for _, g := range n.GPUs {
			s.GPUsTotal++
			if ok, _ := g.Placeable(); ok && !used[g.UUID] && n.Status == structs.NodeReady {
				s.GPUsFree++
			}
		}
	}
	for _, st := range structs.JobStates {
		s.Jobs[st] = 0
	}
	for st, n := range a.fsm.JobCounts() {
		s.Jobs[st] = n
	}
	if r.URL.Query().Get("hash") == "true" {
		s.HashIndex, s.StateHash = a.fsm.IndexedHash()
	}
	writeJSON(w, http.StatusOK, s)
}

// decodeBody reads a JSON body strictly: at most api.MaxBodyBytes, no
// unknown fields, nothing after the value.
func decodeBody(w http.ResponseWriter, r *http.Request, out any) error {
	b, err := readBody(w, r)
	if err != nil {
		return err
	}
	return decodeStrict(b, out)
}

// readBody reads at most api.MaxBodyBytes of a request body.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, api.MaxBodyBytes))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return nil, fmt.Errorf("%w: request body larger than %d bytes", errTooLarge, api.MaxBodyBytes)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: read body: %v", errBadRequest, err)
	}
	return b, nil
}

// decodeStrict decodes one JSON value with no unknown fields and nothing after it.
func decodeStrict(b []byte, out any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(out); err != nil {
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("%w: empty request body", errBadRequest)
		}
		return fmt.Errorf("%w: %s", errBadRequest, strings.TrimPrefix(err.Error(), "json: "))
	}
	if dec.More() {
		return fmt.Errorf("%w: unexpected data after the JSON body", errBadRequest)
	}
	return nil
}

// HTTP-level errors.
var (
	errBadRequest = errors.New("bad request")
	errTooLarge   = errors.New("request too large")
)

// statusOf maps an error to the HTTP status that tells the client what kind
// of failure it was.
func statusOf(err error) int {
	var fe *structs.FieldError
	var remote *api.Error
	switch {
	case errors.As(err, &remote):
		return remote.StatusCode
	case errors.As(err, &fe), errors.Is(err, errBadRequest), errors.Is(err, fsm.ErrAmbiguousID),
		errors.Is(err, fsm.ErrInvalidRequest):
		return http.StatusBadRequest
	case errors.Is(err, errTooLarge):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, fsm.ErrJobNotFound), errors.Is(err, fsm.ErrAllocNotFound), errors.Is(err, fsm.ErrNodeNotFound):
		return http.StatusNotFound
	case errors.Is(err, fsm.ErrJobFinished), errors.Is(err, fsm.ErrJobExists), errors.Is(err, fsm.ErrWrongNode):
		return http.StatusConflict
	case errors.Is(err, cluster.ErrNotLeader), errors.Is(err, ErrNoLeader), errors.Is(err, cluster.ErrLeadershipLost):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// isDomainError reports whether the FSM refused a write on its merits, as
// opposed to the write not reaching the FSM at all.
func isDomainError(err error) bool {
	code := statusOf(err)
	return code >= 400 && code < 500
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, code int, err error) {
	writeJSON(w, code, api.ErrorBody{Error: err.Error()})
}
