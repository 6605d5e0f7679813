package leader

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/skein-dev/skein/cluster"
	"github.com/skein-dev/skein/fsm"
	"github.com/skein-dev/skein/structs"
)

// harness is a Leader over a real FSM whose writes apply at once, as a
// one-node cluster's would.
type harness struct {
	t *testing.T
	f *fsm.FSM
	// mu orders the writes, as Raft's log does: the scheduling loop
	// commits while a test submits.
	mu  sync.Mutex
	idx uint64
	l   *Leader
	// moved, when set, runs while a pass has its view and is deciding:
	// the state moves under the plan.
	moved func()
	// failed are the members gossip declares failed.
	failed map[string]bool
}

func newHarness(t *testing.T) *harness {
	h := &harness{t: t, f: fsm.New(nil)}
	h.l = New(Config{
		NodeID: "leader",
		FSM:    h.f,
		Apply:  h.apply,
		Gossip: func() Gossip {
			if m := h.moved; m != nil {
				h.moved = nil
				m()
			}
			return Gossip{Failed: h.failed}
		},
		HeartbeatInterval: time.Second,
		StopAfter:         3 * time.Second,
		DownAfter:         5 * time.Second,
		JobRetention:      time.Hour,
		Logger:            hclog.NewNullLogger(),
	})
	return h
}

func (h *harness) apply(t structs.MessageType, msg any) (any, error) {
	buf, err := structs.Encode(t, msg)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	h.idx++
	resp := h.f.Apply(&raft.Log{Index: h.idx, Type: raft.LogCommand, Data: buf})
	h.mu.Unlock()
	if err, ok := resp.(error); ok {
		return nil, err
	}
	return resp, nil
}

func (h *harness) must(t structs.MessageType, msg any) {
	h.t.Helper()
	if _, err := h.apply(t, msg); err != nil {
		h.t.Fatalf("%s: %v", t, err)
	}
}

// node registers a ready node with one GPU that the leader has just heard.
func (h *harness) node(id string) {
	h.must(structs.NodeRegisterType, structs.NodeRegisterRequest{Node: structs.Node{
		ID: id, Name: id, Status: structs.NodeReady, CPUs: 8, MemoryMiB: 1024,
		GPUs: []structs.GPU{{Index: 0, UUID: "GPU-" + id, Model: "H100", MemoryMiB: 81920, Healthy: true}},
	}, At: time.Now().UTC()})
	h.l.HeardFrom(id, time.Now())
}

func (h *harness) submit(id string, spec structs.JobSpec, at time.Time) {
	spec.Command = []string{"true"}
	h.must(structs.JobSubmitType, structs.JobSubmitRequest{JobID: id, Spec: spec, SubmittedAt: at})
}

func (h *harness) job(id string) *structs.Job {
	h.t.Helper()
	j, ok := h.f.Job(id)
	if !ok {
		h.t.Fatalf("job %s is gone", id)
	}
	return j
}

func TestLeader_APlanTheStateMovedPastIsCheckedAndRefusedPartsAreNotSent(t *testing.T) {
	h := newHarness(t)
	h.node("n1")
	h.submit("a", structs.JobSpec{GPUs: 1}, time.Now().UTC())
	// The node goes down after the pass took its view: the placement on
	// it must not be committed, and the pass must say so.
	h.moved = func() {
		h.must(structs.NodeStatusType, structs.NodeStatusRequest{NodeID: "n1", Status: structs.NodeDown, At: time.Now().UTC()})
	}
	before := h.idx
	refused, _, err := h.l.pass()
	if err != nil || !refused {
		t.Fatalf("pass over a moved state: refused %v, error %v; want refused", refused, err)
	}
	if j := h.job("a"); j.State != structs.JobQueued || len(h.f.Allocs("a")) != 0 {
		t.Fatalf("job a is %s with %d allocations; want it queued, the refused placement never sent", j.State, len(h.f.Allocs("a")))
	}
	if h.idx != before+1 {
		t.Fatalf("%d entries written; want only the node status, no plan", h.idx-before)
	}
	// Planned again from the fresh state, the job waits and says why.
	refused, _, err = h.l.pass()
	if err != nil || refused {
		t.Fatalf("second pass: refused %v, error %v", refused, err)
	}
	if j := h.job("a"); j.State != structs.JobQueued || !strings.Contains(j.Reason, "node down") {
		t.Fatalf("job a is %s (%q); want it queued for want of a ready node", j.State, j.Reason)
	}
}

