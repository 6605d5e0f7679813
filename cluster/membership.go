package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	autopilot "github.com/hashicorp/raft-autopilot"
)

// leaderLoop drains raft's NotifyCh: it starts and stops the leader's
// membership work (with gossip on) and forwards every change to
// LeaderEvents.
func (c *Cluster) leaderLoop() {
	var stop func()
	defer func() {
		if stop != nil {
			stop()
		}
	}()
	for {
		select {
		case <-c.stopped:
			return
		case leader := <-c.raftNotify:
			if c.autopilot != nil {
				switch {
				case leader && stop == nil:
					stop = c.startLeading()
				case !leader && stop != nil:
					stop()
					stop = nil
				}
			}
			select {
			case c.notifyCh <- leader:
			case <-c.stopped:
				return
			}
		}
	}
}

// startLeading starts autopilot and the reconcile loop and returns the
// function that stops both. Autopilot starts inside the loop's goroutine
// because its first state update waits on peers, and LeaderEvents must
// not wait for that.
func (c *Cluster) startLeading() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.autopilot.Start(ctx)
		c.reconcileLoop(ctx)
	}()
	return func() {
		cancel()
		<-done
		<-c.autopilot.Stop()
	}
}

// Reconcile asks the leader's reconcile to run now, as after a change of
// what Config.Revoked or Config.Admitted says: a revoked server leaves
// raft without waiting for the next ReconcileInterval. It returns at once.
func (c *Cluster) Reconcile() { kick(c.reconcileKick) }

// reconcileLoop adds alive members missing from raft as non-voters and
// asks autopilot to remove those that left, at once on gaining leadership,
// on every member event and every ReconcileInterval. Promotions,
// demotions and reaping are autopilot's (with c's promoter).
func (c *Cluster) reconcileLoop(ctx context.Context) {
	tick := time.NewTicker(c.cfg.ReconcileInterval)
	defer tick.Stop()
	for {
		c.reconcileMembers()
		select {
		case <-ctx.Done():
			return
		case <-c.reconcileKick:
		case <-tick.C:
		}
	}
}

// reconcileMembers removes revoked servers from raft, adds alive admitted
// members missing from it and asks autopilot to prune those that left.
// Gossip membership alone never makes a raft member: a member that is
// not admitted (or is revoked) is skipped, and logged once.
func (c *Cluster) reconcileMembers() {
	conf, err := c.configuration()
	if err != nil {
		c.logger.Debug("reconcile: read raft configuration", "error", err)
		return
	}
	defer c.refused.endRound()
	if c.removeRevoked(conf) {
		return // no longer the leader
	}
	inRaft := map[string]string{}
	for _, s := range conf.Servers {
		inRaft[string(s.ID)] = string(s.Address)
	}
	members := c.Members()
	room := c.serverRoom(conf)
	prune := false
	for _, m := range members {
		addr, ok := inRaft[m.ID]
		switch {
		case m.Status == StatusFailed || m.Status == StatusLeft:
			prune = prune || ok
		case m.RaftAddr == "" || (ok && addr == m.RaftAddr):
		case !ok && room == 0:
			// A worker: the servers are enough.
		case c.refusal(m.ID) != "":
			if why := c.refusal(m.ID); c.refused.note(m.ID, why) {
				c.logger.Info("not adding member to raft", "id", m.ID, "reason", why)
			}
		default:
			if !ok {
				room--
			}
			c.logger.Info("adding server to raft", "id", m.ID, "addr", m.RaftAddr, "known", ok)
			err := c.autopilot.AddServer(&autopilot.Server{
				ID: raft.ServerID(m.ID), Name: m.ID, Address: raft.ServerAddress(m.RaftAddr),
				NodeStatus: autopilot.NodeAlive, RaftVersion: raft.ProtocolVersionMax,
			})
			if err != nil {
				c.logger.Warn("add server to raft", "id", m.ID, "error", err)
			}
		}
	}
	if prune {
		c.autopilot.RemoveDeadServers()
	}
}

