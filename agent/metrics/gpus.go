package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/skein-dev/skein/gpu"
	"github.com/skein-dev/skein/structs"
)

// gpuLabels label every series of one GPU of this node.
var gpuLabels = []string{"node", "index", "uuid", "model", "simulated"}

// The descriptors of the per-GPU series. Health and allocation come from
// the replicated state, as the node's view holds it (what the cluster
// schedules by); the rest from gpu.Telemetry, each only for the GPUs
// whose reading it has.
var (
	gpuHealthDesc = prometheus.NewDesc("skein_gpu_health_state",
		"1 for the GPU's health state as the cluster holds it (healthy, unhealthy, cordoned, foreign), 0 for the others.",
		append(gpuLabels, "state"), nil)
	gpuAllocatedDesc = prometheus.NewDesc("skein_gpu_allocated", "1 while a live allocation holds the GPU, else 0.", gpuLabels, nil)
	gpuJobDesc       = prometheus.NewDesc("skein_gpu_job_info", "1 for the job whose live allocation holds the GPU; absent while none does.",
		append(gpuLabels, "job"), nil)
	gpuUtilDesc     = prometheus.NewDesc("skein_gpu_utilization_percent", "Share of the last sample period a kernel ran on the GPU.", gpuLabels, nil)
	gpuMemUtilDesc  = prometheus.NewDesc("skein_gpu_memory_utilization_percent", "Share of the last sample period the GPU's memory was read or written.", gpuLabels, nil)
	gpuMemUsedDesc  = prometheus.NewDesc("skein_gpu_memory_used_bytes", "GPU memory in use.", gpuLabels, nil)
	gpuMemTotalDesc = prometheus.NewDesc("skein_gpu_memory_total_bytes", "GPU memory in all.", gpuLabels, nil)
	gpuTempDesc     = prometheus.NewDesc("skein_gpu_temperature_celsius", "GPU temperature.", gpuLabels, nil)
	gpuPowerDesc    = prometheus.NewDesc("skein_gpu_power_watts", "GPU power draw.", gpuLabels, nil)
	gpuECCDesc      = prometheus.NewDesc("skein_gpu_ecc_errors_total", "Volatile ECC errors since the driver loaded, by kind (corrected, uncorrected).",
		append(gpuLabels, "kind"), nil)
	gpuXIDDesc = prometheus.NewDesc("skein_gpu_xid_events_total", "Critical XID events this agent has seen on the GPU since it started.", gpuLabels, nil)
)

// gpuCollector reads this node's GPUs at a scrape.
type gpuCollector struct {
	cfg Config
}

func (c *gpuCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{gpuHealthDesc, gpuAllocatedDesc, gpuJobDesc, gpuUtilDesc, gpuMemUtilDesc,
		gpuMemUsedDesc, gpuMemTotalDesc, gpuTempDesc, gpuPowerDesc, gpuECCDesc, gpuXIDDesc} {
		ch <- d
	}
}

func (c *gpuCollector) Collect(ch chan<- prometheus.Metric) {
	gpus := c.cfg.Inventory.GPUs
	// The state's record of the node, in its view, has the GPUs' health
	// as the cluster sees it; before the node registered, discovery's is
	// all there is.
	if n, ok := c.cfg.View.Node(c.cfg.NodeID); ok && len(n.GPUs) > 0 {
		gpus = n.GPUs
	}
	holders := c.cfg.View.GPUHolders(c.cfg.NodeID)
	labels := make(map[string][]string, len(gpus))
	for i := range gpus {
		g := &gpus[i]
		l := []string{c.cfg.NodeName, strconv.Itoa(g.Index), g.UUID, g.Model, strconv.FormatBool(g.Simulated)}
		labels[g.UUID] = l
		state := g.HealthState()
		for _, st := range []string{structs.GPUHealthy, structs.GPUUnhealthy, structs.GPUCordoned, structs.GPUForeign} {
			ch <- prometheus.MustNewConstMetric(gpuHealthDesc, prometheus.GaugeValue, boolValue(st == state), append(l, st)...)
		}
		job, held := holders[g.UUID]
		ch <- prometheus.MustNewConstMetric(gpuAllocatedDesc, prometheus.GaugeValue, boolValue(held), l...)
		if held {
			ch <- prometheus.MustNewConstMetric(gpuJobDesc, prometheus.GaugeValue, 1, append(l, job)...)
		}
	}
	if c.cfg.Telemetry == nil {
		return
	}
	for _, s := range c.cfg.Telemetry.Sample() {
		l, ok := labels[s.UUID]
		if !ok {
			l = []string{c.cfg.NodeName, strconv.Itoa(s.Index), s.UUID, s.Model, strconv.FormatBool(s.Simulated)}
		}
		gauge := func(d *prometheus.Desc, has gpu.Readings, v float64) {
			if s.Has&has != 0 {
				ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, l...)
			}
		}
		gauge(gpuUtilDesc, gpu.HasUtil, s.UtilPercent)
		gauge(gpuMemUtilDesc, gpu.HasMemUtil, s.MemUtilPercent)
		gauge(gpuMemUsedDesc, gpu.HasMemory, float64(s.MemUsedMiB<<20))
		gauge(gpuMemTotalDesc, gpu.HasMemory, float64(s.MemTotalMiB<<20))
		gauge(gpuTempDesc, gpu.HasTemp, s.TempC)
		gauge(gpuPowerDesc, gpu.HasPower, s.PowerW)
		if s.Has&gpu.HasECC != 0 {
			ch <- prometheus.MustNewConstMetric(gpuECCDesc, prometheus.CounterValue, float64(s.ECCCorrected), append(l, "corrected")...)
			ch <- prometheus.MustNewConstMetric(gpuECCDesc, prometheus.CounterValue, float64(s.ECCUncorrected), append(l, "uncorrected")...)
		}
		ch <- prometheus.MustNewConstMetric(gpuXIDDesc, prometheus.CounterValue, float64(s.XIDs), l...)
	}
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
