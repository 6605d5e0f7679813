//go:build !cgo

package gpu

import (
	"context"

	"github.com/skein-dev/skein/structs"
)

// unavailableTelemetry stands in for NVML's telemetry in a binary built
// without NVML support: every GPU is listed, with no readings.
type unavailableTelemetry struct {
	gpus []structs.GPU
	cfg  TelemetryConfig
	last latest
}

func newNVMLTelemetry(gpus []structs.GPU, cfg TelemetryConfig) Sampler {
	return &unavailableTelemetry{gpus: gpus, cfg: cfg.withDefaults()}
}

func (t *unavailableTelemetry) Sample() []Sample { return t.last.load() }

// Run lists the GPUs with no readings, once, and returns when ctx ends.
func (t *unavailableTelemetry) Run(ctx context.Context) {
	at := t.cfg.Now()
	out := make([]Sample, len(t.gpus))
	for i, g := range t.gpus {
		out[i] = blank(g, t.cfg.XIDs, at)
	}
	t.last.store(out)
	<-ctx.Done()
}
