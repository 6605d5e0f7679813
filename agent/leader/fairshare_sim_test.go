package leader

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/skein-dev/skein/sched"
	"github.com/skein-dev/skein/structs"
)

// fairSim is an accelerated cluster in one process: a real FSM, the real
// scheduling pass (sched.Decide over fsm.State) once a simulated minute,
// usage charged every 5 simulated minutes as the leader charges it, and
// simulated nodes that start every allocation at once and end it when
// its job's run time is over. GPUs are simulated.
type fairSim struct {
	h   *harness
	now time.Time
	rng *rand.Rand
	// ends are the running allocations by the time they end; runFor the
	// run time of each job.
	ends   map[string]time.Time
	nodeOf map[string]string
	runFor map[string]time.Duration
	// gpuSeconds are the GPU-seconds each account ran within [from, to).
	gpuSeconds map[string]float64
	from, to   time.Time
	started    map[string]time.Time
	seq        int
	freed      bool // an allocation ended in the current step
}

func newFairSim(t *testing.T, nodes, gpus int) *fairSim {
	s := &fairSim{h: newHarness(t), now: time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC), rng: rand.New(rand.NewPCG(1, 2)),
		ends: map[string]time.Time{}, nodeOf: map[string]string{}, runFor: map[string]time.Duration{},
		gpuSeconds: map[string]float64{}, started: map[string]time.Time{}}
	for i := range nodes {
		id := fmt.Sprintf("sim-%02d", i)
		n := structs.Node{ID: id, Name: id, Status: structs.NodeReady, CPUs: 64, MemoryMiB: 512 << 10}
		for g := range gpus {
			n.GPUs = append(n.GPUs, structs.GPU{Index: g, UUID: fmt.Sprintf("GPU-%s-%d", id, g), Model: "H100",
				MemoryMiB: 81920, Healthy: true, Simulated: true})
		}
		s.h.must(structs.NodeRegisterType, structs.NodeRegisterRequest{Node: n, At: s.now})
	}
	return s
}

// submit queues a job of owner in account with gpus GPUs that runs for d.
func (s *fairSim) submit(owner, account string, gpus int, d time.Duration) string {
	s.seq++
	id := fmt.Sprintf("job-%06d", s.seq)
	spec := structs.JobSpec{Command: []string{"true"}, Nodes: 1, GPUs: gpus, Account: account,
		TimeLimit: structs.Duration(d + time.Minute)}
	s.h.must(structs.JobSubmitType, structs.JobSubmitRequest{JobID: id, Spec: spec, SubmittedAt: s.now, Owner: owner})
	s.runFor[id] = d
	return id
}

