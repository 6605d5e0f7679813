package endpoint

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/fsm"
	"github.com/skein-dev/skein/structs"
)

var (
	alice = Identity{ACL: true, User: "alice", Role: structs.RoleSubmitter}
	bob   = Identity{ACL: true, User: "bob", Role: structs.RoleSubmitter}
)

// submitAnswer answers a submit entry as Apply does: the job it made.
func submitAnswer(_ structs.MessageType, entry any) (any, error) {
	sub := entry.(structs.JobSubmitRequest)
	return &structs.Job{ID: sub.JobID, RequestID: sub.RequestID, Owner: sub.Owner, Spec: sub.Spec}, nil
}

func oneTask() api.SubmitRequest {
	return api.SubmitRequest{Spec: structs.JobSpec{Command: []string{"true"}, Env: map[string]string{"K": "v"}}}
}

func TestJobs_Submit_TheLeaderWritesTheEntryStampedWithTheCaller(t *testing.T) {
	st := newFakeState()
	st.users["alice"] = structs.ACLUser{Name: "alice", AllowRoot: true}
	w := &fakeWriter{leads: true, answer: submitAnswer}
	job, created, err := Jobs{State: st}.Submit(w, alice, oneTask())
	if err != nil || !created {
		t.Fatalf("submit: %v, created %v; want a new job", err, created)
	}
	sub := w.only(t, structs.JobSubmitType).(structs.JobSubmitRequest)
	if sub.Owner != "alice" || !sub.AllowRoot || sub.JobID == "" || sub.SubmittedAt.IsZero() || job.ID != sub.JobID {
		t.Errorf("entry %+v, job %s: want alice's, allowed root, with an ID and a time", sub, job.ID)
	}
	if sub.RequestID != "" {
		t.Errorf("entry's request ID %q, want none: only a forwarded submission needs one", sub.RequestID)
	}
	if sub.Spec.Nodes != 1 {
		t.Errorf("entry's spec asks %d nodes, want the normalized 1", sub.Spec.Nodes)
	}
	if st.limitChecks != 1 {
		t.Errorf("limits checked %d times, want once, on the leader", st.limitChecks)
	}
}

func TestJobs_Submit_ElsewhereItIsPassedOnWithARequestIDAndNothingIsWritten(t *testing.T) {
	st := newFakeState()
	w := &fakeWriter{}
	_, _, err := Jobs{State: st}.Submit(w, alice, oneTask())
	if !errors.Is(err, ErrForwarded) || len(w.forwarded) != 1 || len(w.applied) != 0 {
		t.Fatalf("submit on a node that does not lead: %v, forwarded %q, applied %v; want it passed on", err, w.forwarded, w.applied)
	}
	var fwd api.SubmitRequest
	if err := json.Unmarshal([]byte(w.forwarded[0]), &fwd); err != nil || fwd.RequestID == "" {
		t.Errorf("passed on %s (%v), want a request ID added so retries make one job", w.forwarded[0], err)
	}
	if st.limitChecks != 0 {
		t.Errorf("limits checked %d times on a node that does not lead; the leader checks them", st.limitChecks)
	}
}

func TestJobs_Submit_RefusalsNameTheFieldAndWriteNothing(t *testing.T) {
	st := newFakeState()
	st.partitions["small"] = structs.Partition{Name: "small", MaxNodes: 1}
	for _, c := range []struct {
		name string
		id   Identity
		edit func(*api.SubmitRequest)
		want string
		perm bool
	}{
		{"no command", alice, func(r *api.SubmitRequest) { r.Spec.Command = nil }, "command", false},
		{"request ID too long", alice, func(r *api.SubmitRequest) { r.RequestID = strings.Repeat("x", structs.MaxRequestIDLen+1) }, "request_id", false},
		{"unknown dependency", alice, func(r *api.SubmitRequest) { r.Spec.After = []structs.Dependency{{JobID: "nope", Condition: "ok"}} }, "after", false},
		{"over the partition's nodes", alice, func(r *api.SubmitRequest) { r.Spec.Partition, r.Spec.Nodes = "small", 2 }, "max_nodes", false},
		{"a loader variable", alice, func(r *api.SubmitRequest) { r.Spec.Env["LD_PRELOAD"] = "x.so" }, "LD_PRELOAD", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			req := oneTask()
			c.edit(&req)
			w := &fakeWriter{leads: true, answer: submitAnswer}
			_, _, err := Jobs{State: st}.Submit(w, c.id, req)
			var bad *BadRequest
			switch {
			case err == nil || !strings.Contains(err.Error(), c.want):
				t.Errorf("%v, want an error naming %q", err, c.want)
			case c.perm && !errors.Is(err, structs.ErrPermission):
				t.Errorf("%v, want a permission refusal", err)
			case !c.perm && !errors.As(err, &bad) && !errors.As(err, new(*structs.FieldError)):
				t.Errorf("%v (%T), want the request's fault", err, err)
			}
			w.nothing(t)
		})
	}
}

