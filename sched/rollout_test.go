package sched

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/skein-dev/skein/structs"
)

// rolloutFake is a state of replica jobs and their allocations.
type rolloutFake struct {
	jobs   []*structs.Job
	allocs map[string][]*structs.Allocation
}

func (f *rolloutFake) ServiceReplicas(string) []*structs.Job  { return f.jobs }
func (f *rolloutFake) Allocs(id string) []*structs.Allocation { return f.allocs[id] }

// rrep describes one replica job in a rollout test: its number, its
// version and how it is doing.
type rrep struct {
	n, version int
	how        string // "healthy", "starting", "unhealthy", "queued", "crashing", "stopping", "ended"
}

var rolloutT0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func rolloutState(reps []rrep, now time.Time) *rolloutFake {
	f := &rolloutFake{allocs: map[string][]*structs.Allocation{}}
	for _, r := range reps {
		j := &structs.Job{ID: fmt.Sprintf("svc-web-r%d", r.n), Service: "web", ServiceVersion: r.version, State: structs.JobRunning}
		a := &structs.Allocation{ID: fmt.Sprintf("a%d", r.n), JobID: j.ID, State: structs.AllocRunning, DesiredState: structs.DesiredRun,
			StartedAt: now.Add(-time.Hour), CreateIndex: 10}
		switch r.how {
		case "healthy":
			a.Health = &structs.AllocHealth{Healthy: true, At: now.Add(-time.Minute)}
		case "starting":
			a.StartedAt = now.Add(-time.Second)
			a.Health = &structs.AllocHealth{Reason: "starting: within its grace of 1m0s", At: now.Add(-time.Second)}
		case "unhealthy":
			a.Health = &structs.AllocHealth{Reason: "GET /health: 503 (3 failures in a row)", At: now.Add(-time.Minute)}
		case "queued":
			j.State, a = structs.JobQueued, nil
		case "crashing":
			j.State, j.Crashes = structs.JobQueued, 3
			a.State, a.ExitCode, a.FinishedAt = structs.AllocFailed, 1, now
		case "stopping":
			j.StopRequested, a.DesiredState = true, structs.DesiredStop
		case "ended":
			j.State, a.State = structs.JobCancelled, structs.AllocKilled
		}
		f.jobs = append(f.jobs, j)
		if a != nil {
			f.allocs[j.ID] = append(f.allocs[j.ID], a)
		}
	}
	return f
}

