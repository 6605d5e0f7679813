package fsm

import (
	"testing"

	"github.com/skein-dev/skein/structs"
)

// serving2 registers web, 2 replicas of 1 GPU with an http check, on n1
// (4 GPUs), both running and healthy.
func serving2(t *testing.T) *harness {
	h := newHarness(t)
	h.register(node("n1", 4))
	h.registerService(service("web", 2, 1))
	h.runHealthy("svc-web-r0", "a0", 0)
	h.runHealthy("svc-web-r1", "a1", 1)
	return h
}

// runHealthy places replica jobID as allocation allocID on n1's GPU gpu,
// runs it and reports it healthy.
func (h *harness) runHealthy(jobID, allocID string, gpu int) {
	h.t.Helper()
	h.place(jobID, alloc(allocID, "n1", 0, gpuID("n1", gpu)))
	h.mustUpdate("n1", allocID, structs.AllocRunning, 0, "")
	if err := h.reportHealth("n1", allocID, true, "GET /health: 200"); err != nil {
		h.t.Fatalf("health: %v", err)
	}
}

// updateService applies a ServiceUpdate that sets MODEL=env in web's spec.
func (h *harness) updateService(env string, surge, unavailable int) any {
	h.t.Helper()
	spec := service("web", 0, 1).Spec
	spec.Job.Env = map[string]string{"MODEL": env}
	return h.apply(structs.ServiceUpdateType, structs.ServiceUpdateRequest{
		Name: "web", Spec: spec, MaxSurge: surge, MaxUnavailable: unavailable, At: h.at()})
}

// step applies a rollout step.
func (h *harness) step(req structs.ServiceRolloutRequest) error {
	h.t.Helper()
	req.Name, req.At = "web", h.at()
	return h.applyErr(structs.ServiceRolloutType, req)
}

func (h *harness) svc(name string) *structs.Service {
	h.t.Helper()
	s, ok := h.f.Service(name)
	if !ok {
		h.t.Fatalf("no service %s", name)
	}
	return s
}

func TestFSM_ServiceRegister_IsVersionOneAndItsReplicasToo(t *testing.T) {
	h := serving2(t)
	if v := h.svc("web").Version; v != 1 {
		t.Fatalf("version %d, want 1", v)
	}
	for _, j := range h.f.ServiceReplicas("web") {
		if j.ServiceVersion != 1 {
			t.Fatalf("replica %s of version %d, want 1", j.ID, j.ServiceVersion)
		}
	}
}

func TestFSM_ServiceUpdate_StartsARolloutAndKeepsThePreviousSpec(t *testing.T) {
	h := serving2(t)
	got, ok := h.updateService("mistral", 0, 0).(*structs.Service)
	if !ok {
		t.Fatalf("update answered %v", got)
	}
	r := got.Rollout
	if got.Version != 2 || r == nil || r.Version != 2 || r.From != 1 || r.MaxSurge != 1 || r.MaxUnavailable != 0 || r.State != structs.RolloutRunning {
		t.Fatalf("after update: version %d, rollout %+v", got.Version, r)
	}
	if got.Spec.Job.Env["MODEL"] != "mistral" || got.PrevSpec == nil || got.PrevSpec.Job.Env["MODEL"] != "llama" || got.Spec.PortEnv != "PORT" {
		t.Fatalf("spec %+v, previous %+v", got.Spec, got.PrevSpec)
	}
	if n := len(h.f.ServiceReplicas("web")); n != 2 {
		t.Fatalf("the update itself made or stopped replicas: %d jobs", n)
	}

	// An update during the rollout replaces it, from the latest spec.
	got, _ = h.updateService("qwen", 2, 1).(*structs.Service)
	if got == nil || got.Version != 3 || got.Rollout.From != 2 || got.Rollout.MaxSurge != 2 || got.Rollout.MaxUnavailable != 1 ||
		got.PrevSpec.Job.Env["MODEL"] != "mistral" {
		t.Fatalf("second update: %+v", got)
	}
}

