package gpu

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

// simGPUs is a simulated inventory of n GPUs of 80 GB.
func simGPUs(t *testing.T, n int) []structs.GPU {
	t.Helper()
	inv, err := Discover(fmt.Sprintf("sim:%dxH100-80", n), "node-1", ModeNone)
	if err != nil {
		t.Fatal(err)
	}
	return inv.GPUs
}

func TestSimTelemetry_FreeGPUsReadIdleAndNothingMadeUp(t *testing.T) {
	gpus := simGPUs(t, 4)
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	got := NewSimTelemetry(gpus, TelemetryConfig{Now: func() time.Time { return at }}).read(nil)
	if len(got) != 4 {
		t.Fatalf("got %d samples, want 4", len(got))
	}
	for i, s := range got {
		want := Sample{Index: i, UUID: gpus[i].UUID, Model: gpus[i].Model, Simulated: true,
			Has: HasUtil | HasMemory, MemTotalMiB: 80 << 10, At: at}
		if s != want {
			t.Errorf("GPU %d:\n got %+v\nwant %+v", i, s, want)
		}
	}
}

func TestSimTelemetry_HeldGPUsReadWhatTheJobWrites(t *testing.T) {
	gpus := simGPUs(t, 4)
	dir := t.TempDir()
	fileA, fileB := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	holders := map[string]string{gpus[0].UUID: fileA, gpus[1].UUID: fileA, gpus[2].UUID: fileB}
	tel := NewSimTelemetry(gpus, TelemetryConfig{Holders: func() map[string]string { return holders }})
	tests := []struct {
		name  string
		a, b  string // the files' content; "-" is no file
		prev  []Sample
		utilA float64
		memA  int64
		utilB float64
		memB  int64
	}{
		{name: "no file yet", a: "-", b: "-"},
		{name: "utilisation only", a: "75\n", b: "12.5", utilA: 75, utilB: 12.5},
		{name: "utilisation and memory", a: "40 20480\n", b: "100 1024", utilA: 40, memA: 20480, utilB: 100, memB: 1024},
		{name: "clamped to the GPU", a: "250 999999999", b: "-3 -5", utilA: 100, memA: 80 << 10},
		{name: "does not parse", a: "busy", b: "1 2 3", utilA: 0, utilB: 0},
		{name: "empty keeps the last reading", a: "", b: "",
			prev:  []Sample{{UtilPercent: 60, MemUsedMiB: 7}, {UtilPercent: 60, MemUsedMiB: 7}, {UtilPercent: 33}},
			utilA: 60, memA: 7, utilB: 33},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for path, content := range map[string]string{fileA: tc.a, fileB: tc.b} {
				_ = os.Remove(path)
				if content != "-" {
					if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
						t.Fatal(err)
					}
				}
			}
			got := tel.read(tc.prev)
			want := []struct {
				util float64
				mem  int64
			}{{tc.utilA, tc.memA}, {tc.utilA, tc.memA}, {tc.utilB, tc.memB}, {0, 0}}
			for i, w := range want {
				if got[i].UtilPercent != w.util || got[i].MemUsedMiB != w.mem || got[i].Has != HasUtil|HasMemory || !got[i].Simulated {
					t.Errorf("GPU %d: %+v, want %v %% and %d MiB used, simulated", i, got[i], w.util, w.mem)
				}
			}
		})
	}
}

