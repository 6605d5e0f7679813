package endpoint

import (
	"errors"
	"fmt"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/fsm"
	"github.com/skein-dev/skein/sched"
	"github.com/skein-dev/skein/structs"
)

// JobsState is what the jobs' writes read of the state (fsm.FSM).
type JobsState interface {
	FindJob(idOrPrefix string) (*structs.Job, error)
	ArrayTasks(arrayID string) ([]*structs.Job, error)
	JobByRequestID(requestID string) (*structs.Job, bool)
	Partition(name string) (structs.Partition, bool)
	Nodes() []*structs.Node
	ACLUser(name string) (structs.ACLUser, bool)
	CheckSubmitLimits(owner string, spec structs.JobSpec) error
	CheckSubmitAccount(owner string, spec structs.JobSpec) error
	JobsPage(after fsm.JobCursor, limit int, keep func(*structs.Job) bool) ([]*structs.Job, bool)
	Allocs(jobID string) []*structs.Allocation
	Node(id string) (*structs.Node, bool)
}

// Jobs submits, cancels and changes jobs, and lists and describes them.
type Jobs struct {
	State JobsState
	// QueuePlace says where a queued job stands in the queue (nil: no
	// answer, as for a job no longer queued).
	QueuePlace func(jobID string) *api.QueuePlace
}

// RecentWindow is how long a finished job stays in a listing that does
// not ask for all (skein jobs without --all).
const RecentWindow = time.Hour

// JobsQuery selects one page of jobs (api.JobsQuery on the wire).
type JobsQuery struct {
	// After is the cursor the page starts after; Limit the most jobs it
	// holds.
	After fsm.JobCursor
	Limit int
	// ByOwner keeps only Owner's jobs.
	ByOwner bool
	Owner   string
	// All keeps finished jobs of any age, not only those of RecentWindow.
	All bool
}

// List is one page of jobs, oldest first, as id may see them, and
// whether more follow.
func (j Jobs) List(id Identity, q JobsQuery) ([]*structs.Job, bool) {
	cutoff := now().Add(-RecentWindow)
	jobs, more := j.State.JobsPage(q.After, q.Limit, func(job *structs.Job) bool {
		return (!q.ByOwner || job.Owner == q.Owner) && (q.All || !job.State.Terminal() || job.FinishedAt.After(cutoff))
	})
	for _, job := range jobs {
		Redact(id, job, false)
	}
	return jobs, more
}

// Detail is the job ref names (its number, ID or a prefix) as id may
// see it (its secret_env too when secrets, and id may), its allocations
// with their nodes' names, and, while it is queued, its place.
func (j Jobs) Detail(id Identity, ref string, secrets bool) (api.JobDetail, error) {
	job, err := j.State.FindJob(ref)
	if err != nil {
		return api.JobDetail{}, err
	}
	d := api.JobDetail{Job: *Redact(id, job, secrets), Allocations: []structs.Allocation{}, Nodes: map[string]string{}}
	if job.State == structs.JobQueued && j.QueuePlace != nil {
		d.Queue = j.QueuePlace(job.ID)
	}
	for _, alloc := range j.State.Allocs(job.ID) {
		d.Allocations = append(d.Allocations, *alloc)
		if n, ok := j.State.Node(alloc.NodeID); ok {
			d.Nodes[alloc.NodeID] = n.Name
		}
	}
	return d, nil
}

// Submit checks a submission and has the leader commit it: the job, and
// whether it is new (false: an earlier request with its request ID made
// it). Every node checks what it can (the spec, the loader variables the
// caller may set, the jobs it waits for, its partition's limits, some
// node able to run it); the leader stamps the job's ID, owner and time
// and checks the caller's limits and account first, so that a refused
// submission costs no log entry. A submission passed on to the leader
// gets a request ID, so that the retries of a forward make one job.
func (j Jobs) Submit(w Writer, id Identity, req api.SubmitRequest) (*structs.Job, bool, error) {
	if err := structs.ValidateRequestID(req.RequestID); err != nil {
		return nil, false, badRequest(err)
	}
	req.Spec.Normalize()
	if err := req.Spec.Validate(); err != nil {
		return nil, false, badRequest(err)
	}
	if err := CheckLoaderEnv(id, &req.Spec); err != nil {
		return nil, false, err
	}
	for i, d := range req.Spec.After {
		dep, err := j.State.FindJob(d.JobID)
		if errors.Is(err, fsm.ErrJobNotFound) && !w.Leads() {
			// Submitted a moment ago through another node, perhaps, and
			// not applied here yet: the leader, which committed it, says.
			continue
		}
		if err != nil {
			return nil, false, &structs.FieldError{Field: "after", Msg: err.Error()}
		}
		req.Spec.After[i].JobID = dep.ID // prefixes resolved once, here
	}
	if p, ok := j.State.Partition(structs.PartitionOf(&req.Spec)); ok {
		if err := p.Fit(&req.Spec); err != nil { // its limits, its default time limit
			return nil, false, badRequest(err)
		}
	}
	// With no node registered yet (a cluster still forming) the job waits.
	if err := sched.CheckFits(j.State.Nodes(), req.Spec); err != nil && !errors.Is(err, sched.ErrNoNodes) {
		return nil, false, badRequest(err)
	}
	if req.RequestID != "" {
		if job, ok := j.State.JobByRequestID(req.RequestID); ok {
			return Redact(id, job, false), false, nil
		}
	}
	if req.RequestID == "" && !w.Leads() {
		// Forwarding may be retried; a request ID keeps it to one job.
		req.RequestID = structs.NewID()
	}
	jobID := structs.NewID()
	resp, err := w.Write(structs.JobSubmitType, req, func() (any, error) {
		sub := structs.JobSubmitRequest{RequestID: req.RequestID, JobID: jobID, Spec: req.Spec, SubmittedAt: now(), Owner: id.User}
		if u, ok := j.State.ACLUser(id.User); ok && id.ACL {
			sub.AllowRoot = u.AllowRoot
		}
		// A submit over a limit, or to an account that is not the
		// user's, costs no log entry; Apply checks again.
		if err := j.State.CheckSubmitLimits(sub.Owner, sub.Spec); err != nil {
			return nil, err
		}
		if err := j.State.CheckSubmitAccount(sub.Owner, sub.Spec); err != nil {
			return nil, err
		}
		return sub, nil
	})
	if err != nil {
		return nil, false, err
	}
	job, ok := resp.(*structs.Job)
	if !ok {
		return nil, false, fmt.Errorf("submit: unexpected answer %T from the state machine", resp)
	}
	// Another job ID: an earlier request with this request ID won.
	return Redact(id, job, false), job.ID == jobID, nil
}

