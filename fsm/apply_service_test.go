package fsm

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/structs"
)

// service is a service of the given replicas whose replicas each run
// spec(1, gpus) with an http health check, as alice, created at t0.
func service(name string, replicas, gpus int) structs.Service {
	return structs.Service{
		ID: "svc-" + name, Name: name, Owner: "alice", AllowRoot: true, Replicas: replicas, CreatedAt: t0,
		Spec: structs.ServiceSpec{
			Job:    structs.JobSpec{Command: []string{"serve", "--port", "$PORT"}, GPUs: gpus, Env: map[string]string{"MODEL": "llama"}},
			Health: &structs.HealthCheck{Kind: structs.HealthHTTP, Path: "/health"},
		},
	}
}

// registerService registers svc and fails the test if it is refused.
func (h *harness) registerService(svc structs.Service) *structs.Service {
	h.t.Helper()
	resp := h.apply(structs.ServiceRegisterType, structs.ServiceRegisterRequest{Service: svc})
	got, ok := resp.(*structs.Service)
	if !ok {
		h.t.Fatalf("register service %s: got %v", svc.Name, resp)
	}
	return got
}

// scale applies a ServiceScale entry and returns Apply's answer.
func (h *harness) scale(name string, replicas int, reason string) any {
	h.t.Helper()
	return h.apply(structs.ServiceScaleType, structs.ServiceScaleRequest{Name: name, Replicas: replicas, Reason: reason, At: h.at()})
}

// deleteService applies a ServiceDelete entry and returns Apply's answer.
func (h *harness) deleteService(name, reason string) any {
	h.t.Helper()
	return h.apply(structs.ServiceDeleteType, structs.ServiceDeleteRequest{Name: name, Reason: reason, At: h.at()})
}

// updateAt reports one allocation's state from a node, stamped at.
func (h *harness) updateAt(nodeID, allocID string, st structs.AllocState, code int, at time.Time) {
	h.t.Helper()
	err := h.applyErr(structs.AllocUpdateType, structs.AllocUpdateRequest{
		NodeID:  nodeID,
		Updates: []structs.AllocUpdate{{AllocID: allocID, State: st, ExitCode: code, At: at}},
	})
	if err != nil {
		h.t.Fatalf("update %s: %v", allocID, err)
	}
}

// reportHealth sends a running report of an allocation with its health.
func (h *harness) reportHealth(nodeID, allocID string, healthy bool, reason string) error {
	h.t.Helper()
	return h.applyErr(structs.AllocUpdateType, structs.AllocUpdateRequest{NodeID: nodeID, Updates: []structs.AllocUpdate{{
		AllocID: allocID, State: structs.AllocRunning, At: h.at(),
		Health: &structs.AllocHealth{Healthy: healthy, Reason: reason, At: h.at()},
	}}})
}

// replicaIDs are the IDs of a service's replica jobs, as ServiceReplicas
// orders them.
func replicaIDs(f *FSM, name string) []string {
	var ids []string
	for _, j := range f.ServiceReplicas(name) {
		ids = append(ids, j.ID)
	}
	return ids
}

