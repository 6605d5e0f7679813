package leader

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"time"
)

// Lease renewals through any server (agent/DESIGN.md, "Servers and
// workers"). A worker renews its lease with a server rather than with the
// leader; a server that does not lead holds the renewals that reach it
// and passes them to the leader together, in rounds one relayGap apart at
// least, answering each only once the leader has recorded it. The leader
// therefore hears of every renewal a worker counts no earlier than the
// worker sent it, which is all that fencing needs (agent/node/lease.go):
// a worker's lease runs StopAfter past a renewal the leader heard, and
// the leader declares its allocations lost only DownAfter past the last
// renewal it heard. The leader answers one request per server per round
// instead of one per worker per heartbeat.
const (
	// relayGap is the least time between two rounds a server passes to
	// the leader: the renewals of a round's gap go in the next one.
	relayGap = 50 * time.Millisecond
	// relayTimeout bounds one round's request to the leader: a slow
	// leader's answer still renews the leases of the round (a worker
	// waits for it until its lease runs out), and a round that fails
	// sends its workers to the leader themselves.
	relayTimeout = 2 * time.Second
	// MaxRelayedNodes bounds the nodes one round names.
	MaxRelayedNodes = 20000
)

var (
	// ErrRelayStopped answers the renewals that reach a server on its way
	// out, at once: its rounds are over, and a worker that waited on it
	// until its lease ran out would stop its jobs for a server's restart.
	// The worker asks the leader instead (agent/node/lease.go).
	ErrRelayStopped = errors.New("this server is shutting down")
	// ErrNotRelay answers a relayed round sent by a node that is not a
	// server.
	ErrNotRelay = errors.New("only a server of the Raft configuration passes on other nodes' heartbeats")
)

// LeaseRelay gathers the renewals that reach a server that does not lead
// into rounds, which Run passes to the leader.
type LeaseRelay struct {
	pass    func(ctx context.Context, nodes []string) (leader string, err error)
	wake    chan struct{}
	stopped chan struct{} // closed when Run ends
	mu      sync.Mutex
	next    *relayRound // the round renewals join; nil until one does
}

// relayRound is the renewals passed to the leader together, and its
// answer once done is closed.
type relayRound struct {
	nodes  map[string]bool
	done   chan struct{}
	leader string
	err    error
}

// NewLeaseRelay returns a relay that passes its rounds to the leader with
// pass (which names the leader that recorded them); Run runs it.
func NewLeaseRelay(pass func(context.Context, []string) (string, error)) *LeaseRelay {
	return &LeaseRelay{pass: pass, wake: make(chan struct{}, 1), stopped: make(chan struct{})}
}

// Renew adds nodeID to the next round and waits for its answer (or ctx,
// or the relay's end: a round not yet passed then never is).
func (r *LeaseRelay) Renew(ctx context.Context, nodeID string) (leader string, err error) {
	r.mu.Lock()
	round := r.next
	if round == nil {
		round = &relayRound{nodes: map[string]bool{}, done: make(chan struct{})}
		r.next = round
	}
	round.nodes[nodeID] = true
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
	select {
	case <-round.done:
		return round.leader, round.err
	case <-r.stopped:
		return "", ErrRelayStopped
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// Run passes rounds to the leader, at most one per relayGap, until ctx
// ends. A round does not wait for the one before to be answered: one
// held up (by an election, or a slow leader) would hold up every
// renewal after it, past their leases, while a later round may find the
// new leader at once. At most relayTimeout/relayGap rounds are in flight.
func (r *LeaseRelay) Run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(r.stopped) // before waiting for the rounds in flight
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.wake:
		}
		r.mu.Lock()
		round := r.next
		r.next = nil
		r.mu.Unlock()
		if round == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			pctx, cancel := context.WithTimeout(ctx, relayTimeout)
			round.leader, round.err = r.pass(pctx, slices.Sorted(maps.Keys(round.nodes)))
			cancel()
			close(round.done)
		}()
		select {
		case <-ctx.Done():
			return
		case <-time.After(relayGap):
		}
	}
}
