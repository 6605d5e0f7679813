//go:build cgo

package gpu

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	"github.com/skein-dev/skein/gpu/nvmlmock"
	"github.com/skein-dev/skein/internal/testutil"
)

// telemetryOf discovers srv and returns a sampler of what it found.
func telemetryOf(t *testing.T, srv *server.Server, cfg TelemetryConfig) *NVMLTelemetry {
	t.Helper()
	inv, err := FromNVML(srv)
	if err != nil {
		t.Fatalf("FromNVML: %v", err)
	}
	if cfg.Now == nil {
		cfg.Now = func() time.Time { return checkTime }
	}
	return NewNVMLTelemetry(srv, inv.GPUs, cfg)
}

// runSampler runs s until the test ends.
func runSampler(t *testing.T, s Sampler) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("the sampler did not stop within 10s of its context ending")
		}
	})
}

// waitSample waits until a sample satisfies ok and returns it.
func waitSample(t *testing.T, s Telemetry, what string, ok func([]Sample) error) []Sample {
	t.Helper()
	var got []Sample
	testutil.WaitFor(t, 10*time.Second, func() error {
		got = s.Sample()
		if err := ok(got); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		return nil
	})
	return got
}

func someSample(s []Sample) error {
	if len(s) == 0 {
		return fmt.Errorf("no sample yet")
	}
	return nil
}

const allReadings = HasUtil | HasMemUtil | HasMemory | HasTemp | HasPower | HasECC

func TestNVMLTelemetry_ReadsEveryGPU(t *testing.T) {
	srv := nvmlmock.DGXH100()
	tel := telemetryOf(t, srv, TelemetryConfig{Period: time.Hour})
	if got := tel.Sample(); got != nil {
		t.Fatalf("Sample before Run = %v, want nil", got)
	}
	runSampler(t, tel)
	got := waitSample(t, tel, "the first reading", someSample)
	if len(got) != 8 {
		t.Fatalf("got %d samples, want 8", len(got))
	}
	for i, s := range got {
		want := Sample{
			Index: i, UUID: nvmlmock.Device(srv, i).UUID, Model: "NVIDIA H100 80GB HBM3", Has: allReadings,
			UtilPercent: float64(10 * i), MemUtilPercent: float64(5 * i), MemUsedMiB: int64(i) << 10, MemTotalMiB: 80 << 10,
			TempC: float64(30 + i), PowerW: 100.5 + float64(i), ECCCorrected: uint64(i), ECCUncorrected: uint64(i / 4), At: checkTime,
		}
		if s != want {
			t.Errorf("GPU %d:\n got %+v\nwant %+v", i, s, want)
		}
	}
}

func TestNVMLTelemetry_LeavesOutWhatTheDeviceCannotRead(t *testing.T) {
	srv := nvmlmock.DGXH100()
	tel := telemetryOf(t, srv, TelemetryConfig{})
	nvmlmock.Device(srv, 1).GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{}, nvml.ERROR_NOT_SUPPORTED }
	nvmlmock.Device(srv, 2).GetTemperatureFunc = func(nvml.TemperatureSensors) (uint32, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
	nvmlmock.Device(srv, 3).GetPowerUsageFunc = func() (uint32, nvml.Return) { return 0, nvml.ERROR_FUNCTION_NOT_FOUND }
	// A GPU without ECC memory answers neither count; one that answers
	// only the corrected count has no ECC reading either.
	nvmlmock.Device(srv, 4).GetTotalEccErrorsFunc = func(nvml.MemoryErrorType, nvml.EccCounterType) (uint64, nvml.Return) {
		return 0, nvml.ERROR_NOT_SUPPORTED
	}
	nvmlmock.Device(srv, 5).GetTotalEccErrorsFunc = func(kind nvml.MemoryErrorType, _ nvml.EccCounterType) (uint64, nvml.Return) {
		if kind == nvml.MEMORY_ERROR_TYPE_CORRECTED {
			return 3, nvml.SUCCESS
		}
		return 0, nvml.ERROR_UNKNOWN
	}
	nvmlmock.Device(srv, 6).GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) { return nvml.Memory{}, nvml.ERROR_UNKNOWN }
	got := tel.read(true)
	want := []Readings{
		allReadings,
		allReadings &^ (HasUtil | HasMemUtil),
		allReadings &^ HasTemp,
		allReadings &^ HasPower,
		allReadings &^ HasECC,
		allReadings &^ HasECC,
		allReadings &^ HasMemory,
		allReadings,
	}
	for i, s := range got {
		if s.Has != want[i] {
			t.Errorf("GPU %d has readings %b, want %b", i, s.Has, want[i])
		}
	}
	for _, c := range []struct {
		gpu  int
		zero bool
		what string
	}{
		{1, got[1].UtilPercent == 0 && got[1].MemUtilPercent == 0, "utilisation"},
		{2, got[2].TempC == 0, "temperature"},
		{3, got[3].PowerW == 0, "power"},
		{5, got[5].ECCCorrected == 0 && got[5].ECCUncorrected == 0, "ECC counts"},
		{6, got[6].MemUsedMiB == 0 && got[6].MemTotalMiB == 0, "memory"},
	} {
		if !c.zero {
			t.Errorf("GPU %d: %s left out but not zero: %+v", c.gpu, c.what, got[c.gpu])
		}
	}
}

