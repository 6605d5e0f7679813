package structs

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

// The JSON of these values is the wire format of the API and of the Raft
// log. The tests below pin it: a change to a type's JSON, meant or not,
// shows here first.

func fullJobSpec() JobSpec {
	return JobSpec{
		Name:            "train",
		Command:         []string{"torchrun", "train.py"},
		Env:             map[string]string{"LR": "3e-4"},
		SecretEnv:       map[string]string{"WANDB_API_KEY": "k"},
		Workdir:         "/data",
		Nodes:           2,
		GPUs:            8,
		GPUModel:        "H100",
		GPUMemoryMinMiB: 80 * 1024,
		CPUs:            32,
		MemoryMiB:       512 * 1024,
		PidsMax:         4096,
		Priority:        5,
		Partition:       "gpu",
		NodeList:        []string{"gpu01", "gpu02"},
		ExcludeNodes:    []string{"gpu03"},
		Hold:            true,
		Begin:           time.Date(2030, 1, 2, 3, 4, 0, 0, time.UTC),
		Deadline:        time.Date(2030, 1, 3, 0, 0, 0, 0, time.UTC),
		MailType:        []string{"BEGIN", "END"},
		MailUser:        "alice@example.com",
		Restarts:        2,
		TimeLimit:       Duration(2 * time.Hour),
		Signal:          &TimeSignal{Name: "USR1", Before: Duration(90 * time.Second)},
		Constraints:     map[string]string{"zone": "a"},
		Spread:          true,
		After: []Dependency{{JobID: "abc123", Condition: AfterOK}, {JobID: "def456", Condition: AfterAny},
			{JobID: "0a1b2c", Condition: AfterNotOK}},
		Singleton:    true,
		Exclusive:    true,
		Array:        &ArraySpec{Start: 0, End: 99, MaxRunning: 8},
		Preemptible:  true,
		PreemptGrace: Duration(45 * time.Second),
		Image:        "nvcr.io/nvidia/pytorch:24.01-py3",
		ImagePull:    PullAlways,
		Mounts:       []Mount{{Source: "/data", Target: "/data", ReadOnly: true}, {Source: "/scratch", Target: "/s"}},
		ShmSizeMiB:   64 * 1024,
		Caps:         []string{"NET_BIND_SERVICE"},
		Account:      "ml",
		QoS:          "high",
	}
}

const fullJobSpecJSON = `{
  "name": "train",
  "command": [
    "torchrun",
    "train.py"
  ],
  "env": {
    "LR": "3e-4"
  },
  "secret_env": {
    "WANDB_API_KEY": "k"
  },
  "workdir": "/data",
  "nodes": 2,
  "gpus": 8,
  "gpu_model": "H100",
  "gpu_memory_min_mib": 81920,
  "cpus": 32,
  "memory_mib": 524288,
  "pids_max": 4096,
  "priority": 5,
  "restarts": 2,
  "time_limit": "2h0m0s",
  "signal": {
    "name": "USR1",
    "before": "1m30s"
  },
  "constraints": {
    "zone": "a"
  },
  "partition": "gpu",
  "nodelist": [
    "gpu01",
    "gpu02"
  ],
  "exclude": [
    "gpu03"
  ],
  "hold": true,
  "begin": "2030-01-02T03:04:00Z",
  "deadline": "2030-01-03T00:00:00Z",
  "mail_type": [
    "BEGIN",
    "END"
  ],
  "mail_user": "alice@example.com",
  "spread": true,
  "after": [
    {
      "job_id": "abc123",
      "condition": "ok"
    },
    {
      "job_id": "def456",
      "condition": "any"
    },
    {
      "job_id": "0a1b2c",
      "condition": "notok"
    }
  ],
  "singleton": true,
  "exclusive": true,
  "array": {
    "start": 0,
    "end": 99,
    "max_running": 8
  },
  "preemptible": true,
  "preempt_grace": "45s",
  "image": "nvcr.io/nvidia/pytorch:24.01-py3",
  "image_pull": "always",
  "mounts": [
    {
      "source": "/data",
      "target": "/data",
      "read_only": true
    },
    {
      "source": "/scratch",
      "target": "/s"
    }
  ],
  "shm_size_mib": 65536,
  "caps": [
    "NET_BIND_SERVICE"
  ],
  "account": "ml",
  "qos": "high"
}`

