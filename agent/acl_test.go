package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
	"github.com/skein-dev/skein/trust"
)

// aclAgent starts an agent with the API token "legacy", bootstraps its
// ACLs and returns it with an admin client.
func aclAgent(t *testing.T) (*Agent, *api.Client) {
	t.Helper()
	cfg := testConfig(t, t.TempDir())
	cfg.Token = "legacy"
	return startAgent(t, cfg)
}

// userToken creates a token for user with role through admin.
func userToken(t *testing.T, admin *api.Client, user string, role structs.Role) string {
	t.Helper()
	tok, err := admin.CreateACLToken(context.Background(), api.ACLTokenCreateRequest{User: user, Role: role})
	if err != nil {
		t.Fatalf("create token for %s: %v", user, err)
	}
	return tok.Token
}

// call sends method path with body (nil: none) and token to a, and returns
// the status and the error message of the answer.
func call(t *testing.T, a *Agent, token, method, path string, body any) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, a.HTTPAddr()+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(api.TokenHeader, token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	var e api.ErrorBody
	data, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(data, &e)
	return resp.StatusCode, e.Error
}

func wantStatus(t *testing.T, err error, code int, text string) {
	t.Helper()
	var ae *api.Error
	if !errors.As(err, &ae) || ae.StatusCode != code || !strings.Contains(ae.Message, text) {
		t.Fatalf("got %v, want %d with %q", err, code, text)
	}
}

func TestACL_BootstrapOnceAndTheClusterTokenStopsWorking(t *testing.T) {
	t.Parallel()
	a, admin := aclAgent(t)
	ctx := context.Background()
	who, err := admin.WhoAmI(ctx)
	if err != nil || !who.ACL || who.User != api.DefaultBootstrapUser || who.Role != structs.RoleAdmin {
		t.Fatalf("whoami %+v, %v", who, err)
	}
	_, err = clientFor(t, a, "legacy").Status(ctx)
	wantStatus(t, err, http.StatusUnauthorized, "this cluster has ACLs")
	before := a.fsm.Hash()
	_, err = admin.ACLBootstrap(ctx, api.ACLBootstrapRequest{})
	wantStatus(t, err, http.StatusConflict, "ACLs already bootstrapped")
	if a.fsm.Hash() != before {
		t.Fatal("a second bootstrap changed the state")
	}
	for _, bad := range []string{"", "garbage", "SKA1.0123456789abcdef.AAAA", "SKA1.0123456789abcdef." + strings.Repeat("A", 43)} {
		_, err := clientFor(t, a, bad).Status(ctx)
		wantStatus(t, err, http.StatusUnauthorized, "")
	}
}

func TestACL_BeforeTheBootstrapTheClusterTokenHoldsEveryPermission(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, t.TempDir())
	cfg.Token = "legacy"
	_, c := startAgentWithoutACL(t, cfg) // the behaviour before the bootstrap
	who, err := c.WhoAmI(context.Background())
	if err != nil || who.ACL || who.Role != structs.RoleAdmin || len(who.Permissions) != 6 {
		t.Fatalf("whoami before bootstrap %+v, %v", who, err)
	}
	job := submit(t, c, 0, "true")
	if job.Owner != "" {
		t.Fatalf("a job without ACLs has the owner %q", job.Owner)
	}
}

