package leader

import (
	"context"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/skein-dev/skein/cluster"
	"github.com/skein-dev/skein/fsm"
	"github.com/skein-dev/skein/structs"
)

// A new leader's barrier waits barrierTimeout for the entries before its
// term to apply, and barrierRetry between tries.
const (
	barrierTimeout = 10 * time.Second
	barrierRetry   = 100 * time.Millisecond
)

// Raft is what the leader needs of Raft.
type Raft interface {
	Barrier(timeout time.Duration) error
	IsLeader() bool
	LeaderEvents() <-chan bool
}

// Config configures a Leader.
type Config struct {
	// NodeID is this node's ID: its own liveness is not judged.
	NodeID string
	FSM    *fsm.FSM
	Raft   Raft
	// Apply writes one entry through Raft and returns what the FSM
	// returned.
	Apply func(structs.MessageType, any) (any, error)
	// Gossip returns what gossip says ahead of the state: the members it
	// has declared failed and the GPUs members announce as unhealthy.
	Gossip func() Gossip
	// Liveness timings (see the agent's Config): servers renew their
	// leases every HeartbeatInterval, workers every
	// WorkerHeartbeatInterval (0: HeartbeatInterval).
	HeartbeatInterval       time.Duration
	WorkerHeartbeatInterval time.Duration
	StopAfter               time.Duration
	DownAfter               time.Duration
	// StaleLeader is how long a leader cut off from the voters may go on
	// taking itself for the leader, and answering renewals, after they
	// last answered it (Raft's leader lease and its check,
	// cluster.StaleLeaderBound). A new leader counts the nodes' silence
	// only from that long after it took office (lead).
	StaleLeader time.Duration
	// JobRetention is how long a finished job stays in the state.
	JobRetention time.Duration
	// UsageInterval is how often the running allocations' use is
	// charged to their accounts (DefaultUsageInterval when 0), and
	// UsageHalfLife how long recorded usage takes to count for half
	// (structs.DefaultUsageHalfLife when 0).
	UsageInterval time.Duration
	UsageHalfLife time.Duration
	// NodeGC is how long a node stays in the state once it is down or
	// has left, with nothing live on it (0: for ever); Forget removes it,
	// from Raft too where it is a server.
	NodeGC time.Duration
	Forget func(nodeID, reason string) error
	// AutoscaleInterval is how often autoscaled services are looked at
	// (DefaultAutoscaleInterval when 0).
	AutoscaleInterval time.Duration
	// PassInterval is the least time between the start of a scheduling
	// pass that committed while other changes came in and the next
	// pass's (DefaultPassInterval when 0; see nextPass), and After the timer
	// the loop waits out the rest of it on (nil: time.After); tests hold
	// it to see a burst coalesced.
	PassInterval time.Duration
	After        func(time.Duration) <-chan time.Time
	// Starved reports whether this node's process is short of CPU
	// (agent/overload; nil: never): passes are then spaced by
	// StarvedPassInterval, so the CPU goes to Raft and the leases first.
	Starved func() bool
	// Mail, when set, is handed each mail a job's --mail-type asks for
	// (mail.go), in order, from the leader's duties: it must not block
	// (the agent runs its --mail-prog in the background). Nil sends none.
	Mail func(Mail)
	// Metrics records what the leader does (agent/metrics); nil records
	// nothing.
	Metrics Metrics
	Logger  hclog.Logger
}

// Metrics is what the leader reports of its work.
type Metrics interface {
	// Pass records one scheduling pass: how long it took, its commit
	// included, and how many jobs it placed.
	Pass(took time.Duration, placed int)
	// Placed records one job placed, as it was queued, at the time the
	// leader stamped; previous are the allocations of its attempt before
	// (none on its first placement).
	Placed(job *structs.Job, previous []*structs.Allocation, at time.Time)
	// Preempted records running jobs stopped to make room for others.
	Preempted(victims int)
	// Leading records that this node became or stopped being the leader.
	Leading(bool)
}

// Gossip is what the leader hears by gossip, ahead of the state. It only
// keeps work off nodes and GPUs; the state decides everything else.
type Gossip struct {
	// Failed holds the IDs of the members gossip has declared failed.
	Failed map[string]bool
	// Unhealthy maps a member's ID to the mask of GPU indexes (bit i:
	// GPU i) it announces as unhealthy, ahead of its health report.
	Unhealthy map[string]uint64
}

// Leader carries out the leader's duties while this node leads.
type Leader struct {
	cfg  Config
	log  hclog.Logger
	fsm  *fsm.FSM
	kick chan struct{}
	// passMu is held by each scheduling pass; halted, set under it by
	// StopScheduling, makes every later pass place nothing, and halt is
	// closed then so that the scheduling loop ends. burst says whether
	// other entries came in while the last pass committed (lastBurst).
	passMu sync.Mutex
	halted bool
	halt   chan struct{}
	burst  bool

	mu sync.Mutex
	// heard is when each node's heartbeat last reached this node.
	heard map[string]time.Time
	// as is what autoscaling remembers (autoscale.go).
	as autoscaler
}

