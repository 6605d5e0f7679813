package endpoint

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/internal/fsmtest"
	"github.com/skein-dev/skein/structs"
)

func TestServiceState_SaysHowTheReplicasStand(t *testing.T) {
	type st = map[api.ReplicaStatus]int
	cases := []struct {
		name          string
		svc           structs.Service
		statuses      st
		growing, live int
		want          string
		updated       int
	}{
		{"all healthy", structs.Service{Replicas: 2}, st{api.ReplicaHealthy: 2}, 0, 2, "2/2 healthy", 0},
		{"one crash-looping", structs.Service{Replicas: 2}, st{api.ReplicaHealthy: 1, api.ReplicaCrashLooping: 1}, 0, 2,
			"1/2 healthy, 1 crash-looping", 0},
		{"starting after the create", structs.Service{Replicas: 2}, st{api.ReplicaStarting: 2}, 0, 2, "0/2 healthy, 2 starting", 0},
		{"every kind of trouble", structs.Service{Replicas: 4},
			st{api.ReplicaStarting: 1, api.ReplicaQueued: 1, api.ReplicaUnhealthy: 1, api.ReplicaCrashLooping: 1}, 0, 4,
			"0/4 healthy, 1 starting, 1 queued, 1 unhealthy, 1 crash-looping", 0},
		{"scaling up", structs.Service{Replicas: 4}, st{api.ReplicaHealthy: 2, api.ReplicaStarting: 2}, 2, 4, "scaling 2→4", 0},
		{"scaling up without room", structs.Service{Replicas: 4}, st{api.ReplicaHealthy: 2, api.ReplicaStarting: 1, api.ReplicaQueued: 1}, 2, 4,
			"scaling 2→4, 1 queued", 0},
		{"scaling down", structs.Service{Replicas: 2}, st{api.ReplicaHealthy: 2, api.ReplicaStopping: 2}, 0, 4, "scaling 4→2", 0},
		{"scaling down with a crash loop", structs.Service{Replicas: 1}, st{api.ReplicaCrashLooping: 1, api.ReplicaStopping: 1}, 0, 2,
			"scaling 2→1, 1 crash-looping", 0},
		{"scaled to none", structs.Service{Replicas: 0}, st{}, 0, 0, "0/0 healthy", 0},
		{"deleting", structs.Service{Replicas: 2, Deleted: true}, st{api.ReplicaStopping: 2}, 0, 2, "deleting, 2 stopping", 0},
		{"deleted", structs.Service{Replicas: 2, Deleted: true}, st{}, 0, 0, "deleted", 0},
		// A rollout surges above the count and stops old replicas: no
		// scaling (the issue: "scaling 5→3").
		{"rolling out", structs.Service{Replicas: 3, Rollout: &structs.Rollout{Version: 2, From: 1, State: structs.RolloutRunning}},
			st{api.ReplicaHealthy: 3, api.ReplicaStarting: 1, api.ReplicaStopping: 1}, 1, 5, "rolling out v2: 1/3 updated, 1 starting, 1 stopping", 1},
		{"rolling back", structs.Service{Replicas: 3, Rollout: &structs.Rollout{Version: 1, From: 2, State: structs.RolloutRollingBack}},
			st{api.ReplicaHealthy: 2, api.ReplicaUnhealthy: 1, api.ReplicaStarting: 1}, 1, 4, "rolling back to v1: 2/3 back, 1 starting, 1 unhealthy", 2},
		{"rolled back", structs.Service{Replicas: 3, Rollout: &structs.Rollout{Version: 1, From: 2, State: structs.RolloutRolledBack}},
			st{api.ReplicaHealthy: 3}, 0, 3, "3/3 healthy", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := serviceState(&tc.svc, tc.statuses, tc.growing, tc.live, tc.updated); got != tc.want {
				t.Errorf("state %q, want %q", got, tc.want)
			}
		})
	}
}