// TestACL_EveryRouteRefusesRolesWithoutItsPermission calls every route of
// the user API with a token of every role: a role without the route's
// permission gets 403 naming it, a role with it gets past the check (the
// requests are made so that the handler then refuses them harmlessly, or
// only reads).
func TestACL_EveryRouteRefusesRolesWithoutItsPermission(t *testing.T) {
	t.Parallel()
	a, admin := aclAgent(t)
	tokens := map[structs.Role]string{structs.RoleAdmin: ""}
	for _, r := range structs.Roles {
		tokens[r] = userToken(t, admin, "u-"+string(r), r)
	}
	bad := map[string]string{"bogus": "x"} // refused by strict decoding once past the check
	routes := []struct {
		method, path string
		body         any
		need         structs.Permission
	}{
		{"POST", "/v1/jobs", bad, structs.PermSubmit},
		{"GET", "/v1/jobs", nil, structs.PermRead},
		{"GET", "/v1/jobs/nope", nil, structs.PermRead},
		{"DELETE", "/v1/jobs/nope", nil, structs.PermSubmit},
		{"GET", "/v1/jobs/nope/logs", nil, structs.PermSubmit},
		{"POST", "/v1/jobs/nope/signal", bad, structs.PermSubmit},
		{"POST", "/v1/jobs/nope/requeue", nil, structs.PermSubmit},
		{"POST", "/v1/services", bad, structs.PermSubmit},
		{"GET", "/v1/services", nil, structs.PermRead},
		{"GET", "/v1/services/nope", nil, structs.PermRead},
		{"POST", "/v1/services/nope/scale", bad, structs.PermSubmit},
		{"POST", "/v1/services/nope/autoscale", bad, structs.PermSubmit},
		{"POST", "/v1/services/nope/update", bad, structs.PermSubmit},
		{"DELETE", "/v1/services/nope", nil, structs.PermSubmit},
		{"GET", "/v1/nodes", nil, structs.PermRead},
		{"GET", "/v1/status", nil, structs.PermRead},
		{"GET", "/v1/members", nil, structs.PermRead},
		{"GET", "/v1/raft/peers", nil, structs.PermRead},
		{"POST", "/v1/join", bad, structs.PermNodes},
		{"POST", "/v1/leave", nil, structs.PermNodes},
		{"GET", "/v1/gpus", nil, structs.PermRead},
		{"POST", "/v1/gpus/cordon", bad, structs.PermNodes},
		{"POST", "/v1/gpus/uncordon", bad, structs.PermNodes},
		{"POST", "/v1/gpus/fault", bad, structs.PermNodes},
		{"POST", "/v1/join-tokens", bad, structs.PermNodes},
		{"GET", "/v1/join-tokens", nil, structs.PermNodes},
		{"DELETE", "/v1/join-tokens/nope", nil, structs.PermNodes},
		{"GET", "/v1/keyring", nil, structs.PermNodes},
		{"POST", "/v1/keyring/rotate", nil, structs.PermNodes},
		{"POST", "/v1/nodes/nope/revoke", bad, structs.PermNodes},
		{"GET", "/v1/limits", nil, structs.PermRead},
		{"GET", "/v1/limits/alice", nil, structs.PermRead},
		{"POST", "/v1/limits", bad, structs.PermACL},
		{"POST", "/v1/acl/bootstrap", bad, structs.PermACL},
		{"POST", "/v1/acl/tokens", bad, structs.PermACL},
		{"GET", "/v1/acl/tokens", nil, structs.PermACL},
		{"DELETE", "/v1/acl/tokens/nope", nil, structs.PermACL},
		{"GET", "/v1/acl/users", nil, structs.PermACL},
		{"POST", "/v1/acl/users", bad, structs.PermACL},
		{"GET", "/v1/audit", nil, structs.PermACL},
	}
	before := a.fsm.Hash()
	for _, rt := range routes {
		for _, role := range structs.Roles {
			t.Run(fmt.Sprintf("%s %s as %s", rt.method, rt.path, role), func(t *testing.T) {
				allowed := role.Can(rt.need)
				if allowed && rt.path == "/v1/leave" {
					t.Skip("an allowed leave would stop the agent; the refusals are what is tested here")
				}
				code, msg := call(t, a, tokens[role], rt.method, rt.path, rt.body)
				switch {
				case !allowed && (code != http.StatusForbidden || !strings.Contains(msg, "lacks "+string(rt.need))):
					t.Fatalf("got %d %q, want 403 naming %s", code, msg, rt.need)
				case allowed && (code == http.StatusForbidden || code == http.StatusUnauthorized):
					t.Fatalf("got %d %q for a role that holds %s", code, msg, rt.need)
				}
			})
		}
	}
	if a.fsm.Hash() != before {
		t.Fatal("the calls changed the state")
	}
}

