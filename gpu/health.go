package gpu

import (
	"context"
	"fmt"
	"time"
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