func TestFSM_ServiceRegister_MakesQueuedReplicaJobs(t *testing.T) {
	h := newHarness(t)
	svc := service("llama", 3, 1)
	svc.NextReplica, svc.Deleted = 7, true // the FSM's to set
	got := h.registerService(svc)
	if got.NextReplica != 3 || got.Deleted || got.CreateIndex != h.idx || got.ModifyIndex != h.idx {
		t.Fatalf("registered service %+v: want next replica 3, not deleted, created at index %d", got, h.idx)
	}
	if got.Spec.PortEnv != structs.DefaultPortEnv || got.Spec.Job.Nodes != 1 {
		t.Fatalf("registered spec not normalized: port env %q, nodes %d", got.Spec.PortEnv, got.Spec.Job.Nodes)
	}
	if s, ok := h.f.Service("llama"); !ok || !reflect.DeepEqual(s, got) {
		t.Fatalf("Service(llama) = %+v, %v; want what Apply answered", s, ok)
	}
	want := []string{"svc-llama-r0", "svc-llama-r1", "svc-llama-r2"}
	if ids := replicaIDs(h.f, "llama"); !reflect.DeepEqual(ids, want) {
		t.Fatalf("replicas %v, want %v", ids, want)
	}
	for _, j := range h.f.ServiceReplicas("llama") {
		wantSpec := got.Spec.Job.Copy()
		switch {
		case j.State != structs.JobQueued || j.Service != "llama" || j.Owner != "alice" || !j.AllowRoot:
			t.Fatalf("replica %s: state %s, service %q, owner %q, allow root %v", j.ID, j.State, j.Service, j.Owner, j.AllowRoot)
		case !reflect.DeepEqual(j.Spec, wantSpec):
			t.Fatalf("replica %s spec %+v, want the service's job %+v", j.ID, j.Spec, wantSpec)
		case !j.SubmittedAt.Equal(t0) || j.CreateIndex != h.idx || j.Attempts != 0:
			t.Fatalf("replica %s submitted %s at index %d with %d attempts", j.ID, j.SubmittedAt, j.CreateIndex, j.Attempts)
		}
	}
	if q := h.f.State().Queued; len(q) != 3 {
		t.Fatalf("%d jobs queued for the scheduler, want the 3 replicas", len(q))
	}
	// The replicas' spec is their own: changing one changes neither the
	// service nor another replica.
	h.f.st.jobs["svc-llama-r0"].Spec.Env["MODEL"] = "changed"
	if s, _ := h.f.Service("llama"); s.Spec.Job.Env["MODEL"] != "llama" || h.job("svc-llama-r1").Spec.Env["MODEL"] != "llama" {
		t.Fatal("replicas share their spec with the service")
	}
}

func TestFSM_ServiceRegister_ReplicasNeverTakeTheIDOfAnotherJob(t *testing.T) {
	h := newHarness(t)
	h.submit("svc-llama-r1", spec(1, 0))
	got := h.registerService(service("llama", 2, 0))
	if ids := replicaIDs(h.f, "llama"); !reflect.DeepEqual(ids, []string{"svc-llama-r0", "svc-llama-r2"}) || got.NextReplica != 3 {
		t.Fatalf("replicas %v, next %d; want r0 and r2, next 3", ids, got.NextReplica)
	}
	if j := h.job("svc-llama-r1"); j.Service != "" {
		t.Fatalf("the job in the way became a replica of %s", j.Service)
	}
}

