package leader

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

// passCounter is the leader's metrics, counting its passes and what they
// placed.
type passCounter struct {
	mu     sync.Mutex
	passes int
	placed []int // what each pass placed, in order
}

func (m *passCounter) Pass(_ time.Duration, placed int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.passes++
	m.placed = append(m.placed, placed)
}
func (m *passCounter) Placed(*structs.Job, []*structs.Allocation, time.Time) {}
func (m *passCounter) Preempted(int)                                         {}
func (m *passCounter) Leading(bool)                                          {}

func (m *passCounter) counts() (passes, placed int, each []int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, n := range m.placed {
		placed += n
	}
	return m.passes, placed, append([]int(nil), m.placed...)
}

// heldTimer is the scheduling loop's pacing timer: a wait of a minute or
// more (the tests' pass interval) is held until the test lets it go, a
// shorter one (as long again as a pass took) runs.
type heldTimer struct {
	mu      sync.Mutex
	waiting []chan time.Time
}

func (p *heldTimer) after(d time.Duration) <-chan time.Time {
	if d < time.Minute {
		return time.After(d)
	}
	ch := make(chan time.Time, 1)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.waiting = append(p.waiting, ch)
	return ch
}

// held is how many waits are being held.
func (p *heldTimer) held() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.waiting)
}

// release ends every wait held.
func (p *heldTimer) release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, ch := range p.waiting {
		ch <- time.Now()
	}
	p.waiting = nil
}

// bigNode registers a ready node with room for many CPU-only jobs.
func (h *harness) bigNode(id string) {
	h.must(structs.NodeRegisterType, structs.NodeRegisterRequest{Node: structs.Node{
		ID: id, Name: id, Status: structs.NodeReady, CPUs: 1024, MemoryMiB: 1 << 20,
	}, At: time.Now().UTC()})
	h.l.HeardFrom(id, time.Now())
}

// runLoop runs the scheduling loop until the test ends.
func (h *harness) runLoop() {
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		h.l.scheduleLoop(stop)
	}()
	h.t.Cleanup(func() { close(stop); <-done })
}

// A burst of submissions that arrives while the loop waits out its pass
// interval is planned by one pass, however many entries it made: passes
// follow the interval, not the entries.
func TestScheduleLoop_ABurstOfSubmissionsIsPlacedByOnePass(t *testing.T) {
	const burst = 200
	h := newHarness(t)
	h.bigNode("n1")
	metrics, timer := &passCounter{}, &heldTimer{}
	h.l.cfg.Metrics, h.l.cfg.PassInterval, h.l.cfg.After = metrics, time.Hour, timer.after
	// The second job is submitted while the pass that places the first
	// commits (as a client's next submission does): a burst is under
	// way, and the next pass waits for the interval to end.
	var second sync.Once
	h.l.cfg.Apply = func(mt structs.MessageType, msg any) (any, error) {
		resp, err := h.apply(mt, msg)
		if mt == structs.PlanApplyType {
			second.Do(func() { h.submit("job-001", structs.JobSpec{CPUs: 1}, time.Now().UTC()) })
		}
		return resp, err
	}
	h.runLoop()
	// The loop's first pass, and the one the node's first heartbeat asks
	// for (Kick), run before the burst.
	testutil.WaitFor(t, 10*time.Second, func() error {
		if passes, _, _ := metrics.counts(); passes < 2 {
			return fmt.Errorf("%d passes before the burst; want 2", passes)
		}
		return nil
	})

	h.submit("job-000", structs.JobSpec{CPUs: 1}, time.Now().UTC())
	testutil.WaitFor(t, 10*time.Second, func() error {
		if timer.held() == 0 {
			return fmt.Errorf("the loop is not waiting out its pass interval")
		}
		return nil
	})
	for i := 2; i < burst; i++ {
		h.submit(fmt.Sprintf("job-%03d", i), structs.JobSpec{CPUs: 1}, time.Now().UTC())
	}
	before, placedBefore, _ := metrics.counts()
	timer.release()
	testutil.WaitFor(t, 10*time.Second, func() error {
		if _, placed, _ := metrics.counts(); placed != burst {
			return fmt.Errorf("%d of %d jobs placed", placed, burst)
		}
		return nil
	})
	_, _, each := metrics.counts()
	var placing []int // what each pass that placed anything since the interval placed
	for _, n := range each[before:] {
		if n > 0 {
			placing = append(placing, n)
		}
	}
	if len(placing) != 1 || placing[0] != burst-placedBefore {
		t.Fatalf("the passes since the interval ended placed %v (each pass: %v); want one pass placing the %d still queued", placing, each, burst-placedBefore)
	}
	for i := range burst {
		if id := fmt.Sprintf("job-%03d", i); len(h.f.Allocs(id)) != 1 {
			t.Fatalf("job %s has %d allocations; want 1", id, len(h.f.Allocs(id)))
		}
	}
}