// checkWire checks that every field of v is set, that v encodes to want,
// and that want decodes back to v.
func checkWire[T any](t *testing.T, v T, want string) {
	t.Helper()
	rv := reflect.ValueOf(v)
	for i := range rv.NumField() {
		if rv.Field(i).IsZero() {
			t.Errorf("%s.%s is zero: give it a value so its JSON is pinned", rv.Type().Name(), rv.Type().Field(i).Name)
		}
	}
	got, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("JSON of %T changed:\n%s\nwant\n%s", v, got, want)
	}
	var back T
	if err := json.Unmarshal([]byte(want), &back); err != nil {
		t.Fatalf("decode the pinned JSON of %T: %v", v, err)
	}
	if !reflect.DeepEqual(back, v) {
		t.Errorf("pinned JSON of %T decodes to\n%+v\nwant\n%+v", v, back, v)
	}
}

func TestJobSpec_JSONIsPinned(t *testing.T) {
	checkWire(t, fullJobSpec(), fullJobSpecJSON)
}

func TestJob_JSONIsPinned(t *testing.T) {
	at := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	job := Job{
		ID: "0123456789abcdef0123456789abcdef-7", RequestID: "req-1", Owner: "alice", AllowRoot: true, Spec: fullJobSpec(), State: JobQueued,
		SubmittedAt: at, StartedAt: at.Add(time.Minute), FinishedAt: at.Add(time.Hour), Attempts: 3,
		NotBefore: at.Add(2 * time.Hour), StopRequested: true, PreemptedBy: "fedcba98", Preemptions: 1,
		PreemptReason: "preempted by job fedcba98 (priority 10)", Evicted: "evicted: node gpu-01 drains", Evictions: 2,
		ReplacedBy: "0123456789abcdef-r4", Reason: "waiting", ExitCode: 3, GPUFaults: 1,
		ArrayID: "0123456789abcdef0123456789abcdef", ArrayIndex: 7, Number: 42, ArrayNumber: 35, Held: true, Service: "llama", ServiceVersion: 3, Crashes: 2, CreateIndex: 10, ModifyIndex: 12,
		Usage: &AllocUsage{MemoryPeakBytes: 64 << 20, MemoryLimitBytes: 64 << 20, CPUTime: Duration(90 * time.Second),
			CPUThrottled: Duration(time.Second), ThrottledPeriods: 10, OOMKills: 1},
	}
	spec := strings.ReplaceAll(fullJobSpecJSON, "\n", "\n  ")
	want := `{
  "id": "0123456789abcdef0123456789abcdef-7",
  "request_id": "req-1",
  "owner": "alice",
  "allow_root": true,
  "spec": ` + spec + `,
  "state": "queued",
  "submitted_at": "2026-11-29T12:00:00Z",
  "started_at": "2026-11-29T12:01:00Z",
  "finished_at": "2026-11-29T13:00:00Z",
  "attempts": 3,
  "not_before": "2026-11-29T14:00:00Z",
  "stop_requested": true,
  "preempted_by": "fedcba98",
  "preemptions": 1,
  "preempt_reason": "preempted by job fedcba98 (priority 10)",
  "evicted": "evicted: node gpu-01 drains",
  "evictions": 2,
  "replaced_by": "0123456789abcdef-r4",
  "reason": "waiting",
  "exit_code": 3,
  "gpu_faults": 1,
  "usage": {
    "memory_peak_bytes": 67108864,
    "memory_limit_bytes": 67108864,
    "cpu_time": "1m30s",
    "cpu_throttled": "1s",
    "throttled_periods": 10,
    "oom_kills": 1
  },
  "array_id": "0123456789abcdef0123456789abcdef",
  "array_index": 7,
  "number": 42,
  "array_number": 35,
  "held": true,
  "service": "llama",
  "service_version": 3,
  "crashes": 2,
  "create_index": 10,
  "modify_index": 12
}`
	checkWire(t, job, want)
}