func TestFSM_ServiceUpdate_RefusesBadRequests(t *testing.T) {
	h := serving2(t)
	bad := service("web", 0, 1).Spec
	bad.Job.Nodes = 2
	cases := []struct {
		name  string
		req   structs.ServiceUpdateRequest
		parts []string
	}{
		{"unknown service", structs.ServiceUpdateRequest{Name: "nope", Spec: service("nope", 0, 1).Spec}, []string{"no such service"}},
		{"bad spec", structs.ServiceUpdateRequest{Name: "web", Spec: bad}, []string{"job.nodes"}},
		{"negative surge", structs.ServiceUpdateRequest{Name: "web", Spec: service("web", 0, 1).Spec, MaxSurge: -1}, []string{"max_surge", "-1"}},
		{"unavailable too high", structs.ServiceUpdateRequest{Name: "web", Spec: service("web", 0, 1).Spec, MaxUnavailable: 1001}, []string{"max_unavailable"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := h.f.Hash()
			wantErrIs(t, h.applyErr(structs.ServiceUpdateType, c.req), nil, c.parts...)
			if h.f.Hash() != before {
				t.Fatal("a refused update changed the state")
			}
		})
	}
}

func TestFSM_ServiceRollout_StepsAreCheckedAgainstTheState(t *testing.T) {
	h := serving2(t)
	h.updateService("mistral", 0, 0)

	cases := []struct {
		name  string
		req   structs.ServiceRolloutRequest
		parts []string
	}{
		{"an old version's step", structs.ServiceRolloutRequest{Version: 1, Add: 1}, []string{"no rollout to version 1"}},
		{"past the surge", structs.ServiceRolloutRequest{Version: 2, Add: 2}, []string{"surge of 1"}},
		{"below max unavailable", structs.ServiceRolloutRequest{Version: 2, Stop: []string{"svc-web-r0"}}, []string{"fewer than 2 wanted less 0 unavailable"}},
		{"not a replica", structs.ServiceRolloutRequest{Version: 2, Add: 1, Stop: []string{"other"}}, []string{"stop other"}},
		{"done too soon", structs.ServiceRolloutRequest{Version: 2, Done: true}, []string{"2 replicas of older versions remain"}},
		{"two things", structs.ServiceRolloutRequest{Version: 2, Done: true, Add: 1}, []string{"add"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := h.f.Hash()
			wantErrIs(t, h.step(c.req), nil, c.parts...)
			if h.f.Hash() != before {
				t.Fatal("a refused step changed the state")
			}
		})
	}

	// Surge one of version 2: allowed.
	if err := h.step(structs.ServiceRolloutRequest{Version: 2, Add: 1}); err != nil {
		t.Fatal(err)
	}
	if j := h.job("svc-web-r2"); j.ServiceVersion != 2 || j.Spec.Env["MODEL"] != "mistral" {
		t.Fatalf("new replica: version %d, env %v", j.ServiceVersion, j.Spec.Env)
	}
	// While it is not healthy, no old replica may stop; once it is, one may.
	wantErrIs(t, h.step(structs.ServiceRolloutRequest{Version: 2, Stop: []string{"svc-web-r0"}}), ErrRolloutStale, "1 available would remain")
	wantErrIs(t, h.step(structs.ServiceRolloutRequest{Version: 2, Stop: []string{"svc-web-r2"}}), ErrRolloutStale, "not a replica of an older version")
	h.runHealthy("svc-web-r2", "a2", 2)
	if err := h.step(structs.ServiceRolloutRequest{Version: 2, Stop: []string{"svc-web-r0"}}); err != nil {
		t.Fatal(err)
	}
	if j := h.job("svc-web-r0"); !j.StopRequested || j.Reason != "cancel requested: service web: replaced by version 2" {
		t.Fatalf("old replica r0: stop requested %v, %q", j.StopRequested, j.Reason)
	}
	h.mustUpdate("n1", "a0", structs.AllocKilled, 143, "")
	if err := h.step(structs.ServiceRolloutRequest{Version: 2, Add: 1}); err != nil {
		t.Fatal(err)
	}
	h.runHealthy("svc-web-r3", "a3", 0)
	if err := h.step(structs.ServiceRolloutRequest{Version: 2, Stop: []string{"svc-web-r1"}}); err != nil {
		t.Fatal(err)
	}
	if err := h.step(structs.ServiceRolloutRequest{Version: 2, Done: true}); err != nil {
		t.Fatal(err)
	}
	s := h.svc("web")
	if s.Rollout.State != structs.RolloutDone || s.PrevSpec != nil || s.Rollout.Reason != "every replica runs version 2" {
		t.Fatalf("after done: rollout %+v, previous spec %v", s.Rollout, s.PrevSpec)
	}
	wantErrIs(t, h.step(structs.ServiceRolloutRequest{Version: 2, Add: 1}), ErrRolloutStale)

	// Scale up after the rollout: version 2.
	h.scale("web", 3, "")
	if j := h.job("svc-web-r4"); j.ServiceVersion != 2 {
		t.Fatalf("replica made by a scale: version %d, want 2", j.ServiceVersion)
	}
}