// A change after a quiet spell longer than the interval is planned at
// once: pacing only holds back passes that follow each other.
func TestScheduleLoop_AChangeAfterAQuietSpellIsPlannedAtOnce(t *testing.T) {
	h := newHarness(t)
	h.bigNode("n1")
	metrics := &passCounter{}
	h.l.cfg.Metrics, h.l.cfg.PassInterval = metrics, time.Nanosecond
	h.l.cfg.After = func(d time.Duration) <-chan time.Time {
		t.Errorf("the loop waited %s before planning a change after a quiet spell", d)
		return time.After(d)
	}
	h.runLoop()
	for i := range 3 {
		id := fmt.Sprintf("job-%d", i)
		h.submit(id, structs.JobSpec{CPUs: 1}, time.Now().UTC())
		testutil.WaitFor(t, 10*time.Second, func() error {
			if len(h.f.Allocs(id)) != 1 {
				return fmt.Errorf("job %s not placed", id)
			}
			return nil
		})
	}
}

// A leader short of CPU spaces its passes further: the CPU goes to Raft
// and the leases first.
func TestLeader_PassesAreSpacedFurtherWhileTheProcessIsStarved(t *testing.T) {
	h := newHarness(t)
	starved := false
	h.l.cfg.Starved = func() bool { return starved }
	if got := h.l.passInterval(); got != DefaultPassInterval {
		t.Errorf("pass interval %s with CPU to spare, want %s", got, DefaultPassInterval)
	}
	starved = true
	if got := h.l.passInterval(); got != StarvedPassInterval {
		t.Errorf("pass interval %s while starved, want %s", got, StarvedPassInterval)
	}
}

// A pass that committed nothing, or committed while nothing else came
// in, holds no submission back for the interval: on an idle cluster the
// reports of a job's start and end wake the loop, and the next job
// submitted soon after is planned at once (when any pass started the
// interval, a sequential job's submit→start through the API went from 28
// to 45 ms at p50). The interval here is an hour, and a wait for it
// never ends.
func TestScheduleLoop_ASubmissionAfterAQuietPassIsPlannedAtOnce(t *testing.T) {
	h := newHarness(t)
	h.bigNode("n1")
	metrics := &passCounter{}
	h.l.cfg.Metrics, h.l.cfg.PassInterval = metrics, time.Hour
	h.l.cfg.After = func(d time.Duration) <-chan time.Time {
		if d > time.Minute {
			return make(chan time.Time) // the interval: never over
		}
		return time.After(d) // as long again as a pass took
	}
	h.runLoop()
	passes := func(n int) {
		t.Helper()
		testutil.WaitFor(t, 10*time.Second, func() error {
			if got, _, _ := metrics.counts(); got < n {
				return fmt.Errorf("%d passes; want %d (held for the interval?)", got, n)
			}
			return nil
		})
	}
	placed := func(n int) {
		t.Helper()
		testutil.WaitFor(t, 10*time.Second, func() error {
			if _, got, _ := metrics.counts(); got < n {
				return fmt.Errorf("%d jobs placed; want %d (held for the interval?)", got, n)
			}
			return nil
		})
	}
	passes(1) // nothing queued: nothing committed
	h.bigNode("n2")
	passes(2) // woken by the node's entry; nothing committed
	h.submit("job-0", structs.JobSpec{CPUs: 1}, time.Now().UTC())
	placed(1) // by a pass that committed while nothing else came in
	h.submit("job-1", structs.JobSpec{CPUs: 1}, time.Now().UTC())
	placed(2)
}
