//go:build !cgo

package gpu

import (
	"context"
	"time"

	"github.com/skein-dev/skein/structs"
)

// unavailableMonitor stands in for the NVML monitor in a binary built
// without NVML support: every GPU is Fatal at every check, since nothing
// can vouch for it.
type unavailableMonitor struct {
	gpus []structs.GPU
	cfg  MonitorConfig
}

func newNVMLMonitor(gpus []structs.GPU, cfg MonitorConfig) Monitor {
	return &unavailableMonitor{gpus: gpus, cfg: cfg.withDefaults()}
}

// Run reports every GPU Fatal now and at every interval until ctx ends.
func (m *unavailableMonitor) Run(ctx context.Context, out chan<- Event) {
	reason := errNoNVMLSupport.Error()
	ticker := time.NewTicker(m.cfg.Interval)
	defer ticker.Stop()
	for {
		if !send(ctx, out, reportAll(m.gpus, Fatal, reason, m.cfg.Now())...) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}
