package fsm

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/skein-dev/skein/structs"
)

// TestFSM_GCAndPlanStopsKeepEveryInvariant drives the FSM with job
// arrays, dependencies, plans that cancel and preempt, array cancels and
// GC entries, and checks after every entry the invariants of
// TestFSM_GPUExclusivity (snapshot equivalence included) and of
// preemption; the plan and GC steps check what their entries did.
func TestFSM_GCAndPlanStopsKeepEveryInvariant(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		m := newModel(rt)
		steps := rapid.IntRange(10, 80).Draw(rt, "steps")
		ops := []func(){m.register, m.submitPreemptible, m.submitLinked, m.submitLinked, m.plan, m.plan, m.plan,
			m.update, m.update, m.update, m.cancel, m.cancelArray, m.nodeDown, m.gc, m.gc}
		for range steps {
			ops[rapid.IntRange(0, len(ops)-1).Draw(rt, "op")]()
			m.check()
			m.checkPreemptions()
		}
	})
}

// submitLinked submits a small job or job array, sometimes depending on a
// job the model knows.
func (m *model) submitLinked() {
	id := m.id("j")
	s := spec(1, rapid.IntRange(0, 1).Draw(m.rt, "gpus"))
	s.Preemptible = rapid.Bool().Draw(m.rt, "preemptible")
	s.Priority = rapid.IntRange(0, 2).Draw(m.rt, "priority")
	if rapid.Bool().Draw(m.rt, "array") {
		s.Array = &structs.ArraySpec{End: rapid.IntRange(0, 2).Draw(m.rt, "last index")}
	}
	if len(m.jobs) > 0 && rapid.Bool().Draw(m.rt, "after") {
		s.After = []structs.Dependency{{
			JobID:     rapid.SampledFrom(m.jobs).Draw(m.rt, "dependency"),
			Condition: rapid.SampledFrom([]string{structs.AfterOK, structs.AfterAny}).Draw(m.rt, "condition"),
		}}
	}
	req := structs.JobSubmitRequest{JobID: id, Spec: s, SubmittedAt: m.h.at()}
	if _, ok := m.h.apply(structs.JobSubmitType, req).(*structs.Job); !ok {
		m.rt.Fatalf("valid submit %s refused", id)
	}
	if s.Array == nil {
		m.jobs = append(m.jobs, id)
		return
	}
	m.arrays = append(m.arrays, id)
	for i := s.Array.Start; i <= s.Array.End; i++ {
		m.jobs = append(m.jobs, structs.ArrayTaskID(id, i))
	}
}

// cancelArray cancels a job array the model submitted, which may have
// ended or be gone.
func (m *model) cancelArray() {
	if len(m.arrays) == 0 {
		return
	}
	id := rapid.SampledFrom(m.arrays).Draw(m.rt, "array")
	m.h.apply(structs.JobCancelType, structs.JobCancelRequest{ArrayID: id, Reason: "no longer needed", At: m.h.at()})
}

// planStops adds cancels (mostly of queued jobs) and preemptions (for any
// job, of any jobs) to a plan, as a stale or buggy leader might.
func (m *model) planStops(p *structs.Plan, queued []string) {
	pick := func(label string) string {
		if len(queued) > 0 && rapid.Bool().Draw(m.rt, "queued "+label) {
			return rapid.SampledFrom(queued).Draw(m.rt, label)
		}
		return rapid.SampledFrom(m.jobs).Draw(m.rt, label)
	}
	for range rapid.IntRange(0, 2).Draw(m.rt, "cancels") {
		p.Cancels = append(p.Cancels, structs.JobCancel{JobID: pick("cancel"), Reason: "dependency failed"})
	}
	for range rapid.IntRange(0, 2).Draw(m.rt, "preemptions") {
		pr := structs.Preemption{For: pick("for")}
		withAttempts := rapid.Bool().Draw(m.rt, "attempts")
		for range rapid.IntRange(1, 2).Draw(m.rt, "victims") {
			pr.Victims = append(pr.Victims, rapid.SampledFrom(m.jobs).Draw(m.rt, "victim"))
			if withAttempts {
				pr.Attempts = append(pr.Attempts, rapid.IntRange(0, 2).Draw(m.rt, "attempt"))
			}
		}
		p.Preemptions = append(p.Preemptions, pr)
	}
}