// serverRoom is how many more members raft may take (-1: no bound), and
// removes the alive non-voters beyond Config.Servers (the highest IDs
// first), which then work outside raft. Alive servers count, and so do
// those failed in gossip for less than DeadServerGrace, which hold their
// place (never removed here): a member short of CPU misses its probes,
// is declared failed and refutes it moments later (60 agents on two
// cores: docs/benchmarks-history.md, "2026-12-05, midday: the burst clean
// at the defaults"), and taking a worker into raft in its
// place at once would send that worker the whole state, then take one
// of them out again, work the leader does when it has least time for
// it. One failed for longer leaves room for a worker, as the promoter
// gives a dead voter's vote to a non-voter after the same grace.
func (c *Cluster) serverRoom(conf raft.Configuration) int {
	if c.cfg.Servers == 0 {
		return -1
	}
	now := time.Now()
	voters, held := 0, 0
	var standbys []string // alive ones
	for _, s := range conf.Servers {
		id := string(s.ID)
		m, known := c.member(id)
		switch {
		case id != c.cfg.NodeID && (!known || m.Status != StatusAlive):
			if known && m.Status == StatusFailed && now.Sub(m.since) < c.cfg.DeadServerGrace {
				held++
			}
		case s.Suffrage == raft.Voter:
			voters++
		default:
			standbys = append(standbys, id)
		}
	}
	capacity := c.cfg.Servers
	slices.Sort(standbys)
	for len(standbys) > 0 && voters+held+len(standbys) > capacity {
		id := standbys[len(standbys)-1]
		standbys = standbys[:len(standbys)-1]
		c.logger.Info("removing a non-voter beyond the servers kept; it works outside raft", "id", id, "servers", capacity)
		if err := c.RemoveServer(id); err != nil {
			c.logger.Warn("remove a non-voter beyond the servers kept", "id", id, "error", err)
		}
	}
	return max(0, capacity-voters-held-len(standbys))
}

// HandOver makes a leader hand leadership to another voter, as the first
// step of a leave; it does nothing on a node that does not lead. A sole
// voter of a cluster of several servers cannot hand over (ErrLeave).
func (c *Cluster) HandOver() error {
	if !c.IsLeader() {
		return nil
	}
	conf, err := c.configuration()
	if err != nil {
		return fmt.Errorf("leave: %w", err)
	}
	others := 0
	for _, s := range conf.Servers {
		if s.Suffrage == raft.Voter && string(s.ID) != c.cfg.NodeID {
			others++
		}
	}
	if others == 0 && len(conf.Servers) > 1 {
		return fmt.Errorf("%w: this node is the only voter", ErrLeave)
	}
	if others > 0 {
		if err := c.LeadershipTransfer(); err != nil {
			return fmt.Errorf("leave: %w", err)
		}
	}
	return nil
}

// AnnounceLeave tells the other members, by gossip, that this node
// leaves (not fails), within timeout. Without gossip it does nothing.
func (c *Cluster) AnnounceLeave(timeout time.Duration) error {
	if c.gossip == nil {
		return nil
	}
	deadline := time.Now().Add(timeout)
	// memberlist reports a leave and a failure alike; the leaving flag in
	// this node's meta, sent (and waited for) before the leave, tells the
	// others which it is.
	c.leaving.Store(true)
	g := c.gossip
	g.mu.Lock()
	defer g.mu.Unlock()
	if c.isStopped() {
		return fmt.Errorf("leave: %w", ErrShutdown)
	}
	err := g.updateNode(max(time.Until(deadline), time.Millisecond))
	if err == nil {
		err = g.ml.Leave(max(time.Until(deadline), time.Millisecond))
	}
	if err != nil {
		return fmt.Errorf("leave: broadcast: %w", err)
	}
	return nil
}

// configuration returns the latest raft configuration.
func (c *Cluster) configuration() (raft.Configuration, error) {
	var f raft.ConfigurationFuture
	err := c.wait(func() raft.Future {
		f = c.raft.GetConfiguration()
		return f
	})
	if err != nil {
		return raft.Configuration{}, err
	}
	return f.Configuration(), nil
}

// newAutopilot builds the autopilot the leader runs.
func (c *Cluster) newAutopilot() *autopilot.Autopilot {
	return autopilot.New(apRaft{c}, &apDelegate{c: c},
		autopilot.WithLogger(c.logger),
		autopilot.WithUpdateInterval(c.cfg.ReconcileInterval),
		autopilot.WithReconcileInterval(c.cfg.ReconcileInterval),
		autopilot.WithPromoter(&promoter{c: c}),
	)
}

// apDelegate tells autopilot what gossip knows and fetches server stats.
type apDelegate struct {
	c        *Cluster
	mu       sync.Mutex
	removing map[raft.ServerID]bool
}

