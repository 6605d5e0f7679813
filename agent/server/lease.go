package server

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/cluster"
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

// errRelayStopped answers the renewals that reach a server on its way
// out, at once: its rounds are over, and a worker that waited on it until
// its lease ran out would stop its jobs for a server's restart. The
// worker asks the leader instead (agent/node/lease.go).
var errRelayStopped = errors.New("this server is shutting down")

// errNotRelay answers a relayed round sent by a node that is not a server.
var errNotRelay = errors.New("only a server of the Raft configuration passes on other nodes' heartbeats")

// leaseRelay gathers the renewals that reach a server that does not lead
// into rounds, which run passes to the leader.
type leaseRelay struct {
	pass    func(ctx context.Context, nodes []string) (leader string, err error)
	wake    chan struct{}
	stopped chan struct{} // closed when run ends
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

func newLeaseRelay(pass func(context.Context, []string) (string, error)) *leaseRelay {
	return &leaseRelay{pass: pass, wake: make(chan struct{}, 1), stopped: make(chan struct{})}
}

// renew adds nodeID to the next round and waits for its answer (or ctx,
// or the relay's end: a round not yet passed then never is).
func (r *leaseRelay) renew(ctx context.Context, nodeID string) (leader string, err error) {
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
		return "", errRelayStopped
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// run passes rounds to the leader, at most one per relayGap, until ctx
// ends. A round does not wait for the one before to be answered: one
// held up (by an election, or a slow leader) would hold up every
// renewal after it, past their leases, while a later round may find the
// new leader at once. At most relayTimeout/relayGap rounds are in flight.
func (r *leaseRelay) run(ctx context.Context) {
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

// passRenewals hands a round to the leader, or records it when this node
// has come to lead.
func (s *Server) passRenewals(ctx context.Context, nodes []string) (string, error) {
	c, err := s.cfg.Peers.LeaderClient(ctx)
	if err != nil {
		return "", err
	}
	if c == nil {
		s.heardFrom(nodes)
		return s.cfg.NodeID, nil
	}
	resp, err := c.RelayHeartbeats(ctx, s.cfg.NodeID, nodes)
	if err != nil {
		return "", err
	}
	return resp.LeaderID, nil
}

// heardFrom records that the leader heard from nodes now.
func (s *Server) heardFrom(nodes []string) {
	at := time.Now()
	for _, id := range nodes {
		s.cfg.Heartbeats.HeardFrom(id, at)
	}
}

// handleHeartbeat renews a node's lease: the leader records it (the
// leader's monitor, agent/leader), another server passes it on in its
// next round; a worker, which cannot, answers 503 and the node asks
// another.
func (s *Server) handleHeartbeat(w http.ResponseWriter, r *http.Request) {
	var req api.HeartbeatRequest
	if err := decodeBody(w, r, &req); err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	if !reportsFor(w, r, req.NodeID) {
		return
	}
	if s.cfg.Raft.IsLeader() {
		s.heardFrom([]string{req.NodeID})
		writeJSON(w, http.StatusOK, api.HeartbeatResponse{LeaderID: s.cfg.NodeID})
		return
	}
	if !s.isServer() {
		writeError(w, http.StatusServiceUnavailable, errNotServer)
		return
	}
	leader, err := s.leases.renew(r.Context(), req.NodeID)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, fmt.Errorf("renew the lease through this server: %w", err))
		return
	}
	writeJSON(w, http.StatusOK, api.HeartbeatResponse{LeaderID: leader})
}

// handleRelayedHeartbeats records a round of renewals a server passed on.
// Leader only; the sender must be a server, which checked each node's
// credentials as the leader would have.
func (s *Server) handleRelayedHeartbeats(w http.ResponseWriter, r *http.Request) {
	var req api.RelayedHeartbeatsRequest
	if !s.leaderRequest(w, r, &req) || !reportsFor(w, r, req.From) {
		return
	}
	if len(req.NodeIDs) > MaxRelayedNodes {
		writeError(w, http.StatusBadRequest, fmt.Errorf("node_ids: %d nodes, at most %d in one round", len(req.NodeIDs), MaxRelayedNodes))
		return
	}
	servers, err := s.cfg.Raft.Servers()
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, err)
		return
	}
	if !cluster.HoldsState(servers, nil, req.From) {
		writeError(w, http.StatusForbidden, fmt.Errorf("from %q: %w", req.From, errNotRelay))
		return
	}
	s.heardFrom(req.NodeIDs)
	writeJSON(w, http.StatusOK, api.HeartbeatResponse{LeaderID: s.cfg.NodeID})
}
