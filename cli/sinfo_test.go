package cli

import (
	"strings"
	"testing"
)

func TestSinfo_PartitionsStatesAndGRES(t *testing.T) {
	f := slurmAgent(t)
	r := runCLI(t, "--addr", f.URL, "sinfo")
	if r.code != exitOK {
		t.Fatalf("sinfo: %d %s", r.code, r.stderr)
	}
	// Nodes that declare no partition are in skein*, first; gpu02's
	// fifth GPU keeps it off gpu01's line; gpu's max time is a day.
	want := "" +
		"PARTITION AVAIL  TIMELIMIT  NODES  STATE GRES       NODELIST\n" +
		"skein*       up   infinite      1   down (null)     cpu3\n" +
		"skein*       up   infinite      1  drain (null)     cpu2\n" +
		"skein*       up   infinite      1    mix (null)     cpu1\n" +
		"gpu          up 1-00:00:00      1  alloc gpu:h100:4 gpu01\n" +
		"gpu          up 1-00:00:00      1  alloc gpu:h100:5 gpu02\n" +
		"gpu          up 1-00:00:00      1   idle gpu:h100:2 gpu03\n"
	if r.stdout != want {
		t.Fatalf("sinfo:\n%s\nwant:\n%s", r.stdout, want)
	}

	r = runCLI(t, "--addr", f.URL, "sinfo", "-N", "-p", "gpu")
	want = "" +
		"NODELIST  NODES PARTITION  STATE GRES\n" +
		"gpu01         1 gpu        alloc gpu:h100:4\n" +
		"gpu02         1 gpu        alloc gpu:h100:5\n" +
		"gpu03         1 gpu         idle gpu:h100:2\n"
	if r.code != exitOK || r.stdout != want {
		t.Fatalf("sinfo -N -p gpu: %d\n%s\nwant:\n%s", r.code, r.stdout, want)
	}

	r = runCLI(t, "--addr", f.URL, "sinfo", "-h", "-p", "skein", "-o", "%R|%T|%c|%m|%E|%D|%N")
	want = "skein|DOWN|16|65536|none|1|cpu3\nskein|DRAINED|16|65536|maintenance|1|cpu2\nskein|MIXED|16|65536|none|1|cpu1\n"
	if r.code != exitOK || r.stdout != want {
		t.Fatalf("sinfo -o: %d\n%s\nwant:\n%s", r.code, r.stdout, want)
	}
}

func TestSinfo_GroupsLikeNodes(t *testing.T) {
	f := newFakeAgent(t)
	f.reply("GET /v1/nodes", 200, []map[string]any{
		{"name": "n3", "status": "ready", "cpus": 32, "memory_mib": 1024, "gpus": []map[string]any{{"uuid": "a", "model": "NVIDIA A100-SXM4-40GB"}}, "gpus_total": 1},
		{"name": "n1", "status": "ready", "cpus": 16, "memory_mib": 1024, "gpus": []map[string]any{{"uuid": "b", "model": "NVIDIA A100-SXM4-40GB"}}, "gpus_total": 1},
		{"name": "n2", "status": "ready", "cpus": 16, "memory_mib": 2048, "gpus": []map[string]any{{"uuid": "c", "model": "NVIDIA A100-SXM4-40GB"}}, "gpus_total": 1},
		{"name": "m", "status": "draining", "cpus": 16, "memory_mib": 1024, "live_allocs": 1, "gpus": []map[string]any{{"uuid": "d", "model": "Tesla T4"}, {"uuid": "e", "model": "NVIDIA L40S"}}, "gpus_total": 2},
	})
	r := runCLI(t, "--addr", f.URL, "sinfo", "-o", "%P %D %t %c %m %G %N")
	want := "PARTITION NODES STATE CPUS MEMORY GRES NODELIST\n" +
		"skein* 1 drng 16 1024 gpu:t4:1,gpu:l40s:1 m\n" +
		"skein* 3 idle 16+ 1024+ gpu:a100-sxm4-40gb:1 n[1-3]\n"
	if r.code != exitOK || r.stdout != want {
		t.Fatalf("sinfo: %d\n%s\nwant:\n%s", r.code, r.stdout, want)
	}
	r = runCLI(t, "--addr", f.URL, "sinfo", "--json", "-p", "nope")
	if r.code != exitOK || strings.TrimSpace(r.stdout) != "[]" {
		t.Fatalf("sinfo --json of no nodes: %d %q", r.code, r.stdout)
	}
	var nodes []sinfoJSON
	r = runCLI(t, "--addr", f.URL, "sinfo", "--json")
	mustDecode(t, r.stdout, &nodes)
	if len(nodes) != 4 || nodes[3].Name != "m" || nodes[3].State != "DRAINING" || nodes[3].GRES != "gpu:t4:1,gpu:l40s:1" || nodes[3].Partition != "skein" {
		t.Fatalf("sinfo --json = %+v", nodes)
	}
	if r := runCLI(t, "--addr", f.URL, "sinfo", "-o", "%P %q"); r.code != exitUsage || !strings.Contains(r.stderr, "unsupported field %q") {
		t.Fatalf("sinfo -o %%q: %d %q", r.code, r.stderr)
	}
}
