package cli

import (
	"net/http"
	"strings"
	"testing"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/structs"
)

func testNodes() []api.NodeInfo {
	return []api.NodeInfo{
		{
			Node: structs.Node{
				ID: "n1", Name: "gpu-01", Status: structs.NodeReady, Role: structs.RoleLeader, CPUs: 64,
				MemoryMiB: 512 * 1024, GPUSource: "nvml", Addresses: structs.Addresses{HTTP: "10.0.0.1:7470"},
				GPUs:        []structs.GPU{{Model: "NVIDIA H100 80GB HBM3", MemoryMiB: 80 * 1024}, {Model: "NVIDIA H100 80GB HBM3", MemoryMiB: 80 * 1024}},
				Containers:  &structs.ContainerEngine{Engine: "docker 24.0.7", APIVersion: "1.43", GPUs: true},
				Confinement: "cgroup v2",
			},
			GPUsTotal: 8, GPUsFree: 6, GPUsUnhealthy: 1,
			Protocol: structs.Protocol{Release: "0.2.0", API: 1, Log: 30, Snapshot: 7},
		},
		{
			Node: structs.Node{
				ID: "n2", Name: "dev", Status: structs.NodeReady, Role: structs.RoleVoter, CPUs: 8,
				MemoryMiB: 16 * 1024, GPUSource: "simulated", Addresses: structs.Addresses{HTTP: "127.0.0.1:7470"},
				GPUs:        []structs.GPU{{Model: "A100", MemoryMiB: 40 * 1024, Simulated: true}},
				Containers:  &structs.ContainerEngine{Error: "engine unreachable at unix:///var/run/docker.sock: connection refused"},
				Confinement: "none: the agent is not root, and only root makes cgroups",
			},
			GPUsTotal: 1, GPUsFree: 1,
			Protocol: structs.Protocol{Release: "0.1.0"},
		},
		{
			Node: structs.Node{ID: "n3", Name: "cpu-01", Status: structs.NodeDown, CPUs: 4, MemoryMiB: 1536, GPUSource: "none",
				Confinement: "none: no usable cgroup hierarchy", JobsRefused: "this node cannot confine jobs: no usable cgroup hierarchy"},
			GPUsTotal: 0,
		},
	}
}

func TestNodes_TableShowsGPUsAndResources(t *testing.T) {
	f := newFakeAgent(t)
	f.reply("GET /v1/nodes", http.StatusOK, testNodes())
	r := runCLI(t, "--addr", f.URL, "nodes")
	if r.code != exitOK {
		t.Fatalf("exit code %d: %s", r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	want := []string{
		"NAME STATUS ROLE VERSION GPUS GPU MODEL GPU MEM CPUS MEMORY CONFINED ENGINE ADDRESS",
		"gpu-01 ready leader 0.2.0 (log 30) 6/8, 1 unhealthy NVIDIA H100 80GB HBM3 80G 64 512G cgroup v2 docker 24.0.7 (API 1.43), NVIDIA GPUs 10.0.0.1:7470",
		"dev ready voter 0.1.0 (log 27) 1/1 A100 (simulated) 40G 8 16G NO (--allow-unconfined) unreachable 127.0.0.1:7470",
		"cpu-01 down - - 0/0 - - 4 1.5G NO: takes no jobs - -",
	}
	if len(lines) != len(want) {
		t.Fatalf("got %d lines, want %d:\n%s", len(lines), len(want), r.stdout)
	}
	for i, w := range want {
		if got := strings.Join(strings.Fields(lines[i]), " "); got != w {
			t.Errorf("line %d = %q, want %q", i, got, w)
		}
	}
}

func TestNodes_JSONParsesBack(t *testing.T) {
	f := newFakeAgent(t)
	f.reply("GET /v1/nodes", http.StatusOK, testNodes())
	r := runCLI(t, "--addr", f.URL, "nodes", "--json")
	if r.code != exitOK {
		t.Fatalf("exit code %d: %s", r.code, r.stderr)
	}
	var got []api.NodeInfo
	mustDecode(t, r.stdout, &got)
	if len(got) != 3 || got[0].Name != "gpu-01" || got[0].GPUsUnhealthy != 1 || got[1].GPUSource != "simulated" {
		t.Errorf("nodes = %+v, want the agent's list", got)
	}
	if len(got) == 3 && (got[0].Containers == nil || !got[0].Containers.GPUs || got[1].Containers == nil ||
		!strings.Contains(got[1].Containers.Error, "unreachable") || got[2].Containers != nil) {
		t.Errorf("container engines = %+v, %+v, %+v, want the agent's reports", got[0].Containers, got[1].Containers, got[2].Containers)
	}
}

func TestNodes_EngineColumnSaysWhetherTheEngineHandsOutGPUs(t *testing.T) {
	for _, c := range []struct {
		e    *structs.ContainerEngine
		want string
	}{
		{nil, "-"},
		{&structs.ContainerEngine{Error: "engine unreachable at unix:///x.sock: no such file"}, "unreachable"},
		{&structs.ContainerEngine{Engine: "docker 20.10.24", APIVersion: "1.41"}, "docker 20.10.24 (API 1.41), no GPU runtime"},
		{&structs.ContainerEngine{Engine: "docker 24.0.7", APIVersion: "1.43", GPUs: true}, "docker 24.0.7 (API 1.43), NVIDIA GPUs"},
	} {
		if got := engineCell(c.e); got != c.want {
			t.Errorf("engineCell(%+v) = %q, want %q", c.e, got, c.want)
		}
	}
}

func TestNodes_EmptyList(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"human", nil, "No nodes.\n"},
		{"json", []string{"--json"}, "[]\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeAgent(t)
			f.reply("GET /v1/nodes", http.StatusOK, nil)
			r := runCLI(t, append([]string{"--addr", f.URL, "nodes"}, tc.args...)...)
			if r.code != exitOK || r.stdout != tc.want {
				t.Fatalf("got code %d, stdout %q; want 0, %q", r.code, r.stdout, tc.want)
			}
		})
	}
}