func TestLeader_APassCommitsItsCancelsWithItsPlacements(t *testing.T) {
	h := newHarness(t)
	h.node("n1")
	at := time.Now().UTC()
	h.submit("dep", structs.JobSpec{}, at)
	h.must(structs.JobCancelType, structs.JobCancelRequest{JobID: "dep", At: at})
	h.submit("after-ok", structs.JobSpec{After: []structs.Dependency{{JobID: "dep", Condition: structs.AfterOK}}}, at)
	h.submit("free", structs.JobSpec{GPUs: 1}, at)
	before := h.idx
	if refused, _, err := h.l.pass(); err != nil || refused {
		t.Fatalf("pass: refused %v, error %v", refused, err)
	}
	if h.idx != before+1 {
		t.Fatalf("%d entries written; want the pass's cancel and placement in one", h.idx-before)
	}
	if j := h.job("after-ok"); j.State != structs.JobCancelled || !strings.Contains(j.Reason, "dependency") {
		t.Fatalf("job after-ok is %s (%q); want it cancelled for its dependency", j.State, j.Reason)
	}
	if j := h.job("free"); j.State != structs.JobRunning {
		t.Fatalf("job free is %s, want running", j.State)
	}
}

func TestLeader_CollectRemovesExpiredJobsNothingNeeds(t *testing.T) {
	h := newHarness(t)
	now := time.Now().UTC()
	long, lately := now.Add(-2*time.Hour), now.Add(-10*time.Minute)
	for id, finished := range map[string]time.Time{"old": long, "needed": long, "recent": lately} {
		h.submit(id, structs.JobSpec{}, finished)
		h.must(structs.JobCancelType, structs.JobCancelRequest{JobID: id, At: finished})
	}
	h.submit("waiting", structs.JobSpec{After: []structs.Dependency{{JobID: "needed", Condition: structs.AfterAny}}}, now)
	more, err := h.l.collect()
	if err != nil || more {
		t.Fatalf("collect: more %v, error %v", more, err)
	}
	if _, ok := h.f.Job("old"); ok {
		t.Error("a job finished for twice the retention is still there")
	}
	for _, id := range []string{"needed", "recent", "waiting"} {
		h.job(id)
	}
	// Nothing left to remove: no entry is written.
	before := h.idx
	if _, err := h.l.collect(); err != nil || h.idx != before {
		t.Fatalf("a collect with nothing due wrote %d entries (%v)", h.idx-before, err)
	}
}

func TestLeader_NoWorkGoesToANodeGossipDeclaredFailed(t *testing.T) {
	h := newHarness(t)
	h.node("n1") // heard just now, but gossip says it failed
	h.failed = map[string]bool{"n1": true}
	h.submit("a", structs.JobSpec{GPUs: 1}, time.Now().UTC())
	if _, _, err := h.l.pass(); err != nil {
		t.Fatal(err)
	}
	if j := h.job("a"); j.State != structs.JobQueued || !strings.Contains(j.Reason, "node unresponsive") {
		t.Fatalf("job a is %s (%q); want it kept off the suspected node", j.State, j.Reason)
	}
	h.failed = nil
	if _, _, err := h.l.pass(); err != nil {
		t.Fatal(err)
	}
	if j := h.job("a"); j.State != structs.JobRunning {
		t.Fatalf("job a is %s (%q) once gossip no longer suspects the node; want it running", j.State, j.Reason)
	}
}

