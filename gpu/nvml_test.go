//go:build cgo

package gpu

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxb200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	"github.com/skein-dev/skein/gpu/nvmlmock"
)

func TestFromNVML_ReadsMockServers(t *testing.T) {
	tests := []struct {
		name      string
		srv       *server.Server
		model     string
		memoryMiB int64
		cc        string
		cuda      string
	}{
		{name: "DGX H100", srv: dgxh100.New(), model: "NVIDIA H100 80GB HBM3", memoryMiB: 81920, cc: "9.0", cuda: "12.4"},
		{name: "DGX A100", srv: dgxa100.New(), model: "Mock NVIDIA A100-SXM4-40GB", memoryMiB: 40960, cc: "8.0", cuda: "12.4"},
		{name: "DGX H200", srv: dgxh200.New(), model: "NVIDIA H200 141GB HBM3e", memoryMiB: 144384, cc: "9.0", cuda: "12.4"},
		{name: "DGX B200", srv: dgxb200.New(), model: "NVIDIA B200 180GB HBM3e", memoryMiB: 184320, cc: "10.0", cuda: "12.6"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := nvmlmock.Wire(tc.srv)
			inv, err := FromNVML(srv)
			if err != nil {
				t.Fatalf("FromNVML: %v", err)
			}
			if inv.Source != SourceNVML || inv.Driver != srv.DriverVersion || inv.CUDA != tc.cuda || inv.Note != "" {
				t.Errorf("got source %q, driver %q, CUDA %q, note %q; want %q, %q, %q, no note",
					inv.Source, inv.Driver, inv.CUDA, inv.Note, SourceNVML, srv.DriverVersion, tc.cuda)
			}
			if len(inv.GPUs) != 8 {
				t.Fatalf("got %d GPUs, want 8", len(inv.GPUs))
			}
			uuids := map[string]bool{}
			buses := map[string]bool{}
			for i, g := range inv.GPUs {
				wantBus := fmt.Sprintf("0000:%02x:00.0", i)
				if g.Index != i || g.Model != tc.model || g.MemoryMiB != tc.memoryMiB || g.PCIBusID != wantBus ||
					!g.Healthy || g.Simulated || g.NVLinkPeers != nil {
					t.Errorf("GPU %d = %+v, want index %d, model %q, %d MiB, bus %s, healthy, real, no NVLink",
						i, g, i, tc.model, tc.memoryMiB, wantBus)
				}
				if g.UUID != nvmlmock.Device(srv, i).UUID {
					t.Errorf("GPU %d UUID = %q, want the device's %q", i, g.UUID, nvmlmock.Device(srv, i).UUID)
				}
				wantSwitch := fmt.Sprintf("switch-%d", i&^1)
				if g.ComputeCapability != tc.cc || g.MIGMode != "disabled" || g.NUMANode != i/4 ||
					g.PCIeSwitch != wantSwitch || g.NVSwitch {
					t.Errorf("GPU %d: compute capability %q, MIG %q, NUMA node %d, PCIe switch %q, NVSwitch %t; want %q, disabled, %d, %q, false",
						i, g.ComputeCapability, g.MIGMode, g.NUMANode, g.PCIeSwitch, g.NVSwitch, tc.cc, i/4, wantSwitch)
				}
				uuids[g.UUID], buses[g.PCIBusID] = true, true
			}
			if len(uuids) != 8 || len(buses) != 8 {
				t.Errorf("got %d distinct UUIDs and %d distinct bus IDs, want 8 each", len(uuids), len(buses))
			}
			if n := len(srv.ShutdownCalls()); n != 1 {
				t.Errorf("Shutdown called %d times, want 1", n)
			}
		})
	}
}