// jobOrArray finds the job or the array ref names (a job first) and
// checks the caller may act on it (verb says how): the job's ID, or the
// array's. An array's tasks have one owner, so its first task answers
// for all.
func (j Jobs) jobOrArray(id Identity, ref, verb string) (jobID, arrayID string, err error) {
	var job *structs.Job
	if found, err := j.State.FindJob(ref); err == nil {
		jobID, job = found.ID, found
	} else if tasks, aerr := j.State.ArrayTasks(ref); aerr == nil {
		arrayID, job = tasks[0].ArrayID, tasks[0]
	} else {
		return "", "", err
	}
	return jobID, arrayID, CheckActFor(id, job.Owner, verb+" of another user's job")
}

// passOnMiss answers err, a job's lookup that failed, unless the job is
// unknown here and this node does not lead: then the write is passed on
// to the leader, which answers it. The job may be a write not yet
// applied here (a follower behind, a server that has only just joined).
func passOnMiss(w Writer, typ structs.MessageType, err error) (any, error) {
	if !errors.Is(err, fsm.ErrJobNotFound) || w.Leads() {
		return nil, err
	}
	return w.Write(typ, nil, func() (any, error) { return nil, err })
}

// Cancel cancels the job ref names (its number, ID or a prefix), or
// every task of the array it names still going, in one entry: the job,
// or the array's tasks.
func (j Jobs) Cancel(w Writer, id Identity, ref string) (any, error) {
	var req structs.JobCancelRequest
	var err error
	if req.JobID, req.ArrayID, err = j.jobOrArray(id, ref, "cancel"); err != nil {
		return passOnMiss(w, structs.JobCancelType, err)
	}
	resp, err := w.Write(structs.JobCancelType, nil, func() (any, error) {
		req.At = now()
		return req, nil
	})
	if err != nil {
		return nil, err
	}
	switch v := resp.(type) {
	case *structs.Job:
		return Redact(id, v, false), nil
	case []*structs.Job: // an array's tasks
		tasks := make([]*structs.Job, len(v))
		for i, job := range v {
			tasks[i] = Redact(id, job, false)
		}
		return tasks, nil
	}
	return resp, nil
}

// Update holds, releases or changes a queued job, or every queued task
// of an array (scontrol hold, release and update): the job by its
// number, ID or prefix, as Cancel finds it. It answers the jobs changed.
func (j Jobs) Update(w Writer, id Identity, ref string, u api.JobUpdate) ([]*structs.Job, error) {
	req := structs.JobUpdateRequest{Hold: u.Hold, Name: u.Name, TimeLimit: u.TimeLimit, Priority: u.Priority}
	if req.Empty() {
		return nil, fmt.Errorf("%w: nothing to change: give hold, name, time_limit or priority", ErrInvalid)
	}
	var err error
	if req.JobID, req.ArrayID, err = j.jobOrArray(id, ref, "update"); err != nil {
		_, err = passOnMiss(w, structs.JobUpdateType, err)
		return nil, err
	}
	resp, err := w.Write(structs.JobUpdateType, nil, func() (any, error) {
		req.At = now()
		return req, nil
	})
	if err != nil {
		return nil, err
	}
	jobs, ok := resp.([]*structs.Job)
	if !ok {
		return nil, fmt.Errorf("update: unexpected answer %T from the state machine", resp)
	}
	out := make([]*structs.Job, len(jobs))
	for i, job := range jobs {
		out[i] = Redact(id, job, false)
	}
	return out, nil
}

// Requeue puts a running batch job back in the queue (scontrol requeue):
// its allocations stop, and it waits to be placed again without using a
// restart. A queued job is answered as it is. Only the job's owner, or
// one who may act on any job, may; an array's tasks are requeued one by
// one.
func (j Jobs) Requeue(w Writer, id Identity, ref string) (*structs.Job, error) {
	jobID, arrayID, err := j.jobOrArray(id, ref, "requeue")
	if err != nil {
		_, err = passOnMiss(w, structs.JobRequeueType, err)
		return nil, err
	}
	if arrayID != "" {
		return nil, fmt.Errorf("%w: %s names an array: requeue its tasks one by one (ARRAY_INDEX)", ErrInvalid, ref)
	}
	resp, err := w.Write(structs.JobRequeueType, nil, func() (any, error) {
		return structs.JobRequeueRequest{JobID: jobID, By: id.User, At: now()}, nil
	})
	if err != nil {
		return nil, err
	}
	job, ok := resp.(*structs.Job)
	if !ok {
		return nil, fmt.Errorf("requeue: unexpected answer %T from the state machine", resp)
	}
	return Redact(id, job, false), nil
}
