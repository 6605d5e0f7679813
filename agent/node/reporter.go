package node

import (
	"errors"
	"sync"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/fsm"
	"github.com/skein-dev/skein/structs"
)

// reporter carries allocation updates from the runner into Raft. The runner
// calls add from its goroutines; run sends what is pending in batches and
// retries until the write commits, so a leaderless moment loses nothing.
type reporter struct {
	n       *Node
	mu      sync.Mutex
	pending []structs.AllocUpdate
	wake    chan struct{}
}

func newReporter(n *Node) *reporter {
	return &reporter{n: n, wake: make(chan struct{}, 1)}
}

// add queues an update; it never blocks.
func (r *reporter) add(u structs.AllocUpdate) {
	r.mu.Lock()
	r.pending = append(r.pending, u)
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// inFlight reports whether an update for the allocation is waiting to be sent.
func (r *reporter) inFlight(allocID string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, u := range r.pending {
		if u.AllocID == allocID {
			return true
		}
	}
	return false
}

// flush waits (bounded) until every queued update has been sent.
func (r *reporter) flush(timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		r.mu.Lock()
		n := len(r.pending)
		r.mu.Unlock()
		if n == 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (r *reporter) run() {
	backoff := 50 * time.Millisecond
	for {
		r.mu.Lock()
		batch := r.pending
		r.mu.Unlock()
		if len(batch) == 0 {
			select {
			case <-r.n.ctx.Done():
				return
			case <-r.wake:
				continue
			}
		}
		err := r.n.writeAllocUpdates(batch)
		if err != nil && !refused(err) {
			r.n.log.Warn("report allocation updates; will retry", "updates", len(batch), "error", err)
			select {
			case <-r.n.ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 2*time.Second)
			continue
		}
		if err != nil {
			r.n.log.Debug("some allocation updates were not applied", "error", err)
		}
		backoff = 50 * time.Millisecond
		r.mu.Lock()
		r.pending = r.pending[len(batch):]
		r.mu.Unlock()
		// The local loop skips allocations with a report in flight, and
		// the state change this write made may have woken it before the
		// batch left pending: let it look again, or a stop that arrived
		// meanwhile waits for the next unrelated change.
		r.n.kickLocal()
	}
}

// refused reports whether the state machine refused a report on its
// merits (an allocation unknown or not this node's), as opposed to the
// report not reaching it: sending it again would not help.
func refused(err error) bool {
	var remote *api.Error
	if errors.As(err, &remote) {
		return remote.StatusCode >= 400 && remote.StatusCode < 500
	}
	return errors.Is(err, fsm.ErrAllocNotFound) || errors.Is(err, fsm.ErrWrongNode) || errors.Is(err, fsm.ErrInvalidRequest)
}