func TestFromNVML_FindsNVLinkPeersAndNVSwitch(t *testing.T) {
	// GPUs are paired (0-1, 2-3, ...) over link 0, reported in the current
	// bus ID form while GetPciInfo uses the legacy one. Link 1 reaches an
	// NVSwitch, link 2 is down, and there are no further links.
	tests := []struct {
		name       string
		remoteType func(link int) (nvml.IntNvLinkDeviceType, nvml.Return)
		nvswitch   bool
	}{
		{
			name: "driver names the far end",
			remoteType: func(link int) (nvml.IntNvLinkDeviceType, nvml.Return) {
				if link == 1 {
					return nvml.NVLINK_DEVICE_TYPE_SWITCH, nvml.SUCCESS
				}
				return nvml.NVLINK_DEVICE_TYPE_GPU, nvml.SUCCESS
			},
			nvswitch: true,
		},
		{
			name: "driver cannot name the far end",
			remoteType: func(int) (nvml.IntNvLinkDeviceType, nvml.Return) {
				return nvml.NVLINK_DEVICE_TYPE_UNKNOWN, nvml.ERROR_FUNCTION_NOT_FOUND
			},
			nvswitch: false,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := nvmlmock.Wire(dgxh100.New())
			for i := range srv.Devices {
				dev := nvmlmock.Device(srv, i)
				dev.GetNvLinkStateFunc = func(link int) (nvml.EnableState, nvml.Return) {
					switch link {
					case 0, 1:
						return nvml.FEATURE_ENABLED, nvml.SUCCESS
					case 2:
						return nvml.FEATURE_DISABLED, nvml.SUCCESS
					}
					return nvml.FEATURE_DISABLED, nvml.ERROR_INVALID_ARGUMENT
				}
				dev.GetNvLinkRemoteDeviceTypeFunc = tc.remoteType
				dev.GetNvLinkRemotePciInfoFunc = func(link int) (nvml.PciInfo, nvml.Return) {
					var p nvml.PciInfo
					remote := "00000000:C0:00.0"
					if link == 0 {
						remote = fmt.Sprintf("00000000:%02X:00.0", i^1)
					}
					nvmlmock.PutCString(p.BusId[:], remote)
					return p, nvml.SUCCESS
				}
			}
			inv, err := FromNVML(srv)
			if err != nil {
				t.Fatalf("FromNVML: %v", err)
			}
			for i, g := range inv.GPUs {
				if want := []int{i ^ 1}; !slices.Equal(g.NVLinkPeers, want) || g.NVSwitch != tc.nvswitch {
					t.Errorf("GPU %d NVLinkPeers = %v, NVSwitch %t; want %v, %t", i, g.NVLinkPeers, g.NVSwitch, want, tc.nvswitch)
				}
			}
		})
	}
}

