package gpu

import (
	"context"
	"testing"
	"time"
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
