package runner

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

func envMap(t *testing.T, env []string) map[string]string {
	t.Helper()
	m := make(map[string]string, len(env))
	for _, kv := range env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			t.Fatalf("malformed entry %q", kv)
		}
		if _, dup := m[k]; dup {
			t.Fatalf("%s appears twice in %q", k, env)
		}
		m[k] = v
	}
	return m
}

func TestBuildEnv(t *testing.T) {
	base := []string{
		"PATH=/usr/bin", "HOME=/home/u", "SKEIN_TOKEN=secret", "SKEIN_JOIN_TOKEN=SKJ1.x", "SKEIN_ENCRYPT=key",
		"CUDA_VISIBLE_DEVICES=0,1",
		"SKEIN_JOB_NAME=stale", "FOO=base", "FOO=base2",
	}
	cases := []struct {
		name    string
		gpus    []string
		jobName string
		specEnv map[string]string
		want    map[string]string // exact values
		absent  []string
	}{
		{
			name: "gpus joined in allocation order",
			gpus: []string{"GPU-b", "GPU-a"},
			want: map[string]string{"CUDA_VISIBLE_DEVICES": "GPU-b,GPU-a", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"},
		},
		{
			name: "no gpus sets an empty CUDA_VISIBLE_DEVICES",
			want: map[string]string{"CUDA_VISIBLE_DEVICES": ""},
		},
		{
			name: "spec cannot override skein's variables",
			gpus: []string{"GPU-a"},
			specEnv: map[string]string{"CUDA_VISIBLE_DEVICES": "all", "CUDA_DEVICE_ORDER": "FASTEST_FIRST",
				"SKEIN_ALLOC_ID": "forged", "SKEIN_TOKEN": "stolen"},
			want:   map[string]string{"CUDA_VISIBLE_DEVICES": "GPU-a", "CUDA_DEVICE_ORDER": "PCI_BUS_ID", "SKEIN_ALLOC_ID": "a1"},
			absent: []string{"SKEIN_TOKEN"},
		},
		{
			name:    "spec overrides inherited variables",
			specEnv: map[string]string{"FOO": "spec", "BAR": "x"},
			want:    map[string]string{"FOO": "spec", "BAR": "x", "PATH": "/usr/bin", "HOME": "/home/u"},
		},
		{
			name:   "secrets and stale job name are never inherited",
			want:   map[string]string{"FOO": "base2"},
			absent: []string{"SKEIN_TOKEN", "SKEIN_JOIN_TOKEN", "SKEIN_ENCRYPT", "SKEIN_JOB_NAME"},
		},
		{
			name:    "identity variables",
			jobName: "train",
			want: map[string]string{"SKEIN_JOB_ID": "j1", "SKEIN_ALLOC_ID": "a1", "SKEIN_NODE": "node-a",
				"SKEIN_RANK": "3", "SKEIN_ATTEMPT": "2", "SKEIN_JOB_NAME": "train"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tk := Task{
				Alloc:    structs.Allocation{ID: "a1", JobID: "j1", Rank: 3, Attempt: 2, GPUs: tc.gpus},
				Job:      structs.Job{ID: "j1", Spec: structs.JobSpec{Name: tc.jobName, Env: tc.specEnv}},
				NodeName: "node-a",
			}
			got := envMap(t, BuildEnv(tk, base))
			for k, v := range tc.want {
				if gv, ok := got[k]; !ok || gv != v {
					t.Errorf("%s = %q (set: %v), want %q", k, gv, ok, v)
				}
			}
			for _, k := range tc.absent {
				if v, ok := got[k]; ok {
					t.Errorf("%s = %q, want it absent", k, v)
				}
			}
		})
	}
}

func TestRunner_JobSeesItsEnvironmentWithoutShell(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r, rec := e.runner(t)
	nobody := jobUser(t)
	cases := []struct {
		name string
		gpus []string
		want string
	}{
		{name: "two gpus", gpus: []string{"GPU-11", "GPU-22"}, want: "GPU-11,GPU-22"},
		{name: "no gpus", want: ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tk := task("/usr/bin/env")
			tk.Alloc.GPUs = tc.gpus
			tk.Job.Spec.Env = map[string]string{"CUDA_VISIBLE_DEVICES": "evil", "MY_VAR": "mine"}
			mustStart(t, r, tk)
			if u := waitTerminal(t, rec, tk.Alloc.ID); u.State != structs.AllocSucceeded {
				t.Fatalf("env ended %+v", u)
			}
			path, err := r.LogPath(tk.Alloc.ID, "stdout")
			if err != nil {
				t.Fatal(err)
			}
			out := strings.TrimSpace(readFile(t, path))
			env := envMap(t, strings.Split(out, "\n"))
			want := map[string]string{
				"CUDA_VISIBLE_DEVICES": tc.want, "CUDA_DEVICE_ORDER": "PCI_BUS_ID", "MY_VAR": "mine",
				"SKEIN_ALLOC_ID": tk.Alloc.ID, "SKEIN_JOB_ID": tk.Alloc.JobID, "SKEIN_NODE": "node-a",
				"SKEIN_RANK": "0", "SKEIN_ATTEMPT": "1", "PATH": JobPath, "HOME": nobody.Home,
				"USER": nobody.Name, "LOGNAME": nobody.Name, "SHELL": nobody.Shell, "LC_TEST": "agent",
			}
			for k, v := range want {
				if env[k] != v {
					t.Errorf("job saw %s=%q, want %q", k, env[k], v)
				}
			}
			for _, k := range []string{"SKEIN_TOKEN", superviseEnv, readyFDEnv, lockFDEnv} {
				if v, ok := env[k]; ok {
					t.Errorf("job saw %s=%q, want it absent", k, v)
				}
			}
		})
	}
}

