//go:build cgo

package gpu

import (
	"fmt"
	"slices"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/skein-dev/skein/structs"
)

// discoverNVML reads the inventory from the system's NVML library.
func discoverNVML() (Inventory, error) {
	return FromNVML(nvml.New())
}

// FromNVML initialises lib, reads every GPU it reports and shuts it down
// again. Tests pass go-nvml's mock servers; production passes nvml.New().
//
// A library that does not initialise yields ErrNVMLUnavailable. Any other
// failing call yields ErrNVML naming the call and the device index, except
// queries the driver or device does not support, which leave their field
// unknown: no NVLink peers, no CUDA version or compute capability, MIG mode
// "", NUMA node -1, no PCIe switch.
func FromNVML(lib nvml.Interface) (Inventory, error) {
	if ret := lib.Init(); ret != nvml.SUCCESS {
		return Inventory{}, fmt.Errorf("%w: %s", ErrNVMLUnavailable, initReason(ret))
	}
	defer lib.Shutdown()

	driver, ret := lib.SystemGetDriverVersion()
	if ret != nvml.SUCCESS {
		return Inventory{}, fmt.Errorf("%w: SystemGetDriverVersion: %v", ErrNVML, ret)
	}
	cuda, err := cudaVersion(lib)
	if err != nil {
		return Inventory{}, err
	}
	count, ret := lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return Inventory{}, fmt.Errorf("%w: DeviceGetCount: %v", ErrNVML, ret)
	}
	if count < 0 || count > structs.MaxGPUsPerNode {
		return Inventory{}, fmt.Errorf("%w: DeviceGetCount: %d GPUs, outside 0..%d", ErrNVML, count, structs.MaxGPUsPerNode)
	}

	gpus := make([]structs.GPU, count)
	devices := make([]nvml.Device, count)
	for i := range gpus {
		dev, ret := lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			return Inventory{}, fmt.Errorf("%w: DeviceGetHandleByIndex(%d): %v", ErrNVML, i, ret)
		}
		g, err := readDevice(dev, i)
		if err != nil {
			return Inventory{}, err
		}
		devices[i], gpus[i] = dev, g
	}
	if err := readTopology(devices, gpus); err != nil {
		return Inventory{}, err
	}
	return Inventory{Source: SourceNVML, GPUs: gpus, Driver: driver, CUDA: cuda}, nil
}

// readTopology fills in how the GPUs connect: NVLink peers, NVSwitch and
// PCIe switch groups.
func readTopology(devices []nvml.Device, gpus []structs.GPU) error {
	byBus := make(map[string]int, len(gpus))
	for i, g := range gpus {
		byBus[busKey(g.PCIBusID)] = i
	}
	for i, dev := range devices {
		peers, nvswitch, err := nvlinks(dev, i, byBus)
		if err != nil {
			return err
		}
		gpus[i].NVLinkPeers, gpus[i].NVSwitch = peers, nvswitch
	}
	return pcieSwitches(devices, gpus)
}

// unsupported reports whether a failed query only means the driver or the
// device cannot answer it, so its field stays unknown.
func unsupported(ret nvml.Return) bool {
	return ret == nvml.ERROR_NOT_SUPPORTED || ret == nvml.ERROR_FUNCTION_NOT_FOUND
}

// cudaVersion reads the highest CUDA version the driver supports, as
// "12.4"; "" when the driver cannot say.
func cudaVersion(lib nvml.Interface) (string, error) {
	v, ret := lib.SystemGetCudaDriverVersion()
	switch {
	case ret == nvml.SUCCESS:
		return fmt.Sprintf("%d.%d", v/1000, v%1000/10), nil
	case unsupported(ret):
		return "", nil
	}
	return "", fmt.Errorf("%w: SystemGetCudaDriverVersion: %v", ErrNVML, ret)
}

// initReason turns a failed Init into words a person can act on.
func initReason(ret nvml.Return) string {
	switch ret {
	case nvml.ERROR_LIBRARY_NOT_FOUND:
		return "libnvidia-ml.so.1 not found"
	case nvml.ERROR_DRIVER_NOT_LOADED:
		return "NVIDIA driver not loaded"
	}
	return fmt.Sprintf("init: %v", ret)
}

// readDevice reads everything but the topology from one device.
func readDevice(dev nvml.Device, i int) (structs.GPU, error) {
	fail := func(call string, ret nvml.Return) (structs.GPU, error) {
		return structs.GPU{}, fmt.Errorf("%w: device %d: %s: %v", ErrNVML, i, call, ret)
	}
	uuid, ret := dev.GetUUID()
	if ret != nvml.SUCCESS {
		return fail("GetUUID", ret)
	}
	name, ret := dev.GetName()
	if ret != nvml.SUCCESS {
		return fail("GetName", ret)
	}
	mem, ret := dev.GetMemoryInfo()
	if ret != nvml.SUCCESS {
		return fail("GetMemoryInfo", ret)
	}
	pci, ret := dev.GetPciInfo()
	if ret != nvml.SUCCESS {
		return fail("GetPciInfo", ret)
	}
	g := structs.GPU{
		Index:     i,
		UUID:      uuid,
		Model:     name,
		MemoryMiB: int64(mem.Total >> 20),
		PCIBusID:  pciBusID(pci),
		Healthy:   true,
		NUMANode:  -1,
	}
	major, minor, ret := dev.GetCudaComputeCapability()
	switch {
	case ret == nvml.SUCCESS:
		g.ComputeCapability = fmt.Sprintf("%d.%d", major, minor)
	case !unsupported(ret):
		return fail("GetCudaComputeCapability", ret)
	}
	mig, ret := migMode(dev)
	if ret != nvml.SUCCESS && !unsupported(ret) {
		return fail("GetMigMode", ret)
	}
	g.MIGMode = mig
	numa, ret := dev.GetNumaNodeId()
	switch {
	case ret == nvml.SUCCESS && numa >= 0:
		g.NUMANode = numa
	case ret != nvml.SUCCESS && !unsupported(ret):
		return fail("GetNumaNodeId", ret)
	}
	return g, nil
}