// An agent that shuts down stops scheduling at once: its scheduling loop
// ends, and no pass places the work that waits.
func TestLeader_StopSchedulingEndsTheLoopAndPlacesNothing(t *testing.T) {
	h := newHarness(t)
	h.node("n1")
	stop := make(chan struct{})
	defer close(stop)
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		h.l.scheduleLoop(stop)
	}()
	h.l.StopScheduling()
	<-ended              // a loop that went on would hang the test here
	h.l.StopScheduling() // a second call is harmless
	h.submit("a", structs.JobSpec{GPUs: 1}, time.Now().UTC())
	before := h.idx
	if refused, _, err := h.l.pass(); err != nil || refused {
		t.Fatalf("pass after StopScheduling: refused %v, error %v", refused, err)
	}
	if j := h.job("a"); j.State != structs.JobQueued || len(h.f.Allocs("a")) != 0 || h.idx != before {
		t.Fatalf("job a is %s with %d allocations and %d entries written; want it queued, nothing written",
			j.State, len(h.f.Allocs("a")), h.idx-before)
	}
}

// A node that speaks again after a silence changes no state, so the
// leader's scheduler must be woken for the work that waits for it.
func TestLeader_ANodeHeardAgainAfterSilenceWakesTheScheduler(t *testing.T) {
	h := newHarness(t)
	h.node("n1")
	drain := func() {
		select {
		case <-h.l.kick:
		default:
		}
	}
	drain()
	h.l.HeardFrom("n1", time.Now())
	select {
	case <-h.l.kick:
		t.Fatal("a heartbeat from a node heard a moment ago woke the scheduler")
	default:
	}
	h.l.HeardFrom("n1", time.Now().Add(silentAfter*h.l.cfg.HeartbeatInterval+time.Second))
	select {
	case <-h.l.kick:
	default:
		t.Fatal("a node heard again after a silence did not wake the scheduler")
	}
	h.l.HeardFrom("n2", time.Now())
	select {
	case <-h.l.kick:
	default:
		t.Fatal("the first heartbeat of a node did not wake the scheduler")
	}
}

// leading is a Raft whose node leads.
type leading struct{}

func (leading) Barrier(time.Duration) error { return nil }
func (leading) IsLeader() bool              { return true }
func (leading) LeaderEvents() <-chan bool   { return nil }

// A member gossip declared failed that is alive again changes no state
// either: its return must wake the scheduler too.
func TestLeader_AMemberAliveAgainWakesTheScheduler(t *testing.T) {
	h := newHarness(t)
	h.l.cfg.Raft = leading{}
	h.l.MemberEvent(cluster.MemberEvent{Type: cluster.EventJoin, Member: cluster.Member{ID: "n1"}})
	select {
	case <-h.l.kick:
	default:
		t.Fatal("a member alive again did not wake the scheduler")
	}
}

// A new leader's first entry says so in the event log, by the node's name.
func TestLeader_AnnounceRecordsTheLeaderInTheEventLog(t *testing.T) {
	h := newHarness(t)
	h.node("leader")
	h.l.announce()
	evs := h.f.RecentEvents("", "leader", 10)
	last := evs[len(evs)-1]
	if last.Kind != structs.EventLeaderElected || last.NodeName != "leader" || last.Index != h.idx {
		t.Fatalf("newest event of the leader %+v, want leader-elected at index %d", last, h.idx)
	}
}

// A node already down when a leader takes over stays down until this
// leader hears from it: the grace a new leader gives every node (silence
// counted from when it began to lead) does not bring it back as ready.
func TestLeader_ANodeDownWhenItTookOverStaysDownUntilHeardFrom(t *testing.T) {
	h := newHarness(t)
	h.node("n1")
	h.must(structs.NodeStatusType, structs.NodeStatusRequest{NodeID: "n1", Status: structs.NodeDown, At: time.Now().UTC()})
	fresh := New(Config{NodeID: "leader", FSM: h.f, Apply: h.apply, HeartbeatInterval: time.Second,
		StopAfter: 3 * time.Second, DownAfter: 5 * time.Second, Logger: hclog.NewNullLogger()})
	fresh.checkNodes(time.Now())
	if n, _ := h.f.Node("n1"); n.Status != structs.NodeDown {
		t.Fatalf("a new leader made the down node %s (%s) before hearing from it", n.Status, n.StatusReason)
	}
	fresh.HeardFrom("n1", time.Now())
	fresh.checkNodes(time.Now())
	if n, _ := h.f.Node("n1"); n.Status != structs.NodeReady {
		t.Fatalf("a node heard from again is %s, want ready", n.Status)
	}
}