func TestService_JSONIsPinned(t *testing.T) {
	at := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	svc := Service{
		ID: "0123456789abcdef", Name: "llama", Owner: "alice", AllowRoot: true,
		Spec: ServiceSpec{
			Job: JobSpec{Command: []string{"serve"}, Nodes: 1, GPUs: 1}, PortEnv: "PORT",
			Health: &HealthCheck{Kind: HealthHTTP, Path: "/health", Command: []string{"x"}, Interval: Duration(10 * time.Second),
				Timeout: Duration(time.Second), Failures: 5, Grace: Duration(10 * time.Minute)},
			DrainTimeout: Duration(time.Minute), DrainDelay: Duration(5 * time.Second), Public: true,
		},
		Replicas: 4, Reason: "scaled 2→4 by alice", NextReplica: 6,
		Autoscale: &Autoscale{Min: 1, Max: 8, Metric: AutoscaleInFlight, Target: 10, Tolerance: 0.1,
			UpWindow: Duration(time.Second), DownWindow: Duration(5 * time.Minute)},
		ScaledAt: at, Version: 3,
		Rollout:  &Rollout{Version: 3, From: 2, MaxSurge: 1, MaxUnavailable: 0, State: RolloutRunning, Reason: "2 of 4 replaced", StartedAt: at},
		PrevSpec: &ServiceSpec{Job: JobSpec{Command: []string{"serve"}}, PortEnv: "PORT"},
		Deleted:  true, CreatedAt: at, CreateIndex: 7, ModifyIndex: 9,
	}
	want := `{
  "id": "0123456789abcdef",
  "name": "llama",
  "owner": "alice",
  "allow_root": true,
  "spec": {
    "job": {
      "command": [
        "serve"
      ],
      "nodes": 1,
      "gpus": 1
    },
    "port_env": "PORT",
    "health": {
      "kind": "http",
      "path": "/health",
      "command": [
        "x"
      ],
      "interval": "10s",
      "timeout": "1s",
      "failures": 5,
      "grace": "10m0s"
    },
    "drain_timeout": "1m0s",
    "drain_delay": "5s",
    "public": true
  },
  "replicas": 4,
  "reason": "scaled 2→4 by alice",
  "next_replica": 6,
  "autoscale": {
    "min": 1,
    "max": 8,
    "metric": "inflight",
    "target": 10,
    "tolerance": 0.1,
    "up_window": "1s",
    "down_window": "5m0s"
  },
  "scaled_at": "2026-11-29T12:00:00Z",
  "version": 3,
  "rollout": {
    "version": 3,
    "from": 2,
    "max_surge": 1,
    "max_unavailable": 0,
    "state": "running",
    "reason": "2 of 4 replaced",
    "started_at": "2026-11-29T12:00:00Z"
  },
  "prev_spec": {
    "job": {
      "command": [
        "serve"
      ],
      "nodes": 0,
      "gpus": 0
    },
    "port_env": "PORT"
  },
  "deleted": true,
  "created_at": "2026-11-29T12:00:00Z",
  "create_index": 7,
  "modify_index": 9
}`
	checkWire(t, svc, want)
	checkWire(t, AllocHealth{Healthy: true, Starting: true, Reason: "GET /health: 200", At: at}, `{
  "healthy": true,
  "starting": true,
  "reason": "GET /health: 200",
  "at": "2026-11-29T12:00:00Z"
}`)
}