// migMode reads the current MIG mode as "enabled" or "disabled"; "" with
// the failing return when NVML cannot say.
func migMode(dev nvml.Device) (string, nvml.Return) {
	current, _, ret := dev.GetMigMode()
	if ret != nvml.SUCCESS {
		return "", ret
	}
	if current == nvml.DEVICE_MIG_ENABLE {
		return "enabled", nvml.SUCCESS
	}
	return "disabled", nvml.SUCCESS
}

// pcieSwitches labels the GPUs that share a PCIe switch (NVML's common
// ancestor is at most a set of switches, not a host bridge) with one label,
// "switch-N" after the lowest index of the group. A GPU alone behind its
// switch, or on a device that cannot say, keeps "".
func pcieSwitches(devices []nvml.Device, gpus []structs.GPU) error {
	group := make([]int, len(devices))
	for i := range group {
		group[i] = i
	}
	root := func(i int) int {
		for group[i] != i {
			i = group[i]
		}
		return i
	}
	for i := range devices {
		for j := i + 1; j < len(devices); j++ {
			level, ret := devices[i].GetTopologyCommonAncestor(devices[j])
			if unsupported(ret) {
				return nil
			}
			if ret != nvml.SUCCESS {
				return fmt.Errorf("%w: device %d: GetTopologyCommonAncestor(%d): %v", ErrNVML, i, j, ret)
			}
			if level <= nvml.TOPOLOGY_MULTIPLE {
				a, b := root(i), root(j)
				group[max(a, b)] = min(a, b)
			}
		}
	}
	size := make([]int, len(devices))
	for i := range devices {
		size[root(i)]++
	}
	for i := range gpus {
		if r := root(i); size[r] > 1 {
			gpus[i].PCIeSwitch = fmt.Sprintf("switch-%d", r)
		}
	}
	return nil
}

// nvlinks lists the indexes of the GPUs that dev reaches over an active
// NVLink, and says whether one of its active links ends at an NVSwitch.
// Links to anything else are left out.
func nvlinks(dev nvml.Device, i int, byBus map[string]int) ([]int, bool, error) {
	var peers []int
	nvswitch := false
	for link := range nvml.NVLINK_MAX_LINKS {
		state, ret := dev.GetNvLinkState(link)
		switch ret {
		case nvml.SUCCESS:
		case nvml.ERROR_NOT_SUPPORTED:
			// The device has no NVLink at all.
			return nil, false, nil
		case nvml.ERROR_INVALID_ARGUMENT:
			// The device has fewer links than the most NVML knows of.
			continue
		default:
			return nil, false, fmt.Errorf("%w: device %d: GetNvLinkState(%d): %v", ErrNVML, i, link, ret)
		}
		if state != nvml.FEATURE_ENABLED {
			continue
		}
		kind, ret := dev.GetNvLinkRemoteDeviceType(link)
		switch {
		case ret == nvml.SUCCESS && kind == nvml.NVLINK_DEVICE_TYPE_SWITCH:
			nvswitch = true
			continue
		case ret == nvml.SUCCESS && kind != nvml.NVLINK_DEVICE_TYPE_GPU:
			continue
		case ret != nvml.SUCCESS && !unsupported(ret):
			return nil, false, fmt.Errorf("%w: device %d: GetNvLinkRemoteDeviceType(%d): %v", ErrNVML, i, link, ret)
		}
		remote, ret := dev.GetNvLinkRemotePciInfo(link)
		if ret == nvml.ERROR_NOT_SUPPORTED {
			continue
		}
		if ret != nvml.SUCCESS {
			return nil, false, fmt.Errorf("%w: device %d: GetNvLinkRemotePciInfo(%d): %v", ErrNVML, i, link, ret)
		}
		peer, ok := byBus[busKey(pciBusID(remote))]
		if ok && peer != i && !slices.Contains(peers, peer) {
			peers = append(peers, peer)
		}
	}
	slices.Sort(peers)
	return peers, nvswitch, nil
}

// pciBusID returns the bus ID NVML reports, preferring the current
// 8-digit-domain form over the legacy one.
func pciBusID(p nvml.PciInfo) string {
	if id := cString(p.BusId[:]); id != "" {
		return id
	}
	return cString(p.BusIdLegacy[:])
}

// cString reads a NUL-terminated C char array.
func cString(b []int8) string {
	var sb strings.Builder
	for _, c := range b {
		if c == 0 {
			break
		}
		sb.WriteByte(byte(c))
	}
	return strings.TrimSpace(sb.String())
}

// busKey makes bus IDs comparable across NVML's two forms: lower case, with
// the domain widened to 8 digits ("0000:07:00.0" -> "00000000:07:00.0").
func busKey(id string) string {
	id = strings.ToLower(id)
	domain, rest, ok := strings.Cut(id, ":")
	if !ok || len(domain) >= 8 {
		return id
	}
	return strings.Repeat("0", 8-len(domain)) + domain + ":" + rest
}