func TestEndpoints_OneURLPerReadyNodeOnTheIngressPort(t *testing.T) {
	st := fsmtest.New(t)
	for _, n := range []structs.Node{
		{ID: "b", Name: "b", Addresses: structs.Addresses{HTTP: "https://[fd00::2]:7470"}, Status: structs.NodeReady},
		{ID: "a", Name: "a", Addresses: structs.Addresses{HTTP: "http://10.0.0.1:7470"}, Status: structs.NodeReady},
		{ID: "c", Name: "c", Addresses: structs.Addresses{HTTP: "http://10.0.0.3:7470"}, Status: structs.NodeDown},
	} {
		st.Node(n)
	}
	s := Services{State: st.F, IngressPort: 7480}
	want := []string{"http://10.0.0.1:7480/llama/", "https://[fd00::2]:7480/llama/"}
	if got := s.endpoints("llama"); !reflect.DeepEqual(got, want) {
		t.Errorf("endpoints %q, want %q", got, want)
	}
	s.IngressPort = 0
	if got := s.endpoints("llama"); len(got) != 0 {
		t.Errorf("endpoints without an ingress %q, want none", got)
	}
}

// TestServiceDetail_ReplicasFollowTheirAllocationAndItsHealth walks a
// service's replicas through the state: queued, placed, running before
// and after health reports, crashing, scaled and deleted, and checks
// each replica's status and the service's state in words.
func TestServiceDetail_ReplicasFollowTheirAllocationAndItsHealth(t *testing.T) {
	st := fsmtest.New(t)
	st.Node(structs.Node{ID: "n1", Name: "gpu-01", CPUs: 8, MemoryMiB: 1 << 14, Status: structs.NodeReady})
	st.Must(structs.ServiceRegisterType, structs.ServiceRegisterRequest{Service: structs.Service{
		ID: "svc", Name: "web", Replicas: 2, CreatedAt: time.Now(),
		Spec: structs.ServiceSpec{Job: structs.JobSpec{Command: []string{"serve"}}, Health: &structs.HealthCheck{Kind: structs.HealthTCP}},
	}})
	s := Services{State: st.F}
	detail := func() api.ServiceDetail {
		t.Helper()
		svc, ok := st.F.Service("web")
		if !ok {
			t.Fatal("no service web")
		}
		return s.Detail(Identity{Role: structs.RoleAdmin}, svc, false)
	}
	check := func(state string, statuses ...api.ReplicaStatus) api.ServiceDetail {
		t.Helper()
		d := detail()
		var got []api.ReplicaStatus
		for _, r := range d.Replicas {
			got = append(got, r.Status)
		}
		if d.State != state || !reflect.DeepEqual(got, statuses) {
			t.Fatalf("state %q, replicas %v; want %q, %v (%+v)", d.State, got, state, statuses, d.Replicas)
		}
		return d
	}
	place := func(job, alloc string, port int) {
		t.Helper()
		res := st.Must(structs.PlanApplyType, structs.PlanApplyRequest{At: time.Now(), Plan: structs.Plan{Placements: []structs.JobPlacement{
			{JobID: job, Allocations: []structs.Allocation{{ID: alloc, NodeID: "n1", MasterPort: port}}},
		}}}).(*structs.PlanResult)
		if len(res.Rejected) > 0 {
			t.Fatalf("place %s: %v", job, res.Rejected)
		}
	}
	r0, r1 := structs.ReplicaJobID("svc", 0), structs.ReplicaJobID("svc", 1)

	check("0/2 healthy, 2 starting", api.ReplicaStarting, api.ReplicaStarting)
	st.Must(structs.PlanApplyType, structs.PlanApplyRequest{At: time.Now(), Plan: structs.Plan{Blocked: []structs.JobBlocked{
		{JobID: r1, Reason: "1 node: not enough free GPUs"},
	}}})
	d := check("0/2 healthy, 1 starting, 1 queued", api.ReplicaStarting, api.ReplicaQueued)
	if d.Replicas[1].Reason != "1 node: not enough free GPUs" {
		t.Fatalf("a queued replica's reason %q", d.Replicas[1].Reason)
	}
	place(r0, "a0", 29500)
	place(r1, "a1", 29501)
	check("0/2 healthy, 2 starting", api.ReplicaStarting, api.ReplicaStarting)
	st.Report("n1", structs.AllocUpdate{AllocID: "a0", State: structs.AllocRunning})
	st.Report("n1", structs.AllocUpdate{AllocID: "a1", State: structs.AllocRunning})
	check("0/2 healthy, 2 starting", api.ReplicaStarting, api.ReplicaStarting)

	st.Report("n1", structs.AllocUpdate{AllocID: "a0", State: structs.AllocRunning,
		Health: &structs.AllocHealth{Starting: true, Reason: "starting: within its grace of 10m0s: connection refused"}})
	d = check("0/2 healthy, 2 starting", api.ReplicaStarting, api.ReplicaStarting)
	if d.Replicas[0].Reason != "starting: within its grace of 10m0s: connection refused" {
		t.Fatalf("a starting replica's reason %q", d.Replicas[0].Reason)
	}
	st.Report("n1", structs.AllocUpdate{AllocID: "a0", State: structs.AllocRunning,
		Health: &structs.AllocHealth{Reason: "connection refused (3 failures in a row)"}})
	d = check("0/2 healthy, 1 starting, 1 unhealthy", api.ReplicaUnhealthy, api.ReplicaStarting)
	if d.Replicas[0].Reason != "connection refused (3 failures in a row)" || d.Running != 2 || d.Healthy != 0 {
		t.Fatalf("an unhealthy replica: %+v, running %d", d.Replicas[0], d.Running)
	}
	st.Report("n1", structs.AllocUpdate{AllocID: "a0", State: structs.AllocRunning, Health: &structs.AllocHealth{Healthy: true, Reason: "connected"}})
	d = check("1/2 healthy, 1 starting", api.ReplicaHealthy, api.ReplicaStarting)
	if r := d.Replicas[0]; r.Node != "gpu-01" || r.Port != 29500 || r.Index != 0 || r.Reason != "" || r.LastExit != nil {
		t.Fatalf("a healthy replica: %+v", r)
	}

	st.Report("n1", structs.AllocUpdate{AllocID: "a1", State: structs.AllocFailed, ExitCode: 3, Reason: "exit code 3"})
	d = check("1/2 healthy, 1 crash-looping", api.ReplicaHealthy, api.ReplicaCrashLooping)
	if r := d.Replicas[1]; r.Crashes != 1 || r.Restarts != 1 || r.Node != "" || r.Port != 0 || r.LastExit == nil || r.LastExit.ExitCode != 3 ||
		!strings.Contains(r.Reason, "restarting in") {
		t.Fatalf("a crashed replica: %+v, last exit %+v", r, r.LastExit)
	}
	place(r1, "a1b", 29501)
	st.Report("n1", structs.AllocUpdate{AllocID: "a1b", State: structs.AllocRunning, Health: &structs.AllocHealth{Healthy: true}})
	d = check("2/2 healthy", api.ReplicaHealthy, api.ReplicaHealthy)
	if r := d.Replicas[1]; r.Restarts != 1 || r.LastExit == nil {
		t.Fatalf("a restarted replica: %+v", r)
	}

	st.Must(structs.ServiceScaleType, structs.ServiceScaleRequest{Name: "web", Replicas: 4, At: time.Now()})
	check("scaling 2→4", api.ReplicaHealthy, api.ReplicaHealthy, api.ReplicaStarting, api.ReplicaStarting)
	place(structs.ReplicaJobID("svc", 2), "a2", 29502)
	st.Must(structs.PlanApplyType, structs.PlanApplyRequest{At: time.Now(), Plan: structs.Plan{Blocked: []structs.JobBlocked{
		{JobID: structs.ReplicaJobID("svc", 3), Reason: "1 node: not enough free GPUs"},
	}}})
	check("scaling 2→4, 1 queued", api.ReplicaHealthy, api.ReplicaHealthy, api.ReplicaStarting, api.ReplicaQueued)

	st.Must(structs.ServiceScaleType, structs.ServiceScaleRequest{Name: "web", Replicas: 1, At: time.Now()})
	// The queued replica ends at once; the others stop.
	check("scaling 3→1", api.ReplicaHealthy, api.ReplicaStopping, api.ReplicaStopping)
	st.Report("n1", structs.AllocUpdate{AllocID: "a1b", State: structs.AllocKilled, ExitCode: -1})
	st.Report("n1", structs.AllocUpdate{AllocID: "a2", State: structs.AllocKilled, ExitCode: -1})
	check("1/1 healthy", api.ReplicaHealthy)

	st.Must(structs.ServiceDeleteType, structs.ServiceDeleteRequest{Name: "web", At: time.Now()})
	check("deleting, 1 stopping", api.ReplicaStopping)
}