func TestNode_JSONIsPinned(t *testing.T) {
	at := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	node := Node{
		ID: "n1", Name: "gpu-01", Addresses: Addresses{HTTP: "10.0.0.1:7470", Raft: "10.0.0.1:7471", Gossip: "10.0.0.1:7472"},
		Labels: map[string]string{"rack": "r1"}, Partitions: []string{"gpu", "debug"}, CPUs: 64, MemoryMiB: 1 << 20,
		GPUs:      []GPU{{Index: 0, UUID: "GPU-1", Model: "H100", MemoryMiB: 81920, PCIBusID: "0000:01:00.0", Healthy: true, NUMANode: 0}},
		GPUSource: "nvml", GPUDriver: "550.54.15", CUDAVersion: "12.4", LinkMbps: 100000,
		MasterPorts: PortRange{Min: 29500, Max: 29999},
		Containers: &ContainerEngine{Engine: "docker 20.10.21", APIVersion: "1.41", GPUs: true,
			Images: []string{"busybox:latest"}, AllowMounts: []string{"/data"}, AllowCaps: []string{"NET_RAW"}},
		Confinement: "none: the agent is not root", JobsRefused: "this node cannot confine jobs", JobPidsMax: 16384,
		Status: NodeReady, StatusReason: "joined",
		Drain:    &NodeDrain{Deadline: at.Add(time.Hour), Force: true, Reason: "maintenance", StartedAt: at, DrainedAt: at.Add(time.Minute)},
		StatusAt: at, Role: RoleVoter, Version: "0.1.0", RegisteredAt: at, ModifyIndex: 4,
	}
	want := `{
  "id": "n1",
  "name": "gpu-01",
  "addresses": {
    "http": "10.0.0.1:7470",
    "raft": "10.0.0.1:7471",
    "gossip": "10.0.0.1:7472"
  },
  "partitions": [
    "gpu",
    "debug"
  ],
  "labels": {
    "rack": "r1"
  },
  "cpus": 64,
  "memory_mib": 1048576,
  "gpus": [
    {
      "index": 0,
      "uuid": "GPU-1",
      "model": "H100",
      "memory_mib": 81920,
      "pci_bus_id": "0000:01:00.0",
      "healthy": true,
      "numa_node": 0
    }
  ],
  "gpu_source": "nvml",
  "gpu_driver": "550.54.15",
  "cuda_version": "12.4",
  "link_mbps": 100000,
  "master_ports": {
    "min": 29500,
    "max": 29999
  },
  "containers": {
    "engine": "docker 20.10.21",
    "api_version": "1.41",
    "gpus": true,
    "images": [
      "busybox:latest"
    ],
    "allow_mounts": [
      "/data"
    ],
    "allow_caps": [
      "NET_RAW"
    ]
  },
  "confinement": "none: the agent is not root",
  "jobs_refused": "this node cannot confine jobs",
  "job_pids_max": 16384,
  "status": "ready",
  "status_reason": "joined",
  "drain": {
    "deadline": "2026-11-29T13:00:00Z",
    "force": true,
    "reason": "maintenance",
    "started_at": "2026-11-29T12:00:00Z",
    "drained_at": "2026-11-29T12:01:00Z"
  },
  "status_at": "2026-11-29T12:00:00Z",
  "role": "voter",
  "version": "0.1.0",
  "registered_at": "2026-11-29T12:00:00Z",
  "modify_index": 4
}`
	checkWire(t, node, want)
}

func TestJobSpec_StrictDecodingRefusesUnknownFieldsInside(t *testing.T) {
	// The API decodes with DisallowUnknownFields; a misspelt field inside
	// one of the spec's objects must be refused, not silently dropped.
	for _, body := range []string{
		`{"command":["x"],"array":{"start":0,"end":3,"max_runing":2}}`,
		`{"command":["x"],"after":[{"job_id":"a","conditon":"any"}]}`,
		`{"command":["x"],"signal":{"name":"USR1","befor":"1m"}}`,
		`{"command":["x"],"mounts":[{"source":"/a","target":"/b","readonly":true}]}`,
	} {
		dec := json.NewDecoder(bytes.NewReader([]byte(body)))
		dec.DisallowUnknownFields()
		var s JobSpec
		if err := dec.Decode(&s); err == nil || !strings.Contains(err.Error(), "unknown field") {
			t.Errorf("strict decode of %s = %v, want an unknown field error", body, err)
		}
	}
}
