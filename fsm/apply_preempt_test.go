package fsm

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/skein-dev/skein/structs"
)

// preemptible is a spec that may be preempted, with the given restarts.
func preemptible(nodes, gpus, restarts int) structs.JobSpec {
	s := spec(nodes, gpus)
	s.Preemptible = true
	s.Restarts = restarts
	return s
}

// urgent is a spec of priority 10.
func urgent(nodes, gpus int) structs.JobSpec {
	s := spec(nodes, gpus)
	s.Priority = 10
	return s
}

// lowRunning registers n1 with 4 GPUs and runs "low" on all of them.
func lowRunning(t *testing.T, restarts int) *harness {
	h := newHarness(t)
	h.register(node("n1", 4))
	h.submit("low", preemptible(1, 4, restarts))
	h.place("low", alloc("low0", "n1", 0, gpuID("n1", 0), gpuID("n1", 1), gpuID("n1", 2), gpuID("n1", 3)))
	h.mustUpdate("n1", "low0", structs.AllocRunning, 0, "")
	h.submit("high", urgent(1, 4))
	return h
}

func (h *harness) preempt(forID string, victims ...string) error {
	h.t.Helper()
	return h.applyErr(structs.JobPreemptType, structs.JobPreemptRequest{Victims: victims, For: forID, At: h.at()})
}

func TestFSM_SubmitGivesAPreemptibleJobTheDefaultGrace(t *testing.T) {
	h := newHarness(t)
	if j := h.submit("low", preemptible(1, 0, 0)); j.Spec.PreemptGrace != structs.DefaultPreemptGrace {
		t.Fatalf("PreemptGrace = %s, want %s", j.Spec.PreemptGrace, structs.DefaultPreemptGrace)
	}
}

func TestFSM_PreemptStopsTheVictimWithItsGraceAndReason(t *testing.T) {
	h := lowRunning(t, 0)
	if err := h.preempt("high", "low"); err != nil {
		t.Fatalf("preempt: %v", err)
	}
	a := h.alloc("low0")
	const reason = "preempted by job high (priority 10)"
	if a.DesiredState != structs.DesiredStop || a.Reason != reason || a.StopGrace != structs.DefaultPreemptGrace {
		t.Fatalf("victim allocation: desired %s, reason %q, stop grace %s; want stop, %q, %s",
			a.DesiredState, a.Reason, a.StopGrace, reason, structs.DefaultPreemptGrace)
	}
	j := h.job("low")
	if j.State != structs.JobRunning || j.PreemptedBy != "high" || j.Preemptions != 1 ||
		j.PreemptReason != reason || !strings.Contains(j.Reason, "stopping") {
		t.Fatalf("victim job while stopping: %+v", j)
	}
	if h.job("high").State != structs.JobQueued {
		t.Fatalf("the preempting job should still wait for the GPUs")
	}
}

func TestFSM_PreemptRequeuesWithoutUsingARestart(t *testing.T) {
	h := lowRunning(t, 1)
	if err := h.preempt("high", "low"); err != nil {
		t.Fatalf("preempt: %v", err)
	}
	// The job exits with an error on SIGTERM: still a preemption, no
	// backoff. It waits again from the moment it was requeued, so the age
	// it had cannot lift it over the job it made room for.
	h.mustUpdate("n1", "low0", structs.AllocFailed, 143, "")
	j := h.job("low")
	if j.State != structs.JobQueued || j.NotBefore.IsZero() || j.NotBefore.After(h.at()) || j.PreemptedBy != "" ||
		j.Reason != "preempted by job high (priority 10)" {
		t.Fatalf("preempted job after its allocation ended: %+v", j)
	}
	if h.f.State().Queued[0].ID != "high" {
		t.Fatalf("the preempting job is not first in the queue")
	}
	// It runs again and fails: its one restart is still there.
	all := []string{gpuID("n1", 0), gpuID("n1", 1), gpuID("n1", 2), gpuID("n1", 3)}
	h.place("low", alloc("low1", "n1", 0, all...))
	h.mustUpdate("n1", "low1", structs.AllocFailed, 1, "")
	if j := h.job("low"); j.State != structs.JobQueued || !strings.Contains(j.Reason, "attempt 2 of 2") {
		t.Fatalf("after the first failure: %s (%s), want queued for attempt 2 of 2", j.State, j.Reason)
	}
	h.place("low", alloc("low2", "n1", 0, all...))
	h.mustUpdate("n1", "low2", structs.AllocFailed, 1, "")
	if j := h.job("low"); j.State != structs.JobFailed || j.Preemptions != 1 || j.Attempts != 3 {
		t.Fatalf("after the second failure: %s, %d preemptions, %d attempts; want failed, 1, 3", j.State, j.Preemptions, j.Attempts)
	}
}