func (d *apDelegate) AutopilotConfig() *autopilot.Config {
	return &autopilot.Config{
		CleanupDeadServers: true,
		// Followers hear from the leader every HeartbeatTimeout/10; four
		// heartbeat timeouts without contact means something is wrong.
		LastContactThreshold:    4 * d.c.cfg.Timing.HeartbeatTimeout,
		MaxTrailingLogs:         maxAppendEntries,
		ServerStabilizationTime: d.c.cfg.ReconcileInterval,
	}
}

func (d *apDelegate) NotifyState(*autopilot.State) {}

func (d *apDelegate) FetchServerStats(ctx context.Context, servers map[raft.ServerID]*autopilot.Server) map[raft.ServerID]*autopilot.ServerStats {
	return d.c.fetchStats(ctx, servers)
}

func (d *apDelegate) KnownServers() map[raft.ServerID]*autopilot.Server {
	c := d.c
	leader := c.IsLeader()
	out := map[raft.ServerID]*autopilot.Server{}
	for _, m := range c.Members() {
		// A member that is not admitted is never reported alive: one still
		// in the raft configuration then reads as unhealthy to autopilot
		// and is never promoted (reconcileMembers removes it if revoked).
		// Failed and left ones are still reported, so they are reaped.
		if m.RaftAddr == "" || (m.Status == StatusAlive && m.ID != c.cfg.NodeID && !c.admitted(m.ID)) {
			continue
		}
		status := autopilot.NodeAlive
		switch m.Status {
		case StatusFailed:
			status = autopilot.NodeFailed
		case StatusLeft:
			status = autopilot.NodeLeft
		}
		out[raft.ServerID(m.ID)] = &autopilot.Server{
			ID: raft.ServerID(m.ID), Name: m.ID, Address: raft.ServerAddress(m.RaftAddr),
			NodeStatus: status, RaftVersion: raft.ProtocolVersionMax, NodeType: autopilot.NodeVoter,
			IsLeader: leader && m.ID == c.cfg.NodeID,
		}
	}
	return out
}

// RemoveFailedServer removes a server the promoter allowed to go (left,
// or failed past ReapTimeout). Autopilot wants it to return at once.
func (d *apDelegate) RemoveFailedServer(srv *autopilot.Server) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.removing == nil {
		d.removing = map[raft.ServerID]bool{}
	}
	if d.removing[srv.ID] {
		return
	}
	d.removing[srv.ID] = true
	id := string(srv.ID)
	d.c.goLoop(func() {
		defer func() {
			d.mu.Lock()
			delete(d.removing, srv.ID)
			d.mu.Unlock()
		}()
		d.c.logger.Info("removing server from raft", "id", id, "status", srv.NodeStatus)
		if err := d.c.RemoveServer(id); err != nil {
			d.c.logger.Warn("remove server from raft", "id", id, "error", err)
		}
	})
}

// promoter keeps at most Config.Voters voters, always an odd number, and
// lets servers go from raft only after a graceful leave or ReapTimeout.
// It promotes only admitted non-voters whose gossip metadata says they
// can vote, and asks Config.PrepareVoter to ready those it would promote
// otherwise.
type promoter struct {
	c   *Cluster
	log onceLog // non-voters held back from a vote, each logged once
}

func (p *promoter) GetServerExt(*autopilot.Config, *autopilot.ServerState) any { return nil }

func (p *promoter) GetStateExt(*autopilot.Config, *autopilot.State) any { return nil }

func (p *promoter) GetNodeTypes(_ *autopilot.Config, s *autopilot.State) map[raft.ServerID]autopilot.NodeType {
	out := make(map[raft.ServerID]autopilot.NodeType, len(s.Servers))
	for id := range s.Servers {
		out[id] = autopilot.NodeVoter
	}
	return out
}

func (p *promoter) IsPotentialVoter(t autopilot.NodeType) bool { return t == autopilot.NodeVoter }