// A new leader may take office while the one before, cut off from the
// voters, still answers renewals until its lease runs out: it counts the
// nodes' silence only from then, so a node renewed by the old leader is
// not marked down for the time it took, nor its jobs declared lost.
func TestLeader_ANewLeaderCountsSilenceOnlyOnceTheOldOneMustHaveStepped(t *testing.T) {
	for _, c := range []struct {
		name  string
		stale time.Duration
		want  structs.NodeStatus
	}{
		{"the old leader's lease over at once", 0, structs.NodeDown},
		{"the old leader stepping down 2 s after", 2 * time.Second, structs.NodeReady},
	} {
		h := newHarness(t)
		h.node("n1")
		fresh := New(Config{NodeID: "leader", FSM: h.f, Apply: h.apply, HeartbeatInterval: time.Second,
			StopAfter: 3 * time.Second, DownAfter: 5 * time.Second, StaleLeader: c.stale, Logger: hclog.NewNullLogger()})
		// Took office 4 s ago, past StopAfter (3 s), and never heard n1.
		fresh.checkNodes(fresh.silenceFrom(time.Now().Add(-4 * time.Second)))
		if n, _ := h.f.Node("n1"); n.Status != c.want {
			t.Errorf("%s: node %s (%s), want %s", c.name, n.Status, n.StatusReason, c.want)
		}
	}
}

// A monitor held up while the old leader's lease may still run does not
// bring its silence clock back to now: it counts from the later of the
// two.
func TestLeader_AStallDoesNotBringTheSilenceClockBeforeTheOldLeadersEnd(t *testing.T) {
	h := newHarness(t)
	now := time.Now()
	future := now.Add(2 * time.Second)
	if got := h.l.afterStall(future, now.Add(-5*time.Second), now); !got.Equal(future) {
		t.Errorf("after a stall the clock counts from %v, want %v (the old leader's end)", got.Sub(now), future.Sub(now))
	}
}

// A leader whose node monitor was held up (short of CPU, or paused)
// counts the nodes' silence afresh: the heartbeats it did not take
// meanwhile mark no node down. On time, the same silence does.
func TestLeader_ANodeMonitorHeldUpMarksNoNodeDownForItsOwnSilence(t *testing.T) {
	for _, c := range []struct {
		name string
		last time.Duration // since the monitor's last check
		want structs.NodeStatus
	}{
		{"on time", time.Second, structs.NodeDown},
		{"held up", 5 * time.Second, structs.NodeReady},
	} {
		h := newHarness(t)
		h.node("n1")
		now := time.Now()
		h.l.HeardFrom("n1", now.Add(-4*time.Second)) // past StopAfter (3 s)
		since := h.l.afterStall(now.Add(-time.Minute), now.Add(-c.last), now)
		h.l.checkNodes(since)
		if n, _ := h.f.Node("n1"); n.Status != c.want {
			t.Errorf("%s: silent node %s (%s), want %s", c.name, n.Status, n.StatusReason, c.want)
		}
	}
}

// TestLeader_AWorkerIsNotSilentBetweenTwoOfItsRenewals: workers renew
// their leases less often than servers; the leader takes a node for
// silent only when it missed two of a worker's renewals, not a server's
// four heartbeats.
func TestLeader_AWorkerIsNotSilentBetweenTwoOfItsRenewals(t *testing.T) {
	h := newHarness(t)
	h.l.cfg.HeartbeatInterval = 100 * time.Millisecond
	h.l.cfg.WorkerHeartbeatInterval = time.Second
	nodes := []*structs.Node{{ID: "w1"}}
	now := time.Now()
	h.l.HeardFrom("w1", now)
	for _, tc := range []struct {
		after  time.Duration
		silent bool
	}{
		{500 * time.Millisecond, false}, // past four server intervals
		{1500 * time.Millisecond, false},
		{2500 * time.Millisecond, true}, // past two worker intervals
	} {
		if got := h.l.silentNodes(nodes, nil, now.Add(tc.after))["w1"]; got != tc.silent {
			t.Errorf("heard %s ago: silent = %v, want %v", tc.after, got, tc.silent)
		}
	}
}