// The job owns its utilisation file: a symbolic link in its place is
// not followed, and a FIFO neither blocks the reading nor counts.
func TestSimTelemetry_AFileTheJobReplacedIsNotFollowedOrWaitedOn(t *testing.T) {
	gpus := simGPUs(t, 2)
	dir := t.TempDir()
	secret, link, fifo := filepath.Join(dir, "secret"), filepath.Join(dir, "link"), filepath.Join(dir, "fifo")
	if err := os.WriteFile(secret, []byte("42 100"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, link); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	holders := map[string]string{gpus[0].UUID: link, gpus[1].UUID: fifo}
	tel := NewSimTelemetry(gpus, TelemetryConfig{Holders: func() map[string]string { return holders }})
	done := make(chan []Sample, 1)
	go func() { done <- tel.read(nil) }()
	select {
	case got := <-done:
		for i, s := range got {
			if s.UtilPercent != 0 || s.MemUsedMiB != 0 {
				t.Errorf("GPU %d read %v %% and %d MiB through a replaced file, want nothing", i, s.UtilPercent, s.MemUsedMiB)
			}
		}
	case <-time.After(10 * time.Second):
		t.Fatal("reading a FIFO in place of the utilisation file blocked the sampler")
	}
}

func TestSimTelemetry_RunFollowsTheHolders(t *testing.T) {
	gpus := simGPUs(t, 2)
	file := filepath.Join(t.TempDir(), "util")
	if err := os.WriteFile(file, []byte("90 4096\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	holders := map[string]string{}
	tel := NewSimTelemetry(gpus, TelemetryConfig{Period: 5 * time.Millisecond, Holders: func() map[string]string {
		mu.Lock()
		defer mu.Unlock()
		return map[string]string{gpus[1].UUID: holders[gpus[1].UUID]}
	}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go tel.Run(ctx)
	util := func(want float64) func() error {
		return func() error {
			s := tel.Sample()
			if len(s) != 2 || s[1].UtilPercent != want || s[0].UtilPercent != 0 {
				return fmt.Errorf("samples %+v, want GPU 1 at %v %% and GPU 0 idle", s, want)
			}
			return nil
		}
	}
	testutil.WaitFor(t, 10*time.Second, util(0))
	mu.Lock()
	holders[gpus[1].UUID] = file
	mu.Unlock()
	testutil.WaitFor(t, 10*time.Second, util(90))
	mu.Lock()
	delete(holders, gpus[1].UUID)
	mu.Unlock()
	testutil.WaitFor(t, 10*time.Second, util(0))
}

func TestNewTelemetry_PicksTheSamplerOfTheInventory(t *testing.T) {
	inv, err := Discover("sim:2xH100", "node-1", ModeNone)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := NewTelemetry(inv, TelemetryConfig{}).(*SimTelemetry); !ok {
		t.Errorf("simulated GPUs: NewTelemetry = %T, want *SimTelemetry", got)
	}
	none := NewTelemetry(Inventory{Source: SourceNone, GPUs: []structs.GPU{}}, TelemetryConfig{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	none.Run(ctx)
	if got := none.Sample(); got != nil {
		t.Errorf("no GPUs: Sample = %v, want nil", got)
	}
}

func TestNewTelemetry_NVMLGPUsWithoutNVMLHaveNoReadings(t *testing.T) {
	skipIfNVMLWorks(t)
	inv := Inventory{Source: SourceNVML, GPUs: []structs.GPU{{Index: 0, UUID: "GPU-a", Model: "H100"}, {Index: 1, UUID: "GPU-b", Model: "H100"}}}
	xids := NewXIDCounter(2)
	xids.Add(1)
	tel := NewTelemetry(inv, TelemetryConfig{Period: time.Hour, XIDs: xids})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tel.Run(ctx)
	}()
	testutil.WaitFor(t, 10*time.Second, func() error {
		s := tel.Sample()
		if len(s) != 2 {
			return fmt.Errorf("got %d samples, want 2", len(s))
		}
		for i, g := range s {
			if g.Index != i || g.UUID != inv.GPUs[i].UUID || g.Has != 0 || g.Simulated || g.XIDs != uint64(i) {
				return fmt.Errorf("GPU %d: %+v, want it listed with no readings and %d XIDs", i, g, i)
			}
		}
		return nil
	})
	cancel()
	<-done
}

func TestXIDCounter_CountsPerGPUAndIgnoresOthers(t *testing.T) {
	c := NewXIDCounter(3)
	for _, i := range []int{0, 2, 2, -1, 3, 99} {
		c.Add(i)
	}
	for i, want := range []uint64{1, 0, 2, 0} {
		if got := c.Count(i); got != want {
			t.Errorf("Count(%d) = %d, want %d", i, got, want)
		}
	}
	var none *XIDCounter
	none.Add(0)
	if none.Count(0) != 0 {
		t.Error("a nil counter counted")
	}
}
