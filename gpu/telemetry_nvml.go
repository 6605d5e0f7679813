//go:build cgo

package gpu

import (
	"context"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/skein-dev/skein/structs"
)

// NVMLTelemetry reads a node's real GPUs through NVML every period:
// utilisation of the GPU and of its memory, memory used and total,
// temperature, power and the volatile ECC counts, and the XID count the
// monitor keeps. A query that fails, for any reason, leaves its reading
// out of that sample; a GPU NVML cannot open, or every GPU while NVML does
// not initialise, is listed with no readings. Nothing stops the sampler
// but its context.
type NVMLTelemetry struct {
	lib  nvml.Interface
	gpus []structs.GPU
	cfg  TelemetryConfig
	last latest
}

// NewNVMLTelemetry samples gpus, the inventory FromNVML read from lib.
func NewNVMLTelemetry(lib nvml.Interface, gpus []structs.GPU, cfg TelemetryConfig) *NVMLTelemetry {
	return &NVMLTelemetry{lib: lib, gpus: gpus, cfg: cfg.withDefaults()}
}

func newNVMLTelemetry(gpus []structs.GPU, cfg TelemetryConfig) Sampler {
	return NewNVMLTelemetry(nvml.New(), gpus, cfg)
}

// Sample returns the last readings, without waiting on a device.
func (t *NVMLTelemetry) Sample() []Sample { return t.last.load() }

// Run reads at once and then every period until ctx ends. While NVML
// does not initialise it is tried again at each period.
func (t *NVMLTelemetry) Run(ctx context.Context) {
	ticker := time.NewTicker(t.cfg.Period)
	defer ticker.Stop()
	up := false
	defer func() {
		if up {
			t.lib.Shutdown()
		}
	}()
	for {
		if !up {
			up = t.lib.Init() == nvml.SUCCESS
		}
		t.last.store(t.read(up))
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// read takes one reading of every GPU; with up false, NVML is not
// initialised and every GPU has no readings.
func (t *NVMLTelemetry) read(up bool) []Sample {
	at := t.cfg.Now()
	out := make([]Sample, len(t.gpus))
	for i, g := range t.gpus {
		out[i] = blank(g, t.cfg.XIDs, at)
		if !up {
			continue
		}
		if dev, ret := t.lib.DeviceGetHandleByUUID(g.UUID); ret == nvml.SUCCESS {
			readSample(&out[i], dev)
		}
	}
	return out
}

// readSample fills in what dev answers. A lost GPU answers nothing more.
func readSample(s *Sample, dev nvml.Device) {
	lost := false
	ok := func(ret nvml.Return) bool {
		lost = lost || ret == nvml.ERROR_GPU_IS_LOST
		return ret == nvml.SUCCESS && !lost
	}
	if u, ret := dev.GetUtilizationRates(); ok(ret) {
		s.UtilPercent, s.MemUtilPercent = float64(min(u.Gpu, 100)), float64(min(u.Memory, 100))
		s.Has |= HasUtil | HasMemUtil
	}
	if m, ret := dev.GetMemoryInfo(); ok(ret) {
		s.MemUsedMiB, s.MemTotalMiB = int64(m.Used>>20), int64(m.Total>>20)
		s.Has |= HasMemory
	}
	if c, ret := dev.GetTemperature(nvml.TEMPERATURE_GPU); ok(ret) {
		s.TempC = float64(c)
		s.Has |= HasTemp
	}
	if mw, ret := dev.GetPowerUsage(); ok(ret) {
		s.PowerW = float64(mw) / 1000
		s.Has |= HasPower
	}
	corrected, cret := dev.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_CORRECTED, nvml.VOLATILE_ECC)
	if ok(cret) {
		uncorrected, uret := dev.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.VOLATILE_ECC)
		if ok(uret) {
			s.ECCCorrected, s.ECCUncorrected = corrected, uncorrected
			s.Has |= HasECC
		}
	}
}
