//go:build cgo

package nvmlmock

import (
	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// DGXH100 is go-nvml's mock DGX H100, eight "NVIDIA H100 80GB HBM3",
// wired (Wire), whose telemetry queries answer with readings that tell
// the GPUs apart: GPU i is 10·i % busy, its memory 5·i % busy, uses i GiB
// of 80, runs at 30+i °C and 100.5+i W, and has i corrected and i/4
// uncorrected volatile ECC errors.
func DGXH100() *server.Server {
	srv := Wire(dgxh100.New())
	sensors(srv)
	return srv
}

// Wire fills in what go-nvml's mock servers leave out: GetPciInfo carries
// no bus ID, and NVLink, NUMA and PCIe topology queries are unset. Each
// device reports its mock bus ID in the legacy field and no NVLink
// support, and the node is laid out like a DGX: two GPUs per PCIe switch,
// four per NUMA node. It returns srv.
func Wire(srv *server.Server) *server.Server {
	for _, d := range srv.Devices {
		dev := d.(*server.Device)
		dev.GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) {
			var p nvml.PciInfo
			PutCString(p.BusIdLegacy[:], dev.PciBusID)
			return p, nvml.SUCCESS
		}
		dev.GetNvLinkStateFunc = func(int) (nvml.EnableState, nvml.Return) {
			return nvml.FEATURE_DISABLED, nvml.ERROR_NOT_SUPPORTED
		}
		dev.GetNvLinkRemoteDeviceTypeFunc = func(int) (nvml.IntNvLinkDeviceType, nvml.Return) {
			return nvml.NVLINK_DEVICE_TYPE_GPU, nvml.SUCCESS
		}
		dev.GetNumaNodeIdFunc = func() (int, nvml.Return) { return dev.Index / 4, nvml.SUCCESS }
		dev.GetTopologyCommonAncestorFunc = func(other nvml.Device) (nvml.GpuTopologyLevel, nvml.Return) {
			o := other.(*server.Device)
			switch {
			case o.Index/2 == dev.Index/2:
				return nvml.TOPOLOGY_SINGLE, nvml.SUCCESS
			case o.Index/4 == dev.Index/4:
				return nvml.TOPOLOGY_NODE, nvml.SUCCESS
			}
			return nvml.TOPOLOGY_SYSTEM, nvml.SUCCESS
		}
	}
	return srv
}

// PutCString writes s into dst as NVML writes its C strings: cut to fit,
// NUL-terminated (dst is zeroed, as NVML's structs come).
func PutCString(dst []int8, s string) {
	for i := range min(len(s), len(dst)-1) {
		dst[i] = int8(s[i])
	}
}

// Device is GPU i of srv.
func Device(srv *server.Server, i int) *server.Device {
	return srv.Devices[i].(*server.Device)
}

// sensors answers srv's telemetry queries with DGXH100's readings.
func sensors(srv *server.Server) {
	for i := range srv.Devices {
		dev := Device(srv, i)
		dev.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
			return nvml.Utilization{Gpu: uint32(10 * i), Memory: uint32(5 * i)}, nvml.SUCCESS
		}
		dev.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) {
			return nvml.Memory{Total: 80 << 30, Used: uint64(i) << 30, Free: uint64(80-i) << 30}, nvml.SUCCESS
		}
		dev.GetTemperatureFunc = func(sensor nvml.TemperatureSensors) (uint32, nvml.Return) {
			if sensor != nvml.TEMPERATURE_GPU {
				return 0, nvml.ERROR_INVALID_ARGUMENT
			}
			return uint32(30 + i), nvml.SUCCESS
		}
		dev.GetPowerUsageFunc = func() (uint32, nvml.Return) { return uint32(100_000 + 1000*i + 500), nvml.SUCCESS }
		dev.GetTotalEccErrorsFunc = func(kind nvml.MemoryErrorType, counter nvml.EccCounterType) (uint64, nvml.Return) {
			switch {
			case counter != nvml.VOLATILE_ECC:
				return 0, nvml.ERROR_INVALID_ARGUMENT
			case kind == nvml.MEMORY_ERROR_TYPE_CORRECTED:
				return uint64(i), nvml.SUCCESS
			}
			return uint64(i / 4), nvml.SUCCESS
		}
	}
}