func (p *promoter) CalculatePromotionsAndDemotions(conf *autopilot.Config, s *autopilot.State) autopilot.RaftChanges {
	now := time.Now()
	stable := s.ServerStabilizationTime(conf)
	var v voterSet
	defer p.log.endRound()
	for rid, srv := range s.Servers {
		id := string(rid)
		switch {
		case srv.HasVotingRights():
			if p.deadVoter(id, now) {
				v.dead = append(v.dead, id)
			} else {
				v.good = append(v.good, id)
			}
		case srv.State != autopilot.RaftNonVoter:
		case !p.c.admitted(id):
			if p.log.note(id, p.c.refusal(id)) {
				p.c.logger.Info("not promoting non-voter", "id", id, "reason", p.c.refusal(id))
			}
		case !srv.Health.IsStable(now, stable):
			v.waiting++
		case !p.c.canVote(id):
			v.unready = append(v.unready, id)
		default:
			v.candidates = append(v.candidates, id)
		}
	}
	v.leader = string(s.Leader)
	promote, demote, prepare := planVoters(p.c.cfg.Voters, v)
	for _, id := range prepare {
		if p.log.note(id, refusedCannotVote) {
			p.c.logger.Info("non-voter is not ready to vote; preparing it", "id", id)
		}
		if p.c.cfg.PrepareVoter != nil {
			p.c.cfg.PrepareVoter(id)
		}
	}
	var ch autopilot.RaftChanges
	for _, id := range promote {
		ch.Promotions = append(ch.Promotions, raft.ServerID(id))
	}
	for _, id := range demote {
		ch.Demotions = append(ch.Demotions, raft.ServerID(id))
	}
	return ch
}

// deadVoter reports whether a voter has been failed in gossip longer than
// DeadServerGrace, or has left. A server gossip does not know (yet) is
// not dead: a new leader may not have heard of every member.
func (p *promoter) deadVoter(id string, now time.Time) bool {
	m, ok := p.c.member(id)
	switch {
	case !ok:
		return false
	case m.Status == StatusLeft:
		return true
	case m.Status == StatusFailed:
		return now.Sub(m.since) >= p.c.cfg.DeadServerGrace
	}
	return false
}

// FilterFailedServerRemovals lets autopilot remove servers that left, and
// failed ones only after ReapTimeout. Raft servers gossip never reported
// ("stale") are kept: after a restart gossip may simply not have met them
// yet.
func (p *promoter) FilterFailedServerRemovals(_ *autopilot.Config, _ *autopilot.State, f *autopilot.FailedServers) *autopilot.FailedServers {
	now := time.Now()
	keep := func(in []*autopilot.Server) []*autopilot.Server {
		var out []*autopilot.Server
		for _, srv := range in {
			m, ok := p.c.member(string(srv.ID))
			if ok && (m.Status == StatusLeft || (m.Status == StatusFailed && now.Sub(m.since) >= p.c.cfg.ReapTimeout)) {
				out = append(out, srv)
			}
		}
		return out
	}
	return &autopilot.FailedServers{FailedVoters: keep(f.FailedVoters), FailedNonVoters: keep(f.FailedNonVoters)}
}

// voterSet is the input of planVoters: the current voters split into good
// (alive, or failed for less than the grace period) and dead, the leader's
// ID, and the non-voters healthy long enough to be promoted.
type voterSet struct {
	leader     string
	good, dead []string
	candidates []string
	// unready are non-voters healthy long enough whose gossip metadata
	// says they cannot vote yet. They are never promoted.
	unready []string
	// waiting counts non-voters not (yet) healthy and stable enough to
	// be candidates.
	waiting int
}

// planVoters plans with the candidates that can vote (planReady), the
// unready ones counting as waiting, so a count kept even for them is not
// shrunk. It also returns the unready non-voters to prepare: as many, by
// lowest ID, as the plan would have promoted beyond the ready ones had
// all been ready. Dead-voter replacement follows the same rule: only a
// ready candidate replaces a dead voter.
func planVoters(cap int, v voterSet) (promote, demote, prepare []string) {
	unready := slices.Sorted(slices.Values(v.unready))
	ready := v
	ready.unready = nil
	ready.waiting += len(unready)
	promote, demote = planReady(cap, ready)
	if len(unready) == 0 {
		return promote, demote, nil
	}
	all := v
	all.unready = nil
	all.candidates = append(slices.Clone(v.candidates), unready...)
	wanted, _ := planReady(cap, all)
	if extra := len(wanted) - len(promote); extra > 0 {
		prepare = unready[:min(extra, len(unready))]
	}
	return promote, demote, prepare
}