func TestJobs_Submit_AnUnknownDependencyElsewhereIsLeftToTheLeader(t *testing.T) {
	req := oneTask()
	req.Spec.After = []structs.Dependency{{JobID: "just-submitted", Condition: "ok"}}
	w := &fakeWriter{}
	if _, _, err := (Jobs{State: newFakeState()}).Submit(w, alice, req); !errors.Is(err, ErrForwarded) {
		t.Fatalf("submit after a job this node has not seen yet: %v, want it passed on", err)
	}
}

func TestJobs_Submit_ADependencyPrefixIsResolvedToItsJob(t *testing.T) {
	st := newFakeState()
	st.jobs["abcdef123"] = &structs.Job{ID: "abcdef123", Owner: "alice"}
	req := oneTask()
	req.Spec.After = []structs.Dependency{{JobID: "abcd", Condition: "ok"}}
	w := &fakeWriter{leads: true, answer: submitAnswer}
	if _, _, err := (Jobs{State: st}).Submit(w, alice, req); err != nil {
		t.Fatal(err)
	}
	if got := w.only(t, structs.JobSubmitType).(structs.JobSubmitRequest).Spec.After[0].JobID; got != "abcdef123" {
		t.Errorf("dependency written as %q, want the whole ID", got)
	}
}

func TestJobs_Submit_ARequestIDAlreadyCommittedAnswersItsJobWithoutAWrite(t *testing.T) {
	st := newFakeState()
	st.jobs["j1"] = &structs.Job{ID: "j1", RequestID: "r1", Owner: "alice"}
	req := oneTask()
	req.RequestID = "r1"
	w := &fakeWriter{leads: true, answer: submitAnswer}
	job, created, err := Jobs{State: st}.Submit(w, alice, req)
	if err != nil || created || job.ID != "j1" {
		t.Fatalf("resubmit: %v, created %v, job %v; want j1 as it was", err, created, job)
	}
	w.nothing(t)
}

func TestJobs_Submit_OverALimitTheLeaderWritesNothing(t *testing.T) {
	st := newFakeState()
	st.limitErr = fsm.ErrLimit
	w := &fakeWriter{leads: true, answer: submitAnswer}
	if _, _, err := (Jobs{State: st}).Submit(w, alice, oneTask()); !errors.Is(err, fsm.ErrLimit) {
		t.Fatalf("submit over a limit: %v, want fsm.ErrLimit", err)
	}
	w.nothing(t)
}

func TestJobs_Cancel_OnlyTheOwnerCancelsAndTheAnswerHidesTheEnv(t *testing.T) {
	st := newFakeState()
	st.jobs["j1"] = &structs.Job{ID: "j1", Owner: "alice", Spec: structs.JobSpec{Env: map[string]string{"K": "v"}}}
	w := &fakeWriter{leads: true, answer: func(_ structs.MessageType, e any) (any, error) {
		return st.FindJob(e.(structs.JobCancelRequest).JobID)
	}}
	if _, err := (Jobs{State: st}).Cancel(w, bob, "j1"); !errors.Is(err, structs.ErrPermission) || !strings.Contains(err.Error(), "cancel of another user's job") {
		t.Fatalf("bob cancels alice's job: %v, want a permission refusal", err)
	}
	w.nothing(t)
	op := Identity{ACL: true, User: "olga", Role: structs.RoleOperator}
	resp, err := Jobs{State: st}.Cancel(w, op, "j1")
	if err != nil {
		t.Fatalf("an operator cancels: %v", err)
	}
	if req := w.only(t, structs.JobCancelType).(structs.JobCancelRequest); req.JobID != "j1" || req.At.IsZero() {
		t.Errorf("entry %+v, want j1 stamped with a time", req)
	}
	if env := resp.(*structs.Job).Spec.Env["K"]; env != "v" {
		t.Errorf("env shown to an operator as %q, want its value", env)
	}
}

