package gpu

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/skein-dev/skein/structs"
)

var uuidForm = regexp.MustCompile(`^GPU-[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func TestParseSim_BuildsSimulatedGPUs(t *testing.T) {
	tests := []struct {
		name      string
		spec      string
		count     int
		model     string
		memoryMiB int64
	}{
		{name: "count model and memory", spec: "sim:8xH100-80", count: 8, model: "NVIDIA H100", memoryMiB: 80 * 1024},
		{name: "memory defaults to 80G", spec: "sim:4xA100", count: 4, model: "NVIDIA A100", memoryMiB: 80 * 1024},
		{name: "model is upper-cased", spec: "sim:2xl40s-48", count: 2, model: "NVIDIA L40S", memoryMiB: 48 * 1024},
		{name: "zero GPUs", spec: "sim:0xH100", count: 0, model: "", memoryMiB: 0},
		{name: "the most GPUs a node may have", spec: "sim:64xB200-180", count: 64, model: "NVIDIA B200", memoryMiB: 180 * 1024},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			gpus, err := ParseSim(tc.spec, "node-1")
			if err != nil {
				t.Fatalf("ParseSim(%q): %v", tc.spec, err)
			}
			if gpus == nil || len(gpus) != tc.count {
				t.Fatalf("got %d GPUs (nil=%t), want %d", len(gpus), gpus == nil, tc.count)
			}
			for i, g := range gpus {
				if g.Index != i || g.Model != tc.model || g.MemoryMiB != tc.memoryMiB || !g.Simulated || !g.Healthy {
					t.Errorf("GPU %d = %+v, want index %d, model %q, %d MiB, simulated and healthy", i, g, i, tc.model, tc.memoryMiB)
				}
				if !uuidForm.MatchString(g.UUID) {
					t.Errorf("GPU %d UUID %q is not a GPU- prefixed UUID", i, g.UUID)
				}
				if want := fmt.Sprintf("00000000:%02X:00.0", i+0x10); g.PCIBusID != want {
					t.Errorf("GPU %d PCIBusID = %q, want %q", i, g.PCIBusID, want)
				}
			}
		})
	}
}

func TestParseSim_RejectsBadSpecsNamingTheLimit(t *testing.T) {
	const syntax = `: expected sim:COUNTxMODEL[-MEMGB][:TOPOLOGY], like sim:8xH100-80`
	tests := []struct {
		name string
		spec string
		want string
	}{
		{name: "count above the limit", spec: "sim:99xH100", want: `--gpus "sim:99xH100": count must be 0..64`},
		{name: "count one above the limit", spec: "sim:65xH100-80", want: `--gpus "sim:65xH100-80": count must be 0..64`},
		{name: "count overflows", spec: "sim:99999999999999999999xH100", want: `--gpus "sim:99999999999999999999xH100": count must be 0..64`},
		{name: "negative count", spec: "sim:-1xH100", want: `--gpus "sim:-1xH100"` + syntax},
		{name: "zero memory", spec: "sim:8xH100-0", want: `--gpus "sim:8xH100-0": memory must be 1..65536 GB`},
		{name: "memory above the limit", spec: "sim:8xH100-65537", want: `--gpus "sim:8xH100-65537": memory must be 1..65536 GB`},
		{name: "memory with a unit", spec: "sim:8xH100-80G", want: `--gpus "sim:8xH100-80G"` + syntax},
		{name: "no count", spec: "sim:H100", want: `--gpus "sim:H100"` + syntax},
		{name: "no model", spec: "sim:8x", want: `--gpus "sim:8x"` + syntax},
		{name: "no sim prefix", spec: "8xH100", want: `--gpus "8xH100"` + syntax},
		{name: "space in model", spec: "sim:8xH 100", want: `--gpus "sim:8xH 100"` + syntax},
		{name: "empty", spec: "", want: `--gpus ""` + syntax},
		{name: "unknown topology", spec: "sim:8xH100-80:mesh", want: `--gpus "sim:8xH100-80:mesh": topology must be nvswitch, nvlink-pairs, pcie`},
		{name: "empty topology", spec: "sim:8xH100:", want: `--gpus "sim:8xH100:": topology must be nvswitch, nvlink-pairs, pcie`},
		{name: "topology is lower case", spec: "sim:8xH100:PCIE", want: `--gpus "sim:8xH100:PCIE": topology must be nvswitch, nvlink-pairs, pcie`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			gpus, err := ParseSim(tc.spec, "node-1")
			if err == nil {
				t.Fatalf("ParseSim(%q) = %d GPUs, want error %q", tc.spec, len(gpus), tc.want)
			}
			if err.Error() != tc.want {
				t.Errorf("error = %q, want %q", err, tc.want)
			}
			if !errors.Is(err, ErrInvalidFlag) {
				t.Errorf("error %q does not wrap ErrInvalidFlag", err)
			}
		})
	}
}

func TestParseSim_DescribesTheTopology(t *testing.T) {
	tests := []struct {
		name     string
		spec     string
		nvswitch bool
		peers    func(i int) []int
	}{
		{name: "NVSwitch by default", spec: "sim:8xH100-80", nvswitch: true, peers: func(int) []int { return nil }},
		{name: "NVSwitch", spec: "sim:8xH100:nvswitch", nvswitch: true, peers: func(int) []int { return nil }},
		{name: "NVLink pairs", spec: "sim:8xA100-40:nvlink-pairs", peers: func(i int) []int { return []int{i ^ 1} }},
		{name: "PCIe only", spec: "sim:8xL40S-48:pcie", peers: func(int) []int { return nil }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			gpus, err := ParseSim(tc.spec, "node-1")
			if err != nil {
				t.Fatalf("ParseSim(%q): %v", tc.spec, err)
			}
			for i, g := range gpus {
				wantSwitch := fmt.Sprintf("switch-%d", i&^1)
				if g.NVSwitch != tc.nvswitch || !slices.Equal(g.NVLinkPeers, tc.peers(i)) ||
					g.NUMANode != i/4 || g.PCIeSwitch != wantSwitch {
					t.Errorf("GPU %d: NVSwitch %t, peers %v, NUMA node %d, PCIe switch %q; want %t, %v, %d, %q",
						i, g.NVSwitch, g.NVLinkPeers, g.NUMANode, g.PCIeSwitch, tc.nvswitch, tc.peers(i), i/4, wantSwitch)
				}
			}
		})
	}
}

func TestParseSim_OddCountsAndKnownModels(t *testing.T) {
	gpus, err := ParseSim("sim:3xh100:nvlink-pairs", "node-1")
	if err != nil {
		t.Fatal(err)
	}
	want := [][]int{{1}, {0}, nil}
	for i, g := range gpus {
		if !slices.Equal(g.NVLinkPeers, want[i]) || g.ComputeCapability != "9.0" {
			t.Errorf("GPU %d: peers %v, compute capability %q; want %v, 9.0", i, g.NVLinkPeers, g.ComputeCapability, want[i])
		}
	}
	one, err := ParseSim("sim:1xMI300X", "node-1")
	if err != nil {
		t.Fatal(err)
	}
	if g := one[0]; g.NVSwitch || g.PCIeSwitch != "" || g.NUMANode != 0 || g.ComputeCapability != "" {
		t.Errorf("a lone GPU of an unknown model = %+v, want no NVSwitch, no PCIe switch, NUMA node 0, no compute capability", g)
	}
}

func TestParseSim_UUIDsStablePerSeedAndUniqueAcrossSeeds(t *testing.T) {
	spec := fmt.Sprintf("sim:%dxH100", structs.MaxGPUsPerNode)
	a1, err := ParseSim(spec, "node-a")
	if err != nil {
		t.Fatal(err)
	}
	a2, err := ParseSim(spec, "node-a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := ParseSim(spec, "node-b")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	for i := range a1 {
		if a1[i].UUID != a2[i].UUID {
			t.Errorf("GPU %d: UUID changed between calls with one seed: %s then %s", i, a1[i].UUID, a2[i].UUID)
		}
		for _, g := range []structs.GPU{a1[i], b[i]} {
			if prev, dup := seen[g.UUID]; dup {
				t.Errorf("UUID %s given twice (%s and GPU %d)", g.UUID, prev, g.Index)
			}
			seen[g.UUID] = fmt.Sprintf("GPU %d", g.Index)
		}
	}
}

func TestDiscover_ResolvesExplicitModes(t *testing.T) {
	tests := []struct {
		name    string
		mode    string
		source  string
		count   int
		note    string
		wantErr string
	}{
		{name: "none offers nothing", mode: "none", source: SourceNone, count: 0},
		{name: "sim offers simulated GPUs and says so", mode: "sim:2xA100-40", source: SourceSimulated, count: 2,
			note: "using 2 simulated GPUs (A100, 40G) — not real hardware"},
		{name: "sim with zero GPUs", mode: "sim:0xH100", source: SourceSimulated, count: 0, note: "using 0 simulated GPUs"},
		{name: "bad sim spec", mode: "sim:99xH100", wantErr: `--gpus "sim:99xH100": count must be 0..64`},
		{name: "unknown mode", mode: "foo",
			wantErr: `--gpus: unknown mode "foo": use auto, nvml, none or sim:COUNTxMODEL[-MEMGB][:TOPOLOGY]`},
		{name: "modes are lower case", mode: "NVML",
			wantErr: `--gpus: unknown mode "NVML": use auto, nvml, none or sim:COUNTxMODEL[-MEMGB][:TOPOLOGY]`},
		{name: "sim without a spec", mode: "sim",
			wantErr: `--gpus: unknown mode "sim": use auto, nvml, none or sim:COUNTxMODEL[-MEMGB][:TOPOLOGY]`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			inv, err := Discover(tc.mode, "node-1", ModeNone)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("Discover(%q) error = %v, want %q", tc.mode, err, tc.wantErr)
				}
				if !errors.Is(err, ErrInvalidFlag) {
					t.Errorf("error %q does not wrap ErrInvalidFlag", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Discover(%q): %v", tc.mode, err)
			}
			if inv.Source != tc.source || inv.GPUs == nil || len(inv.GPUs) != tc.count || inv.Note != tc.note || inv.Driver != "" {
				t.Errorf("Discover(%q) = %+v, want source %q, %d GPUs (non-nil), note %q, no driver",
					tc.mode, inv, tc.source, tc.count, tc.note)
			}
		})
	}
}

func TestDiscover_AutoRejectsBadFallback(t *testing.T) {
	_, err := Discover(ModeAuto, "node-1", ModeNVML)
	want := `--gpus: fallback "nvml": use none or sim:COUNTxMODEL[-MEMGB][:TOPOLOGY]`
	if err == nil || err.Error() != want {
		t.Fatalf("error = %v, want %q", err, want)
	}
}

// skipIfNVMLWorks skips tests that need NVML to be missing, as it is on
// machines without an NVIDIA driver.
func skipIfNVMLWorks(t *testing.T) {
	t.Helper()
	if _, err := discoverNVML(); err == nil {
		t.Skip("NVML initialises on this machine")
	}
}

func TestDiscover_AutoFallsBackWhenNVMLIsMissing(t *testing.T) {
	skipIfNVMLWorks(t)
	tests := []struct {
		name     string
		mode     string
		fallback string
		source   string
		count    int
		noteTail string
	}{
		{name: "to nothing", mode: ModeAuto, fallback: ModeNone, source: SourceNone, count: 0,
			noteTail: "; no GPUs offered"},
		{name: "to simulated GPUs in dev mode", mode: ModeAuto, fallback: "sim:8xH100-80", source: SourceSimulated, count: 8,
			noteTail: "; using 8 simulated GPUs (H100, 80G) — not real hardware"},
		{name: "empty mode means auto", mode: "", fallback: ModeNone, source: SourceNone, count: 0,
			noteTail: "; no GPUs offered"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			inv, err := Discover(tc.mode, "node-1", tc.fallback)
			if err != nil {
				t.Fatalf("Discover(%q, fallback %q): %v", tc.mode, tc.fallback, err)
			}
			if inv.Source != tc.source || len(inv.GPUs) != tc.count {
				t.Errorf("got source %q with %d GPUs, want %q with %d", inv.Source, len(inv.GPUs), tc.source, tc.count)
			}
			if !strings.HasPrefix(inv.Note, "NVML unavailable: ") || !strings.HasSuffix(inv.Note, tc.noteTail) {
				t.Errorf("Note = %q, want it to say NVML is unavailable and end %q", inv.Note, tc.noteTail)
			}
		})
	}
}

func TestDiscover_NVMLModeFailsClearlyWhenNVMLIsMissing(t *testing.T) {
	skipIfNVMLWorks(t)
	_, err := Discover(ModeNVML, "node-1", "sim:8xH100-80")
	if err == nil {
		t.Fatal("Discover(nvml) succeeded without NVML")
	}
	if !errors.Is(err, ErrNVMLUnavailable) {
		t.Errorf("error %q does not wrap ErrNVMLUnavailable", err)
	}
	if !strings.HasPrefix(err.Error(), "--gpus nvml: NVML unavailable: ") {
		t.Errorf("error = %q, want it to name the flag and say NVML is unavailable", err)
	}
	t.Logf("error: %v", err)
}

func TestDiscover_NVMLWithoutGPUsSaysSo(t *testing.T) {
	tests := []struct {
		name string
		gpus []structs.GPU
		note string
	}{
		{name: "no GPUs", gpus: []structs.GPU{}, note: "NVML reports no GPUs; none offered"},
		{name: "some GPUs", gpus: []structs.GPU{{UUID: "GPU-1", Healthy: true}}, note: ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			inv := withNVMLNote(Inventory{Source: SourceNVML, GPUs: tc.gpus})
			if inv.Note != tc.note {
				t.Errorf("Note = %q, want %q", inv.Note, tc.note)
			}
		})
	}
}