// planReady decides which servers gain and lose their vote:
//  1. each dead voter is replaced by a candidate, one for one, so the
//     number of voters (and the quorum) stays the same;
//  2. below the cap, grow to the largest odd count the candidates allow;
//  3. above the cap, or at an even count with no non-voter waiting to be
//     promoted, shrink to the next odd count, dead voters first, then
//     healthy ones by highest ID, never the leader.
//
// A dead voter without a replacement keeps its vote: removing it would
// leave an even count, or shrink fault tolerance for nothing. No plan
// leaves fewer alive voters than the new configuration's quorum.
func planReady(cap int, v voterSet) (promote, demote []string) {
	good := slices.Sorted(slices.Values(v.good))
	dead := slices.Sorted(slices.Values(v.dead))
	cands := slices.Sorted(slices.Values(v.candidates))

	for len(dead) > 0 && len(cands) > 0 {
		promote = append(promote, cands[0])
		demote = append(demote, dead[0])
		cands, dead = cands[1:], dead[1:]
	}
	count := len(good) + len(dead) + len(promote)
	alive := len(good) + len(promote)

	if count < cap {
		target := largestOdd(min(cap, count+len(cands)))
		for ; count < target; count++ {
			promote = append(promote, cands[0])
			cands = cands[1:]
			alive++
		}
	}

	// An even count below the cap with a non-voter still waiting is a
	// moment in growth, or a candidate whose stats were late this round
	// (they travel by UDP): shrinking then would make voters flap with
	// every lost packet. Shrink only above the cap, or when nobody waits.
	if count <= cap && (count%2 == 1 || v.waiting > 0) {
		return promote, demote
	}
	target := largestOdd(min(cap, count))
	if target >= count {
		return promote, demote
	}
	var shrink []string
	shrink = append(shrink, dead...)
	for i := len(good) - 1; i >= 0; i-- {
		if good[i] != v.leader {
			shrink = append(shrink, good[i])
		}
	}
	aliveAfter := alive
	var extra []string
	for _, id := range shrink {
		if count-len(extra) == target {
			break
		}
		if !slices.Contains(dead, id) {
			aliveAfter--
		}
		extra = append(extra, id)
	}
	if count-len(extra) != target || aliveAfter < target/2+1 {
		return promote, demote
	}
	return promote, append(demote, extra...)
}

// largestOdd returns the largest odd number <= n, and at least 1.
func largestOdd(n int) int {
	if n <= 1 {
		return 1
	}
	if n%2 == 0 {
		return n - 1
	}
	return n
}

// apRaft is the raft autopilot drives. Its futures give up with
// ErrShutdown when Shutdown starts, for the reason Cluster.wait does.
type apRaft struct{ c *Cluster }

func (a apRaft) AddNonvoter(id raft.ServerID, addr raft.ServerAddress, prev uint64, _ time.Duration) raft.IndexFuture {
	return guardedIndex{a.c.raft.AddNonvoter(id, addr, prev, membershipWait), a.c.stopped}
}

func (a apRaft) AddVoter(id raft.ServerID, addr raft.ServerAddress, prev uint64, _ time.Duration) raft.IndexFuture {
	return guardedIndex{a.c.raft.AddVoter(id, addr, prev, membershipWait), a.c.stopped}
}

func (a apRaft) DemoteVoter(id raft.ServerID, prev uint64, _ time.Duration) raft.IndexFuture {
	return guardedIndex{a.c.raft.DemoteVoter(id, prev, membershipWait), a.c.stopped}
}

func (a apRaft) RemoveServer(id raft.ServerID, prev uint64, _ time.Duration) raft.IndexFuture {
	return guardedIndex{a.c.raft.RemoveServer(id, prev, membershipWait), a.c.stopped}
}

func (a apRaft) GetConfiguration() raft.ConfigurationFuture {
	return guardedConfig{a.c.raft.GetConfiguration(), a.c.stopped}
}

func (a apRaft) LeadershipTransferToServer(id raft.ServerID, addr raft.ServerAddress) raft.Future {
	return guardedPlain{a.c.raft.LeadershipTransferToServer(id, addr), a.c.stopped}
}

func (a apRaft) LastIndex() uint64          { return a.c.raft.LastIndex() }
func (a apRaft) Leader() raft.ServerAddress { return a.c.raft.Leader() }
func (a apRaft) Stats() map[string]string   { return a.c.raft.Stats() }
func (a apRaft) State() raft.RaftState      { return a.c.raft.State() }

type guardedIndex struct {
	raft.IndexFuture
	stopped <-chan struct{}
}

type guardedConfig struct {
	raft.ConfigurationFuture
	stopped <-chan struct{}
}