func TestFSM_PreemptStopsAGangVictimWhole(t *testing.T) {
	h := newHarness(t)
	h.register(node("n1", 1))
	h.register(node("n2", 1))
	h.submit("gang", preemptible(2, 1, 0))
	h.place("gang", alloc("g0", "n1", 0, gpuID("n1", 0)), alloc("g1", "n2", 1, gpuID("n2", 0)))
	h.submit("high", urgent(1, 1))
	if err := h.preempt("high", "gang"); err != nil {
		t.Fatalf("preempt: %v", err)
	}
	for _, id := range []string{"g0", "g1"} {
		if a := h.alloc(id); a.DesiredState != structs.DesiredStop {
			t.Fatalf("rank %s not asked to stop", id)
		}
	}
	h.mustUpdate("n1", "g0", structs.AllocKilled, 137, "killed")
	if j := h.job("gang"); j.State != structs.JobRunning {
		t.Fatalf("gang is %s with a rank still live, want running", j.State)
	}
	h.mustUpdate("n2", "g1", structs.AllocSucceeded, 0, "")
	if j := h.job("gang"); j.State != structs.JobQueued || j.Preemptions != 1 {
		t.Fatalf("gang after both ranks ended: %s, %d preemptions; want queued, 1", j.State, j.Preemptions)
	}
}

func TestFSM_PreemptIsIdempotent(t *testing.T) {
	h := lowRunning(t, 0)
	if err := h.preempt("high", "low"); err != nil {
		t.Fatalf("preempt: %v", err)
	}
	before := h.f.Hash()
	if err := h.preempt("high", "low"); err != nil {
		t.Fatalf("repeated preempt: %v", err)
	}
	if h.f.Hash() != before || h.job("low").Preemptions != 1 {
		t.Fatalf("a repeated preemption changed the state (preemptions %d)", h.job("low").Preemptions)
	}
	// Repeated after the victim is back in the queue: still nothing.
	h.mustUpdate("n1", "low0", structs.AllocKilled, 137, "")
	before = h.f.Hash()
	wantErrIs(t, h.preempt("high", "low"), ErrNotPreemptible, "low", "queued")
	if h.f.Hash() != before {
		t.Fatal("a preemption of a queued victim changed the state")
	}
}

func TestFSM_PreemptRepeatedForAnotherAttemptIsRefused(t *testing.T) {
	h := lowRunning(t, 0)
	if err := h.preempt("high", "low"); err != nil {
		t.Fatalf("preempt: %v", err)
	}
	before := h.f.Hash()
	again := func(attempt int) error {
		return h.applyErr(structs.JobPreemptType, structs.JobPreemptRequest{
			Victims: []string{"low"}, Attempts: []int{attempt}, For: "high", At: h.at(),
		})
	}
	if err := again(1); err != nil {
		t.Fatalf("repeated preemption of the same attempt: %v", err)
	}
	// As on a state where the first had not happened: the attempt named
	// is not the one that runs.
	wantErrIs(t, again(2), ErrNotPreemptible, "attempt 2 was chosen, attempt 1 runs")
	if h.f.Hash() != before {
		t.Fatal("a repeated preemption changed the state")
	}
}

func TestFSM_PreemptSkipsVictimsStateNoLongerAllows(t *testing.T) {
	h := newHarness(t)
	h.register(node("n1", 4))
	run := func(id string, s structs.JobSpec, gpu int) {
		h.submit(id, s)
		h.place(id, alloc(id+"0", "n1", 0, gpuID("n1", gpu)))
	}
	run("ok", preemptible(1, 1, 0), 0)
	run("solid", spec(1, 1), 1)
	peer := preemptible(1, 1, 0)
	peer.Priority = 10
	run("peer", peer, 2)
	run("done", preemptible(1, 1, 0), 3)
	h.mustUpdate("n1", "done0", structs.AllocSucceeded, 0, "")
	h.submit("high", urgent(1, 4))

	err := h.applyErr(structs.JobPreemptType, structs.JobPreemptRequest{
		Victims: []string{"ghost", "solid", "peer", "done", "ok"}, For: "high", At: h.at(),
	})
	wantErrIs(t, err, ErrJobNotFound, "ghost")
	wantErrIs(t, err, ErrNotPreemptible, "solid: cannot be preempted: not submitted as preemptible",
		"peer: cannot be preempted: priority 10 is not below 10", "done: cannot be preempted: it is succeeded")
	if j := h.job("ok"); j.PreemptedBy != "high" {
		t.Fatalf("the one valid victim was not preempted: %+v", j)
	}
	for _, id := range []string{"solid0", "peer0"} {
		if a := h.alloc(id); a.DesiredState != structs.DesiredRun {
			t.Fatalf("allocation %s of a refused victim was asked to stop", id)
		}
	}
}

