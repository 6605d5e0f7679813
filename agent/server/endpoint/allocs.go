package endpoint

import (
	"fmt"
	"slices"
	"strings"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/structs"
)

// AllocsState is what the allocations' endpoints read of the state
// (fsm.FSM), and of a worker's view of it.
type AllocsState interface {
	FindJob(ref string) (*structs.Job, error)
	ArrayTasks(arrayID string) ([]*structs.Job, error)
	Job(id string) (*structs.Job, bool)
	Allocs(jobID string) []*structs.Allocation
}

// Allocs decides what reaches a running job's processes, which live on
// the nodes that run its ranks: commands run beside a rank (exec, and
// terminals) and signals. It answers a plan: what this node does itself,
// and which nodes the transport relays the request to. It writes
// nothing.
type Allocs struct {
	State AllocsState
	// View is a worker's view of the state, which holds the jobs it runs
	// (nil: none). A request another node passed on that the state does
	// not know is looked up there.
	View AllocsState
	// NodeID and NodeName are this node's.
	NodeID, NodeName string
}

// Exec's bounds: the words and bytes of a command, and of a terminal's
// name.
const (
	MaxExecArgs  = 256
	MaxExecBytes = 64 << 10
	MaxTermBytes = 64
)

// ExecPlan is where a command runs: beside Alloc, rank Rank of Job, on
// this node (Local) or relayed to Alloc.NodeID.
type ExecPlan struct {
	Job   *structs.Job
	Alloc *structs.Allocation
	Local bool
}

// PlanExec decides where a command runs beside one rank of a running
// job (skein exec): the job ref names, the newest attempt of the rank,
// on the node that runs it. upgraded says whether the request's
// connection asks to become a terminal, which req.TTY needs; forwarded
// whether another node passed the request on, as it does to the node
// that runs the rank. Only the job's owner, or one who may act on any
// job, may: the command runs as the job's account.
func (a Allocs) PlanExec(id Identity, ref string, req api.ExecRequest, upgraded, forwarded bool) (ExecPlan, error) {
	if err := CheckExec(req); err != nil {
		return ExecPlan{}, err
	}
	if req.TTY && !upgraded {
		return ExecPlan{}, &structs.FieldError{Field: "tty", Msg: "a terminal is asked on a connection upgraded to " + api.PTYUpgrade + " (skein exec -it)"}
	}
	st := a.State
	job, err := st.FindJob(ref)
	if err != nil && a.View != nil && forwarded {
		// A worker that runs the job, asked by a server: it holds no
		// state but its own view, which holds the jobs it runs.
		if j, verr := a.View.FindJob(ref); verr == nil {
			st, job, err = a.View, j, nil
		}
	}
	if err != nil {
		return ExecPlan{}, err
	}
	if err := CheckActFor(id, job.Owner, "run commands in of another user's job"); err != nil {
		return ExecPlan{}, err
	}
	if job.State != structs.JobRunning {
		return ExecPlan{}, &Conflict{fmt.Errorf("job %s is %s: commands run only beside a running job", job.SlurmID(), job.State)}
	}
	if req.Rank < 0 || req.Rank >= job.Spec.Nodes {
		return ExecPlan{}, &structs.FieldError{Field: "rank", Msg: fmt.Sprintf("%d: job %s has ranks 0..%d", req.Rank, job.SlurmID(), job.Spec.Nodes-1)}
	}
	var alloc *structs.Allocation
	for _, al := range st.Allocs(job.ID) {
		if al.Rank == req.Rank && al.Live() && (alloc == nil || al.Attempt > alloc.Attempt) {
			alloc = al
		}
	}
	if alloc == nil || alloc.State != structs.AllocRunning {
		return ExecPlan{}, &Conflict{fmt.Errorf("rank %d of job %s is not running yet", req.Rank, job.SlurmID())}
	}
	return ExecPlan{Job: job, Alloc: alloc, Local: alloc.NodeID == a.NodeID}, nil
}

// CheckExec bounds a command: at least its program, at most MaxExecArgs
// words and MaxExecBytes bytes; and its terminal's name.
func CheckExec(req api.ExecRequest) error {
	n := 0
	for _, a := range req.Command {
		n += len(a)
	}
	switch {
	case len(req.Command) == 0 || req.Command[0] == "":
		return &structs.FieldError{Field: "command", Msg: "empty: give the program and its arguments"}
	case len(req.Command) > MaxExecArgs:
		return &structs.FieldError{Field: "command", Msg: fmt.Sprintf("%d words, more than the limit of %d", len(req.Command), MaxExecArgs)}
	case n > MaxExecBytes:
		return &structs.FieldError{Field: "command", Msg: fmt.Sprintf("%d bytes, more than the limit of %d", n, MaxExecBytes)}
	case len(req.Term) > MaxTermBytes:
		return &structs.FieldError{Field: "term", Msg: fmt.Sprintf("%d bytes, more than the limit of %d", len(req.Term), MaxTermBytes)}
	case strings.IndexFunc(req.Term, func(c rune) bool { return !termChar(c) }) >= 0:
		return &structs.FieldError{Field: "term", Msg: fmt.Sprintf("%q: only letters, digits and . _ + - make a terminal's name", req.Term)}
	}
	return nil
}

// termChar reports whether c may be in a terminal's name (TERM).
func termChar(c rune) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("._+-", c)
}

// SignalPlan is where a signal goes: to this node's ranks (Local), each
// with how the answer names it, and relayed to the other nodes that run
// ranks (Relay, node IDs, sorted), which signal their own.
type SignalPlan struct {
	// Signal is the signal's name, as structs.JobSignals has it.
	Signal string
	Local  []SignalTarget
	Relay  []string
}