type guardedPlain struct {
	raft.Future
	stopped <-chan struct{}
}

func (g guardedIndex) Error() error  { return waitOn(g.IndexFuture, g.stopped) }
func (g guardedConfig) Error() error { return waitOn(g.ConfigurationFuture, g.stopped) }
func (g guardedPlain) Error() error  { return waitOn(g.Future, g.stopped) }

// waitOn waits for a raft future or for Shutdown, whichever comes first.
func waitOn(f raft.Future, stopped <-chan struct{}) error {
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		return translate(err)
	case <-stopped:
		return ErrShutdown
	}
}

// statsReply is one server's answer to a stats request.
type statsReply struct {
	id    string
	stats autopilot.ServerStats
}

// Stats messages travel as memberlist user messages (best-effort UDP):
// request = type, round (8 bytes), requester ID; reply = type, round, last
// index, last term, last contact in ns (8 bytes each), replier ID.
const (
	msgStatsRequest byte = 1
	msgStatsReply   byte = 2
	statsReplyLen        = 1 + 4*8
)

// Follower is what the leader last heard of another server (autopilot's
// stats exchange, every ReconcileInterval).
type Follower struct {
	ID string
	// LastContact is the server's time since it last heard from the
	// leader, as it reported it; -1 for never.
	LastContact time.Duration
	// LastIndex is the last index in the server's log.
	LastIndex uint64
	Healthy   bool
}

