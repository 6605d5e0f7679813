package agent

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

// sleepService is a create request for a service of n replicas that
// sleep.
func sleepService(name string, n int) api.ServiceCreateRequest {
	return api.ServiceCreateRequest{Name: name, Replicas: n, Spec: structs.ServiceSpec{Job: structs.JobSpec{Command: []string{"sleep", "1000"}}}}
}

// appliedByType counts the entries a's state machine has applied, by
// entry type (the samples of its skein_fsm_apply_duration_seconds).
func appliedByType(t *testing.T, a *Agent) map[string]uint64 {
	t.Helper()
	fams, err := a.metrics.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]uint64{}
	for _, fam := range fams {
		if fam.GetName() != "skein_fsm_apply_duration_seconds" {
			continue
		}
		for _, m := range fam.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "type" {
					out[l.GetValue()] = m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return out
}

// nodeOwnWrites are the entries a node writes on its own while a replica
// runs: its allocations' reports, its status, its GPUs' health, and its
// election. A loaded machine can delay one into any window of a test.
var nodeOwnWrites = []string{
	structs.AllocUpdateType.String(), structs.NodeStatusType.String(),
	structs.NodeGPUHealthType.String(), structs.LeaderElectedType.String(),
}

// wroteNothing fails t if a's state machine applied an entry since the
// counts before other than those its node writes on its own: what was
// refused (what) wrote nothing.
func wroteNothing(t *testing.T, a *Agent, before map[string]uint64, what string) {
	t.Helper()
	for typ, n := range appliedByType(t, a) {
		if n > before[typ] && !slices.Contains(nodeOwnWrites, typ) {
			t.Fatalf("%s wrote %d %s entries", what, n-before[typ], typ)
		}
	}
}

// waitServiceState waits until the service's state reads want.
func waitServiceState(t *testing.T, c *api.Client, name, want string) *api.ServiceDetail {
	t.Helper()
	var d *api.ServiceDetail
	testutil.WaitFor(t, 20*time.Second, func() error {
		var err error
		if d, err = c.Service(context.Background(), name); err != nil {
			return err
		}
		if d.State != want {
			return fmt.Errorf("service %s is %q, want %q (replicas %+v)", name, d.State, want, d.Replicas)
		}
		return nil
	})
	return d
}

func TestServiceRoutes_CreateListDetailScaleDelete(t *testing.T) {
	t.Parallel()
	a, c := startAgent(t, testConfig(t, t.TempDir()))
	ctx := context.Background()

	created, err := c.CreateService(ctx, sleepService("web", 2))
	if err != nil {
		t.Fatal(err)
	}
	if created.Service.Name != "web" || created.Service.ID == "" || created.Service.Replicas != 2 || created.Service.Spec.PortEnv != structs.DefaultPortEnv {
		t.Fatalf("create answered %+v", created.Service)
	}
	d := waitServiceState(t, c, "web", "2/2 healthy")
	if d.Running != 2 || d.Healthy != 2 || len(d.Replicas) != 2 {
		t.Fatalf("detail %+v", d.ServiceInfo)
	}
	ports := map[int]bool{}
	for i, r := range d.Replicas {
		if r.Index != i || r.JobID != structs.ReplicaJobID(d.Service.ID, i) || r.Node != a.Name() || r.Port == 0 ||
			r.Status != api.ReplicaHealthy || r.Alloc == nil || r.Alloc.State != structs.AllocRunning {
			t.Fatalf("replica %d: %+v", i, r)
		}
		ports[r.Port] = true
	}
	if len(ports) != 2 {
		t.Fatalf("the replicas share a port: %+v", d.Replicas)
	}
	list, err := c.Services(ctx)
	if err != nil || len(list) != 1 || list[0].Service.Name != "web" || list[0].State != "2/2 healthy" {
		t.Fatalf("list %+v, %v", list, err)
	}

	scaled, err := c.ScaleService(ctx, "web", api.ServiceScaleRequest{Replicas: 3})
	if err != nil || scaled.Service.Replicas != 3 || scaled.Service.Reason != "scaled 2→3 by admin" {
		t.Fatalf("scale up: %+v, %v", scaled, err)
	}
	d = waitServiceState(t, c, "web", "3/3 healthy")
	if d.Replicas[2].Index != 2 {
		t.Fatalf("the new replica is %+v, want number 2", d.Replicas[2])
	}
	scaled, err = c.ScaleService(ctx, "web", api.ServiceScaleRequest{Replicas: 1, Reason: "quiet night"})
	if err != nil || scaled.Service.Reason != "quiet night" {
		t.Fatalf("scale down: %+v, %v", scaled, err)
	}
	d = waitServiceState(t, c, "web", "1/1 healthy")
	if len(d.Replicas) != 1 || d.Replicas[0].Index != 0 {
		t.Fatalf("after the scale down the replicas are %+v, want the oldest", d.Replicas)
	}

	deleted, err := c.DeleteService(ctx, "web")
	if err != nil || !deleted.Service.Deleted {
		t.Fatalf("delete: %+v, %v", deleted, err)
	}
	testutil.WaitFor(t, 20*time.Second, func() error {
		_, err := c.Service(ctx, "web")
		if api.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("the deleted service is still there: %v", err)
	})
	if list, err := c.Services(ctx); err != nil || len(list) != 0 {
		t.Fatalf("list after the delete: %+v, %v", list, err)
	}
	for i := range 3 {
		waitJobState(t, c, structs.ReplicaJobID(d.Service.ID, i), structs.JobCancelled)
	}
}

func TestServiceRoutes_RefusalsNameTheField(t *testing.T) {
	t.Parallel()
	a, admin, c := startAgentAdmin(t, testConfig(t, t.TempDir()))
	ctx := context.Background()
	if _, err := c.CreateService(ctx, sleepService("web", 1)); err != nil {
		t.Fatal(err)
	}
	waitServiceState(t, c, "web", "1/1 healthy") // its replica writes no more entries
	withJob := func(name string, f func(*structs.ServiceSpec)) api.ServiceCreateRequest {
		req := sleepService(name, 1)
		f(&req.Spec)
		return req
	}
	before := appliedByType(t, a)
	for _, tc := range []struct {
		name string
		req  api.ServiceCreateRequest
		code int
		want string
	}{
		{"bad name", sleepService("Web!", 1), http.StatusBadRequest, `name: "Web!": want lower-case letters`},
		{"too many replicas", sleepService("big", 1001), http.StatusBadRequest, "replicas: 1001 is out of range 0..1000"},
		{"no command", withJob("x", func(s *structs.ServiceSpec) { s.Job.Command = nil }), http.StatusBadRequest, "job.command: empty"},
		{"several nodes", withJob("x", func(s *structs.ServiceSpec) { s.Job.Nodes = 2 }), http.StatusBadRequest, "job.nodes: 2: a replica runs on one node"},
		{"bad health path", withJob("x", func(s *structs.ServiceSpec) { s.Health = &structs.HealthCheck{Kind: "http", Path: "health"} }),
			http.StatusBadRequest, `health.path: "health": want a path starting with '/'`},
		{"never fits", withJob("x", func(s *structs.ServiceSpec) { s.Job.GPUs = 8 }), http.StatusBadRequest, "no node has 8 GPUs; largest has 4"},
		{"name taken", sleepService("web", 1), http.StatusConflict, "service web: service already exists"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.CreateService(ctx, tc.req)
			wantStatus(t, err, tc.code, tc.want)
		})
	}
	_, err := c.ScaleService(ctx, "web", api.ServiceScaleRequest{Replicas: -1})
	wantStatus(t, err, http.StatusBadRequest, "replicas: -1 is out of range 0..1000")
	_, err = c.ScaleService(ctx, "nope", api.ServiceScaleRequest{Replicas: 1})
	wantStatus(t, err, http.StatusNotFound, `no such service: "nope"`)
	_, err = c.DeleteService(ctx, "nope")
	wantStatus(t, err, http.StatusNotFound, `no such service: "nope"`)
	_, err = c.Service(ctx, "nope")
	wantStatus(t, err, http.StatusNotFound, `no such service: "nope"`)
	// An empty body would scale to 0: it is refused.
	if code, msg := call(t, a, admin, "POST", "/v1/services/web/scale", nil); code != http.StatusBadRequest || !strings.Contains(msg, "empty request body") {
		t.Fatalf("scale without a body: %d %q", code, msg)
	}
	wroteNothing(t, a, before, "a refused write")
	if _, err := c.DeleteService(ctx, "web"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ScaleService(ctx, "web", api.ServiceScaleRequest{Replicas: 2}); !api.IsNotFound(err) {
		wantStatus(t, err, http.StatusConflict, "service web: service is being deleted")
	}
}

func TestServiceRoutes_ServicesBelongToTheirOwner(t *testing.T) {
	t.Parallel()
	a, admin := aclAgent(t)
	ctx := context.Background()
	alice := clientFor(t, a, userToken(t, admin, "alice", structs.RoleSubmitter))
	bob := clientFor(t, a, userToken(t, admin, "bob", structs.RoleSubmitter))
	reader := clientFor(t, a, userToken(t, admin, "rita", structs.RoleReader))
	op := clientFor(t, a, userToken(t, admin, "oscar", structs.RoleOperator))

	req := sleepService("web", 1)
	req.Spec.Job.Env = map[string]string{"LR": "3e-4"}
	req.Spec.Job.SecretEnv = map[string]string{"HF_TOKEN": "s3cret"}
	created, err := alice.CreateService(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if created.Service.Owner != "alice" || created.Service.Spec.Job.Env["LR"] != "3e-4" || created.Service.Spec.Job.SecretEnv["HF_TOKEN"] != api.HiddenValue {
		t.Fatalf("create answered owner %q spec %+v", created.Service.Owner, created.Service.Spec.Job)
	}
	d := waitServiceState(t, alice, "web", "1/1 healthy")
	if job, err := alice.Job(ctx, d.Replicas[0].JobID); err != nil || job.Job.Owner != "alice" {
		t.Fatalf("the replica job: %+v, %v", job, err)
	}

	// Others see the service, not its replicas' environment.
	for name, cl := range map[string]*api.Client{"bob": bob, "reader": reader} {
		d, err := cl.ServiceWithSecrets(ctx, "web")
		if err != nil || d.Service.Spec.Job.Env["LR"] != api.HiddenValue || d.Service.Spec.Job.SecretEnv["HF_TOKEN"] != api.HiddenValue {
			t.Fatalf("%s sees %+v, %v", name, d.Service.Spec.Job, err)
		}
		list, err := cl.Services(ctx)
		if err != nil || len(list) != 1 || list[0].Service.Spec.Job.Env["LR"] != api.HiddenValue {
			t.Fatalf("%s lists %+v, %v", name, list, err)
		}
	}
	// The owner and operators see the secret when they ask for it.
	for name, cl := range map[string]*api.Client{"alice": alice, "operator": op} {
		d, err := cl.Service(ctx, "web")
		if err != nil || d.Service.Spec.Job.Env["LR"] != "3e-4" || d.Service.Spec.Job.SecretEnv["HF_TOKEN"] != api.HiddenValue {
			t.Fatalf("%s without asking: %+v, %v", name, d.Service.Spec.Job, err)
		}
		d, err = cl.ServiceWithSecrets(ctx, "web")
		if err != nil || d.Service.Spec.Job.SecretEnv["HF_TOKEN"] != "s3cret" {
			t.Fatalf("%s asking: %+v, %v", name, d.Service.Spec.Job, err)
		}
	}

	before := appliedByType(t, a)
	_, err = reader.CreateService(ctx, sleepService("mine", 1))
	wantStatus(t, err, http.StatusForbidden, "role reader lacks submit to create services")
	_, err = bob.ScaleService(ctx, "web", api.ServiceScaleRequest{Replicas: 2})
	wantStatus(t, err, http.StatusForbidden, "role submitter lacks jobs:any to scale another user's service")
	_, err = bob.DeleteService(ctx, "web")
	wantStatus(t, err, http.StatusForbidden, "role submitter lacks jobs:any to delete another user's service")
	_, err = reader.ScaleService(ctx, "web", api.ServiceScaleRequest{Replicas: 2})
	wantStatus(t, err, http.StatusForbidden, "role reader lacks submit to scale services")
	wroteNothing(t, a, before, "a refused write")

	scaled, err := op.ScaleService(ctx, "web", api.ServiceScaleRequest{Replicas: 2})
	if err != nil || scaled.Service.Reason != "scaled 1→2 by oscar" || scaled.Service.Spec.Job.SecretEnv["HF_TOKEN"] != api.HiddenValue {
		t.Fatalf("an operator scales another user's service: %+v, %v", scaled, err)
	}
	if _, err := alice.DeleteService(ctx, "web"); err != nil {
		t.Fatalf("the owner deletes: %v", err)
	}

	page, err := admin.Audit(ctx, api.AuditQuery{})
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	for _, r := range page.Records {
		seen = append(seen, fmt.Sprintf("%s %s %s %d", r.User, r.Method, r.Path, r.Status))
	}
	for _, want := range []string{
		"alice POST /v1/services 200",
		"bob POST /v1/services/web/scale 403",
		"oscar POST /v1/services/web/scale 200",
		"alice DELETE /v1/services/web 200",
	} {
		if !strings.Contains(strings.Join(seen, "\n"), want) {
			t.Fatalf("audit log lacks %q:\n%s", want, strings.Join(seen, "\n"))
		}
	}
}