// SignalTarget is one of this node's running ranks to signal.
type SignalTarget struct {
	Alloc *structs.Allocation
	As    api.SignalledAlloc
}

// PlanSignal decides where a signal goes (scancel --signal): every
// running rank of the job ref names, or of each running task of the
// array it names, on the node that runs it. A request another node
// passed on (forwarded) reaches only this node's ranks: the node that
// took it relays to each node once. Only the job's owner, or one who may
// act on any job, may.
func (a Allocs) PlanSignal(id Identity, ref string, req api.SignalRequest, forwarded bool) (SignalPlan, error) {
	name, err := structs.ParseJobSignal(req.Signal)
	if err != nil {
		return SignalPlan{}, err
	}
	st := a.State
	jobs, err := signalTargets(st, ref)
	if err != nil && a.View != nil && forwarded {
		// A worker asked by a server: its view holds the jobs it runs.
		if vj, verr := signalTargets(a.View, ref); verr == nil {
			st, jobs, err = a.View, vj, nil
		}
	}
	if err != nil {
		return SignalPlan{}, err
	}
	if err := CheckActFor(id, jobs[0].Owner, "signal of another user's job"); err != nil {
		return SignalPlan{}, err
	}
	plan := SignalPlan{Signal: name}
	var theirs []string
	for _, job := range jobs {
		for _, al := range runningRanks(st, job) {
			switch {
			case al.NodeID == a.NodeID:
				plan.Local = append(plan.Local, SignalTarget{Alloc: al, As: signalled(st, al, a.NodeName)})
			case !forwarded:
				theirs = append(theirs, al.NodeID)
			}
		}
	}
	slices.Sort(theirs)
	plan.Relay = slices.Compact(theirs)
	if len(plan.Local)+len(plan.Relay) == 0 {
		what := "job " + jobs[0].SlurmID() + " is " + string(jobs[0].State)
		if len(jobs) > 1 {
			what = "no task of array " + ref + " is running"
		}
		if forwarded {
			what = "no rank of job " + jobs[0].SlurmID() + " runs on node " + a.NodeName
		}
		return SignalPlan{}, &Conflict{fmt.Errorf("%s: only a running job's processes can be signalled", what)}
	}
	return plan, nil
}

// signalTargets is the job ref names, or the tasks of the array it
// names.
func signalTargets(st AllocsState, ref string) ([]*structs.Job, error) {
	if j, err := st.FindJob(ref); err == nil {
		return []*structs.Job{j}, nil
	} else if tasks, aerr := st.ArrayTasks(ref); aerr == nil {
		return tasks, nil
	} else {
		return nil, err
	}
}

// runningRanks are the running allocations of a running job, the
// newest attempt of each rank, by rank.
func runningRanks(st AllocsState, job *structs.Job) []*structs.Allocation {
	if job.State != structs.JobRunning {
		return nil
	}
	newest := map[int]*structs.Allocation{}
	for _, al := range st.Allocs(job.ID) {
		if b := newest[al.Rank]; al.Live() && (b == nil || al.Attempt > b.Attempt) {
			newest[al.Rank] = al
		}
	}
	var out []*structs.Allocation
	for _, al := range newest {
		if al.State == structs.AllocRunning {
			out = append(out, al)
		}
	}
	slices.SortFunc(out, func(x, y *structs.Allocation) int { return x.Rank - y.Rank })
	return out
}

// signalled names a rank a signal is sent to, on node.
func signalled(st AllocsState, al *structs.Allocation, node string) api.SignalledAlloc {
	out := api.SignalledAlloc{JobID: al.JobID, Rank: al.Rank, Node: node}
	if j, ok := st.Job(al.JobID); ok {
		out.SlurmID = j.SlurmID()
	}
	return out
}

// LogsOf finds the job ref names for a read of the logs of its rank:
// refused unless the caller may act on the job, or the job has no such
// rank.
func (a Allocs) LogsOf(id Identity, ref string, rank int) (*structs.Job, error) {
	job, err := a.State.FindJob(ref)
	if err != nil {
		return nil, err
	}
	if err := CheckActFor(id, job.Owner, "read the logs of another user's job"); err != nil {
		return nil, err
	}
	if rank >= job.Spec.Nodes {
		return nil, &BadRequest{fmt.Errorf("rank %d: job %s has ranks 0..%d", rank, structs.ShortID(job.ID), job.Spec.Nodes-1)}
	}
	return job, nil
}

// LogAlloc is the allocation whose output a read of the logs of rank
// streams: of attempt (0: the newest). It is nil, with no error, while
// none is placed yet and the reader follows a job still going: the
// transport waits for the state to change and asks again.
func (a Allocs) LogAlloc(jobID string, rank, attempt int, follow bool) (*structs.Allocation, error) {
	var found *structs.Allocation
	for _, al := range a.State.Allocs(jobID) {
		if al.Rank != rank {
			continue
		}
		if attempt == 0 && (found == nil || al.Attempt > found.Attempt) || al.Attempt == attempt {
			found = al
		}
	}
	if found != nil {
		return found, nil
	}
	job, ok := a.State.Job(jobID)
	if follow && ok && !job.State.Terminal() {
		return nil, nil
	}
	if attempt == 0 || !ok || job.Attempts == 0 {
		return nil, fmt.Errorf("job %s has not started, so it has no logs yet", structs.ShortID(jobID))
	}
	return nil, fmt.Errorf("job %s has no attempt %d: its attempts are 1..%d", structs.ShortID(jobID), attempt, job.Attempts)
}