func TestJobs_Cancel_AnArrayIsCancelledInOneEntry(t *testing.T) {
	st := newFakeState()
	st.jobs["arr-1"] = &structs.Job{ID: "arr-1", ArrayID: "arr", Owner: "alice", Spec: structs.JobSpec{Env: map[string]string{"K": "v"}}}
	st.jobs["arr-2"] = &structs.Job{ID: "arr-2", ArrayID: "arr", Owner: "alice", Spec: structs.JobSpec{Env: map[string]string{"K": "v"}}}
	w := &fakeWriter{leads: true, answer: func(structs.MessageType, any) (any, error) {
		return st.ArrayTasks("arr")
	}}
	resp, err := Jobs{State: st}.Cancel(w, bob, "arr")
	if !errors.Is(err, structs.ErrPermission) {
		t.Fatalf("bob cancels alice's array: %v, want a permission refusal", err)
	}
	if resp, err = (Jobs{State: st}).Cancel(w, alice, "arr"); err != nil {
		t.Fatal(err)
	}
	if req := w.only(t, structs.JobCancelType).(structs.JobCancelRequest); req.ArrayID != "arr" || req.JobID != "" {
		t.Errorf("entry %+v, want the array, by its ID", req)
	}
	if tasks := resp.([]*structs.Job); len(tasks) != 2 {
		t.Errorf("answer %v, want both tasks", tasks)
	}
}

func TestJobs_Cancel_AnUnknownJobIsNotFoundAndElsewhereItIsPassedOnAsItCame(t *testing.T) {
	st := newFakeState()
	w := &fakeWriter{leads: true}
	if _, err := (Jobs{State: st}).Cancel(w, alice, "nope"); !errors.Is(err, fsm.ErrJobNotFound) {
		t.Fatalf("cancel of no job: %v, want fsm.ErrJobNotFound", err)
	}
	w.nothing(t)
	st.jobs["j1"] = &structs.Job{ID: "j1", Owner: "alice"}
	w = &fakeWriter{}
	if _, err := (Jobs{State: st}).Cancel(w, alice, "j1"); !errors.Is(err, ErrForwarded) || len(w.forwarded) != 1 || w.forwarded[0] != "" {
		t.Fatalf("cancel on a node that does not lead: %v, forwarded %q; want the request passed on as it came", err, w.forwarded)
	}
	// A job this node does not know yet may be one the leader has
	// committed and this node not applied: the leader answers.
	hold := true
	for verb, write := range map[string]func(Writer) error{
		"cancel": func(w Writer) error { _, err := (Jobs{State: st}).Cancel(w, alice, "j2"); return err },
		"update": func(w Writer) error {
			_, err := (Jobs{State: st}).Update(w, alice, "j2", api.JobUpdate{Hold: &hold})
			return err
		},
		"requeue": func(w Writer) error { _, err := (Jobs{State: st}).Requeue(w, alice, "j2"); return err },
	} {
		w = &fakeWriter{}
		if err := write(w); !errors.Is(err, ErrForwarded) || len(w.forwarded) != 1 {
			t.Errorf("%s of a job unknown on a node that does not lead: %v, forwarded %q; want it passed on", verb, err, w.forwarded)
		}
	}
}

func TestJobs_Update_NothingToChangeIsRefusedAndAChangeIsWritten(t *testing.T) {
	st := newFakeState()
	st.jobs["j1"] = &structs.Job{ID: "j1", Owner: "alice"}
	w := &fakeWriter{leads: true, answer: func(structs.MessageType, any) (any, error) {
		j, err := st.FindJob("j1")
		return []*structs.Job{j}, err
	}}
	if _, err := (Jobs{State: st}).Update(w, alice, "j1", api.JobUpdate{}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "give hold, name, time_limit or priority") {
		t.Fatalf("empty update: %v, want ErrInvalid naming the fields", err)
	}
	hold := true
	if _, err := (Jobs{State: st}).Update(w, bob, "j1", api.JobUpdate{Hold: &hold}); !errors.Is(err, structs.ErrPermission) {
		t.Fatalf("bob holds alice's job: %v, want a permission refusal", err)
	}
	w.nothing(t)
	jobs, err := Jobs{State: st}.Update(w, alice, "j1", api.JobUpdate{Hold: &hold})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("hold: %v, %v", err, jobs)
	}
	if req := w.only(t, structs.JobUpdateType).(structs.JobUpdateRequest); req.JobID != "j1" || req.Hold == nil || !*req.Hold || req.At.IsZero() {
		t.Errorf("entry %+v, want j1 held, stamped", req)
	}
}

