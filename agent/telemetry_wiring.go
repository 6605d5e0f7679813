package agent

import (
	"github.com/skein-dev/skein/gpu"
	"github.com/skein-dev/skein/structs"
)

// newTelemetry makes this node's GPU telemetry for its inventory (NVML's,
// or the simulated GPUs', which read what the jobs holding them write),
// sets a.telemetry and a.xids, and returns the sampler for start to run
// with the agent. The XID counter is shared with the GPUs' monitor
// (gpuMonitor): the monitor already receives NVML's XID events, so the
// telemetry counts them without registering for them a second time.
func (a *Agent) newTelemetry() gpu.Sampler {
	a.xids = gpu.NewXIDCounter(len(a.inv.GPUs))
	cfg := gpu.TelemetryConfig{Period: a.cfg.TelemetryPeriod, XIDs: a.xids}
	if a.inv.Source == gpu.SourceSimulated {
		cfg.Holders = a.simGPUHolders
	}
	s := gpu.NewTelemetry(a.inv, cfg)
	a.telemetry = s
	return s
}

// gpuMonitor is the monitor of this node's GPUs: the config's when it
// gives one (tests), none without GPUs, else the inventory's, counting
// XIDs for the telemetry.
func (a *Agent) gpuMonitor() gpu.Monitor {
	if a.cfg.GPUMonitor != nil || len(a.inv.GPUs) == 0 {
		return a.cfg.GPUMonitor
	}
	return gpu.NewMonitor(a.inv, gpu.MonitorConfig{XIDs: a.xids})
}

// simGPUHolders names, for each simulated GPU a running allocation of
// this node holds, the utilisation file its job writes (runner.SimGPUUtilEnv).
func (a *Agent) simGPUHolders() map[string]string {
	out := map[string]string{}
	for _, alloc := range a.view.NodeLiveAllocs(a.nodeID) {
		if alloc.State != structs.AllocRunning {
			continue
		}
		for _, uuid := range alloc.GPUs {
			out[uuid] = a.runner.SimGPUUtilFile(alloc.ID)
		}
	}
	return out
}
