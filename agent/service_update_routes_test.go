package agent

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

// An update is its owner's or an operator's, and a bad one is refused
// naming the field, before anything is written.
func TestServiceRoutes_UpdateIsTheOwnersAndChecked(t *testing.T) {
	t.Parallel()
	a, admin := aclAgent(t)
	ctx := context.Background()
	alice := clientFor(t, a, userToken(t, admin, "alice", structs.RoleSubmitter))
	bob := clientFor(t, a, userToken(t, admin, "bob", structs.RoleSubmitter))
	reader := clientFor(t, a, userToken(t, admin, "rita", structs.RoleReader))
	req := sleepService("web", 1)
	req.Spec.Job.SecretEnv = map[string]string{"HF_TOKEN": "s3cret"}
	if _, err := alice.CreateService(ctx, req); err != nil {
		t.Fatal(err)
	}
	waitServiceState(t, alice, "web", "1/1 healthy")
	spec := req.Spec
	spec.Job.Env = map[string]string{"MODEL": "v2"}
	several := spec
	several.Job.Nodes = 2
	big := spec
	big.Job.GPUs = 8

	before := appliedByType(t, a)
	for _, tc := range []struct {
		name string
		cl   *api.Client
		svc  string
		req  api.ServiceUpdateRequest
		code int
		want string
	}{
		{"another user", bob, "web", api.ServiceUpdateRequest{Spec: spec}, http.StatusForbidden, "role submitter lacks jobs:any to update another user's service"},
		{"a reader", reader, "web", api.ServiceUpdateRequest{Spec: spec}, http.StatusForbidden, "role reader lacks submit to update services"},
		{"unknown", alice, "nope", api.ServiceUpdateRequest{Spec: spec}, http.StatusNotFound, `no such service: "nope"`},
		{"several nodes", alice, "web", api.ServiceUpdateRequest{Spec: several}, http.StatusBadRequest, "job.nodes: 2: a replica runs on one node"},
		{"never fits", alice, "web", api.ServiceUpdateRequest{Spec: big}, http.StatusBadRequest, "no node has 8 GPUs; largest has 4"},
		{"negative surge", alice, "web", api.ServiceUpdateRequest{Spec: spec, MaxSurge: -1}, http.StatusBadRequest, "max_surge: -1 is out of range 0..1000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.cl.UpdateService(ctx, tc.svc, tc.req)
			wantStatus(t, err, tc.code, tc.want)
		})
	}
	wroteNothing(t, a, before, "a refused update")

	d, err := alice.UpdateService(ctx, "web", api.ServiceUpdateRequest{Spec: spec})
	if err != nil {
		t.Fatal(err)
	}
	if d.Service.Version != 2 || d.Service.Reason != "updating to version 2: by alice" || d.Service.Rollout == nil {
		t.Fatalf("update answered version %d, reason %q, rollout %+v", d.Service.Version, d.Service.Reason, d.Service.Rollout)
	}
	// The spec kept for a rollback hides its secrets as the spec does.
	if p := d.Service.PrevSpec; p == nil || p.Job.SecretEnv["HF_TOKEN"] != api.HiddenValue || d.Service.Spec.Job.SecretEnv["HF_TOKEN"] != api.HiddenValue {
		t.Fatalf("update answered spec %+v, previous spec %+v", d.Service.Spec.Job, d.Service.PrevSpec)
	}
	// Its one replica is replaced by one of version 2.
	testutil.WaitFor(t, 30*time.Second, func() error {
		d, err := alice.Service(ctx, "web")
		if err != nil {
			return err
		}
		if len(d.Replicas) != 1 || d.Replicas[0].Version != 2 || d.Replicas[0].Status != api.ReplicaHealthy {
			return fmt.Errorf("replicas %+v, want one healthy of version 2", d.Replicas)
		}
		return nil
	})
}