func TestNVMLTelemetry_ErrorsDoNotStopTheSampler(t *testing.T) {
	srv := nvmlmock.DGXH100()
	tel := telemetryOf(t, srv, TelemetryConfig{Period: 5 * time.Millisecond})
	var broken, loaded atomic.Bool
	broken.Store(true)
	srv.InitFunc = func() nvml.Return {
		if loaded.Load() {
			return nvml.SUCCESS
		}
		return nvml.ERROR_LIBRARY_NOT_FOUND
	}
	uuid0 := nvmlmock.Device(srv, 0).UUID
	byUUID := srv.DeviceGetHandleByUUIDFunc
	srv.DeviceGetHandleByUUIDFunc = func(uuid string) (nvml.Device, nvml.Return) {
		if broken.Load() && uuid == uuid0 {
			return nil, nvml.ERROR_UNKNOWN
		}
		return byUUID(uuid)
	}
	lost := nvmlmock.Device(srv, 1).GetUtilizationRatesFunc
	nvmlmock.Device(srv, 1).GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
		if broken.Load() {
			return nvml.Utilization{}, nvml.ERROR_GPU_IS_LOST
		}
		return lost()
	}
	nvmlmock.Device(srv, 2).GetPowerUsageFunc = func() (uint32, nvml.Return) {
		if broken.Load() {
			return 0, nvml.ERROR_UNKNOWN
		}
		return 250_000, nvml.SUCCESS
	}
	runSampler(t, tel)

	// Without NVML every GPU is listed with no readings.
	got := waitSample(t, tel, "GPUs listed while NVML is missing", someSample)
	for i, s := range got {
		if s.Index != i || s.UUID != nvmlmock.Device(srv, i).UUID || s.Has != 0 {
			t.Errorf("GPU %d without NVML: %+v, want it listed with no readings", i, s)
		}
	}
	loaded.Store(true)
	got = waitSample(t, tel, "readings once NVML loads", func(s []Sample) error {
		if len(s) != 8 || s[7].Has != allReadings {
			return fmt.Errorf("GPU 7 not read yet")
		}
		return nil
	})
	switch {
	case got[0].Has != 0:
		t.Errorf("GPU 0, which NVML cannot open: readings %b, want none", got[0].Has)
	case got[1].Has != 0:
		t.Errorf("GPU 1, lost at its first query: readings %b, want none", got[1].Has)
	case got[2].Has != allReadings&^HasPower:
		t.Errorf("GPU 2, whose power query fails: readings %b, want all but power", got[2].Has)
	}
	broken.Store(false)
	waitSample(t, tel, "every reading once the errors stop", func(s []Sample) error {
		for _, g := range s {
			if g.Has != allReadings {
				return fmt.Errorf("GPU %d has readings %b", g.Index, g.Has)
			}
		}
		if s[2].PowerW != 250 {
			return fmt.Errorf("GPU 2 power %v W, want 250", s[2].PowerW)
		}
		return nil
	})
}

func TestNVMLTelemetry_SampleDoesNotWaitOnTheDevice(t *testing.T) {
	srv := nvmlmock.DGXH100()
	var calls atomic.Int32
	stuck, release := make(chan struct{}), make(chan struct{})
	read := nvmlmock.Device(srv, 0).GetUtilizationRatesFunc
	nvmlmock.Device(srv, 0).GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
		if calls.Add(1) == 2 {
			close(stuck)
			<-release
		}
		return read()
	}
	tel := telemetryOf(t, srv, TelemetryConfig{Period: 5 * time.Millisecond})
	runSampler(t, tel)
	t.Cleanup(func() { close(release) })
	first := waitSample(t, tel, "the first reading", someSample)
	select {
	case <-stuck:
	case <-time.After(10 * time.Second):
		t.Fatal("the second reading did not start within 10s")
	}
	// The second reading now hangs in GPU 0's utilisation query until
	// the test ends: Sample returns the first.
	got := make(chan []Sample, 1)
	go func() { got <- tel.Sample() }()
	select {
	case s := <-got:
		if len(s) != 8 || s[0] != first[0] {
			t.Errorf("Sample during a hung reading = %+v, want the last reading %+v", s, first)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Sample waited on a hung device query")
	}
}