func TestFSM_ServiceRollout_RollBackReturnsToThePreviousSpec(t *testing.T) {
	h := serving2(t)
	h.updateService("broken", 0, 0)
	if err := h.step(structs.ServiceRolloutRequest{Version: 2, Add: 1}); err != nil {
		t.Fatal(err)
	}
	// A scale during the rollout makes replicas of the latest version.
	h.scale("web", 4, "")
	if j := h.job("svc-web-r3"); j.ServiceVersion != 2 {
		t.Fatalf("replica made by a scale in the rollout: version %d, want 2", j.ServiceVersion)
	}
	const why = "replica r2 of version 2 crash-looping: exited with code 1"
	if err := h.step(structs.ServiceRolloutRequest{Version: 2, RollBack: true, Reason: why}); err != nil {
		t.Fatal(err)
	}
	s := h.svc("web")
	r := s.Rollout
	if s.Version != 1 || s.Spec.Job.Env["MODEL"] != "llama" || s.PrevSpec != nil ||
		r.Version != 1 || r.From != 2 || r.State != structs.RolloutRollingBack || r.Reason != "rolled back: "+why {
		t.Fatalf("after rollback: version %d, env %v, rollout %+v", s.Version, s.Spec.Job.Env, r)
	}
	wantErrIs(t, h.step(structs.ServiceRolloutRequest{Version: 2, Stop: []string{"svc-web-r2"}}), ErrRolloutStale, "no rollout to version 2")
	wantErrIs(t, h.step(structs.ServiceRolloutRequest{Version: 1, RollBack: true}), ErrRolloutStale, "already rolling back")

	// The failed replicas of version 2 are now the older ones: they stop,
	// and new ones take version 1's spec.
	h.scale("web", 3, "")
	if err := h.step(structs.ServiceRolloutRequest{Version: 1, Add: 1, Stop: []string{"svc-web-r2"}}); err != nil {
		t.Fatal(err)
	}
	if j := h.job("svc-web-r4"); j.ServiceVersion != 1 || j.Spec.Env["MODEL"] != "llama" {
		t.Fatalf("replica made in the rollback: version %d, env %v", j.ServiceVersion, j.Spec.Env)
	}
	if err := h.step(structs.ServiceRolloutRequest{Version: 1, Done: true}); err != nil {
		t.Fatal(err)
	}
	if r := h.svc("web").Rollout; r.State != structs.RolloutRolledBack || r.Reason != "rolled back: "+why {
		t.Fatalf("after the rollback's end: %+v", r)
	}
	// The next update takes a number no replica ever had.
	if got, _ := h.updateService("fixed", 0, 0).(*structs.Service); got == nil || got.Version != 3 || got.Rollout.From != 1 {
		t.Fatalf("update after a rollback: %+v", got)
	}
}

func TestFSM_ServiceRollout_SurvivesASnapshot(t *testing.T) {
	h := serving2(t)
	h.updateService("mistral", 0, 0)
	if got, want := restoreFresh(t, h.f).Hash(), h.f.Hash(); got != want {
		t.Fatal("restored state differs")
	}
	s, _ := restoreFresh(t, h.f).Service("web")
	if s.PrevSpec == nil || s.Rollout == nil || s.Rollout.Version != 2 {
		t.Fatalf("restored service: %+v", s)
	}
}