func TestACL_JobsBelongToTheirOwner(t *testing.T) {
	t.Parallel()
	a, admin := aclAgent(t)
	ctx := context.Background()
	alice := clientFor(t, a, userToken(t, admin, "alice", structs.RoleSubmitter))
	bob := clientFor(t, a, userToken(t, admin, "bob", structs.RoleSubmitter))
	reader := clientFor(t, a, userToken(t, admin, "rita", structs.RoleReader))
	op := clientFor(t, a, userToken(t, admin, "oscar", structs.RoleOperator))

	job, err := alice.SubmitJob(ctx, api.SubmitRequest{Spec: structs.JobSpec{
		Command: []string{"sleep", "600"}, Env: map[string]string{"LR": "3e-4"}, SecretEnv: map[string]string{"WANDB_API_KEY": "s3cret"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if job.Owner != "alice" || job.Spec.SecretEnv["WANDB_API_KEY"] != api.HiddenValue || job.Spec.Env["LR"] != "3e-4" {
		t.Fatalf("submit answered owner %q env %v secret_env %v", job.Owner, job.Spec.Env, job.Spec.SecretEnv)
	}
	bobs := submit(t, bob, 0, "true")

	// Others see the job, not its environment.
	for name, c := range map[string]*api.Client{"bob": bob, "reader": reader} {
		d, err := c.Job(ctx, job.ID)
		if err != nil {
			t.Fatal(err)
		}
		if d.Job.Owner != "alice" || d.Job.Spec.Env["LR"] != api.HiddenValue || d.Job.Spec.SecretEnv["WANDB_API_KEY"] != api.HiddenValue {
			t.Fatalf("%s sees env %v secret_env %v", name, d.Job.Spec.Env, d.Job.Spec.SecretEnv)
		}
		d, _ = c.JobWithSecrets(ctx, job.ID)
		if d.Job.Spec.SecretEnv["WANDB_API_KEY"] != api.HiddenValue {
			t.Fatalf("%s asked for the secrets and saw them", name)
		}
	}
	// The owner and operators see the secret when they ask for it.
	for name, c := range map[string]*api.Client{"alice": alice, "operator": op} {
		d, err := c.Job(ctx, job.ID)
		if err != nil || d.Job.Spec.Env["LR"] != "3e-4" || d.Job.Spec.SecretEnv["WANDB_API_KEY"] != api.HiddenValue {
			t.Fatalf("%s without asking: %+v, %v", name, d.Job.Spec, err)
		}
		d, err = c.JobWithSecrets(ctx, job.ID)
		if err != nil || d.Job.Spec.SecretEnv["WANDB_API_KEY"] != "s3cret" {
			t.Fatalf("%s asking: %+v, %v", name, d.Job.Spec, err)
		}
	}
	// Listings never carry secrets.
	page, err := alice.JobsPage(ctx, api.JobsQuery{Mine: true})
	if err != nil || len(page.Jobs) != 1 || page.Jobs[0].ID != job.ID || page.Jobs[0].Spec.SecretEnv["WANDB_API_KEY"] != api.HiddenValue {
		t.Fatalf("alice's jobs: %+v, %v", page, err)
	}
	if page, _ := reader.JobsPage(ctx, api.JobsQuery{Owner: "bob"}); len(page.Jobs) != 1 || page.Jobs[0].Owner != "bob" {
		t.Fatalf("bob's jobs as the reader sees them: %+v", page)
	}

	// Both jobs settle first, so that only a refusal could change the state.
	testutil.WaitFor(t, 15*time.Second, func() error {
		if al := a.fsm.Allocs(job.ID); len(al) != 1 || al[0].State != structs.AllocRunning {
			return fmt.Errorf("alice's job has not started")
		}
		return nil
	})
	waitJobState(t, bob, bobs.ID, structs.JobSucceeded)
	before := a.fsm.Hash()
	_, err = bob.CancelJob(ctx, job.ID)
	wantStatus(t, err, http.StatusForbidden, "lacks jobs:any to cancel of another user's job")
	err = bob.Logs(ctx, job.ID, api.LogOptions{}, io.Discard)
	wantStatus(t, err, http.StatusForbidden, "lacks jobs:any to read the logs of another user's job")
	if a.fsm.Hash() != before {
		t.Fatal("a refused cancel changed the state")
	}
	if _, err := op.CancelJob(ctx, job.ID); err != nil {
		t.Fatalf("an operator cancels another user's job: %v", err)
	}
	waitJobState(t, alice, job.ID, structs.JobCancelled)
}

func TestACL_LoaderVariablesNeedTheirPermission(t *testing.T) {
	t.Parallel()
	a, admin := aclAgent(t)
	ctx := context.Background()
	alice := clientFor(t, a, userToken(t, admin, "alice", structs.RoleSubmitter))
	op := clientFor(t, a, userToken(t, admin, "oscar", structs.RoleOperator))
	before := a.fsm.Index()
	for _, spec := range []structs.JobSpec{
		{Command: []string{"true"}, Env: map[string]string{"LD_PRELOAD": "/tmp/x.so"}},
		{Command: []string{"true"}, SecretEnv: map[string]string{"LD_LIBRARY_PATH": "/tmp"}},
	} {
		_, err := alice.SubmitJob(ctx, api.SubmitRequest{Spec: spec})
		wantStatus(t, err, http.StatusForbidden, "role submitter lacks env:loader to set LD_")
	}
	if a.fsm.Index() != before {
		t.Fatal("a refused submit wrote a log entry")
	}
	job, err := op.SubmitJob(ctx, api.SubmitRequest{Spec: structs.JobSpec{Command: []string{"true"}, Env: map[string]string{"LD_LIBRARY_PATH": "/opt/lib"}}})
	if err != nil || job.Owner != "oscar" {
		t.Fatalf("an operator's submit with LD_LIBRARY_PATH: %+v, %v", job, err)
	}
}

func TestACL_ExpiredTokenIsRefused(t *testing.T) {
	t.Parallel()
	a, admin := aclAgent(t)
	tok, err := admin.CreateACLToken(context.Background(), api.ACLTokenCreateRequest{User: "temp", Role: structs.RoleReader, TTL: structs.Duration(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	c := clientFor(t, a, tok.Token)
	testutil.WaitFor(t, 10*time.Second, func() error {
		_, err := c.Status(context.Background())
		var ae *api.Error
		if errors.As(err, &ae) && ae.StatusCode == http.StatusUnauthorized && strings.Contains(ae.Message, "ACL token expired") {
			return nil
		}
		return fmt.Errorf("status with a token past its TTL: %v", err)
	})
	list, err := admin.ACLTokens(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, info := range list {
		if info.ID == tok.Info.ID && info.State != api.TokenExpired {
			t.Fatalf("the token is listed %s, want expired", info.State)
		}
	}
}

func TestACL_AuditRecordsWhoWroteWhat(t *testing.T) {
	t.Parallel()
	a, admin := aclAgent(t)
	ctx := context.Background()
	aliceTok := userToken(t, admin, "alice", structs.RoleSubmitter)
	alice := clientFor(t, a, aliceTok)
	job := submit(t, alice, 0, "true")
	_, _ = clientFor(t, a, userToken(t, admin, "rita", structs.RoleReader)).CancelJob(ctx, job.ID)

	page, err := admin.Audit(ctx, api.AuditQuery{})
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	for _, r := range page.Records {
		seen = append(seen, fmt.Sprintf("%s %s %s %s %d", r.User, r.Role, r.Method, r.Path, r.Status))
		if r.Remote == "" || r.Node != a.Name() || r.At.IsZero() {
			t.Fatalf("record without origin, node or time: %+v", r)
		}
	}
	for _, want := range []string{
		"admin admin POST /v1/acl/tokens 200",
		"alice submitter POST /v1/jobs 201",
		"rita reader DELETE /v1/jobs/" + job.ID + " 403",
	} {
		if !strings.Contains(strings.Join(seen, "\n"), want) {
			t.Fatalf("audit log lacks %q:\n%s", want, strings.Join(seen, "\n"))
		}
	}
	_, err = alice.Audit(ctx, api.AuditQuery{})
	wantStatus(t, err, http.StatusForbidden, "lacks acl")
}

func TestACL_RevokedTokenIsRefusedOnEveryNode(t *testing.T) {
	t.Parallel()
	tc := startCluster(t, 3) // its ACLs bootstrapped, on every node
	ctx := context.Background()
	admin := tc.client(tc.agents[1])
	tok, err := admin.CreateACLToken(ctx, api.ACLTokenCreateRequest{User: "alice", Role: structs.RoleReader})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range tc.agents {
		testutil.WaitFor(t, 5*time.Second, func() error {
			_, err := clientFor(t, a, tok.Token).Status(ctx)
			return err
		})
	}
	if _, err := admin.RevokeACLToken(ctx, tok.Info.ID[:6]); err != nil {
		t.Fatal(err)
	}
	// Revocation is one entry: every node refuses the token once it has
	// applied it, and the leader acknowledged it only after a majority did.
	for _, a := range tc.agents {
		testutil.WaitFor(t, 5*time.Second, func() error {
			_, err := clientFor(t, a, tok.Token).Status(ctx)
			var ae *api.Error
			if errors.As(err, &ae) && ae.StatusCode == http.StatusUnauthorized && strings.Contains(ae.Message, "ACL token revoked") {
				return nil
			}
			return fmt.Errorf("%s answered %v", a.Name(), err)
		})
	}
}

// A token works on every node as soon as its create returns, as a user
// would use it: the follower that has not applied it yet waits for it.
func TestACL_ANewTokenWorksAtOnceOnEveryNode(t *testing.T) {
	t.Parallel()
	tc := startCluster(t, 3)
	ctx := context.Background()
	lead := tc.leader()
	admin := tc.client(tc.agents[lead])
	for i := range 5 {
		tok, err := admin.CreateACLToken(ctx, api.ACLTokenCreateRequest{User: fmt.Sprintf("user%d", i), Role: structs.RoleReader})
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range tc.agents {
			if _, err := clientFor(t, a, tok.Token).Status(ctx); err != nil {
				t.Fatalf("token %d on %s right after its create: %v", i, a.Name(), err)
			}
		}
	}
}

// logBuffer collects an agent's log, written from many goroutines.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestACL_ASecretEnvValueIsNeverLogged: a --secret-env value reaches the
// job, and appears in nothing the agent writes about it: its own log at
// trace level, the audit log (file and route), the supervisor's log, nor
// the errors of refused submits carrying it.
func TestACL_ASecretEnvValueIsNeverLogged(t *testing.T) {
	t.Parallel()
	// The job gets the value's halves in its plain env to check it by;
	// only a leak of the secret itself writes the whole.
	const half1, half2 = "sk-d0n0t", "l0g-4f9c"
	const secret = half1 + half2
	var agentLog logBuffer
	cfg := testConfig(t, t.TempDir())
	cfg.Token = "legacy"
	cfg.Logger = hclog.New(&hclog.LoggerOptions{Name: t.Name(), Level: hclog.Trace, Output: &agentLog})
	a, admin := startAgent(t, cfg)
	alice := clientFor(t, a, userToken(t, admin, "alice", structs.RoleSubmitter))
	ctx := context.Background()

	job := submitSpec(t, alice, structs.JobSpec{
		Command:   []string{"sh", "-c", `[ "$API_KEY" = "$HALF1$HALF2" ]`},
		Env:       map[string]string{"HALF1": half1, "HALF2": half2},
		SecretEnv: map[string]string{"API_KEY": secret},
	})
	d := waitJobState(t, alice, job.ID, structs.JobSucceeded) // the job saw the value
	for _, spec := range []structs.JobSpec{
		{Command: []string{"true"}, SecretEnv: map[string]string{"LD_PRELOAD": secret}},           // no permission
		{Command: []string{"true"}, SecretEnv: map[string]string{"CUDA_VISIBLE_DEVICES": secret}}, // reserved
		{Command: []string{"true"}, SecretEnv: map[string]string{"API_KEY": secret + "\x00"}},     // NUL
	} {
		_, err := alice.SubmitJob(ctx, api.SubmitRequest{Spec: spec})
		if err == nil {
			t.Fatalf("a submit with secret_env %v was taken", slices.Collect(maps.Keys(spec.SecretEnv)))
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("a refused submit's error quotes the secret: %v", err)
		}
	}

	page, err := admin.Audit(ctx, api.AuditQuery{})
	if err != nil {
		t.Fatal(err)
	}
	records, err := json.Marshal(page.Records)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(records), "/v1/jobs") {
		t.Fatalf("the audit log has no submit to look in: %s", records)
	}
	auditFile, err := os.ReadFile(filepath.Join(a.DataDir(), "audit.log"))
	if err != nil {
		t.Fatal(err)
	}
	supervisorLog, err := os.ReadFile(filepath.Join(a.allocDir(), d.Allocations[0].ID, "supervisor.log"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	if agentLog.String() == "" {
		t.Fatal("the agent logged nothing at trace level: nothing was looked at")
	}
	for what, text := range map[string]string{
		"the agent's log":      agentLog.String(),
		"the audit route":      string(records),
		"the audit file":       string(auditFile),
		"the supervisor's log": string(supervisorLog),
	} {
		if strings.Contains(text, secret) {
			t.Errorf("%s holds the secret", what)
		}
	}
}

// TestACL_TokensAreKeptOnlyHashed: the replicated state, its log on disk
// included, holds a token's hash and never its secret, the bootstrap's
// admin token included.
func TestACL_TokensAreKeptOnlyHashed(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, t.TempDir())
	cfg.Token = "legacy"
	a, bootToken, admin := startAgentAdmin(t, cfg)
	created, err := admin.CreateACLToken(context.Background(), api.ACLTokenCreateRequest{User: "alice", Role: structs.RoleSubmitter})
	if err != nil {
		t.Fatal(err)
	}
	raftDB := filepath.Join(a.DataDir(), "raft", "raft.db")
	for _, token := range []string{bootToken, created.Token} {
		tok, err := trust.ParseACLToken(token)
		if err != nil {
			t.Fatal(err)
		}
		testutil.WaitFor(t, 5*time.Second, func() error { // the entry is on disk once applied
			log, err := os.ReadFile(raftDB)
			if err != nil {
				return err
			}
			if !bytes.Contains(log, []byte(trust.HashSecret(tok.Secret))) {
				return fmt.Errorf("token %s's hash is not in %s yet", tok.ID, raftDB)
			}
			if bytes.Contains(log, []byte(tok.Secret)) {
				t.Fatalf("token %s's secret is in %s", tok.ID, raftDB)
			}
			return nil
		})
		state, err := json.Marshal(a.fsm.ACLTokens())
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(state), tok.Secret) {
			t.Errorf("the state's token records hold token %s's secret", tok.ID)
		}
	}
}
