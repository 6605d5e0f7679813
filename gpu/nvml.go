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
// NVLink queries a device does not support, which only leave NVLinkPeers
// empty.
func FromNVML(lib nvml.Interface) (Inventory, error) {
	if ret := lib.Init(); ret != nvml.SUCCESS {
		return Inventory{}, fmt.Errorf("%w: %s", ErrNVMLUnavailable, initReason(ret))
	}
	defer lib.Shutdown()

	driver, ret := lib.SystemGetDriverVersion()
	if ret != nvml.SUCCESS {
		return Inventory{}, fmt.Errorf("%w: SystemGetDriverVersion: %v", ErrNVML, ret)
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

	byBus := make(map[string]int, count)
	for i, g := range gpus {
		byBus[busKey(g.PCIBusID)] = i
	}
	for i, dev := range devices {
		peers, err := nvlinkPeers(dev, i, byBus)
		if err != nil {
			return Inventory{}, err
		}
		gpus[i].NVLinkPeers = peers
	}
	return Inventory{Source: SourceNVML, GPUs: gpus, Driver: driver}, nil
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

// readDevice reads everything but NVLink peers from one device.
func readDevice(dev nvml.Device, i int) (structs.GPU, error) {
	uuid, ret := dev.GetUUID()
	if ret != nvml.SUCCESS {
		return structs.GPU{}, fmt.Errorf("%w: device %d: GetUUID: %v", ErrNVML, i, ret)
	}
	name, ret := dev.GetName()
	if ret != nvml.SUCCESS {
		return structs.GPU{}, fmt.Errorf("%w: device %d: GetName: %v", ErrNVML, i, ret)
	}
	mem, ret := dev.GetMemoryInfo()
	if ret != nvml.SUCCESS {
		return structs.GPU{}, fmt.Errorf("%w: device %d: GetMemoryInfo: %v", ErrNVML, i, ret)
	}
	pci, ret := dev.GetPciInfo()
	if ret != nvml.SUCCESS {
		return structs.GPU{}, fmt.Errorf("%w: device %d: GetPciInfo: %v", ErrNVML, i, ret)
	}
	return structs.GPU{
		Index:     i,
		UUID:      uuid,
		Model:     name,
		MemoryMiB: int64(mem.Total >> 20),
		PCIBusID:  pciBusID(pci),
		Healthy:   true,
	}, nil
}

// nvlinkPeers lists the indexes of the GPUs that dev reaches over an active
// NVLink. Links to anything that is not one of this node's GPUs (an
// NVSwitch, say) are left out.
func nvlinkPeers(dev nvml.Device, i int, byBus map[string]int) ([]int, error) {
	var peers []int
	for link := range nvml.NVLINK_MAX_LINKS {
		state, ret := dev.GetNvLinkState(link)
		switch ret {
		case nvml.SUCCESS:
		case nvml.ERROR_NOT_SUPPORTED:
			// The device has no NVLink at all.
			return nil, nil
		case nvml.ERROR_INVALID_ARGUMENT:
			// The device has fewer links than the most NVML knows of.
			continue
		default:
			return nil, fmt.Errorf("%w: device %d: GetNvLinkState(%d): %v", ErrNVML, i, link, ret)
		}
		if state != nvml.FEATURE_ENABLED {
			continue
		}
		remote, ret := dev.GetNvLinkRemotePciInfo(link)
		if ret == nvml.ERROR_NOT_SUPPORTED {
			continue
		}
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("%w: device %d: GetNvLinkRemotePciInfo(%d): %v", ErrNVML, i, link, ret)
		}
		peer, ok := byBus[busKey(pciBusID(remote))]
		if ok && peer != i && !slices.Contains(peers, peer) {
			peers = append(peers, peer)
		}
	}
	slices.Sort(peers)
	return peers, nil
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