// Followers returns, while this node leads, what it last heard of the
// other servers of the Raft configuration, by ID; nil on a node that does
// not lead, or before autopilot's first round.
func (c *Cluster) Followers() []Follower {
	if c.autopilot == nil || !c.IsLeader() {
		return nil
	}
	st := c.autopilot.GetState()
	if st == nil {
		return nil
	}
	var out []Follower
	for id, s := range st.Servers {
		if string(id) == c.cfg.NodeID {
			continue
		}
		out = append(out, Follower{ID: string(id), LastContact: s.Stats.LastContact, LastIndex: s.Stats.LastIndex, Healthy: s.Health.Healthy})
	}
	slices.SortFunc(out, func(a, b Follower) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// localStats is what this server tells the leader about its raft log.
func (c *Cluster) localStats() autopilot.ServerStats {
	contact := time.Duration(-1) // never heard from a leader: unhealthy
	if c.IsLeader() {
		contact = 0
	} else if t := c.raft.LastContact(); !t.IsZero() {
		contact = time.Since(t)
	}
	term, _ := strconv.ParseUint(c.raft.Stats()["last_log_term"], 10, 64)
	return autopilot.ServerStats{LastContact: contact, LastTerm: term, LastIndex: c.raft.LastIndex()}
}

// fetchStats asks every alive server for its stats and collects the
// replies that arrive before ctx ends. Servers that do not answer are
// left out, which autopilot reads as unhealthy.
func (c *Cluster) fetchStats(ctx context.Context, servers map[raft.ServerID]*autopilot.Server) map[raft.ServerID]*autopilot.ServerStats {
	out := map[raft.ServerID]*autopilot.ServerStats{}
	g := c.gossip
	want := 0
	replies := make(chan statsReply, len(servers))
	g.statsMu.Lock()
	g.statsRound++
	round := g.statsRound
	g.statsCh = replies
	g.statsMu.Unlock()
	defer func() {
		g.statsMu.Lock()
		g.statsCh = nil
		g.statsMu.Unlock()
	}()

	req := putUint64([]byte{msgStatsRequest}, round)
	req = append(req, c.cfg.NodeID...)
	for id := range servers {
		if string(id) == c.cfg.NodeID {
			s := c.localStats()
			out[id] = &s
			continue
		}
		if err := c.sendTo(string(id), req); err == nil {
			want++
		}
	}
	for want > 0 {
		select {
		case r := <-replies:
			if _, ok := servers[raft.ServerID(r.id)]; ok {
				s := r.stats
				out[raft.ServerID(r.id)] = &s
				want--
			}
		case <-ctx.Done():
			return out
		}
	}
	return out
}

// handleMsg receives a memberlist user message. It runs on memberlist's
// packet path, so it only decodes and hands on.
func (c *Cluster) handleMsg(b []byte) {
	if len(b) == 0 {
		return
	}
	g := c.gossip
	switch b[0] {
	case msgStatsRequest:
		if len(b) < 1+8+1 {
			return
		}
		select {
		case g.statsReq <- slices.Clone(b):
		default: // the leader asks again next round
		}
	case msgStatsReply:
		if len(b) < statsReplyLen+1 {
			return
		}
		r := statsReply{id: string(b[statsReplyLen:]), stats: autopilot.ServerStats{
			LastIndex:   getUint64(b[9:]),
			LastTerm:    getUint64(b[17:]),
			LastContact: time.Duration(int64(getUint64(b[25:]))),
		}}
		round := getUint64(b[1:])
		g.statsMu.Lock()
		if round == g.statsRound && g.statsCh != nil {
			select {
			case g.statsCh <- r:
			default:
			}
		}
		g.statsMu.Unlock()
	}
}

// statsResponder answers stats requests.
func (c *Cluster) statsResponder() {
	g := c.gossip
	for {
		var req []byte
		select {
		case <-c.stopped:
			return
		case req = <-g.statsReq:
		}
		from := string(req[9:])
		s := c.localStats()
		reply := putUint64([]byte{msgStatsReply}, getUint64(req[1:]))
		reply = putUint64(reply, s.LastIndex)
		reply = putUint64(reply, s.LastTerm)
		reply = putUint64(reply, uint64(s.LastContact))
		reply = append(reply, c.cfg.NodeID...)
		if err := c.sendTo(from, reply); err != nil {
			g.logger.Debug("send stats", "to", from, "error", err)
		}
	}
}

// bootstrapLoop runs until this node holds raft state. With
// BootstrapExpect set it bootstraps raft when its turn comes (see
// tryBootstrap); either way it then advertises that it has state, which
// stops later bootstrap-expect nodes from forming a second cluster.
func (c *Cluster) bootstrapLoop() {
	tick := time.NewTicker(bootstrapPoll)
	defer tick.Stop()
	for !c.tryBootstrap() {
		select {
		case <-c.stopped:
			return
		case <-c.bootstrapKick:
		case <-tick.C:
		}
	}
}

// tryBootstrap reports whether the bootstrap question is settled. It
// bootstraps raft when BootstrapExpect members with the same expect value
// are alive, none of them holds raft state, and this node has the lowest
// ID of them; the voters are the N lowest IDs.
func (c *Cluster) tryBootstrap() bool {
	if c.hasState.Load() || c.raft.LastIndex() > 0 {
		c.markState()
		return true
	}
	n := c.cfg.BootstrapExpect
	if n == 0 {
		return false
	}
	var peers []memberState
	g := c.gossip
	g.tableMu.Lock()
	for _, m := range g.table {
		if m.Status != StatusAlive {
			continue
		}
		if m.header.hasState {
			g.tableMu.Unlock()
			g.logger.Info("a member holds raft state; waiting to be added instead of bootstrapping", "member", m.ID)
			return true
		}
		if m.header.expect == n && m.RaftAddr != "" {
			peers = append(peers, *m)
		} else if m.header.expect != n {
			g.logger.Warn("member expects a different bootstrap size", "member", m.ID, "expect", m.header.expect, "want", n)
		}
	}
	g.tableMu.Unlock()
	if len(peers) < n {
		return false
	}
	slices.SortFunc(peers, func(a, b memberState) int { return strings.Compare(a.ID, b.ID) })
	peers = peers[:n]
	if peers[0].ID != c.cfg.NodeID {
		return false // the lowest ID bootstraps; raft will contact us
	}
	conf := raft.Configuration{}
	for _, p := range peers {
		conf.Servers = append(conf.Servers, raft.Server{
			Suffrage: raft.Voter, ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.RaftAddr),
		})
	}
	err := c.wait(func() raft.Future { return c.raft.BootstrapCluster(conf) })
	switch {
	case err == nil:
		g.logger.Info("bootstrapped raft", "voters", len(conf.Servers))
	case errors.Is(err, raft.ErrCantBootstrap):
		g.logger.Info("raft state appeared; not bootstrapping")
	default:
		g.logger.Error("bootstrap raft", "error", err)
		return false
	}
	c.markState()
	return true
}

// markState notes that raft holds state and tells the other members.
func (c *Cluster) markState() {
	if c.hasState.CompareAndSwap(false, true) {
		if err := c.gossip.updateNode(gossipTimeout); err != nil {
			c.gossip.logger.Warn("advertise raft state", "error", err)
		}
	}
}
