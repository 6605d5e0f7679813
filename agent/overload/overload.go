// Package overload tells whether this agent's process is short of CPU,
// so that a leader can shed or delay the work that can wait (users'
// reads, metrics scrapes, scheduling passes) before the work that must
// not (Raft's heartbeats, the nodes' leases): agent/DESIGN.md, "Bounded
// API".
//
// The signal is timer lag: a goroutine asks to wake every Tick and
// measures how late it woke. A process that gets the CPU it asks for
// wakes within a millisecond or two; one whose threads wait for a core
// (other processes, or its own goroutines queued behind one another)
// wakes late by about as long as everything else waits. It sees both
// kinds of shortage, which the Go scheduler's own latencies do not: a
// thread the kernel does not run leaves its goroutines running, as far
// as Go knows.
package overload

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// Tick is how often the monitor wakes to measure its lag while the
	// process holds the state (a server: one that may lead or answer
	// reads), and IdleTick while it does not (a worker, which sheds
	// nothing and only reports its lag): twenty wake-ups a second were a
	// quarter of an idle worker's CPU (docs/benchmarks-history.md,
	// "2026-12-04, on another machine: 60 idle agents take most of it").
	Tick     = 50 * time.Millisecond
	IdleTick = 500 * time.Millisecond
	// Window is how many of the last ticks the lag is the worst of: a
	// second's (ten on a worker).
	Window = 20
	// StarvedLag is the lag from which a tick counts as late: a wake-up
	// late by two ticks, when a healthy one is late by a millisecond or
	// two. It is far below what would delay a lease (--stop-after is
	// 2.5 s) and far above a garbage collection's pause.
	StarvedLag = 100 * time.Millisecond
	// StarvedTicks is how many late ticks in the window make the process
	// starved: one alone is a hiccup (a page fault, a burst of another
	// process), not a shortage.
	StarvedTicks = 2
)

// Monitor measures the process's timer lag.
type Monitor struct {
	mu   sync.Mutex
	lags [Window]time.Duration
	next int
	// worst is the worst lag in the window, in nanoseconds, and late
	// how many of its ticks were StarvedLag late or more.
	worst atomic.Int64
	late  atomic.Int32
}

// New returns a Monitor that has measured nothing (not starved).
func New() *Monitor { return &Monitor{} }

// Run measures the lag until ctx ends: every Tick while server says the
// process holds the state, every IdleTick while it does not (nil: always
// every Tick). A node that becomes a server ticks faster from its next
// tick on.
func (m *Monitor) Run(ctx context.Context, server func() bool) {
	d := interval(server)
	t := time.NewTimer(d)
	defer t.Stop()
	due := time.Now().Add(d)
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			m.Observe(max(0, now.Sub(due)))
			d = interval(server)
			due = time.Now().Add(d)
			t.Reset(d)
		}
	}
}

// interval is the time to the next tick: Tick for a process that holds
// the state (or when server is nil), IdleTick for one that does not.
func interval(server func() bool) time.Duration {
	if server == nil || server() {
		return Tick
	}
	return IdleTick
}

// Observe records one tick's lag.
func (m *Monitor) Observe(lag time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lags[m.next] = lag
	m.next = (m.next + 1) % Window
	worst, late := time.Duration(0), int32(0)
	for _, l := range m.lags {
		worst = max(worst, l)
		if l >= StarvedLag {
			late++
		}
	}
	m.worst.Store(int64(worst))
	m.late.Store(late)
}

// Lag is the worst timer lag of the last Window ticks.
func (m *Monitor) Lag() time.Duration { return time.Duration(m.worst.Load()) }

// Starved reports whether StarvedTicks of the last Window woke StarvedLag
// late or more.
func (m *Monitor) Starved() bool { return m.late.Load() >= StarvedTicks }