func TestNextRolloutStep_Situations(t *testing.T) {
	now := rolloutT0
	cases := []struct {
		name        string
		replicas    int
		state       string // the rollout's state
		surge, down int
		reps        []rrep
		want        *structs.ServiceRolloutRequest // nil: no step
	}{
		{name: "start: surge one new", replicas: 2, surge: 1,
			reps: []rrep{{0, 1, "healthy"}, {1, 1, "healthy"}},
			want: &structs.ServiceRolloutRequest{Add: 1}},
		{name: "new one starting: wait", replicas: 2, surge: 1,
			reps: []rrep{{0, 1, "healthy"}, {1, 1, "healthy"}, {2, 2, "starting"}}},
		{name: "new one healthy: stop an old one", replicas: 2, surge: 1,
			reps: []rrep{{0, 1, "healthy"}, {1, 1, "healthy"}, {2, 2, "healthy"}},
			want: &structs.ServiceRolloutRequest{Stop: []string{"svc-web-r0"}}},
		{name: "old one draining: the next new one", replicas: 2, surge: 1,
			reps: []rrep{{0, 1, "stopping"}, {1, 1, "healthy"}, {2, 2, "healthy"}},
			want: &structs.ServiceRolloutRequest{Add: 1}},
		{name: "all new and healthy: done", replicas: 2, surge: 1,
			reps: []rrep{{0, 1, "ended"}, {1, 1, "stopping"}, {2, 2, "healthy"}, {3, 2, "healthy"}},
			want: &structs.ServiceRolloutRequest{Done: true}},
		{name: "all new, one starting: wait", replicas: 2, surge: 1,
			reps: []rrep{{2, 2, "healthy"}, {3, 2, "starting"}}},
		{name: "surge 2: two at once", replicas: 3, surge: 2,
			reps: []rrep{{0, 1, "healthy"}, {1, 1, "healthy"}, {2, 1, "healthy"}},
			want: &structs.ServiceRolloutRequest{Add: 2}},
		{name: "max unavailable 1, no surge: stop one first", replicas: 2, down: 1,
			reps: []rrep{{0, 1, "healthy"}, {1, 1, "healthy"}},
			want: &structs.ServiceRolloutRequest{Stop: []string{"svc-web-r0"}}},
		{name: "max unavailable 1, no surge: then make one", replicas: 2, down: 1,
			reps: []rrep{{0, 1, "stopping"}, {1, 1, "healthy"}},
			want: &structs.ServiceRolloutRequest{Add: 1}},
		{name: "an unavailable old one stops before a healthy one", replicas: 2, surge: 1,
			reps: []rrep{{0, 1, "healthy"}, {1, 1, "unhealthy"}, {2, 2, "starting"}},
			want: &structs.ServiceRolloutRequest{Stop: []string{"svc-web-r1"}}},
		{name: "new one crash-looping: roll back", replicas: 2, surge: 1,
			reps: []rrep{{0, 1, "healthy"}, {1, 1, "healthy"}, {2, 2, "crashing"}},
			want: &structs.ServiceRolloutRequest{RollBack: true, Reason: "replica r2 of version 2 crash-looping: exited with code 1"}},
		{name: "new one unhealthy past its grace: roll back", replicas: 2, surge: 1,
			reps: []rrep{{0, 1, "healthy"}, {1, 1, "healthy"}, {2, 2, "unhealthy"}},
			want: &structs.ServiceRolloutRequest{RollBack: true, Reason: "replica r2 of version 2 unhealthy for 1m0s: GET /health: 503 (3 failures in a row)"}},
		{name: "an old one unhealthy: no rollback", replicas: 2, surge: 1,
			reps: []rrep{{0, 1, "unhealthy"}, {1, 1, "healthy"}, {2, 2, "starting"}},
			want: &structs.ServiceRolloutRequest{Stop: []string{"svc-web-r0"}}},
		{name: "rolling back: the failed ones stop", replicas: 2, surge: 1, state: structs.RolloutRollingBack,
			reps: []rrep{{0, 1, "healthy"}, {1, 1, "healthy"}, {2, 2, "crashing"}},
			want: &structs.ServiceRolloutRequest{Stop: []string{"svc-web-r2"}}},
		{name: "rolling back: back to the version, done", replicas: 2, surge: 1, state: structs.RolloutRollingBack,
			reps: []rrep{{0, 1, "healthy"}, {1, 1, "healthy"}, {2, 2, "stopping"}},
			want: &structs.ServiceRolloutRequest{Done: true}},
		{name: "rolling back never rolls back", replicas: 1, surge: 1, state: structs.RolloutRollingBack,
			reps: []rrep{{3, 1, "crashing"}}},
		{name: "no replicas wanted: done", replicas: 0, surge: 1, want: &structs.ServiceRolloutRequest{Done: true}},
		{name: "a rollout that is done: nothing", replicas: 2, surge: 1, state: structs.RolloutDone,
			reps: []rrep{{0, 1, "healthy"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			svc := &structs.Service{ID: "svc-web", Name: "web", Replicas: c.replicas, Version: 2,
				Spec:    structs.ServiceSpec{Health: &structs.HealthCheck{Kind: structs.HealthHTTP, Path: "/health"}},
				Rollout: &structs.Rollout{Version: 2, From: 1, MaxSurge: c.surge, MaxUnavailable: c.down, State: c.state, StartedAt: now.Add(-time.Minute)}}
			if c.state == "" {
				svc.Rollout.State = structs.RolloutRunning
			}
			if c.state == structs.RolloutRollingBack {
				svc.Version, svc.Rollout.Version, svc.Rollout.From = 1, 1, 2
			}
			got, ok := NextRolloutStep(rolloutState(c.reps, now), svc, now, DefaultRolloutPolicy)
			if c.want == nil {
				if ok {
					t.Fatalf("got step %+v, want none", got)
				}
				return
			}
			want := *c.want
			want.Name, want.Version, want.At = "web", svc.Rollout.Version, now
			if !ok || !reflect.DeepEqual(got, want) {
				t.Fatalf("got %+v (ok %v), want %+v", got, ok, want)
			}
		})
	}
}

// A rollout driven by its own steps, each new replica becoming healthy
// when made, ends with every replica of the new version and never fewer
// than Replicas-MaxUnavailable available.
func TestNextRolloutStep_ReachesTheEndWithinTheLimits(t *testing.T) {
	for _, lim := range []struct{ replicas, surge, down int }{{3, 1, 0}, {4, 2, 0}, {4, 0, 1}, {5, 2, 2}} {
		t.Run(fmt.Sprintf("%d replicas surge %d unavailable %d", lim.replicas, lim.surge, lim.down), func(t *testing.T) {
			var reps []rrep
			for i := range lim.replicas {
				reps = append(reps, rrep{i, 1, "healthy"})
			}
			next := lim.replicas
			svc := &structs.Service{ID: "svc-web", Name: "web", Replicas: lim.replicas, Version: 2,
				Rollout: &structs.Rollout{Version: 2, From: 1, MaxSurge: lim.surge, MaxUnavailable: lim.down, State: structs.RolloutRunning, StartedAt: rolloutT0}}
			for range 100 {
				step, ok := NextRolloutStep(rolloutState(reps, rolloutT0), svc, rolloutT0, DefaultRolloutPolicy)
				if !ok {
					t.Fatalf("stuck at %v", reps)
				}
				if step.Done {
					for _, r := range reps {
						if r.how == "healthy" && r.version != 2 {
							t.Fatalf("done with %v", reps)
						}
					}
					return
				}
				for _, id := range step.Stop {
					for i := range reps {
						if fmt.Sprintf("svc-web-r%d", reps[i].n) == id {
							reps[i].how = "ended"
						}
					}
				}
				for range step.Add {
					reps = append(reps, rrep{next, 2, "healthy"})
					next++
				}
				live, avail := 0, 0
				for _, r := range reps {
					if r.how == "healthy" {
						live++
						avail++
					}
				}
				if avail < lim.replicas-lim.down || live > lim.replicas+lim.surge {
					t.Fatalf("after %+v: %d available, %d live", step, avail, live)
				}
			}
			t.Fatal("no end in 100 steps")
		})
	}
}

// A rollout that makes no progress for its spec's ProgressDeadline rolls
// back, naming the replica that holds it up and why; progress is its
// start or latest step, a new replica running to the end of its grace,
// or becoming available.
func TestNextRolloutStep_ProgressDeadline(t *testing.T) {
	now := rolloutT0
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	queued := func(j *structs.Job, _ *structs.Allocation) {
		j.Reason = "waiting: 0 of 3 nodes have 8 free GPUs"
	}
	cases := []struct {
		name       string
		deadline   time.Duration // the spec's; 0: the default
		grace      time.Duration
		unhealthy  time.Duration // the spec's unhealthy timeout; 0: the default
		progressAt time.Time
		how        string // the new replica r2's
		edit       func(*structs.Job, *structs.Allocation)
		want       string // the rollback's reason; "": no step
	}{
		{name: "not placed for the default deadline", progressAt: ago(10 * time.Minute), how: "queued", edit: queued,
			want: "version 2 made no progress in 10m0s: replica r2 not placed: waiting: 0 of 3 nodes have 8 free GPUs"},
		{name: "not placed, just within the deadline", progressAt: ago(10*time.Minute - time.Second), how: "queued", edit: queued},
		{name: "the spec's deadline", deadline: time.Minute, progressAt: ago(time.Minute), how: "queued",
			want: "version 2 made no progress in 1m0s: replica r2 not placed"},
		{name: "a longer deadline of the spec", deadline: time.Hour, progressAt: ago(30 * time.Minute), how: "queued"},
		{name: "placed, still pulling", progressAt: ago(11 * time.Minute), how: "healthy",
			edit: func(_ *structs.Job, a *structs.Allocation) {
				a.State, a.Health, a.Reason = structs.AllocPending, nil, "pulling image"
			},
			want: "version 2 made no progress in 10m0s: replica r2 placed, not started: pulling image"},
		{name: "within a grace longer than the deadline", grace: 30 * time.Minute, progressAt: ago(25 * time.Minute), how: "starting",
			edit: func(_ *structs.Job, a *structs.Allocation) { a.StartedAt = ago(25 * time.Minute) }},
		{name: "unhealthy past its grace, a long unhealthy timeout", grace: time.Minute, unhealthy: time.Hour,
			progressAt: ago(20 * time.Minute), how: "unhealthy",
			edit: func(_ *structs.Job, a *structs.Allocation) { a.StartedAt = ago(20 * time.Minute) },
			want: "version 2 made no progress in 10m0s: replica r2 not healthy: GET /health: 503 (3 failures in a row)"},
		{name: "the new one became healthy since the last step", progressAt: ago(time.Hour), how: "healthy",
			edit: func(_ *structs.Job, a *structs.Allocation) { a.Health.At = ago(time.Minute) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := rolloutState([]rrep{{0, 1, "healthy"}, {1, 1, "healthy"}, {2, 2, c.how}}, now)
			if c.edit != nil {
				var a *structs.Allocation
				if as := st.allocs["svc-web-r2"]; len(as) > 0 {
					a = as[0]
				}
				c.edit(st.jobs[2], a)
			}
			svc := &structs.Service{ID: "svc-web", Name: "web", Replicas: 2, Version: 2,
				Spec: structs.ServiceSpec{
					Health:           &structs.HealthCheck{Kind: structs.HealthHTTP, Path: "/health", Grace: structs.Duration(c.grace)},
					ProgressDeadline: structs.Duration(c.deadline), UnhealthyTimeout: structs.Duration(c.unhealthy)},
				Rollout: &structs.Rollout{Version: 2, From: 1, MaxSurge: 1, State: structs.RolloutRunning,
					StartedAt: ago(2 * time.Hour), ProgressAt: c.progressAt}}
			step, ok := NextRolloutStep(st, svc, now, DefaultRolloutPolicy)
			if c.want == "" {
				if ok && step.RollBack {
					t.Fatalf("rolled back: %s", step.Reason)
				}
				return
			}
			if !ok || !step.RollBack || step.Reason != c.want {
				t.Fatalf("got %+v (ok %v), want a rollback: %s", step, ok, c.want)
			}
		})
	}
}

// A rollout that has not started a new replica yet counts from its
// start; one rolling back never rolls back for want of progress.
func TestNextRolloutStep_ProgressDeadline_StartAndRollingBack(t *testing.T) {
	now := rolloutT0
	st := rolloutState([]rrep{{0, 1, "healthy"}, {1, 1, "healthy"}, {2, 2, "queued"}}, now)
	svc := &structs.Service{ID: "svc-web", Name: "web", Replicas: 2, Version: 2,
		Rollout: &structs.Rollout{Version: 2, From: 1, MaxSurge: 1, State: structs.RolloutRunning, StartedAt: now.Add(-10 * time.Minute)}}
	if step, ok := NextRolloutStep(st, svc, now, DefaultRolloutPolicy); !ok || !step.RollBack {
		t.Fatalf("running, 10m since its start: got %+v (ok %v), want a rollback", step, ok)
	}
	svc.Rollout.StartedAt = now.Add(-9 * time.Minute)
	if step, ok := NextRolloutStep(st, svc, now, DefaultRolloutPolicy); ok {
		t.Fatalf("running, 9m since its start: got %+v, want no step", step)
	}
	svc.Version, svc.Rollout.Version, svc.Rollout.From, svc.Rollout.State = 1, 1, 2, structs.RolloutRollingBack
	st = rolloutState([]rrep{{0, 1, "queued"}, {1, 1, "healthy"}, {2, 2, "healthy"}}, now)
	svc.Rollout.StartedAt = now.Add(-time.Hour)
	if step, ok := NextRolloutStep(st, svc, now, DefaultRolloutPolicy); ok && step.RollBack {
		t.Fatalf("rolling back: got %+v, want no rollback", step)
	}
}

// The spec's UnhealthyTimeout bounds how long a new replica may stay
// unhealthy after its grace.
func TestNextRolloutStep_UnhealthyTimeout(t *testing.T) {
	now := rolloutT0
	for _, c := range []struct {
		timeout, unhealthyFor time.Duration
		rollBack              bool
	}{
		{0, 29 * time.Second, false}, {0, 30 * time.Second, true},
		{2 * time.Minute, time.Minute, false}, {2 * time.Minute, 2 * time.Minute, true},
		{5 * time.Second, 5 * time.Second, true},
	} {
		st := rolloutState([]rrep{{0, 1, "healthy"}, {1, 1, "healthy"}, {2, 2, "unhealthy"}}, now)
		st.allocs["svc-web-r2"][0].Health.At = now.Add(-c.unhealthyFor)
		svc := &structs.Service{ID: "svc-web", Name: "web", Replicas: 2, Version: 2,
			Spec: structs.ServiceSpec{Health: &structs.HealthCheck{Kind: structs.HealthHTTP, Path: "/health"},
				UnhealthyTimeout: structs.Duration(c.timeout)},
			Rollout: &structs.Rollout{Version: 2, From: 1, MaxSurge: 1, State: structs.RolloutRunning, StartedAt: now.Add(-time.Minute)}}
		step, ok := NextRolloutStep(st, svc, now, DefaultRolloutPolicy)
		if got := ok && step.RollBack; got != c.rollBack {
			t.Errorf("timeout %s, unhealthy for %s: got %+v (ok %v), want rollback %v", c.timeout, c.unhealthyFor, step, ok, c.rollBack)
		}
		if c.rollBack && !strings.Contains(step.Reason, "unhealthy for "+c.unhealthyFor.String()) {
			t.Errorf("timeout %s: reason %q does not say for how long", c.timeout, step.Reason)
		}
	}
}

// A rollback's reason quoting a long wait reason is cut to what a step
// may carry, so the state does not refuse the rollback.
func TestNextRolloutStep_ALongReasonIsCutToTheLimit(t *testing.T) {
	now := rolloutT0
	st := rolloutState([]rrep{{0, 1, "healthy"}, {1, 2, "queued"}}, now)
	st.jobs[1].Reason = strings.Repeat("é", structs.MaxServiceReasonLen)
	svc := &structs.Service{ID: "svc-web", Name: "web", Replicas: 1, Version: 2,
		Rollout: &structs.Rollout{Version: 2, From: 1, MaxSurge: 1, State: structs.RolloutRunning, StartedAt: now.Add(-time.Hour)}}
	step, ok := NextRolloutStep(st, svc, now, DefaultRolloutPolicy)
	if !ok || !step.RollBack {
		t.Fatalf("got %+v (ok %v), want a rollback", step, ok)
	}
	if err := step.Validate(); err != nil || !utf8.ValidString(step.Reason) || !strings.HasPrefix(step.Reason, "version 2 made no progress") {
		t.Fatalf("reason of %d bytes (valid UTF-8 %v): %v", len(step.Reason), utf8.ValidString(step.Reason), err)
	}
}
