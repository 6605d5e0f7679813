package gpu

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/structs"
)

func TestSimMonitor_ForwardsInjectedEvents(t *testing.T) {
	m := NewSimMonitor(2)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := make(chan Event, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.Run(ctx, out)
	}()
	want := Event{Index: 1, UUID: "GPU-x", Kind: Fatal, Reason: "XID 79: GPU has fallen off the bus"}
	if err := m.Inject(want); err != nil {
		t.Fatalf("Inject: %v", err)
	}
	select {
	case got := <-out:
		if got.Index != want.Index || got.Kind != want.Kind || got.Reason != want.Reason {
			t.Errorf("got %+v, want %+v", got, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no event forwarded within 5s")
	}
	cancel()
	<-done
}

func TestSimMonitor_RejectsUnknownIndex(t *testing.T) {
	m := NewSimMonitor(2)
	for _, idx := range []int{-1, 2} {
		err := m.Inject(Event{Index: idx, Kind: Fatal})
		want := "GPU index " + map[int]string{-1: "-1", 2: "2"}[idx] + ": this node has simulated GPUs 0..1"
		if err == nil || err.Error() != want {
			t.Errorf("Inject(index %d) = %v, want %q", idx, err, want)
		}
	}
}

func TestNewMonitor_SimulatedAndEmptyInventoriesTakeInjectedFaults(t *testing.T) {
	for _, mode := range []string{"sim:4xH100", "none"} {
		inv, err := Discover(mode, "node-1", ModeNone)
		if err != nil {
			t.Fatal(err)
		}
		m, ok := NewMonitor(inv, MonitorConfig{}).(*SimMonitor)
		if !ok {
			t.Fatalf("%s: NewMonitor = %T, want *SimMonitor", mode, NewMonitor(inv, MonitorConfig{}))
		}
		err = m.Inject(Event{Index: 3, Kind: Fatal})
		if wantErr := len(inv.GPUs) == 0; (err != nil) != wantErr {
			t.Errorf("%s: Inject(GPU 3) = %v, want error %t", mode, err, wantErr)
		}
	}
}

func TestNewMonitor_NVMLGPUsAreFatalWithoutNVML(t *testing.T) {
	skipIfNVMLWorks(t)
	inv := Inventory{Source: SourceNVML, GPUs: []structs.GPU{{Index: 0, UUID: "GPU-a"}, {Index: 1, UUID: "GPU-b"}}}
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan Event, 2)
	done := make(chan struct{})
	go func() {
		defer close(done)
		NewMonitor(inv, MonitorConfig{Interval: time.Hour}).Run(ctx, out)
	}()
	for i := range 2 {
		select {
		case ev := <-out:
			if ev.Index != i || ev.UUID != inv.GPUs[i].UUID || ev.Kind != Fatal || !strings.HasPrefix(ev.Reason, "NVML unavailable: ") {
				t.Errorf("event %d = %+v, want GPU %d Fatal because NVML is unavailable", i, ev, i)
			}
			t.Logf("reason: %s", ev.Reason)
		case <-time.After(10 * time.Second):
			t.Fatalf("no event for GPU %d within 10s", i)
		}
	}
	cancel()
	<-done
}
