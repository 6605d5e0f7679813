package e2e

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/fsm"
	"github.com/skein-dev/skein/structs"
)

// sim is one simulated worker of simWorkers. It acts on its view as a
// worker's agent does (agent/node, "The node reads its view"), without
// processes: an allocation placed on it that it has not started yet is
// reported running, and succeeded runFor later (a timer, no goroutine of
// its own); one asked to stop is reported killed, whether it had started
// or not. Its reports go to the leader in batches, sent again until the
// leader takes them, as the agent's reporter sends them.
type sim struct {
	w  *simWorkers
	id string
	// cs holds one client per server, all dialling from the sim's own
	// address.
	cs   []*api.Client
	view *fsm.FSM

	mu sync.Mutex
	// started holds every allocation the sim has acted on (a real node
	// keeps a directory for each), so that it never starts one twice;
	// running the run timers of those not finished yet.
	started map[string]bool
	running map[string]*time.Timer
	pending []simReport
	wasDown bool
	wake    chan struct{}

	// lastBeat is when the leader last took this sim's heartbeat
	// (UnixNano); lapsed says the sim went --stop-after without one since,
	// when a real node would have stopped its jobs.
	lastBeat atomic.Int64
	lapsed   bool
}

// simReport is one allocation update and what the ledger records of it.
type simReport struct {
	u     structs.AllocUpdate
	job   string
	rank  int
	ranks int // the job's Spec.Nodes
}

func newSim(w *simWorkers, id string, cs []*api.Client) *sim {
	return &sim{w: w, id: id, cs: cs, view: fsm.New(nil),
		started: map[string]bool{}, running: map[string]*time.Timer{}, wake: make(chan struct{}, 1)}
}

// leader is the sim's client for the server it takes to lead.
func (m *sim) leader() *api.Client { return m.cs[m.w.leader.Load()] }

// load reads a view the sim's server sent and acts on it.
func (m *sim) load(data []byte) {
	if err := m.view.LoadView(bytes.NewReader(data)); err != nil {
		m.w.failed.Add(1)
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if n, ok := m.view.Node(m.id); ok && n.Status != structs.NodeReady && !m.wasDown {
		m.wasDown = true // the leader marked this sim down: counted once
		m.w.markedDown.Add(1)
	}
	live := map[string]bool{}
	for _, a := range m.view.NodeLiveAllocs(m.id) {
		live[a.ID] = true
		ranks := 1
		if job, ok := m.view.Job(a.JobID); ok {
			ranks = job.Spec.Nodes
		}
		r := simReport{job: a.JobID, rank: a.Rank, ranks: ranks,
			u: structs.AllocUpdate{AllocID: a.ID, At: time.Now()}}
		stop := a.DesiredState == structs.DesiredStop
		switch t := m.running[a.ID]; {
		case !m.started[a.ID]:
			m.started[a.ID] = true
			if stop {
				r.u.State, r.u.ExitCode, r.u.Reason = structs.AllocKilled, -1, "stopped before it started"
				break
			}
			r.u.State = structs.AllocRunning
			m.running[a.ID] = time.AfterFunc(m.w.runFor, func() { m.finish(r) })
		case t != nil && stop:
			t.Stop()
			delete(m.running, a.ID)
			r.u.State, r.u.ExitCode, r.u.Reason = structs.AllocKilled, -1, "stopped"
		default:
			continue // running, or its end is reported or on its way
		}
		m.queue(r)
	}
	// An allocation still running here that the state no longer counts
	// live was ended without the sim (its node marked down, its
	// allocations lost): a healthy job killed. One the view does not
	// hold at all is left alone, as a node's agent leaves it
	// (agent/node, reconcileLocal): the view is behind, as a server
	// restarted on its data dir serves until it has caught up.
	for id, t := range m.running {
		if a, ok := m.view.Alloc(id); !live[id] && ok && !a.Live() {
			t.Stop()
			delete(m.running, id)
			m.w.lostRunning.Add(1)
		}
	}
}

// finish reports a run that went its time: r, as reported running.
func (m *sim) finish(r simReport) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.running[r.u.AllocID] == nil {
		return // stopped meanwhile
	}
	delete(m.running, r.u.AllocID)
	r.u.State, r.u.At = structs.AllocSucceeded, time.Now()
	m.queue(r)
}