func TestJobs_List_KeepsTheOwnersAndTheRecentAndHidesOthersEnv(t *testing.T) {
	st := newFakeState()
	env := func() map[string]string { return map[string]string{"K": "v"} }
	st.jobs["j1"] = &structs.Job{ID: "j1", Owner: "alice", State: structs.JobRunning, Spec: structs.JobSpec{Env: env()}}
	st.jobs["j2"] = &structs.Job{ID: "j2", Owner: "bob", State: structs.JobRunning, Spec: structs.JobSpec{Env: env()}}
	st.jobs["j3"] = &structs.Job{ID: "j3", Owner: "alice", State: structs.JobSucceeded, FinishedAt: time.Now().Add(-2 * RecentWindow)}
	j := Jobs{State: st}

	jobs, more := j.List(alice, JobsQuery{Limit: 10})
	if len(jobs) != 2 || more || jobs[0].ID != "j1" || jobs[1].ID != "j2" {
		t.Fatalf("recent jobs %v (more %v), want j1 and j2: j3 finished long ago", jobs, more)
	}
	if jobs[0].Spec.Env["K"] != "v" || jobs[1].Spec.Env["K"] != api.HiddenValue {
		t.Errorf("env %v and %v, want alice's shown and bob's hidden from her", jobs[0].Spec.Env, jobs[1].Spec.Env)
	}
	if jobs, _ := j.List(alice, JobsQuery{Limit: 10, All: true, ByOwner: true, Owner: "alice"}); len(jobs) != 2 || jobs[1].ID != "j3" {
		t.Errorf("all of alice's %v, want j1 and j3", jobs)
	}
	if jobs, more := j.List(alice, JobsQuery{Limit: 1}); len(jobs) != 1 || !more {
		t.Errorf("a page of 1: %v, more %v; want one and more", jobs, more)
	}
}

func TestJobs_Detail_AQueuedJobSaysItsPlace(t *testing.T) {
	st := newFakeState()
	st.jobs["j1"] = &structs.Job{ID: "j1", Owner: "alice", State: structs.JobQueued}
	j := Jobs{State: st, QueuePlace: func(id string) *api.QueuePlace {
		return &api.QueuePlace{JobPriority: api.JobPriority{JobID: id, Position: 3}}
	}}
	d, err := j.Detail(alice, "j1", false)
	if err != nil || d.Queue == nil || d.Queue.Position != 3 || d.Allocations == nil {
		t.Fatalf("detail: %+v, %v; want its place, and allocations listed (none)", d, err)
	}
	if _, err := j.Detail(alice, "nope", false); !errors.Is(err, fsm.ErrJobNotFound) {
		t.Errorf("no job: %v, want fsm.ErrJobNotFound", err)
	}
}

func TestJobs_Requeue_TheOwnersJobIsWrittenAndAnArrayIsRefused(t *testing.T) {
	st := newFakeState()
	st.jobs["j1"] = &structs.Job{ID: "j1", Owner: "alice", State: structs.JobRunning}
	st.jobs["arr-1"] = &structs.Job{ID: "arr-1", ArrayID: "arr", Owner: "alice"}
	st.jobs["arr-2"] = &structs.Job{ID: "arr-2", ArrayID: "arr", Owner: "alice"}
	w := &fakeWriter{leads: true, answer: func(_ structs.MessageType, e any) (any, error) {
		return st.FindJob(e.(structs.JobRequeueRequest).JobID)
	}}
	if _, err := (Jobs{State: st}).Requeue(w, bob, "j1"); !errors.Is(err, structs.ErrPermission) {
		t.Fatalf("bob requeues alice's job: %v, want a permission refusal", err)
	}
	if _, err := (Jobs{State: st}).Requeue(w, alice, "arr"); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "one by one") {
		t.Fatalf("requeue of an array: %v, want it refused, its tasks one by one", err)
	}
	w.nothing(t)
	job, err := Jobs{State: st}.Requeue(w, alice, "j1")
	if err != nil || job.ID != "j1" {
		t.Fatalf("alice requeues her job: %v, %v", job, err)
	}
	if req := w.only(t, structs.JobRequeueType).(structs.JobRequeueRequest); req.JobID != "j1" || req.By != "alice" || req.At.IsZero() {
		t.Errorf("entry %+v, want j1 by alice, stamped with a time", req)
	}
	w = &fakeWriter{}
	if _, err := (Jobs{State: st}).Requeue(w, alice, "j1"); !errors.Is(err, ErrForwarded) || len(w.forwarded) != 1 {
		t.Fatalf("requeue on a node that does not lead: %v, forwarded %q; want it passed on", err, w.forwarded)
	}
}