func TestFSM_PreemptLeavesAVictimOnAnotherAttemptAlone(t *testing.T) {
	h := lowRunning(t, 0)
	before := h.f.Hash()
	err := h.applyErr(structs.JobPreemptType, structs.JobPreemptRequest{
		Victims: []string{"low"}, Attempts: []int{2}, For: "high", At: h.at(),
	})
	wantErrIs(t, err, ErrNotPreemptible, "attempt 2 was chosen, attempt 1 runs")
	if h.f.Hash() != before {
		t.Fatal("a preemption of another attempt changed the state")
	}
}

func TestFSM_PreemptRefusesBadRequestsAndChangesNothing(t *testing.T) {
	h := lowRunning(t, 0)
	h.submit("other", urgent(1, 1))
	h.apply(structs.JobCancelType, structs.JobCancelRequest{JobID: "other", At: h.at()})
	before := h.f.Hash()
	for _, c := range []struct {
		name   string
		req    structs.JobPreemptRequest
		target error
		text   string
	}{
		{"no victims", structs.JobPreemptRequest{For: "high"}, ErrInvalidRequest, "no victims"},
		{"attempts do not match victims", structs.JobPreemptRequest{Victims: []string{"low"}, Attempts: []int{1, 1}, For: "high"}, ErrInvalidRequest, "2 attempts for 1 victims"},
		{"unknown preempting job", structs.JobPreemptRequest{Victims: []string{"low"}, For: "nope"}, ErrJobNotFound, "nope"},
		{"preempting job not queued", structs.JobPreemptRequest{Victims: []string{"low"}, For: "other"}, ErrNotPreemptible, "cancelled"},
		{"preempting for itself", structs.JobPreemptRequest{Victims: []string{"low"}, For: "low"}, ErrNotPreemptible, "running"},
	} {
		t.Run(c.name, func(t *testing.T) {
			wantErrIs(t, h.applyErr(structs.JobPreemptType, c.req), c.target, c.text)
			if h.f.Hash() != before {
				t.Fatal("a refused preemption changed the state")
			}
		})
	}
}

func TestFSM_CancelDuringPreemptionCancels(t *testing.T) {
	h := lowRunning(t, 0)
	if err := h.preempt("high", "low"); err != nil {
		t.Fatalf("preempt: %v", err)
	}
	h.apply(structs.JobCancelType, structs.JobCancelRequest{JobID: "low", At: h.at()})
	h.mustUpdate("n1", "low0", structs.AllocKilled, 137, "")
	if j := h.job("low"); j.State != structs.JobCancelled || j.PreemptedBy != "" {
		t.Fatalf("a preempted job cancelled while stopping is %s, preempted by %q; want cancelled, none", j.State, j.PreemptedBy)
	}
}

func TestFSM_SnapshotRoundTripsAPreemptionUnderWay(t *testing.T) {
	h := lowRunning(t, 0)
	if err := h.preempt("high", "low"); err != nil {
		t.Fatalf("preempt: %v", err)
	}
	g := restoreFresh(t, h.f)
	if g.Hash() != h.f.Hash() {
		t.Fatal("restored hash differs")
	}
	if !reflect.DeepEqual(g.Jobs(), h.f.Jobs()) || !reflect.DeepEqual(g.Allocs("low"), h.f.Allocs("low")) {
		t.Fatal("restored jobs or allocations differ")
	}
	j, _ := g.Job("low")
	a, _ := g.Alloc("low0")
	if j.PreemptedBy != "high" || j.Preemptions != 1 || j.PreemptReason == "" || a.StopGrace != structs.DefaultPreemptGrace {
		t.Fatalf("restored preemption fields: job %+v, alloc stop grace %s", j, a.StopGrace)
	}
	// The restored replica finishes the preemption like the original.
	h2 := &harness{t: t, f: g, idx: h.idx}
	h2.mustUpdate("n1", "low0", structs.AllocKilled, 137, "")
	if j := h2.job("low"); j.State != structs.JobQueued {
		t.Fatalf("restored replica: victim is %s after its allocation ended, want queued", j.State)
	}
}

// TestFSM_PreemptionKeepsEveryInvariant drives the FSM as
// TestFSM_GPUExclusivity does, with preemptible jobs of random priority
// and random, often stale or wrong preemptions in the mix.
func TestFSM_PreemptionKeepsEveryInvariant(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		m := newModel(rt)
		steps := rapid.IntRange(10, 60).Draw(rt, "steps")
		ops := []func(){m.register, m.submitPreemptible, m.submitPreemptible, m.plan, m.plan, m.plan,
			m.update, m.update, m.update, m.cancel, m.nodeDown, m.preempt, m.preempt}
		for range steps {
			ops[rapid.IntRange(0, len(ops)-1).Draw(rt, "op")]()
			m.check()
			m.checkPreemptions()
		}
	})
}