// step advances the clock by a minute: allocations due end, usage is
// charged every 5 minutes, fill tops the queues up, and one pass places.
func (s *fairSim) step(fill func()) {
	s.now = s.now.Add(time.Minute)
	s.freed = false
	for id, end := range s.ends {
		if end.After(s.now) {
			continue
		}
		s.h.must(structs.AllocUpdateType, structs.AllocUpdateRequest{NodeID: s.nodeOf[id],
			Updates: []structs.AllocUpdate{{AllocID: id, State: structs.AllocSucceeded, At: end}}})
		delete(s.ends, id)
		s.freed = true
	}
	if s.now.Minute()%5 == 0 {
		s.h.must(structs.UsageChargeType, structs.UsageChargeRequest{At: s.now, HalfLife: structs.Duration(structs.DefaultUsageHalfLife)})
	}
	fill()
	view := s.h.f.State()
	plan := sched.Decide(view, sched.Inputs{Now: s.now}).Plan
	if len(plan.Placements) == 0 && len(plan.Blocked) == 0 {
		return
	}
	for i := range plan.Placements {
		for k := range plan.Placements[i].Allocations {
			a := &plan.Placements[i].Allocations[k]
			s.seq++
			a.ID, a.CreatedAt = fmt.Sprintf("alloc-%06d", s.seq), s.now
		}
	}
	resp, err := s.h.apply(structs.PlanApplyType, structs.PlanApplyRequest{Plan: plan, At: s.now})
	if err != nil || len(resp.(*structs.PlanResult).Rejected) > 0 {
		s.h.t.Fatalf("plan refused: %v %+v", err, resp)
	}
	for _, pl := range plan.Placements {
		j := s.h.job(pl.JobID)
		s.started[j.ID] = s.now
		for _, a := range pl.Allocations {
			s.h.must(structs.AllocUpdateType, structs.AllocUpdateRequest{NodeID: a.NodeID,
				Updates: []structs.AllocUpdate{{AllocID: a.ID, State: structs.AllocRunning, At: s.now}}})
			end := s.now.Add(s.runFor[j.ID])
			s.ends[a.ID], s.nodeOf[a.ID] = end, a.NodeID
			if s.to.After(s.from) {
				lo, hi := maxTime(s.now, s.from), minTime(end, s.to)
				if hi.After(lo) {
					s.gpuSeconds[j.Spec.Account] += float64(len(a.GPUs)) * hi.Sub(lo).Seconds()
				}
			}
		}
	}
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// queued counts the queued jobs of an account.
func (s *fairSim) queued(account string) int {
	n := 0
	for _, j := range s.h.f.State().Queued {
		if j.Spec.Account == account {
			n++
		}
	}
	return n
}

func TestFairShare_SimulatedWeek_7030AndALateAccountRunsAtTheFirstFreeGPU(t *testing.T) {
	if testing.Short() {
		t.Skip("a simulated week of passes: seconds of CPU")
	}
	s := newFairSim(t, 10, 8) // 80 simulated GPUs
	account := func(name string, shares int, user string) {
		s.h.must(structs.AccountSetType, structs.AccountRequest{Op: structs.AccountCreate, Name: name, Shares: &shares})
		s.h.must(structs.AccountSetType, structs.AccountRequest{Op: structs.AccountAddUser, Name: name, User: user})
	}
	account("ml", 70, "alice")
	account("cv", 30, "bob")
	// Both flood the queue: always 40 jobs waiting each, far more than
	// the cluster holds.
	fill := func() {
		for _, a := range []struct{ owner, account string }{{"alice", "ml"}, {"bob", "cv"}} {
			for n := s.queued(a.account); n < 40; n++ {
				gpus := []int{1, 2, 4, 8}[s.rng.IntN(4)]
				s.submit(a.owner, a.account, gpus, time.Duration(30+s.rng.IntN(210))*time.Minute)
			}
		}
	}
	const day = 24 * 60
	// The first day fills the cluster and builds usage; the GPU time of
	// the week after it is what is measured.
	s.from = s.now.Add(day * time.Minute)
	s.to = s.from.Add(7 * day * time.Minute)
	late := ""
	var lateAt, submitted time.Time
	for m := 0; m < 8*day; m++ {
		s.step(fill)
		if m == 4*day {
			account("late", 10, "carol")
			late = s.submit("carol", "late", 1, time.Hour)
			lateAt, submitted = s.now, s.now
		}
		if late != "" && !lateAt.IsZero() && s.now.After(lateAt) && s.freed {
			// The first pass after a GPU freed must start it.
			if _, ok := s.started[late]; !ok {
				t.Fatalf("GPUs freed at %s and the late account's job is still queued: %s", s.now, s.h.job(late).Reason)
			}
			lateAt = time.Time{}
			t.Logf("late account's job started %s after its submit, in the first pass after a GPU freed", s.started[late].Sub(submitted))
		}
	}
	if _, ok := s.started[late]; !ok {
		t.Fatal("the late account's job never started")
	}
	total := s.gpuSeconds["ml"] + s.gpuSeconds["cv"] + s.gpuSeconds["late"]
	ml := s.gpuSeconds["ml"] / (s.gpuSeconds["ml"] + s.gpuSeconds["cv"])
	t.Logf("week's GPU-hours: ml %.0f, cv %.0f, late %.0f; ml:cv = %.3f:%.3f; cluster busy %.1f%%",
		s.gpuSeconds["ml"]/3600, s.gpuSeconds["cv"]/3600, s.gpuSeconds["late"]/3600, ml, 1-ml, 100*total/(80*7*86400))
	if math.Abs(ml-0.70) > 0.03 {
		t.Fatalf("ml got %.3f of the GPU time against cv, want 0.70 within 0.03", ml)
	}
}