func TestFromNVML_UnsupportedQueriesLeaveFieldsUnknown(t *testing.T) {
	srv := nvmlmock.Wire(dgxa100.New())
	srv.SystemGetCudaDriverVersionFunc = func() (int, nvml.Return) { return 0, nvml.ERROR_FUNCTION_NOT_FOUND }
	for i := range srv.Devices {
		dev := nvmlmock.Device(srv, i)
		dev.GetCudaComputeCapabilityFunc = func() (int, int, nvml.Return) { return 0, 0, nvml.ERROR_NOT_SUPPORTED }
		dev.GetMigModeFunc = func() (int, int, nvml.Return) { return 0, 0, nvml.ERROR_NOT_SUPPORTED }
		dev.GetNumaNodeIdFunc = func() (int, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
		dev.GetTopologyCommonAncestorFunc = func(nvml.Device) (nvml.GpuTopologyLevel, nvml.Return) {
			return 0, nvml.ERROR_NOT_SUPPORTED
		}
	}
	inv, err := FromNVML(srv)
	if err != nil {
		t.Fatalf("FromNVML: %v", err)
	}
	if inv.CUDA != "" {
		t.Errorf("CUDA = %q, want unknown", inv.CUDA)
	}
	for i, g := range inv.GPUs {
		if g.ComputeCapability != "" || g.MIGMode != "" || g.NUMANode != -1 || g.PCIeSwitch != "" {
			t.Errorf("GPU %d: compute capability %q, MIG %q, NUMA node %d, PCIe switch %q; want all unknown",
				i, g.ComputeCapability, g.MIGMode, g.NUMANode, g.PCIeSwitch)
		}
	}
}

func TestFromNVML_ReadsMIGMode(t *testing.T) {
	srv := nvmlmock.Wire(dgxh100.New())
	nvmlmock.Device(srv, 2).MigMode = nvml.DEVICE_MIG_ENABLE
	inv, err := FromNVML(srv)
	if err != nil {
		t.Fatalf("FromNVML: %v", err)
	}
	for i, g := range inv.GPUs {
		want := "disabled"
		if i == 2 {
			want = "enabled"
		}
		if g.MIGMode != want {
			t.Errorf("GPU %d MIGMode = %q, want %q", i, g.MIGMode, want)
		}
	}
}

func TestFromNVML_ErrorsNameTheCall(t *testing.T) {
	tests := []struct {
		name      string
		inject    func(srv *server.Server)
		sentinel  error
		want      string
		shutdowns int
	}{
		{
			name: "library missing",
			inject: func(srv *server.Server) {
				srv.InitFunc = func() nvml.Return { return nvml.ERROR_LIBRARY_NOT_FOUND }
			},
			sentinel: ErrNVMLUnavailable, want: "NVML unavailable: libnvidia-ml.so.1 not found", shutdowns: 0,
		},
		{
			name: "driver not loaded",
			inject: func(srv *server.Server) {
				srv.InitFunc = func() nvml.Return { return nvml.ERROR_DRIVER_NOT_LOADED }
			},
			sentinel: ErrNVMLUnavailable, want: "NVML unavailable: NVIDIA driver not loaded", shutdowns: 0,
		},
		{
			name: "device count",
			inject: func(srv *server.Server) {
				srv.DeviceGetCountFunc = func() (int, nvml.Return) { return 0, nvml.ERROR_UNKNOWN }
			},
			sentinel: ErrNVML, want: "nvml: DeviceGetCount: ERROR_UNKNOWN", shutdowns: 1,
		},
		{
			name: "more GPUs than a node may have",
			inject: func(srv *server.Server) {
				srv.DeviceGetCountFunc = func() (int, nvml.Return) { return 65, nvml.SUCCESS }
			},
			sentinel: ErrNVML, want: "nvml: DeviceGetCount: 65 GPUs, outside 0..64", shutdowns: 1,
		},
		{
			name: "device handle",
			inject: func(srv *server.Server) {
				srv.DeviceGetHandleByIndexFunc = func(int) (nvml.Device, nvml.Return) { return nil, nvml.ERROR_GPU_IS_LOST }
			},
			sentinel: ErrNVML, want: "nvml: DeviceGetHandleByIndex(0): ERROR_GPU_IS_LOST", shutdowns: 1,
		},
		{
			name: "memory of one device",
			inject: func(srv *server.Server) {
				nvmlmock.Device(srv, 3).GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) { return nvml.Memory{}, nvml.ERROR_GPU_IS_LOST }
			},
			sentinel: ErrNVML, want: "nvml: device 3: GetMemoryInfo: ERROR_GPU_IS_LOST", shutdowns: 1,
		},
		{
			name: "name of one device",
			inject: func(srv *server.Server) {
				nvmlmock.Device(srv, 7).GetNameFunc = func() (string, nvml.Return) { return "", nvml.ERROR_UNKNOWN }
			},
			sentinel: ErrNVML, want: "nvml: device 7: GetName: ERROR_UNKNOWN", shutdowns: 1,
		},
		{
			name: "CUDA version",
			inject: func(srv *server.Server) {
				srv.SystemGetCudaDriverVersionFunc = func() (int, nvml.Return) { return 0, nvml.ERROR_UNKNOWN }
			},
			sentinel: ErrNVML, want: "nvml: SystemGetCudaDriverVersion: ERROR_UNKNOWN", shutdowns: 1,
		},
		{
			name: "compute capability of one device",
			inject: func(srv *server.Server) {
				nvmlmock.Device(srv, 1).GetCudaComputeCapabilityFunc = func() (int, int, nvml.Return) { return 0, 0, nvml.ERROR_GPU_IS_LOST }
			},
			sentinel: ErrNVML, want: "nvml: device 1: GetCudaComputeCapability: ERROR_GPU_IS_LOST", shutdowns: 1,
		},
		{
			name: "NUMA node of one device",
			inject: func(srv *server.Server) {
				nvmlmock.Device(srv, 4).GetNumaNodeIdFunc = func() (int, nvml.Return) { return 0, nvml.ERROR_UNKNOWN }
			},
			sentinel: ErrNVML, want: "nvml: device 4: GetNumaNodeId: ERROR_UNKNOWN", shutdowns: 1,
		},
		{
			name: "PCIe topology of one device",
			inject: func(srv *server.Server) {
				nvmlmock.Device(srv, 6).GetTopologyCommonAncestorFunc = func(nvml.Device) (nvml.GpuTopologyLevel, nvml.Return) {
					return 0, nvml.ERROR_UNKNOWN
				}
			},
			sentinel: ErrNVML, want: "nvml: device 6: GetTopologyCommonAncestor(7): ERROR_UNKNOWN", shutdowns: 1,
		},
		{
			name: "NVLink state of one device",
			inject: func(srv *server.Server) {
				nvmlmock.Device(srv, 5).GetNvLinkStateFunc = func(int) (nvml.EnableState, nvml.Return) {
					return nvml.FEATURE_DISABLED, nvml.ERROR_UNKNOWN
				}
			},
			sentinel: ErrNVML, want: "nvml: device 5: GetNvLinkState(0): ERROR_UNKNOWN", shutdowns: 1,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := nvmlmock.Wire(dgxh100.New())
			tc.inject(srv)
			inv, err := FromNVML(srv)
			if err == nil {
				t.Fatalf("FromNVML = %d GPUs, want error %q", len(inv.GPUs), tc.want)
			}
			if err.Error() != tc.want {
				t.Errorf("error = %q, want %q", err, tc.want)
			}
			if !errors.Is(err, tc.sentinel) {
				t.Errorf("error %q does not wrap %v", err, tc.sentinel)
			}
			if n := len(srv.ShutdownCalls()); n != tc.shutdowns {
				t.Errorf("Shutdown called %d times, want %d", n, tc.shutdowns)
			}
		})
	}
}
