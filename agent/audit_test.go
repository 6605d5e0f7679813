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

// auditHas fails unless one of recs is of event with every field of want
// that is set (Via, User, Path prefix, Detail substring).
func auditHas(t *testing.T, recs []api.AuditRecord, event string, want api.AuditRecord) {
	t.Helper()
	for _, r := range recs {
		if r.Event == event && (want.Via == "" || r.Via == want.Via) && (want.User == "" || r.User == want.User) &&
			strings.HasPrefix(r.Path, want.Path) && strings.Contains(r.Detail, want.Detail) && (want.Status == 0 || r.Status == want.Status) {
			return
		}
	}
	var got []string
	for _, r := range recs {
		got = append(got, fmt.Sprintf("%s via=%s user=%s %s %s %d %q", r.Event, r.Via, r.User, r.Method, r.Path, r.Status, r.Detail))
	}
	t.Errorf("no %s record like %+v; the log holds:\n%s", event, want, strings.Join(got, "\n"))
}

// Every door's events are in the audit log, and skein audit selects them:
// admissions and refused ones, sign-ins and failed logins at the API, the
// UI and the ingress, revocations of tokens and nodes, the keyring
// rotation a revocation starts, and reads of secrets.
func TestAudit_EveryDoorsEventsAreRecordedAndSelected(t *testing.T) {
	t.Parallel()
	tc := startClusterWith(t, 2, func(_ int, cfg *Config) {
		cfg.Security = SecurityTLS
		cfg.IngressPort = -1
	})
	a := tc.agents[0] // the founder, the only voter: it leads, and node1 was admitted through it
	admin := tc.client(a)
	ctx := context.Background()

	// A refused admission.
	bad := clientFrom(t, a, "127.0.0.31", "")
	if _, err := bad.Admit(ctx, api.AdmitRequest{Token: "SKJ1.00000000." + strings.Repeat("A", 43) + "." + strings.Repeat("0", 64),
		NodeID: structs.NewID(), Name: "intruder"}); err == nil {
		t.Fatal("a made-up join token admitted a node")
	}
	// Failed logins at the API, the UI and the ingress; a UI sign-in.
	if _, err := clientFrom(t, a, "127.0.0.32", "SKA1.0000000000000000."+strings.Repeat("A", 43)).Status(ctx); err == nil {
		t.Fatal("a made-up ACL token was let in")
	}
	ui := newUIBrowser(t, a)
	if code, _ := ui.login("not-a-token"); code != http.StatusUnauthorized {
		t.Fatalf("a UI sign-in with a bad token: %d", code)
	}
	if code, _ := ui.login(tc.admin); code != http.StatusSeeOther {
		t.Fatalf("the admin's UI sign-in: %d", code)
	}
	if code := statusWith(t, fromAddr("127.0.0.33", a), a.IngressAddr()+"/llama/", "wrong"); code != http.StatusUnauthorized {
		t.Fatalf("the ingress with a wrong token: %d", code)
	}
	// A read of secrets.
	job, err := admin.SubmitJob(ctx, api.SubmitRequest{Spec: structs.JobSpec{Command: []string{"true"},
		SecretEnv: map[string]string{"WANDB_KEY": "s3cr3t"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.JobWithSecrets(ctx, job.ID); err != nil {
		t.Fatal(err)
	}
	// Revocations: a token, a node, and the rotation it starts.
	tok, err := admin.CreateACLToken(ctx, api.ACLTokenCreateRequest{User: "alice", Role: structs.RoleSubmitter})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.RevokeACLToken(ctx, tok.Info.ID); err != nil {
		t.Fatal(err)
	}
	revoked := tc.agents[1].NodeID()
	if _, err := admin.RevokeNode(ctx, revoked, api.NodeRevokeRequest{Reason: "stolen"}); err != nil {
		t.Fatal(err)
	}
	var recs []api.AuditRecord
	testutil.WaitFor(t, 30*time.Second, func() error {
		page, err := admin.Audit(ctx, api.AuditQuery{Local: true, Limit: api.MaxAuditLimit})
		if err != nil {
			return err
		}
		recs = page.Records
		if !slices.ContainsFunc(recs, func(r api.AuditRecord) bool { return r.Event == api.AuditKeyringRotate }) {
			return fmt.Errorf("no keyring rotation recorded yet")
		}
		return nil
	})
	auditHas(t, recs, api.AuditNodeAdmit, api.AuditRecord{Via: "api", Path: "/v1/admit", Detail: revoked})
	auditHas(t, recs, api.AuditNodeRefused, api.AuditRecord{Via: "api", Path: "/v1/admit", Detail: "intruder"})
	auditHas(t, recs, api.AuditLoginFailed, api.AuditRecord{Via: "api", Path: "/v1/status", Status: http.StatusUnauthorized, Detail: "unknown ACL token"})
	auditHas(t, recs, api.AuditLoginFailed, api.AuditRecord{Via: "ui", Path: "/ui/login", Status: http.StatusUnauthorized})
	auditHas(t, recs, api.AuditLogin, api.AuditRecord{Via: "ui", User: "admin", Path: "/ui/login"})
	auditHas(t, recs, api.AuditLoginFailed, api.AuditRecord{Via: "ingress", Path: "/llama/", Status: http.StatusUnauthorized})
	auditHas(t, recs, api.AuditSecretsRead, api.AuditRecord{Via: "api", User: "admin", Path: "/v1/jobs/" + job.ID, Status: http.StatusOK})
	auditHas(t, recs, api.AuditTokenRevoke, api.AuditRecord{Via: "api", User: "admin", Path: "/v1/acl/tokens/" + tok.Info.ID})
	auditHas(t, recs, api.AuditNodeRevoke, api.AuditRecord{Via: "api", User: "admin", Path: "/v1/nodes/" + revoked + "/revoke"})
	auditHas(t, recs, api.AuditKeyringRotate, api.AuditRecord{Detail: "generation"})
	for _, r := range recs {
		if strings.Contains(r.Detail+r.Path, "SKA1.") || strings.Contains(r.Detail, "s3cr3t") || strings.Contains(r.Detail, tc.admin) {
			t.Errorf("a record holds a secret: %+v", r)
		}
	}

	// skein audit selects by event (a prefix of its dotted name) and user.
	page, err := admin.Audit(ctx, api.AuditQuery{Local: true, Limit: api.MaxAuditLimit, Events: []string{"login"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Records) < 4 || slices.ContainsFunc(page.Records, func(r api.AuditRecord) bool { return !strings.HasPrefix(r.Event, "login") }) {
		t.Errorf("--event login selected %+v, want the four sign-ins and failed logins only", page.Records)
	}
	page, err = admin.Audit(ctx, api.AuditQuery{Local: true, Limit: api.MaxAuditLimit, Events: []string{api.AuditNodeRevoke, api.AuditTokenRevoke}, User: "admin"})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Records) != 2 {
		t.Errorf("--event node.revoke,token.revoke --user admin selected %+v, want the two revocations", page.Records)
	}
}