func TestRunner_DefaultWorkdirIsTheJobsOwnInsideAllocDir(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r, rec := e.runner(t)
	tk := task("/bin/pwd")
	mustStart(t, r, tk)
	waitTerminal(t, rec, tk.Alloc.ID)
	want, err := filepath.EvalSymlinks(filepath.Join(e.allocDir, tk.Alloc.ID, workDirName))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(readFile(t, filepath.Join(e.allocDir, tk.Alloc.ID, stdoutFile))); got != want {
		t.Errorf("job ran in %q, want %q", got, want)
	}
	nobody := jobUser(t)
	for _, c := range []struct {
		path string
		mode os.FileMode
		uid  uint32
	}{
		{path: e.allocDir, mode: 0o711},
		{path: filepath.Join(e.allocDir, tk.Alloc.ID), mode: 0o711},
		{path: filepath.Join(e.allocDir, tk.Alloc.ID, workDirName), mode: 0o700, uid: nobody.UID},
		{path: filepath.Join(e.allocDir, tk.Alloc.ID, stdoutFile), mode: 0o600},
		{path: filepath.Join(e.allocDir, tk.Alloc.ID, specFile), mode: 0o600},
	} {
		fi, err := os.Stat(c.path)
		if err != nil {
			t.Fatal(err)
		}
		if uid := fi.Sys().(*syscall.Stat_t).Uid; fi.Mode().Perm() != c.mode || uid != c.uid {
			t.Errorf("%s: mode %04o, owner uid %d; want %04o, uid %d", c.path, fi.Mode().Perm(), uid, c.mode, c.uid)
		}
	}
}

func TestBuildEnv_LaunchVariablesForEachRank(t *testing.T) {
	peers := []Peer{{Rank: 0, Node: "gpu-a", Addr: "10.0.0.5"}, {Rank: 1, Node: "gpu-b", Addr: "10.0.0.6"}}
	for rank := range 2 {
		task := Task{
			Alloc:    structs.Allocation{ID: "a1", JobID: "job-1", Rank: rank, GPUs: []string{"GPU-x", "GPU-y"}},
			Job:      structs.Job{ID: "job-1", Spec: structs.JobSpec{Name: "train", Nodes: 2, GPUs: 8}},
			NodeName: peers[rank].Node, Peers: peers, MasterPort: 29777,
		}
		// Inherited copies never win over skein's values.
		env := envMap(t, BuildEnv(task, []string{"MASTER_ADDR=stale", "SLURM_PROCID=9"}))
		want := map[string]string{
			"MASTER_ADDR": "10.0.0.5", "MASTER_PORT": "29777", "NNODES": "2",
			"NODE_RANK": strconv.Itoa(rank), "GPUS_PER_NODE": "8", "WORLD_SIZE": "16",
			"SLURM_NNODES": "2", "SLURM_NODEID": strconv.Itoa(rank), "SLURM_PROCID": strconv.Itoa(rank),
			"SLURM_NTASKS": "2", "SLURM_JOB_NODELIST": "gpu-a,gpu-b", "SLURM_GPUS_ON_NODE": "8",
			"SLURM_JOB_NAME": "train", "SLURMD_NODENAME": peers[rank].Node, "SLURM_LOCALID": "0",
		}
		for k, v := range want {
			if env[k] != v {
				t.Errorf("rank %d: %s = %q, want %q", rank, k, env[k], v)
			}
		}
		if _, err := strconv.Atoi(env["SLURM_JOB_ID"]); err != nil {
			t.Errorf("SLURM_JOB_ID %q is not numeric", env["SLURM_JOB_ID"])
		}
	}
}