// queue adds a report for the reporter; the caller holds mu.
func (m *sim) queue(r simReport) {
	m.pending = append(m.pending, r)
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// report sends the sim's reports to the leader until the sims stop.
func (m *sim) report() {
	defer m.w.wg.Done()
	backoff := 50 * time.Millisecond
	for {
		m.mu.Lock()
		batch := m.pending
		m.mu.Unlock()
		if len(batch) == 0 {
			select {
			case <-m.w.ctx.Done():
				return
			case <-m.wake:
				continue
			}
		}
		us := make([]structs.AllocUpdate, len(batch))
		for i, r := range batch {
			us[i] = r.u
		}
		ctx, cancel := context.WithTimeout(m.w.ctx, 10*time.Second)
		err := m.leader().UpdateAllocs(ctx, m.id, us)
		cancel()
		var apiErr *api.Error
		refused := errors.As(err, &apiErr) && apiErr.StatusCode >= 400 && apiErr.StatusCode < 500
		if err != nil && !refused {
			if m.w.ctx.Err() != nil {
				return
			}
			// Not the leader (503) or not reached: as the agent does,
			// the same batch again after a pause.
			m.w.failed.Add(1)
			select {
			case <-m.w.ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 2*time.Second)
			continue
		}
		backoff = 50 * time.Millisecond
		if refused {
			m.w.refusedReports.Add(int64(len(batch)))
		} else {
			m.w.ledger.record(m.id, batch, time.Now())
		}
		m.mu.Lock()
		m.pending = m.pending[len(batch):]
		m.mu.Unlock()
	}
}

// beat renews the sim's lease every interval, each sim at its own phase,
// as a worker's agent does: through a server other than the leader while
// there is one, else (or when that server does not answer) with the
// leader.
func (m *sim) beat(phase time.Duration) {
	defer m.w.wg.Done()
	select {
	case <-m.w.ctx.Done():
		return
	case <-time.After(phase):
	}
	m.lastBeat.Store(time.Now().UnixNano())
	tick := time.NewTicker(m.w.interval)
	defer tick.Stop()
	for {
		sent := time.Now()
		err := m.renew()
		switch now := time.Now(); {
		case err == nil:
			m.lastBeat.Store(sent.UnixNano())
			m.lapsed = false
		case m.w.ctx.Err() != nil:
			return
		default:
			m.w.failed.Add(1)
			if !m.lapsed && now.Sub(time.Unix(0, m.lastBeat.Load())) >= simStopAfter {
				m.lapsed = true
				m.w.lapses.Add(1)
			}
		}
		select {
		case <-m.w.ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// renew renews the sim's lease once, bounded as a node bounds it: half
// the lease (--stop-after) in all, a quarter through the server it picks.
func (m *sim) renew() error {
	ctx, cancel := context.WithTimeout(m.w.ctx, simStopAfter/2)
	defer cancel()
	if leader := int(m.w.leader.Load()); len(m.cs) > 1 && !m.w.direct {
		relay := rand.N(len(m.cs) - 1)
		if relay >= leader {
			relay++
		}
		rctx, rcancel := context.WithTimeout(ctx, simStopAfter/4)
		_, err := m.cs[relay].Heartbeat(rctx, m.id)
		rcancel()
		if err == nil {
			return nil
		}
	}
	_, err := m.leader().Heartbeat(ctx, m.id)
	return err
}

// watch keeps the sim's view watch open with server (an index of cs), as a
// worker's agent does, and acts on each view it is sent.
func (m *sim) watch(server int) {
	defer m.w.wg.Done()
	var hash, leader string
	var index uint64
	for m.w.ctx.Err() == nil {
		v, err := m.cs[server].NodeView(m.w.ctx, m.id, hash, index, leader, 20*time.Second)
		if err != nil {
			if m.w.ctx.Err() == nil {
				m.w.failed.Add(1)
			}
			select {
			case <-m.w.ctx.Done():
			case <-time.After(250 * time.Millisecond):
			}
			continue
		}
		if v.Leader != leader {
			m.w.follow(v.Leader)
		}
		if v.Data != nil && v.Hash != hash {
			m.load(v.Data)
			index = v.Index
		}
		hash, leader = v.Hash, v.Leader
	}
}

// simStopAfter is the agent's --stop-after (agent.DefaultStopAfter): a
// node that has not renewed its lease for this long stops its jobs.
const simStopAfter = 2500 * time.Millisecond

// simRenewEvery is how often a sim renews its lease, as a worker does
// (agent.WorkerHeartbeatInterval: a quarter of --stop-after).
const simRenewEvery = simStopAfter / 4

// simLedger records what the sims reported, as the leader acknowledged
// it: which sim ran each rank of each job, and when each job was
// running and done.
type simLedger struct {
	mu   sync.Mutex
	jobs map[string]*simJob
	// done counts jobs every rank of which was reported succeeded;
	// lastDone is when the last of them was.
	done     int
	lastDone time.Time
}

// simJob is what the sims reported of one job.
type simJob struct {
	// runs holds, by rank, the nodes that reported the rank running (a
	// rank run twice, on one node or two, is there twice).
	runs      map[int][]string
	running   time.Time // when the last rank's running report was taken
	succeeded int       // ranks reported succeeded
	ended     int       // ranks reported ended in any way
}

func newSimLedger() *simLedger { return &simLedger{jobs: map[string]*simJob{}} }

// record notes the reports of node that the leader took at.
func (l *simLedger) record(node string, batch []simReport, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range batch {
		j := l.jobs[r.job]
		if j == nil {
			j = &simJob{runs: map[int][]string{}}
			l.jobs[r.job] = j
		}
		switch r.u.State {
		case structs.AllocRunning:
			j.runs[r.rank] = append(j.runs[r.rank], node)
			if at.After(j.running) {
				j.running = at
			}
		case structs.AllocSucceeded:
			j.succeeded++
			j.ended++
			if j.succeeded == r.ranks {
				l.done++
				if at.After(l.lastDone) {
					l.lastDone = at
				}
			}
		default:
			j.ended++
		}
	}
}

// progress is how many jobs are done, and when the last was.
func (l *simLedger) progress() (int, time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.done, l.lastDone
}

// job is a copy of what the sims reported of job id (nil: nothing).
func (l *simLedger) job(id string) *simJob {
	l.mu.Lock()
	defer l.mu.Unlock()
	j := l.jobs[id]
	if j == nil {
		return nil
	}
	cp := *j
	cp.runs = make(map[int][]string, len(j.runs))
	for r, ns := range j.runs {
		cp.runs[r] = append([]string(nil), ns...)
	}
	return &cp
}