func TestNVMLTelemetry_CountsTheMonitorsXIDs(t *testing.T) {
	srv := nvmlmock.DGXH100()
	fe := healthy(srv)
	xids := NewXIDCounter(8)
	m := monitorOf(t, srv, MonitorConfig{Interval: time.Hour, EventWait: 5 * time.Millisecond, XIDs: xids})
	tel := telemetryOf(t, srv, TelemetryConfig{Period: 5 * time.Millisecond, XIDs: xids})
	c := start(t, m)
	runSampler(t, tel)
	c.waitFor(t, "the first check", func(ev Event) bool { return ev.Index == 7 && ev.Kind == Processes })
	// An application's XID (13) counts too: NVML calls both critical.
	fe.ch <- nvml.EventData{Device: srv.Devices[2], EventType: nvml.EventTypeXidCriticalError, EventData: 13}
	fe.ch <- nvml.EventData{Device: srv.Devices[2], EventType: nvml.EventTypeXidCriticalError, EventData: 79}
	fe.ch <- nvml.EventData{Device: srv.Devices[5], EventType: nvml.EventTypeXidCriticalError, EventData: 48}
	fe.ch <- nvml.EventData{Device: srv.Devices[1], EventType: nvml.EventTypeDoubleBitEccError}
	c.waitFor(t, "XID 48 on GPU 5", func(ev Event) bool { return ev.Index == 5 && ev.Kind == Fatal })
	c.waitFor(t, "double-bit ECC on GPU 1", func(ev Event) bool { return ev.Index == 1 && ev.Kind == Fatal })
	waitSample(t, tel, "the XID counts", func(s []Sample) error {
		for i, g := range s {
			want := map[int]uint64{2: 2, 5: 1}[i]
			if g.XIDs != want {
				return fmt.Errorf("GPU %d has %d XIDs, want %d", i, g.XIDs, want)
			}
		}
		return someSample(s)
	})
}

func TestNVMLTelemetry_ShutsNVMLDownWhenItStops(t *testing.T) {
	srv := nvmlmock.DGXH100()
	tel := telemetryOf(t, srv, TelemetryConfig{Period: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tel.Run(ctx)
	}()
	waitSample(t, tel, "the first reading", someSample)
	cancel()
	<-done
	if inits, shutdowns := len(srv.InitCalls()), len(srv.ShutdownCalls()); inits != 2 || shutdowns != 2 {
		t.Errorf("Init called %d times and Shutdown %d, want 2 each (discovery, then telemetry)", inits, shutdowns)
	}
}

// On a machine with NVIDIA GPUs, the real library: every GPU of the
// inventory is read, with at least its utilisation and memory (every
// data-centre GPU has those), and the total memory discovery found.
func TestNVMLTelemetry_ReadsTheRealGPUs(t *testing.T) {
	inv, err := discoverNVML()
	if err != nil {
		t.Skipf("no NVML on this machine: %v", err)
	}
	if len(inv.GPUs) == 0 {
		t.Skip("NVML sees no GPU on this machine")
	}
	tel := NewNVMLTelemetry(nvml.New(), inv.GPUs, TelemetryConfig{Period: time.Hour})
	runSampler(t, tel)
	got := waitSample(t, tel, "the first reading", someSample)
	if len(got) != len(inv.GPUs) {
		t.Fatalf("%d samples for %d GPUs", len(got), len(inv.GPUs))
	}
	for i, s := range got {
		g := inv.GPUs[i]
		t.Logf("GPU %d %s: readings %06b, %v %% busy, %d/%d MiB, %v °C, %v W, ECC %d/%d", s.Index, s.Model, s.Has,
			s.UtilPercent, s.MemUsedMiB, s.MemTotalMiB, s.TempC, s.PowerW, s.ECCCorrected, s.ECCUncorrected)
		switch {
		case s.UUID != g.UUID || s.Index != g.Index || s.Simulated:
			t.Errorf("GPU %d: sample of %s (index %d, simulated %t), want %s", i, s.UUID, s.Index, s.Simulated, g.UUID)
		case s.Has&(HasUtil|HasMemory) != HasUtil|HasMemory:
			t.Errorf("GPU %d: readings %06b, want at least utilisation and memory", i, s.Has)
		case s.MemTotalMiB != g.MemoryMiB || s.MemUsedMiB > s.MemTotalMiB:
			t.Errorf("GPU %d: %d of %d MiB used, want a total of %d", i, s.MemUsedMiB, s.MemTotalMiB, g.MemoryMiB)
		case s.UtilPercent < 0 || s.UtilPercent > 100:
			t.Errorf("GPU %d: %v %% busy", i, s.UtilPercent)
		}
	}
}
