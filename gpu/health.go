package gpu

import (
	"context"
	"fmt"
	"time"

	"github.com/skein-dev/skein/structs"
)

// EventKind says what a health event means for the GPU it names.
type EventKind string

// Event kinds.
const (
	// Fatal takes the GPU out of service. Point faults (an XID error, a
	// double-bit ECC error) are reported once; persistent conditions
	// (device lost, row remap pending) are reported again at every check
	// while they last, so a GPU is back in service only after a clean
	// period with no Fatal event.
	Fatal EventKind = "fatal"
	// Warning is shown with the GPU but leaves it in service (throttling).
	Warning EventKind = "warning"
	// Processes lists, at every check, the processes NVML sees on the GPU.
	// The agent decides which of them it did not start.
	Processes EventKind = "processes"
)

// Event is one observation about one GPU of this node.
type Event struct {
	Index int
	UUID  string
	Kind  EventKind
	// Reason is for people: "XID 79: GPU has fallen off the bus".
	Reason string
	// PIDs are set on Processes events; empty means the GPU is idle.
	PIDs []uint32
	At   time.Time
}

// Monitor watches the GPUs of one node.
type Monitor interface {
	// Run sends events to out until ctx ends. It never closes out.
	Run(ctx context.Context, out chan<- Event)
}

// SimMonitor is the monitor of simulated GPUs. Nothing happens to them by
// itself: a person or a test injects faults with Inject, so the whole
// health path can be exercised without hardware.
type SimMonitor struct {
	gpus     int
	injected chan Event
}

// NewSimMonitor watches gpus simulated GPUs.
func NewSimMonitor(gpus int) *SimMonitor {
	return &SimMonitor{gpus: gpus, injected: make(chan Event, 64)}
}

// Inject reports ev as if the GPU had produced it. It fails for an index
// this node does not have, or when events are not being consumed.
func (m *SimMonitor) Inject(ev Event) error {
	if ev.Index < 0 || ev.Index >= m.gpus {
		return fmt.Errorf("GPU index %d: this node has simulated GPUs 0..%d", ev.Index, m.gpus-1)
	}
	select {
	case m.injected <- ev:
		return nil
	default:
		return fmt.Errorf("GPU index %d: too many events waiting to be handled", ev.Index)
	}
}

// Run forwards injected events until ctx ends.
func (m *SimMonitor) Run(ctx context.Context, out chan<- Event) {
	for {
		select {
		case <-ctx.Done():
			return
		case ev := <-m.injected:
			select {
			case out <- ev:
			case <-ctx.Done():
				return
			}
		}
	}
}

// DefaultCheckInterval is how often a monitor runs its periodic checks when
// its config does not say.
const DefaultCheckInterval = 10 * time.Second

// MonitorConfig tunes an NVML monitor. Zero values mean production
// defaults; tests shorten them.
type MonitorConfig struct {
	// Interval is the time between periodic checks (DefaultCheckInterval).
	Interval time.Duration
	// EventWait is how long one wait for an NVML event blocks, which bounds
	// how long Run takes to return after ctx ends (one second).
	EventWait time.Duration
	// Now stamps events (time.Now).
	Now func() time.Time
	// XIDs counts every critical XID event of each GPU, the application's
	// own included, for the telemetry (TelemetryConfig.XIDs); nil counts
	// none.
	XIDs *XIDCounter
}

func (c MonitorConfig) withDefaults() MonitorConfig {
	if c.Interval <= 0 {
		c.Interval = DefaultCheckInterval
	}
	if c.EventWait <= 0 {
		c.EventWait = time.Second
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// NewMonitor returns the monitor that fits inv: an NVML monitor for GPUs
// NVML found, tuned by cfg, and a *SimMonitor otherwise, into which
// faults can be injected. A binary built without NVML support reports
// NVML GPUs as Fatal at every check.
func NewMonitor(inv Inventory, cfg MonitorConfig) Monitor {
	if inv.Source == SourceNVML {
		return newNVMLMonitor(inv.GPUs, cfg)
	}
	return NewSimMonitor(len(inv.GPUs))
}

// reportAll is one event of the same kind and reason for every GPU.
func reportAll(gpus []structs.GPU, kind EventKind, reason string, at time.Time) []Event {
	evs := make([]Event, len(gpus))
	for i, g := range gpus {
		evs[i] = Event{Index: g.Index, UUID: g.UUID, Kind: kind, Reason: reason, At: at}
	}
	return evs
}

// send delivers evs in order and reports false when ctx ended first.
func send(ctx context.Context, out chan<- Event, evs ...Event) bool {
	for _, ev := range evs {
		select {
		case out <- ev:
		case <-ctx.Done():
			return false
		}
	}
	return true
}
