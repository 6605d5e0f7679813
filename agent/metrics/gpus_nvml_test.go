//go:build cgo

package metrics

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/skein-dev/skein/gpu"
	"github.com/skein-dev/skein/gpu/nvmlmock"
	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

// Over go-nvml's mock DGX H100, through gpu's discovery and its NVML
// telemetry, as an agent wires them: every GPU has its series, labelled
// as discovery named it, with what the mock's sensors read (see
// nvmlmock.DGXH100), the XIDs the monitor counted and the health the
// state holds.
func TestMetrics_GPUSeriesPerGPU_OverNVMLsMockDGX(t *testing.T) {
	srv := nvmlmock.DGXH100()
	inv, err := gpu.FromNVML(srv)
	if err != nil {
		t.Fatalf("FromNVML: %v", err)
	}
	if inv.Source != gpu.SourceNVML || len(inv.GPUs) != 8 {
		t.Fatalf("discovered %d GPUs from %s, want 8 from NVML", len(inv.GPUs), inv.Source)
	}
	// GPU 3 falls off the bus: the monitor counts its XID, its node
	// reports it unhealthy.
	xids := gpu.NewXIDCounter(len(inv.GPUs))
	xids.Add(3)
	tel := gpu.NewNVMLTelemetry(srv, inv.GPUs, gpu.TelemetryConfig{Period: time.Hour, XIDs: xids})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tel.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	testutil.WaitFor(t, 10*time.Second, func() error {
		if len(tel.Sample()) == 0 {
			return fmt.Errorf("no reading yet")
		}
		return nil
	})
	w, _, cfg := newWorldOf(t, inv)
	at := time.Unix(1_700_000_100, 0).UTC()
	w.apply(structs.NodeGPUHealthType, structs.NodeGPUHealthRequest{NodeID: nodeID, At: at, GPUs: []structs.GPUHealth{{
		UUID: inv.GPUs[3].UUID, Healthy: false, Reason: "XID 79: GPU has fallen off the bus", UnhealthySince: at, LastFaultAt: at}}})
	cfg.Telemetry = tel
	fams := scrape(t, New(cfg))

	for i := range 8 {
		uuid := nvmlmock.Device(srv, i).UUID
		l := map[string]string{"node": "n1", "index": strconv.Itoa(i), "uuid": uuid, "model": "NVIDIA H100 80GB HBM3", "simulated": "false"}
		health := map[string]float64{"healthy": 1, "unhealthy": 0, "cordoned": 0, "foreign": 0}
		xid := 0.0
		if i == 3 {
			health["healthy"], health["unhealthy"] = 0, 1
			xid = 1
		}
		for state, want := range health {
			if got := value(t, fams, "skein_gpu_health_state", merge(l, "state", state)); got != want {
				t.Errorf("GPU %d health_state{state=%q} = %v, want %v", i, state, got, want)
			}
		}
		for _, c := range []struct {
			name   string
			labels map[string]string
			want   float64
		}{
			{"skein_gpu_allocated", l, boolValue(i == 0)}, // job-a holds GPU 0
			{"skein_gpu_utilization_percent", l, float64(10 * i)},
			{"skein_gpu_memory_utilization_percent", l, float64(5 * i)},
			{"skein_gpu_memory_used_bytes", l, float64(i << 30)},
			{"skein_gpu_memory_total_bytes", l, 80 << 30},
			{"skein_gpu_temperature_celsius", l, float64(30 + i)},
			{"skein_gpu_power_watts", l, 100.5 + float64(i)},
			{"skein_gpu_ecc_errors_total", merge(l, "kind", "corrected"), float64(i)},
			{"skein_gpu_ecc_errors_total", merge(l, "kind", "uncorrected"), float64(i / 4)},
			{"skein_gpu_xid_events_total", l, xid},
		} {
			if got := value(t, fams, c.name, c.labels); got != c.want {
				t.Errorf("GPU %d %s = %v, want %v", i, c.name, got, c.want)
			}
		}
	}
	for name, want := range map[string]int{
		"skein_gpu_health_state": 8 * 4, "skein_gpu_allocated": 8, "skein_gpu_job_info": 1,
		"skein_gpu_utilization_percent": 8, "skein_gpu_memory_utilization_percent": 8, "skein_gpu_memory_used_bytes": 8,
		"skein_gpu_memory_total_bytes": 8, "skein_gpu_temperature_celsius": 8, "skein_gpu_power_watts": 8,
		"skein_gpu_ecc_errors_total": 8 * 2, "skein_gpu_xid_events_total": 8,
	} {
		if n := len(fams[name].GetMetric()); n != want {
			t.Errorf("%d %s series, want %d", n, name, want)
		}
	}
}
