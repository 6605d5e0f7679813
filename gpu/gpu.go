package gpu

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/skein-dev/skein/structs"
)

// Sources of an inventory, as stored in structs.Node.GPUSource.
const (
	SourceNVML      = "nvml"
	SourceSimulated = "simulated"
	SourceNone      = "none"
)

// Modes of the --gpus flag that are not a sim: spec.
const (
	ModeAuto = "auto"
	ModeNVML = "nvml"
	ModeNone = "none"
)

// simPrefix starts a simulated-GPU spec.
const simPrefix = "sim:"

// defaultSimMemGB is the memory of a simulated GPU when the spec gives none.
const defaultSimMemGB = 80

// maxSimMemGB bounds the memory of one simulated GPU.
const maxSimMemGB = structs.MaxMemoryMiB / 1024

var (
	// ErrInvalidFlag marks a --gpus value that cannot be used. Its text is
	// the flag's name, so wrapped messages read "--gpus ...: why".
	ErrInvalidFlag = errors.New("--gpus")
	// ErrNVMLUnavailable means NVML could not be loaded or initialised.
	ErrNVMLUnavailable = errors.New("NVML unavailable")
	// ErrNVML is an NVML call that failed after initialisation.
	ErrNVML = errors.New("nvml")
	// ErrNotSimulated refuses a fault injected into a GPU that is not
	// simulated.
	ErrNotSimulated = errors.New("faults can only be injected into simulated GPUs")
	// errEmptyUtil is a simulated GPU's utilisation file with nothing in
	// it, and errBadUtil one that does not parse (SimTelemetry).
	errEmptyUtil = errors.New("empty utilisation file")
	errBadUtil   = errors.New("utilisation file")
)

// Inventory is what a node offers.
type Inventory struct {
	// Source is SourceNVML, SourceSimulated or SourceNone.
	Source string
	// GPUs is never nil. Simulated is true on every simulated GPU; Healthy
	// is true unless known otherwise.
	GPUs []structs.GPU
	// Driver is the NVML driver version and CUDA the highest CUDA version
	// that driver supports ("12.4"); both "" for other sources.
	Driver string
	CUDA   string
	// Note is one line for the agent's log and console when something is
	// worth saying, such as a fallback to simulated GPUs.
	Note string
}

// Discover resolves the --gpus flag. mode is "auto" ("" means the same),
// "nvml", "none" or "sim:COUNTxMODEL[-MEMGB][:TOPOLOGY]" (see ParseSim).
// seed makes simulated UUIDs unique per node and stable across restarts:
// pass the node ID. fallback is what "auto" uses when NVML does not
// initialise: "none", or a sim: spec in dev mode.
//
// "nvml" fails when NVML cannot initialise; "auto" never fails for that
// reason: it falls back and says so in Note.
func Discover(mode, seed, fallback string) (Inventory, error) {
	switch {
	case mode == ModeNone:
		return Inventory{Source: SourceNone, GPUs: []structs.GPU{}}, nil
	case strings.HasPrefix(mode, simPrefix):
		return simInventory(mode, seed)
	case mode == ModeNVML:
		inv, err := discoverNVML()
		if err != nil {
			return Inventory{}, fmt.Errorf("--gpus %s: %w", ModeNVML, err)
		}
		return withNVMLNote(inv), nil
	case mode == ModeAuto || mode == "":
		if fallback != ModeNone && !strings.HasPrefix(fallback, simPrefix) {
			return Inventory{}, fmt.Errorf("%w: fallback %q: use none or sim:COUNTxMODEL[-MEMGB][:TOPOLOGY]", ErrInvalidFlag, fallback)
		}
		inv, nvmlErr := discoverNVML()
		if nvmlErr == nil {
			return withNVMLNote(inv), nil
		}
		if !errors.Is(nvmlErr, ErrNVMLUnavailable) {
			return Inventory{}, fmt.Errorf("--gpus %s: %w", ModeAuto, nvmlErr)
		}
		inv, err := Discover(fallback, seed, ModeNone)
		if err != nil {
			return Inventory{}, err
		}
		if inv.Note == "" {
			inv.Note = fmt.Sprintf("%v; no GPUs offered", nvmlErr)
		} else {
			inv.Note = fmt.Sprintf("%v; %s", nvmlErr, inv.Note)
		}
		return inv, nil
	}
	return Inventory{}, fmt.Errorf("%w: unknown mode %q: use auto, nvml, none or sim:COUNTxMODEL[-MEMGB][:TOPOLOGY]", ErrInvalidFlag, mode)
}

// withNVMLNote says so when NVML works but finds nothing.
func withNVMLNote(inv Inventory) Inventory {
	if len(inv.GPUs) == 0 {
		inv.Note = "NVML reports no GPUs; none offered"
	}
	return inv
}