// New returns a Leader; Follow runs it.
func New(cfg Config) *Leader {
	return &Leader{cfg: cfg, log: cfg.Logger, fsm: cfg.FSM, kick: make(chan struct{}, 1),
		halt: make(chan struct{}), heard: map[string]time.Time{}}
}

// StopScheduling ends this node's scheduling for good, for an agent that
// is shutting down: it runs no scheduling pass from now on, whether it
// leads now or later, and when StopScheduling returns none is under way
// either. The leader's other duties go on until Follow ends.
func (l *Leader) StopScheduling() {
	l.passMu.Lock()
	defer l.passMu.Unlock()
	if !l.halted {
		l.halted = true
		close(l.halt)
	}
}

// Follow follows Raft's leadership events until ctx ends: while this node
// leads, it runs the leader's duties; when leadership goes, they stop
// with it.
func (l *Leader) Follow(ctx context.Context) {
	var stop, done chan struct{}
	stopLeading := func() {
		if stop != nil {
			close(stop)
			<-done
			stop, done = nil, nil
			l.log.Info("leadership lost; scheduling stopped")
		}
	}
	defer stopLeading()
	// Leadership gained before this loop started is not lost: check once.
	leading := l.cfg.Raft.IsLeader()
	if leading && l.cfg.Metrics != nil {
		l.cfg.Metrics.Leading(true)
	}
	for {
		if leading && stop == nil {
			stop, done = make(chan struct{}), make(chan struct{})
			go func(stop, done chan struct{}) {
				defer close(done)
				l.lead(stop)
			}(stop, done)
		} else if !leading {
			stopLeading()
		}
		select {
		case <-ctx.Done():
			return
		case leading = <-l.cfg.Raft.LeaderEvents():
			if l.cfg.Metrics != nil {
				l.cfg.Metrics.Leading(leading)
			}
		}
	}
}

// lead runs the leader's duties until stop closes: a barrier so the FSM
// holds every committed entry, then the node monitor, the removal of
// expired jobs, the autoscaler, the rollouts of service updates, the
// drains, the jobs' mail and the scheduling loop.
func (l *Leader) lead(stop <-chan struct{}) {
	for {
		err := l.cfg.Raft.Barrier(barrierTimeout)
		if err == nil {
			break
		}
		l.log.Warn("leader barrier failed; retrying", "error", err)
		select {
		case <-stop:
			return
		case <-time.After(barrierRetry):
		}
	}
	l.announce()
	l.log.Info("leading: scheduling started")
	since := l.silenceFrom(time.Now())
	var duties sync.WaitGroup
	defer duties.Wait()
	duties.Add(7)
	go func() {
		defer duties.Done()
		l.mailLoop(stop)
	}()
	go func() {
		defer duties.Done()
		l.monitorNodes(stop, since)
	}()
	go func() {
		defer duties.Done()
		l.autoscaleLoop(stop)
	}()
	go func() {
		defer duties.Done()
		l.rolloutLoop(stop)
	}()
	go func() {
		defer duties.Done()
		l.gcLoop(stop)
	}()
	go func() {
		defer duties.Done()
		l.usageLoop(stop)
	}()
	go func() {
		defer duties.Done()
		l.drainLoop(stop)
	}()
	l.scheduleLoop(stop)
}

// silenceFrom is when a leader that took office at now starts counting
// the nodes' silence. The voters that elected it stopped answering the
// leader before when they voted, before now; that one steps down at most
// StaleLeader after, and until then may answer renewals, which run a
// node's lease StopAfter past their sending. Counted from now, a node
// whose renewals only the old leader heard could be declared lost while
// its lease still ran; counted from when the old one cannot have heard
// any, never.
func (l *Leader) silenceFrom(now time.Time) time.Time {
	return now.Add(l.cfg.StaleLeader)
}

// announce commits the entry that says this node leads now, the event
// log's "leader elected". It changes no other state, so a failure (most
// likely leadership already lost again) is only logged.
func (l *Leader) announce() {
	req := structs.LeaderElectedRequest{NodeID: l.cfg.NodeID, At: now()}
	if _, err := l.cfg.Apply(structs.LeaderElectedType|structs.IgnoreUnknownTypeFlag, req); err != nil {
		l.log.Warn("cannot record the leadership in the state", "error", err)
	}
}

// Kick makes the leader plan again without a state change: gossip said
// something that changes what may be placed (a GPU mask).
func (l *Leader) Kick() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// MemberEvent records in the state, while this node leads, that a node
// left the cluster gracefully. A member back from failed and a change of
// metadata (the agent passes on those that return a masked GPU) make it
// plan again: either may free work that waits, and neither changes the
// state.
func (l *Leader) MemberEvent(ev cluster.MemberEvent) {
	if !l.cfg.Raft.IsLeader() {
		return
	}
	switch ev.Type {
	case cluster.EventJoin, cluster.EventUpdate:
		l.Kick()
	case cluster.EventLeft:
		if n, ok := l.fsm.Node(ev.Member.ID); ok && n.Status != structs.NodeLeft {
			if err := l.setNodeStatus(n.ID, n.Name, structs.NodeLeft, "left the cluster"); err != nil {
				l.log.Warn("record node leave", "node", n.Name, "error", err)
			}
		}
	}
}

func now() time.Time { return time.Now().UTC() }