func TestBuildEnv_SecretEnvReachesTheJobLikeEnv(t *testing.T) {
	tk := Task{
		Alloc: structs.Allocation{ID: "a1", JobID: "j1"},
		Job: structs.Job{ID: "j1", Spec: structs.JobSpec{
			Env:       map[string]string{"LR": "3e-4"},
			SecretEnv: map[string]string{"WANDB_API_KEY": "s3cret", "CUDA_VISIBLE_DEVICES": "forged"},
		}},
	}
	got := map[string]string{}
	for _, kv := range BuildEnv(tk, nil) {
		k, v, _ := strings.Cut(kv, "=")
		got[k] = v
	}
	if got["WANDB_API_KEY"] != "s3cret" || got["LR"] != "3e-4" || got["CUDA_VISIBLE_DEVICES"] != "" {
		t.Fatalf("env %v", got)
	}
}

func TestBuildEnv_AReplicaGetsItsPortInItsPortVariable(t *testing.T) {
	tk := Task{
		Alloc:      structs.Allocation{ID: "a1", JobID: "svc-r0", MasterPort: 29512},
		Job:        structs.Job{ID: "svc-r0", Service: "web", Spec: structs.JobSpec{Nodes: 1}},
		Peers:      []Peer{{Rank: 0, Node: "gpu-a", Addr: "10.0.0.5"}},
		MasterPort: 29512,
		PortEnv:    "HTTP_PORT",
	}
	env := envMap(t, BuildEnv(tk, []string{"HTTP_PORT=1"}))
	if env["HTTP_PORT"] != "29512" || env["MASTER_PORT"] != "29512" {
		t.Errorf("HTTP_PORT %q, MASTER_PORT %q: want the replica's port in both", env["HTTP_PORT"], env["MASTER_PORT"])
	}
	tk.PortEnv = "CUDA_VISIBLE_DEVICES"
	if env := envMap(t, BuildEnv(tk, nil)); env["CUDA_VISIBLE_DEVICES"] != "" {
		t.Errorf("a port variable of skein's own took its place: CUDA_VISIBLE_DEVICES=%q", env["CUDA_VISIBLE_DEVICES"])
	}
}

func TestRunner_AJobOnSimulatedGPUsGetsItsUtilisationFile(t *testing.T) {
	t.Parallel()
	sim, _ := newEnv(t).runner(t, func(c *Config) { c.SimulatedGPUs = true })
	real, _ := newEnv(t).runner(t)
	work := testutil.SharedDir(t)
	script := `printf '%s' "${SKEIN_SIM_GPU_UTIL_FILE-unset}" > "$OUT"; [ -z "$SKEIN_SIM_GPU_UTIL_FILE" ] || echo 42 > "$SKEIN_SIM_GPU_UTIL_FILE"`
	tests := []struct {
		name string
		r    *Runner
		gpus []string
		file bool
	}{
		{name: "simulated GPUs", r: sim, gpus: []string{"GPU-sim-0", "GPU-sim-1"}, file: true},
		{name: "no GPUs", r: sim},
		{name: "real GPUs", r: real, gpus: []string{"GPU-0"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tk := sh(script)
			tk.Alloc.GPUs = tc.gpus
			out := filepath.Join(work, tk.Alloc.ID)
			// A job cannot set the variable itself.
			tk.Job.Spec.Env = map[string]string{"OUT": out, SimGPUUtilEnv: "/tmp/mine"}
			mustStart(t, tc.r, tk)
			path := tc.r.SimGPUUtilFile(tk.Alloc.ID)
			want := "unset"
			if tc.file {
				want = path
			}
			waitFile(t, out, want)
			if got := readFile(t, out); got != want {
				t.Fatalf("%s = %q, want %q", SimGPUUtilEnv, got, want)
			}
			if !tc.file {
				if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("%s: stat = %v, want no utilisation file", path, err)
				}
				return
			}
			waitFile(t, path, "42\n")
			if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
				t.Errorf("utilisation file: %v, mode %v, want 0600", err, fi.Mode())
			}
		})
	}
}
