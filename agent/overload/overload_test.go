package overload

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/skein-dev/skein/internal/testutil"
)

func TestMonitor_StarvedWhileALateTickIsInTheWindow(t *testing.T) {
	m := New()
	if m.Starved() {
		t.Fatal("a monitor that measured nothing is starved")
	}
	for range Window {
		m.Observe(time.Millisecond)
	}
	if m.Starved() || m.Lag() != time.Millisecond {
		t.Fatalf("ticks a millisecond late: starved %v, lag %s; want not starved, 1ms", m.Starved(), m.Lag())
	}
	m.Observe(StarvedLag)
	if m.Starved() || m.Lag() != StarvedLag {
		t.Fatalf("one tick %s late: starved %v, lag %s; want a hiccup, not starved", StarvedLag, m.Starved(), m.Lag())
	}
	m.Observe(time.Millisecond)
	m.Observe(2 * StarvedLag)
	if !m.Starved() {
		t.Fatalf("two ticks late in the window: not starved")
	}
	// It stays starved until the first late tick leaves the window.
	for i := range Window - 3 {
		m.Observe(time.Millisecond)
		if !m.Starved() {
			t.Fatalf("not starved %d ticks after the late ones, still in the window of %d", i+1, Window)
		}
	}
	m.Observe(time.Millisecond)
	if m.Starved() {
		t.Fatalf("starved with one late tick left in the window; lag %s", m.Lag())
	}
}

func TestMonitor_RunMeasuresTheTicksOfAnIdleProcess(t *testing.T) {
	m := New()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		m.Run(ctx, nil)
		close(done)
	}()
	// Run fills the window with the ticks' lags (an idle test process
	// is still late by a little; the bound is what counts as starved).
	testutil.WaitFor(t, 10*time.Second, func() error {
		m.mu.Lock()
		defer m.mu.Unlock()
		for _, l := range m.lags {
			if l > 0 {
				return nil
			}
		}
		return errors.New("Run has measured no tick's lag")
	})
	cancel()
	<-done
}

// TestMonitor_AWorkerTicksLessOften: the monitor wakes every Tick on a
// server, which sheds by it, and every IdleTick on a worker, which only
// reports its lag.
func TestMonitor_AWorkerTicksLessOften(t *testing.T) {
	for _, c := range []struct {
		name   string
		server func() bool
		want   time.Duration
	}{
		{"no role given", nil, Tick},
		{"a server", func() bool { return true }, Tick},
		{"a worker", func() bool { return false }, IdleTick},
	} {
		if got := interval(c.server); got != c.want {
			t.Errorf("%s: ticks every %s, want %s", c.name, got, c.want)
		}
	}
	if IdleTick <= Tick {
		t.Errorf("IdleTick %s is not longer than Tick %s", IdleTick, Tick)
	}
}