// A step that makes or stops replicas stamps the rollout's ProgressAt
// with its time (the leader's); a refused step, a Done and a rollback do
// not, and a snapshot keeps it.
func TestFSM_ServiceRollout_StepsStampProgress(t *testing.T) {
	h := serving2(t)
	h.updateService("mistral", 1, 0)
	if p := h.svc("web").Rollout.ProgressAt; !p.IsZero() {
		t.Fatalf("a new rollout has progress at %v, want none (its start counts)", p)
	}
	added := h.at()
	if err := h.step(structs.ServiceRolloutRequest{Version: 2, Add: 1}); err != nil {
		t.Fatal(err)
	}
	if p := h.svc("web").Rollout.ProgressAt; !p.Equal(added) {
		t.Fatalf("after an add: progress at %v, want %v", p, added)
	}
	wantErrIs(t, h.step(structs.ServiceRolloutRequest{Version: 2, Stop: []string{"svc-web-r0"}}), ErrRolloutStale)
	if p := h.svc("web").Rollout.ProgressAt; !p.Equal(added) {
		t.Fatalf("after a refused stop: progress at %v, want %v still", p, added)
	}
	h.runHealthy("svc-web-r2", "a2", 2)
	stopped := h.at()
	if err := h.step(structs.ServiceRolloutRequest{Version: 2, Stop: []string{"svc-web-r0"}}); err != nil {
		t.Fatal(err)
	}
	if p := h.svc("web").Rollout.ProgressAt; !p.Equal(stopped) {
		t.Fatalf("after a stop: progress at %v, want %v", p, stopped)
	}
	if s, _ := restoreFresh(t, h.f).Service("web"); !s.Rollout.ProgressAt.Equal(stopped) {
		t.Fatalf("restored: progress at %v, want %v", s.Rollout.ProgressAt, stopped)
	}
	if err := h.step(structs.ServiceRolloutRequest{Version: 2, RollBack: true, Reason: "version 2 made no progress in 10m0s"}); err != nil {
		t.Fatal(err)
	}
	if r := h.svc("web").Rollout; !r.ProgressAt.Equal(stopped) || r.Reason != "rolled back: version 2 made no progress in 10m0s" {
		t.Fatalf("after the rollback: %+v", r)
	}
}

// An autoscaled service is not scaled while a rollout runs or rolls back
// (only the leader's autoscaler scales it, and it pauses for rollouts),
// and is again once the rollout is over.
func TestFSM_ServiceScale_OfAnAutoscaledServiceWaitsForTheRollout(t *testing.T) {
	h := serving2(t)
	if _, ok := h.autoscale("web", &structs.Autoscale{Min: 1, Max: 4, Metric: structs.AutoscaleInFlight, Target: 10}).(*structs.Service); !ok {
		t.Fatal("autoscale refused")
	}
	h.updateService("mistral", 1, 0)
	before := h.f.Hash()
	err, _ := h.scale("web", 3, "scaled 2→3: 15 requests in flight per replica, target 10").(error)
	wantErrIs(t, err, ErrAutoscalePaused, "a rollout to version 2 is in progress")
	if h.f.Hash() != before {
		t.Fatal("a refused scale changed the state")
	}
	if err := h.step(structs.ServiceRolloutRequest{Version: 2, RollBack: true, Reason: "no"}); err != nil {
		t.Fatal(err)
	}
	err, _ = h.scale("web", 3, "").(error)
	wantErrIs(t, err, ErrAutoscalePaused, "a rollout to version 1 is in progress")
	if err := h.step(structs.ServiceRolloutRequest{Version: 1, Done: true}); err != nil {
		t.Fatal(err)
	}
	if s, ok := h.scale("web", 3, "").(*structs.Service); !ok || s.Replicas != 3 {
		t.Fatalf("after the rollout: %v, want 3 replicas", s)
	}
}