// commitPlan dry-runs a plan, applies it, and checks what the entry did:
// CheckPlan changed nothing and refused no more than Apply (and the same,
// for a plan of one part); cancels ended only jobs that were queued, and
// every other cancel was reported; victims were preempted only as allowed.
func (m *model) commitPlan(p structs.Plan) {
	f := m.h.f
	before := m.jobsNow()
	idx, hash := f.Index(), f.Hash()
	checked := f.CheckPlan(p)
	if f.Index() != idx || f.Hash() != hash {
		m.rt.Fatalf("CheckPlan changed the state")
	}
	res := m.h.plan(p)
	for _, c := range []struct {
		kind           string
		dry, committed []structs.JobBlocked
	}{
		{"placements", checked.Rejected, res.Rejected},
		{"cancels", checked.RejectedCancels, res.RejectedCancels},
		{"victims", checked.RejectedVictims, res.RejectedVictims},
	} {
		left := refusedIDs(c.committed)
		for _, id := range refusedIDs(c.dry) {
			i := slices.Index(left, id)
			if i < 0 {
				m.rt.Fatalf("CheckPlan refused %s %s, Apply did not: dry %v, applied %v", c.kind, id, c.dry, c.committed)
			}
			left = slices.Delete(left, i, i+1)
		}
	}
	if len(p.Cancels)+len(p.Preemptions)+len(p.Placements) == 1 && !reflect.DeepEqual(checked, res) {
		m.rt.Fatalf("one-part plan: CheckPlan %+v, Apply %+v", checked, res)
	}
	ended := 0
	for id, b := range before {
		j := m.h.job(id)
		if j.State != structs.JobCancelled || b.State == structs.JobCancelled {
			continue
		}
		if b.State != structs.JobQueued || !slices.ContainsFunc(p.Cancels, func(c structs.JobCancel) bool { return c.JobID == id }) {
			m.rt.Fatalf("plan cancelled job %s, which was %s", id, b.State)
		}
		ended++
	}
	if ended+len(res.RejectedCancels) != len(p.Cancels) {
		m.rt.Fatalf("%d cancels: %d jobs ended, %d refused", len(p.Cancels), ended, len(res.RejectedCancels))
	}
	asked := map[string][]string{}
	for _, pr := range p.Preemptions {
		for _, id := range pr.Victims {
			asked[id] = append(asked[id], pr.For)
		}
	}
	m.checkVictims(before, asked)
}

func refusedIDs(r []structs.JobBlocked) []string {
	ids := make([]string, len(r))
	for i, b := range r {
		ids[i] = b.JobID
	}
	return ids
}

// gc sends a GC entry for random jobs (sometimes all that ExpiredJobs
// lists, sometimes one that never existed) and checks that it removed
// exactly the listed jobs that, before it, had finished at least the
// retention ago, were needed by no job that had not ended, and belonged to
// no array with a task that had not ended. The model's own view of what
// holds a job is checked against GCHolds too.
func (m *model) gc() {
	f := m.h.f
	before := m.jobsNow()
	retention := rapid.SampledFrom([]time.Duration{0, 5 * time.Second, 30 * time.Second, time.Hour}).Draw(m.rt, "retention")
	at := m.h.at().Add(time.Duration(rapid.IntRange(0, 20).Draw(m.rt, "later")) * time.Second)
	var ids []string
	for range rapid.IntRange(0, 3).Draw(m.rt, "gc jobs") {
		if len(m.jobs) > 0 {
			ids = append(ids, rapid.SampledFrom(m.jobs).Draw(m.rt, "gc job"))
		}
	}
	if rapid.Bool().Draw(m.rt, "all expired") {
		for _, j := range f.ExpiredJobs(retention, at) {
			ids = append(ids, j.ID)
		}
	}
	if rapid.IntRange(0, 5).Draw(m.rt, "ghost") == 0 {
		ids = append(ids, "ghost")
	}
	if len(ids) == 0 || len(ids) > MaxGCJobs {
		return
	}
	needed, open := map[string]bool{}, map[string]bool{}
	for _, j := range before {
		if j.State.Terminal() {
			continue
		}
		for _, d := range j.Spec.After {
			needed[d.JobID] = true
		}
		if j.ArrayID != "" {
			open[j.ArrayID] = true
		}
	}
	if n, o := f.GCHolds(); !reflect.DeepEqual(n, needed) || !reflect.DeepEqual(o, open) {
		m.rt.Fatalf("GCHolds %v %v, the jobs say %v %v", n, o, needed, open)
	}
	err := m.h.gc(retention, at, ids...)
	removed := map[string]bool{}
	for _, id := range ids {
		b, existed := before[id]
		_, still := f.Job(id)
		if !existed {
			if still {
				m.rt.Fatalf("GC created job %s", id)
			}
			continue
		}
		may := b.State.Terminal() && !b.FinishedAt.Add(retention).After(at) &&
			!needed[id] && !(b.ArrayID != "" && open[b.ArrayID])
		if still == may {
			m.rt.Fatalf("job %s (before: %+v) may go: %v, still there: %v; entry said %v", id, b, may, still, err)
		}
		if !still {
			removed[id] = true
		}
		if still && err == nil {
			m.rt.Fatalf("job %s kept without a word", id)
		}
	}
	if got := len(f.Jobs()); got != len(before)-len(removed) {
		m.rt.Fatalf("%d jobs after removing %d of %d", got, len(removed), len(before))
	}
	m.jobs = slices.DeleteFunc(m.jobs, func(id string) bool { return removed[id] })
}
