// Package gpu finds the GPUs a node offers and watches their health: real
// devices through NVML (github.com/NVIDIA/go-nvml), or simulated ones for
// dev mode and tests, which are marked as simulated wherever they travel.
//
// Discovery (Discover, FromNVML) reads, per GPU, the index, UUID, model,
// memory, PCI bus ID, compute capability, MIG mode, NUMA node, and how the
// GPUs connect: NVLink peers, NVSwitch, and which share a PCIe switch
// (NVML's common ancestor at most a set of switches). The inventory also
// carries the driver and CUDA versions. Queries a driver or device does not
// support leave their field unknown instead of failing discovery. A
// simulated inventory, sim:COUNTxMODEL[-MEMGB][:TOPOLOGY], lays its GPUs
// out on two NUMA nodes with a PCIe switch per pair and NVLink by TOPOLOGY:
// nvswitch (the default), nvlink-pairs or pcie.
//
// Health is a stream of Events from a Monitor (NewMonitor picks one).
// NVMLMonitor forwards NVML events as they come: critical XID errors
// (ClassifyXID, in xid.go, tells a GPU fault from an application's own
// error), double-bit ECC, memory retirement and poison errors, the driver's
// recovery actions. Every interval it also checks each GPU: gone from NVML
// or lost, retired pages or row remaps waiting for a reset (Fatal at every
// check while they last), throttling for heat or a hardware slowdown
// (Warning), MIG mode, index and NVLink changed since discovery (Warning),
// and the processes running on it (Processes). While NVML does not
// initialise every GPU is Fatal at every check. SimMonitor reports only
// the faults injected into it.
//
// Telemetry (NewTelemetry) takes readings in the background every period
// (DefaultTelemetryPeriod) and hands out the last ones without waiting on
// a device. NVMLTelemetry reads, per GPU, the utilisation of the GPU and
// of its memory, memory used and total, temperature, power and the
// volatile ECC counts; a query that fails or is not supported leaves its
// reading out of Sample.Has. The XID count comes from the monitor, which
// sees the events already: an XIDCounter shared through MonitorConfig and
// TelemetryConfig. SimTelemetry makes nothing up: a simulated GPU has
// only utilisation and memory, 0 while free, and while held what its job
// writes to its utilisation file ("UTIL [MEM_MIB]"; the agent names the
// file, see TelemetryConfig.Holders).
//
// It is the only skein package that imports go-nvml, with gpu/nvmlmock,
// which readies go-nvml's mock servers for tests. go-nvml needs cgo, so
// the NVML code carries a cgo build constraint; a binary built with
// CGO_ENABLED=0 still builds and reports that NVML support is missing.
package gpu