func TestFSM_ServiceRegister_RefusesANameInUseAndBadRequests(t *testing.T) {
	h := newHarness(t)
	h.registerService(service("llama", 1, 0))
	twoNodes := service("other", 1, 0)
	twoNodes.Spec.Job.Nodes = 2
	noID := service("other", 1, 0)
	noID.ID = ""
	sameID := service("other", 1, 0)
	sameID.ID = "svc-llama"
	badName := service("Other", 1, 0)
	cases := []struct {
		name   string
		svc    structs.Service
		target error
		says   string
	}{
		{"name in use", service("llama", 2, 0), ErrServiceExists, "service llama: service already exists"},
		{"name in use by another id", func() structs.Service { s := service("llama", 2, 0); s.ID = "x"; return s }(), ErrServiceExists, "llama"},
		{"id in use", sameID, ErrServiceExists, "is service llama's"},
		{"no id", noID, ErrInvalidRequest, "empty service id"},
		{"two nodes", twoNodes, nil, "job.nodes: 2: a replica runs on one node"},
		{"bad name", badName, nil, `name: "Other"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := h.f.Hash()
			err := h.applyErr(structs.ServiceRegisterType, structs.ServiceRegisterRequest{Service: c.svc})
			wantErrIs(t, err, c.target, c.says)
			var fe *structs.FieldError
			if c.target == nil && !errors.As(err, &fe) {
				t.Fatalf("error %v is no *structs.FieldError", err)
			}
			if h.f.Hash() != before {
				t.Fatal("a refused register changed the state")
			}
		})
	}
}

func TestFSM_ServiceRegister_CountsReplicasAgainstTheQueuedLimits(t *testing.T) {
	h := newHarness(t)
	h.setLimits(structs.LimitsSetRequest{User: "alice", Limits: structs.Limits{MaxQueued: intp(3)}})
	before := h.f.Hash()
	err := h.applyErr(structs.ServiceRegisterType, structs.ServiceRegisterRequest{Service: service("llama", 4, 0)})
	wantErrIs(t, err, ErrLimit, "alice may have 3 queued jobs (has 0, service llama adds 4 replicas)")
	if h.f.Hash() != before {
		t.Fatal("a register over the limit changed the state")
	}
	h.registerService(service("llama", 3, 0))
	err = h.applyErr(structs.ServiceScaleType, structs.ServiceScaleRequest{Name: "llama", Replicas: 4, At: h.at()})
	wantErrIs(t, err, ErrLimit, "service llama adds 1 replica)")
	if got := len(h.f.ServiceReplicas("llama")); got != 3 {
		t.Fatalf("%d replicas after a refused scale, want 3", got)
	}
}

// servingHalf registers llama with 4 replicas on n1 (4 GPUs) and runs
// r0 and r2; r1 and r3 stay queued.
func servingHalf(t *testing.T) *harness {
	h := newHarness(t)
	h.register(node("n1", 4))
	h.registerService(service("llama", 4, 1))
	h.place("svc-llama-r0", alloc("r0a", "n1", 0, gpuID("n1", 0)))
	h.place("svc-llama-r2", alloc("r2a", "n1", 0, gpuID("n1", 2)))
	h.mustUpdate("n1", "r0a", structs.AllocRunning, 0, "")
	h.mustUpdate("n1", "r2a", structs.AllocRunning, 0, "")
	return h
}

func TestFSM_ServiceScale_DownStopsTheNewestUpMakesNewOnes(t *testing.T) {
	h := servingHalf(t)
	_, watch := h.f.Watch()
	at := h.at()
	got, ok := h.scale("llama", 1, "scaled 4→1 by alice").(*structs.Service)
	if !ok || got.Replicas != 1 || got.Reason != "scaled 4→1 by alice" || got.ModifyIndex != h.idx {
		t.Fatalf("scale answered %+v", got)
	}
	waitClosed(t, watch)
	const reason = "service llama scaled to 1 replica: scaled 4→1 by alice"
	for _, id := range []string{"svc-llama-r1", "svc-llama-r3"} {
		if j := h.job(id); j.State != structs.JobCancelled || j.Reason != reason || !j.FinishedAt.Equal(at) {
			t.Fatalf("queued replica %s: %s, %q at %s; want cancelled at once, %q", id, j.State, j.Reason, j.FinishedAt, reason)
		}
	}
	if j := h.job("svc-llama-r2"); j.State != structs.JobRunning || !j.StopRequested || j.Reason != "cancel requested: "+reason {
		t.Fatalf("running replica r2: %s, stop requested %v, %q", j.State, j.StopRequested, j.Reason)
	}
	if a := h.alloc("r2a"); a.DesiredState != structs.DesiredStop {
		t.Fatalf("r2's allocation desired %s, want stop", a.DesiredState)
	}
	if j, a := h.job("svc-llama-r0"), h.alloc("r0a"); j.State != structs.JobRunning || j.StopRequested || a.DesiredState != structs.DesiredRun {
		t.Fatalf("the oldest replica was touched: %s, stop requested %v, desired %s", j.State, j.StopRequested, a.DesiredState)
	}

	// The stopping replica ends cancelled, not restarted.
	h.mustUpdate("n1", "r2a", structs.AllocKilled, 143, "")
	if j := h.job("svc-llama-r2"); j.State != structs.JobCancelled || j.Reason != reason {
		t.Fatalf("stopped replica r2: %s, %q; want cancelled, %q", j.State, j.Reason, reason)
	}

	// Up again: new numbers, none of the old IDs.
	at = h.at()
	got, _ = h.scale("llama", 3, "").(*structs.Service)
	if got == nil || got.Replicas != 3 || got.NextReplica != 6 || got.Reason != "scaled 1→3" {
		t.Fatalf("scale up answered %+v", got)
	}
	for _, id := range []string{"svc-llama-r4", "svc-llama-r5"} {
		if j := h.job(id); j.State != structs.JobQueued || !j.SubmittedAt.Equal(at) || j.CreateIndex != h.idx {
			t.Fatalf("new replica %s: %s, submitted %s at index %d", id, j.State, j.SubmittedAt, j.CreateIndex)
		}
	}
	if n := len(h.f.ServiceReplicas("llama")); n != 6 {
		t.Fatalf("%d replica jobs in the state, want the 6 made", n)
	}

	// A scale to what the service has changes nothing.
	before := h.f.Hash()
	if _, ok := h.scale("llama", 3, "again").(*structs.Service); !ok || h.f.Hash() != before {
		t.Fatal("a scale to the same count changed the state")
	}
}

func TestFSM_ServiceScale_RefusesUnknownDeletedAndBadRequests(t *testing.T) {
	h := newHarness(t)
	h.register(node("n1", 1))
	h.registerService(service("llama", 1, 1))
	h.place("svc-llama-r0", alloc("r0a", "n1", 0, gpuID("n1", 0)))
	h.deleteService("llama", "")
	before := h.f.Hash()
	wantErrIs(t, h.scale("ghost", 1, "").(error), ErrServiceNotFound, "service ghost")
	wantErrIs(t, h.scale("llama", 2, "").(error), ErrServiceDeleted, "service llama")
	wantErrIs(t, h.scale("llama", structs.MaxReplicas+1, "").(error), nil, "replicas: 1001 is out of range")
	if h.f.Hash() != before {
		t.Fatal("a refused scale changed the state")
	}
}

func TestFSM_ServiceDelete_StopsEveryReplicaAndGoesWhenTheyHaveEnded(t *testing.T) {
	h := servingHalf(t)
	got, ok := h.deleteService("llama", "not needed").(*structs.Service)
	if !ok || !got.Deleted || got.Reason != "deleted: not needed" {
		t.Fatalf("delete answered %+v", got)
	}
	const reason = "service llama deleted: not needed"
	for _, id := range []string{"svc-llama-r1", "svc-llama-r3"} {
		if j := h.job(id); j.State != structs.JobCancelled || j.Reason != reason {
			t.Fatalf("queued replica %s: %s, %q", id, j.State, j.Reason)
		}
	}
	for _, id := range []string{"svc-llama-r0", "svc-llama-r2"} {
		if j := h.job(id); j.State != structs.JobRunning || !j.StopRequested {
			t.Fatalf("running replica %s: %s, stop requested %v", id, j.State, j.StopRequested)
		}
	}
	if svcs := h.f.Services(); len(svcs) != 1 || !svcs[0].Deleted {
		t.Fatalf("services while replicas stop: %+v", svcs)
	}
	if again, ok := h.deleteService("llama", "").(*structs.Service); !ok || again.ModifyIndex != got.ModifyIndex {
		t.Fatalf("a second delete answered %+v", again)
	}
	wantErrIs(t, h.applyErr(structs.ServiceRegisterType, structs.ServiceRegisterRequest{Service: service("llama", 1, 0)}),
		ErrServiceExists, "being deleted")

	// Restart rules do not apply to a stopped replica: it ends cancelled.
	h.mustUpdate("n1", "r0a", structs.AllocSucceeded, 0, "")
	if _, ok := h.f.Service("llama"); !ok {
		t.Fatal("service gone while a replica still runs")
	}
	_, watch := h.f.Watch()
	h.mustUpdate("n1", "r2a", structs.AllocFailed, 1, "")
	waitClosed(t, watch)
	if _, ok := h.f.Service("llama"); ok || len(h.f.Services()) != 0 || h.f.ServiceReplicas("llama") != nil {
		t.Fatal("service still there after its last replica ended")
	}
	for _, id := range []string{"svc-llama-r0", "svc-llama-r2"} {
		if j := h.job(id); j.State != structs.JobCancelled || j.Reason != reason {
			t.Fatalf("stopped replica %s: %s, %q; want cancelled, %q", id, j.State, j.Reason, reason)
		}
	}
	wantErrIs(t, h.deleteService("llama", "").(error), ErrServiceNotFound)

	// The name is free again; the old replicas are not the new service's.
	svc := service("llama", 1, 0)
	svc.ID = "svc-llama-2"
	h.registerService(svc)
	if ids := replicaIDs(h.f, "llama"); !reflect.DeepEqual(ids, []string{"svc-llama-2-r0"}) {
		t.Fatalf("replicas of the new llama: %v", ids)
	}
}

func TestFSM_ServiceDelete_WithNothingRunningGoesAtOnce(t *testing.T) {
	h := newHarness(t)
	h.registerService(service("idle", 0, 0))
	h.registerService(service("queued", 2, 0))
	for _, name := range []string{"idle", "queued"} {
		if _, ok := h.deleteService(name, "").(*structs.Service); !ok {
			t.Fatalf("delete %s refused", name)
		}
		if _, ok := h.f.Service(name); ok {
			t.Fatalf("service %s with nothing running is still there after its delete", name)
		}
	}
	if j := h.job("svc-queued-r1"); j.State != structs.JobCancelled || j.Reason != "service queued deleted" {
		t.Fatalf("queued replica: %s, %q", j.State, j.Reason)
	}
}

func TestFSM_ServiceReplica_CannotBeCancelledAsAJob(t *testing.T) {
	h := newHarness(t)
	h.registerService(service("llama", 1, 0))
	before := h.f.Hash()
	err := h.applyErr(structs.JobCancelType, structs.JobCancelRequest{JobID: "svc-llama-r0", At: h.at()})
	wantErrIs(t, err, ErrInvalidRequest, "replica of service llama", "scale or delete the service")
	res := h.plan(structs.Plan{Cancels: []structs.JobCancel{{JobID: "svc-llama-r0", Reason: "dependency failed"}}})
	if len(res.RejectedCancels) != 1 || !strings.Contains(res.RejectedCancels[0].Reason, "replica of service llama") {
		t.Fatalf("plan cancel of a replica: %+v", res)
	}
	if h.f.Hash() != before {
		t.Fatal("a refused cancel changed the state")
	}
}

func TestFSM_ServiceReplica_RestartsHoweverItsAttemptEnds(t *testing.T) {
	cases := []struct {
		st     structs.AllocState
		code   int
		reason string
	}{
		{structs.AllocSucceeded, 0, "restarting: exited with code 0"},
		{structs.AllocFailed, 3, "restarting: exited with code 3"},
		{structs.AllocLost, -1, "restarting: lost"},
		{structs.AllocKilled, 137, "restarting: killed"},
		{structs.AllocTimedOut, 143, "restarting: timed_out"},
	}
	for _, c := range cases {
		t.Run(string(c.st), func(t *testing.T) {
			h := newHarness(t)
			h.register(node("n1", 1))
			h.registerService(service("llama", 1, 1))
			id := "svc-llama-r0"
			for attempt := 1; attempt <= 3; attempt++ {
				a := "a" + string(rune('0'+attempt))
				h.place(id, alloc(a, "n1", 0, gpuID("n1", 0)))
				start := h.at()
				h.updateAt("n1", a, structs.AllocRunning, 0, start)
				h.updateAt("n1", a, c.st, c.code, start.Add(time.Hour))
				j := h.job(id)
				switch {
				case j.State != structs.JobQueued || j.Attempts != attempt || j.ExitCode != c.code:
					t.Fatalf("attempt %d: %s after %d attempts, exit code %d; want queued", attempt, j.State, j.Attempts, j.ExitCode)
				case j.Reason != c.reason || !j.NotBefore.IsZero() || j.Crashes != 0:
					t.Fatalf("attempt %d: reason %q, not before %s, crashes %d; want %q at once", attempt, j.Reason, j.NotBefore, j.Crashes, c.reason)
				case !j.StartedAt.IsZero() || !j.FinishedAt.IsZero():
					t.Fatalf("requeued replica keeps started %s, finished %s", j.StartedAt, j.FinishedAt)
				}
				if a := h.alloc(a); a.Live() {
					t.Fatalf("allocation of an ended attempt is %s", a.State)
				}
			}
		})
	}
}

func TestFSM_ServiceReplica_CrashBackoffGrowsOnQuickExitsAndResetsAfterALongRun(t *testing.T) {
	h := newHarness(t)
	h.register(node("n1", 1))
	h.registerService(service("llama", 1, 1))
	id := "svc-llama-r0"
	n := 0
	var last *structs.Allocation
	// attempt places the replica, runs it for ran (never, if ran < 0) and
	// ends it with st, and returns the job.
	attempt := func(ran time.Duration, st structs.AllocState, code int) *structs.Job {
		t.Helper()
		n++
		a := fmt.Sprintf("a%d", n)
		h.place(id, alloc(a, "n1", 0, gpuID("n1", 0)))
		start := h.at()
		if ran >= 0 {
			h.updateAt("n1", a, structs.AllocRunning, 0, start)
		}
		end := start.Add(max(ran, time.Second))
		h.updateAt("n1", a, st, code, end)
		last = h.alloc(a)
		j := h.job(id)
		if j.State != structs.JobQueued {
			t.Fatalf("attempt %d: replica %s, want queued", n, j.State)
		}
		return j
	}
	wantWait := func(j *structs.Job, crashes int, wait time.Duration, reason string) {
		t.Helper()
		if j.Crashes != crashes || j.Reason != reason {
			t.Fatalf("attempt %d: crashes %d, reason %q; want %d, %q", n, j.Crashes, j.Reason, crashes, reason)
		}
		if wait == 0 && !j.NotBefore.IsZero() || wait > 0 && !j.NotBefore.Equal(last.FinishedAt.Add(wait)) {
			t.Fatalf("attempt %d: not before %s, want %s after the end at %s", n, j.NotBefore, wait, last.FinishedAt)
		}
	}
	wantWait(attempt(10*time.Second, structs.AllocFailed, 1), 1, time.Second,
		"restarting in 1s: exited with code 1 (it ran less than a minute)")
	wantWait(attempt(10*time.Second, structs.AllocSucceeded, 0), 2, 2*time.Second,
		"crash-looping: restarting in 2s: exited with code 0 (2 quick exits in a row)")
	wantWait(attempt(59*time.Second, structs.AllocFailed, 1), 3, 4*time.Second,
		"crash-looping: restarting in 4s: exited with code 1 (3 quick exits in a row)")
	// Failing to start counts too.
	wantWait(attempt(-1, structs.AllocFailed, 127), 4, 8*time.Second,
		"crash-looping: restarting in 8s: exited with code 127 (4 quick exits in a row)")
	// A lost node is not the replica's doing: at once, and the streak stays.
	wantWait(attempt(5*time.Second, structs.AllocLost, -1), 4, 0, "restarting: lost")
	wantWait(attempt(5*time.Second, structs.AllocFailed, 1), 5, 16*time.Second,
		"crash-looping: restarting in 16s: exited with code 1 (5 quick exits in a row)")
	for range 3 {
		attempt(time.Second, structs.AllocFailed, 1)
	}
	wantWait(attempt(time.Second, structs.AllocFailed, 1), 9, time.Minute,
		"crash-looping: restarting in 1m0s: exited with code 1 (9 quick exits in a row)")
	// A run of a minute or more ends the streak.
	wantWait(attempt(time.Minute, structs.AllocFailed, 1), 0, 0, "restarting: exited with code 1")
	wantWait(attempt(time.Second, structs.AllocFailed, 1), 1, time.Second,
		"restarting in 1s: exited with code 1 (it ran less than a minute)")
	if j := h.job(id); j.Attempts != n || j.Spec.Restarts != 0 {
		t.Fatalf("attempts %d (want %d), restarts %d", j.Attempts, n, j.Spec.Restarts)
	}
}

func TestFSM_ServiceReplica_PreemptedIsRequeuedAsAnyJob(t *testing.T) {
	h := newHarness(t)
	h.register(node("n1", 1))
	svc := service("llama", 1, 1)
	svc.Spec.Job.Preemptible = true
	h.registerService(svc)
	id := "svc-llama-r0"
	h.place(id, alloc("r0a", "n1", 0, gpuID("n1", 0)))
	h.mustUpdate("n1", "r0a", structs.AllocRunning, 0, "")
	h.submit("train", urgent(1, 1))
	res := h.plan(structs.Plan{Preemptions: []structs.Preemption{{For: "train", Victims: []string{id}}}})
	if len(res.RejectedVictims) != 0 {
		t.Fatalf("preemption of a replica refused: %+v", res)
	}
	h.mustUpdate("n1", "r0a", structs.AllocFailed, 1, "")
	j := h.job(id)
	const reason = "preempted by job train (priority 10)"
	if j.State != structs.JobQueued || j.Preemptions != 1 || j.Reason != reason || !j.NotBefore.Equal(h.at().Add(-time.Second)) || j.Crashes != 0 {
		t.Fatalf("preempted replica: %s, %d preemptions, %q, not before %s, crashes %d", j.State, j.Preemptions, j.Reason, j.NotBefore, j.Crashes)
	}
}

func TestFSM_ServiceReplica_HealthIsKeptWhileItRunsAndClearedWhenItEnds(t *testing.T) {
	h := newHarness(t)
	h.register(node("n1", 2))
	h.registerService(service("llama", 1, 1))
	h.place("svc-llama-r0", alloc("r0a", "n1", 0, gpuID("n1", 0)))
	h.submit("batch", spec(1, 1))
	h.place("batch", alloc("b0", "n1", 0, gpuID("n1", 1)))

	// Pending: the report starts the allocation, and its health is kept.
	if err := h.reportHealth("n1", "r0a", false, "starting: within its grace"); err != nil {
		t.Fatal(err)
	}
	a := h.alloc("r0a")
	if a.State != structs.AllocRunning || a.Health == nil || a.Health.Healthy || a.Health.Reason != "starting: within its grace" || a.ModifyIndex != h.idx {
		t.Fatalf("after the first report: %s, health %+v, modify index %d", a.State, a.Health, a.ModifyIndex)
	}
	since := a.Health.At
	// The same health again changes nothing, its time included.
	before := h.f.Hash()
	if err := h.reportHealth("n1", "r0a", false, "starting: within its grace"); err != nil {
		t.Fatal(err)
	}
	if h.f.Hash() != before {
		t.Fatal("a report of the same health changed the state")
	}
	if err := h.reportHealth("n1", "r0a", true, "GET /health: 200"); err != nil {
		t.Fatal(err)
	}
	if a := h.alloc("r0a"); !a.Health.Healthy || a.Health.Reason != "GET /health: 200" || !a.Health.At.After(since) || a.ModifyIndex != h.idx {
		t.Fatalf("after turning healthy: %+v, modify index %d", a.Health, a.ModifyIndex)
	}
	// A long reason is cut, never inside a character.
	long := strings.Repeat("é", structs.MaxAllocHealthReasonLen)
	if err := h.reportHealth("n1", "r0a", false, long); err != nil {
		t.Fatal(err)
	}
	if r := h.alloc("r0a").Health.Reason; len(r) != structs.MaxAllocHealthReasonLen || !strings.HasPrefix(long, r) {
		t.Fatalf("kept reason of %d bytes, want the first %d of the report", len(r), structs.MaxAllocHealthReasonLen)
	}
	odd := strings.Repeat("x", 1) + long
	if err := h.reportHealth("n1", "r0a", false, odd); err != nil {
		t.Fatal(err)
	}
	if r := h.alloc("r0a").Health.Reason; len(r) != structs.MaxAllocHealthReasonLen-1 || !strings.HasPrefix(odd, r) {
		t.Fatalf("kept reason of %d bytes, want %d: the cut backs off to a whole character", len(r), structs.MaxAllocHealthReasonLen-1)
	}
	if g := restoreFresh(t, h.f); g.Hash() != h.f.Hash() || !reflect.DeepEqual(g.Allocs("svc-llama-r0"), h.f.Allocs("svc-llama-r0")) {
		t.Fatal("a cut reason does not survive a snapshot")
	}

	// A batch job has no health to keep.
	if err := h.reportHealth("n1", "b0", true, "ok"); err != nil {
		t.Fatal(err)
	}
	if a := h.alloc("b0"); a.Health != nil {
		t.Fatalf("batch job's allocation keeps health %+v", a.Health)
	}

	h.mustUpdate("n1", "r0a", structs.AllocFailed, 1, "")
	if a := h.alloc("r0a"); a.Health != nil {
		t.Fatalf("ended allocation keeps health %+v", a.Health)
	}
	// A late report of an ended allocation brings nothing back.
	if err := h.reportHealth("n1", "r0a", true, "GET /health: 200"); err != nil {
		t.Fatal(err)
	}
	if a := h.alloc("r0a"); a.Health != nil || a.State != structs.AllocFailed {
		t.Fatalf("late report: %s, health %+v", a.State, a.Health)
	}
}

func TestFSM_ServiceReplica_HealthOnAPendingReportIsIgnored(t *testing.T) {
	h := newHarness(t)
	h.register(node("n1", 1))
	h.registerService(service("llama", 1, 1))
	h.place("svc-llama-r0", alloc("r0a", "n1", 0, gpuID("n1", 0)))
	before := h.f.Hash()
	err := h.applyErr(structs.AllocUpdateType, structs.AllocUpdateRequest{NodeID: "n1", Updates: []structs.AllocUpdate{{
		AllocID: "r0a", State: structs.AllocPending, At: h.at(), Health: &structs.AllocHealth{Healthy: true, At: h.at()},
	}}})
	if err != nil || h.f.Hash() != before {
		t.Fatalf("pending report with health: %v, state changed %v", err, h.f.Hash() != before)
	}
}

func TestFSM_GC_KeepsLiveReplicasAndRemovesEndedOnes(t *testing.T) {
	h := servingHalf(t)
	h.scale("llama", 3, "")
	far := h.at().Add(time.Hour)
	err := h.gc(0, far, "svc-llama-r0", "svc-llama-r1", "svc-llama-r3")
	wantErrIs(t, err, ErrJobRetained, "job svc-llama-r0", "job svc-llama-r1")
	if strings.Contains(err.Error(), "svc-llama-r3") {
		t.Fatalf("the GC kept the ended replica r3: %v", err)
	}
	if _, ok := h.f.Job("svc-llama-r3"); ok {
		t.Fatal("ended replica r3 still there")
	}
	if ids := replicaIDs(h.f, "llama"); !reflect.DeepEqual(ids, []string{"svc-llama-r0", "svc-llama-r1", "svc-llama-r2"}) {
		t.Fatalf("replicas after the GC: %v", ids)
	}
	if err := checkIndexes(h.f.st); err != nil {
		t.Fatal(err)
	}
	// The service goes on: a scale up makes a new replica, never r3 again.
	h.scale("llama", 4, "")
	if j := h.job("svc-llama-r4"); j.State != structs.JobQueued {
		t.Fatalf("new replica %s", j.State)
	}
	if _, ok := h.f.Job("svc-llama-r3"); ok {
		t.Fatal("a scale up took the ID of a removed replica")
	}
}