func (m *model) submitPreemptible() {
	id := m.id("j")
	s := spec(rapid.IntRange(1, 2).Draw(m.rt, "ranks"), rapid.IntRange(0, 2).Draw(m.rt, "gpus"))
	s.Restarts = rapid.IntRange(0, 1).Draw(m.rt, "restarts")
	s.Priority = rapid.IntRange(0, 2).Draw(m.rt, "priority")
	s.Preemptible = rapid.Bool().Draw(m.rt, "preemptible")
	req := structs.JobSubmitRequest{JobID: id, RequestID: "r" + id, Spec: s, SubmittedAt: m.h.at()}
	if _, ok := m.h.apply(structs.JobSubmitType, req).(*structs.Job); !ok {
		m.rt.Fatalf("valid submit %s refused", id)
	}
	m.jobs = append(m.jobs, id)
}

// preempt sends a preemption for any job, of any jobs, sometimes naming
// the attempt (right or wrong).
func (m *model) preempt() {
	if len(m.jobs) == 0 {
		return
	}
	req := structs.JobPreemptRequest{For: rapid.SampledFrom(m.jobs).Draw(m.rt, "for"), At: m.h.at()}
	withAttempts := rapid.Bool().Draw(m.rt, "attempts")
	for range rapid.IntRange(1, 3).Draw(m.rt, "victims") {
		req.Victims = append(req.Victims, rapid.SampledFrom(m.jobs).Draw(m.rt, "victim"))
		if withAttempts {
			req.Attempts = append(req.Attempts, rapid.IntRange(0, 3).Draw(m.rt, "attempt"))
		}
	}
	before := m.jobsNow()
	_ = m.h.applyErr(structs.JobPreemptType, req)
	asked := map[string][]string{}
	for _, id := range req.Victims {
		asked[id] = []string{req.For}
	}
	m.checkVictims(before, asked)
}

// jobsNow returns copies of every job, by ID.
func (m *model) jobsNow() map[string]*structs.Job {
	jobs := map[string]*structs.Job{}
	for _, j := range m.h.f.Jobs() {
		jobs[j.ID] = j
	}
	return jobs
}

// checkVictims asserts that every job an entry preempted was asked for
// (asked: victim ID -> the jobs it was to make room for), and was, before
// the entry, a running preemptible job of lower priority than the queued
// job it now makes room for, and was preempted once.
func (m *model) checkVictims(before map[string]*structs.Job, asked map[string][]string) {
	for id, fors := range asked {
		b, j := before[id], m.h.job(id)
		if j.Preemptions == b.Preemptions {
			continue
		}
		forJob := before[j.PreemptedBy]
		if forJob == nil || !slices.Contains(fors, forJob.ID) {
			m.rt.Fatalf("job %s preempted for %q, asked for %v", id, j.PreemptedBy, fors)
		}
		if j.Preemptions != b.Preemptions+1 || !b.Spec.Preemptible || b.Spec.Priority >= forJob.Spec.Priority ||
			b.State != structs.JobRunning || forJob.State != structs.JobQueued {
			m.rt.Fatalf("job %s (%s, priority %d, preemptible %v) preempted for %s (%s, priority %d): %d -> %d preemptions",
				id, b.State, b.Spec.Priority, b.Spec.Preemptible, forJob.ID, forJob.State, forJob.Spec.Priority,
				b.Preemptions, j.Preemptions)
		}
	}
}

// checkPreemptions asserts what preemption must keep true after every entry.
func (m *model) checkPreemptions() {
	for _, j := range m.h.f.Jobs() {
		// Preemptions and the first GPU faults use no restart; a
		// replica's restarts never run out.
		if used := j.Attempts - 1 - j.Preemptions - j.GPUFaults; used > j.Spec.Restarts && j.Service == "" {
			m.rt.Fatalf("job %s used %d restarts of %d (%d attempts, %d preemptions, %d GPU faults)",
				j.ID, used, j.Spec.Restarts, j.Attempts, j.Preemptions, j.GPUFaults)
		}
		if j.PreemptedBy == "" {
			continue
		}
		if j.State != structs.JobRunning {
			m.rt.Fatalf("job %s is %s but still marked preempted by %s", j.ID, j.State, j.PreemptedBy)
		}
		for _, a := range m.h.f.Allocs(j.ID) {
			if a.Live() && a.DesiredState != structs.DesiredStop {
				m.rt.Fatalf("preempted job %s has live allocation %s still meant to run", j.ID, a.ID)
			}
		}
	}
}