func simInventory(spec, seed string) (Inventory, error) {
	gpus, err := ParseSim(spec, seed)
	if err != nil {
		return Inventory{}, err
	}
	note := "using 0 simulated GPUs"
	if len(gpus) > 0 {
		g := gpus[0]
		note = fmt.Sprintf("using %d simulated GPUs (%s, %s) — not real hardware",
			len(gpus), strings.TrimPrefix(g.Model, "NVIDIA "), structs.FormatMiB(g.MemoryMiB))
	}
	return Inventory{Source: SourceSimulated, GPUs: gpus, Note: note}, nil
}

// Simulated topologies, the optional last field of a sim: spec.
const (
	// SimNVSwitch links every GPU through an NVSwitch, like an HGX board.
	// It is the default.
	SimNVSwitch = "nvswitch"
	// SimNVLinkPairs links GPUs in pairs: 0-1, 2-3, ...
	SimNVLinkPairs = "nvlink-pairs"
	// SimPCIe has no NVLink at all.
	SimPCIe = "pcie"
)

// simTopologies are the topologies a sim: spec may name, default first.
var simTopologies = []string{SimNVSwitch, SimNVLinkPairs, SimPCIe}

// simComputeCapability is the compute capability of well-known models.
var simComputeCapability = map[string]string{
	"V100": "7.0", "T4": "7.5", "A100": "8.0", "A30": "8.0", "A10": "8.6",
	"L4": "8.9", "L40": "8.9", "L40S": "8.9", "H100": "9.0", "H200": "9.0",
	"GH200": "9.0", "B100": "10.0", "B200": "10.0", "GB200": "10.0",
}

var simSpec = regexp.MustCompile(`^sim:([0-9]+)x([A-Za-z0-9][A-Za-z0-9_.]*)(?:-([0-9]+))?(?::(.*))?$`)

// ParseSim parses a simulated-GPU spec, sim:COUNTxMODEL[-MEMGB][:TOPOLOGY],
// such as "sim:8xH100-80" or "sim:4xA100:nvlink-pairs", into that many
// healthy GPUs marked Simulated. Memory is 80G each when -MEMGB is absent.
// The model is upper-cased and reads "NVIDIA <MODEL>"; well-known models
// get their compute capability. UUIDs derive from seed and the index, so
// they are stable and differ between nodes with different seeds.
//
// Every simulated node has two NUMA nodes (the lower half of the GPUs on
// node 0) and one PCIe switch per pair of GPUs (0-1, 2-3, ...). TOPOLOGY
// adds NVLink: "nvswitch" (the default) puts every GPU on an NVSwitch,
// "nvlink-pairs" links the GPUs of each PCIe pair, "pcie" has none.
func ParseSim(spec, seed string) ([]structs.GPU, error) {
	m := simSpec.FindStringSubmatch(spec)
	if m == nil {
		return nil, fmt.Errorf("%w %q: expected sim:COUNTxMODEL[-MEMGB][:TOPOLOGY], like sim:8xH100-80", ErrInvalidFlag, spec)
	}
	count, err := strconv.Atoi(m[1])
	if err != nil || count > structs.MaxGPUsPerNode {
		return nil, fmt.Errorf("%w %q: count must be 0..%d", ErrInvalidFlag, spec, structs.MaxGPUsPerNode)
	}
	memGB := int64(defaultSimMemGB)
	if m[3] != "" {
		memGB, err = strconv.ParseInt(m[3], 10, 64)
		if err != nil || memGB < 1 || memGB > maxSimMemGB {
			return nil, fmt.Errorf("%w %q: memory must be 1..%d GB", ErrInvalidFlag, spec, maxSimMemGB)
		}
	}
	topology := SimNVSwitch
	if strings.Contains(spec[len(simPrefix):], ":") {
		topology = m[4]
		if !slices.Contains(simTopologies, topology) {
			return nil, fmt.Errorf("%w %q: topology must be %s", ErrInvalidFlag, spec, strings.Join(simTopologies, ", "))
		}
	}
	upper := strings.ToUpper(m[2])
	gpus := make([]structs.GPU, count)
	for i := range gpus {
		g := structs.GPU{
			Index:             i,
			UUID:              simUUID(seed, i),
			Model:             "NVIDIA " + upper,
			MemoryMiB:         memGB * 1024,
			PCIBusID:          fmt.Sprintf("00000000:%02X:00.0", i+0x10),
			Healthy:           true,
			NUMANode:          i * 2 / count,
			ComputeCapability: simComputeCapability[upper],
			Simulated:         true,
		}
		if count > 1 {
			g.PCIeSwitch = fmt.Sprintf("switch-%d", i&^1)
		}
		switch topology {
		case SimNVSwitch:
			g.NVSwitch = count > 1
		case SimNVLinkPairs:
			if i^1 < count {
				g.NVLinkPeers = []int{i ^ 1}
			}
		}
		gpus[i] = g
	}
	return gpus, nil
}

// simUUID formats the first 16 bytes of sha256(seed/index) as an RFC 9562
// version 8 (custom) UUID behind NVML's "GPU-" prefix.
func simUUID(seed string, index int) string {
	sum := sha256.Sum256([]byte(seed + "/" + strconv.Itoa(index)))
	b := sum[:16]
	b[6] = b[6]&0x0f | 0x80
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("GPU-%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
