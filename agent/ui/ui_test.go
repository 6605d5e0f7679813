package ui

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/gpu"
	"github.com/skein-dev/skein/structs"
)

// A name, reason and env value that would run script if not escaped.
const (
	evilName   = `train <script>alert("name")</script>`
	evilReason = `waiting: needs 8 free GPUs on one node <img src=x onerror=alert(1)>`
	evilEnv    = `"><script>alert("env")</script>`
	secret     = "s3cr3t-wandb-key"
)

// cluster is two nodes, alpha (this one) and beta, with a running job
// of alice's on alpha, a failed one of bob's, a waiting one, a cordoned
// GPU and a failed one.
func cluster(t testing.TB) *state {
	st := newState(t)
	st.node("n1", "alpha", 4)
	st.node("n2", "beta", 4)
	st.submit("job-run-1", "alice", structs.JobSpec{Name: evilName, GPUs: 2,
		Env: map[string]string{"LR": evilEnv}, SecretEnv: map[string]string{"WANDB_KEY": secret}})
	st.run("job-run-1", "n1", 0, 1)
	st.submit("job-fail-1", "bob", structs.JobSpec{Name: "eval", GPUs: 1})
	st.run("job-fail-1", "n2", 0)
	st.report("n2", "alloc-job-fail-1", structs.AllocFailed, 3, "exit status 3")
	st.submit("job-wait-1", "alice", structs.JobSpec{Name: "big", GPUs: 8, CPUs: 8, MemoryMiB: 64 << 10, Priority: 5,
		TimeLimit: structs.Duration(time.Hour), Constraints: map[string]string{"zone": "a"}, Preemptible: true, Image: "pytorch:24",
		After: []structs.Dependency{{JobID: "job-run-1", Condition: structs.AfterOK}}})
	st.block("job-wait-1", evilReason)
	st.cordon("n1", 3, "bad fan")
	st.fault("n2", 3, "XID 79: fell off the bus")
	return st
}

func localTelemetry() fakeTelemetry {
	return fakeTelemetry{
		{Index: 0, Simulated: true, Has: gpu.HasUtil | gpu.HasMemory | gpu.HasTemp, UtilPercent: 73, MemUsedMiB: 40 << 10, MemTotalMiB: 80 << 10, TempC: 61},
		{Index: 1, Simulated: true, Has: gpu.HasUtil, UtilPercent: 12},
	}
}

func TestUI_EveryPageShowsTheState(t *testing.T) {
	h := newHarness(t, cluster(t), localTelemetry())
	h.api.answers["GET /v1/services"] = fakeAnswer{http.StatusOK,
		`[{"service":{"name":"chat","owner":"alice","replicas":2,"version":3},"running":2,"healthy":1,"state":"1/2 healthy, 1 starting"},` +
			`{"service":{"name":"back","owner":"alice","replicas":1,"version":4,"rollout":{"version":4,"from":5,"state":"rolled-back"}},"running":1,"healthy":1,"state":"1/1 healthy"},` +
			`{"service":{"name":"new","owner":"alice","replicas":1,"version":7,"rollout":{"version":7,"from":6,"state":"running"}},"running":1,"healthy":1,"state":"rolling out v7: 0/1 updated"}]`}
	c := h.client("operator-token")

	overview := c.get("/ui/", http.StatusOK)
	contains(t, overview, "overview", "alpha", "beta", `id="nodes-ready">2/2<`, `id="gpus-used">2<`, `id="gpus-unhealthy">1<`,
		`id="leader">alpha<`, "job-wait", "olga (operator)",
		`class="gpu used u7" href="/ui/nodes/n1/gpus/0"`, `class="gpu used u1" href="/ui/nodes/n1/gpus/1"`,
		`class="gpu cordoned " href="/ui/nodes/n1/gpus/3"`, `class="gpu unhealthy " href="/ui/nodes/n2/gpus/3"`,
		`class="gpu free " href="/ui/nodes/n2/gpus/0"`, `data-refresh="3"`)

	queue := c.get("/ui/queue", http.StatusOK)
	contains(t, queue, "queue", `id="queue-size">1 jobs wait`, `href="/ui/jobs/job-wait-1"`, "waiting: needs 8 free GPUs on one node")
	lacks(t, queue, "queue", "job-run-1", "job-fail-1")

	jobs := c.get("/ui/jobs", http.StatusOK)
	contains(t, jobs, "jobs", "job-run-1", "job-fail-1", "job-wait-1", `js-failed">failed`, "exit status 3")
	failed := c.get("/ui/jobs?state=failed", http.StatusOK)
	contains(t, failed, "failed jobs", "job-fail-1")
	lacks(t, failed, "failed jobs", "job-run-1", "job-wait-1")

	job := c.get("/ui/jobs/job-run-1", http.StatusOK)
	contains(t, job, "running job", `id="job-id">job-run-1<`, "python train.py", `href="/ui/nodes/n1">alpha</a>`,
		"Attempt 1, by rank", `id="cancel"`, "WANDB_KEY", "secret: never shown")
	failedJob := c.get("/ui/jobs/job-fail", http.StatusOK) // by a unique prefix, as the API finds it
	contains(t, failedJob, "failed job's events", "Recent events", "<code>job-submitted</code>", "<code>job-placed</code>",
		"<code>job-failed</code>", `href="/ui/nodes/n2">beta</a>`)
	lacks(t, failedJob, "failed job's events", "<code>gpu-fault</code>")
	waiting := c.get("/ui/jobs/job-wait-1", http.StatusOK)
	contains(t, waiting, "queued job", "1h0m0s", "8 CPUs, 64 GiB memory", "zone=a", "pytorch:24", "preemptible",
		`href="/ui/jobs/job-run-1"`, "Not placed yet", "has not started")

	node := c.get("/ui/nodes/n1", http.StatusOK)
	contains(t, node, "local node", `id="node-id">n1<`, "73%", "12%", "bad fan", `href="/ui/jobs/job-run-1"`, "Uncordon", "Cordon")
	lacks(t, node, "local node", `id="telemetry-note"`)
	remote := c.get("/ui/nodes/n2", http.StatusOK)
	contains(t, remote, "another node", "<th>Utilisation</th>", "<td>58%</td>", "as beta read it", "XID 79: fell off the bus")
	lacks(t, remote, "another node", `id="telemetry-note"`)
	contains(t, remote, "another node's events", "Recent events", "<code>node-joined</code>", "<code>gpu-fault</code>")
	// A node by its name, as people type it (the issue: "no such node").
	contains(t, c.get("/ui/nodes/beta", http.StatusOK), "a node by its name", `id="node-id">n2<`)
	contains(t, c.get("/ui/nodes/alpha/gpus/0", http.StatusOK), "a GPU of a node by its name", `id="gpu-uuid">GPU-n1-0<`)

	g := c.get("/ui/nodes/n1/gpus/0", http.StatusOK)
	contains(t, g, "local GPU", `id="gpu-uuid">GPU-n1-0<`, `id="gpu-util">73%<`, "40 GiB of 80 GiB", "61 °C",
		`id="gpu-job">job job-run-1<`, "simulated: the readings are made up")
	rg := c.get("/ui/nodes/n2/gpus/1", http.StatusOK)
	contains(t, rg, "remote GPU", `id="gpu-state">free<`, `id="gpu-util">58%<`, "47 °C")
	rg = c.get("/ui/nodes/n2/gpus/3", http.StatusOK)
	contains(t, rg, "remote GPU without a reading", `id="gpu-state">unhealthy<`, "No telemetry: beta has no reading of this GPU.")
	lacks(t, rg, "remote GPU without a reading", `id="gpu-util"`)

	svc := c.get("/ui/services", http.StatusOK)
	contains(t, svc, "services", "chat", "1/2 healthy, 1 starting", "<td>4 (rolled back from 5)</td>", "<td>7 (rolling out over 6)</td>")
	lacks(t, svc, "a rolled-back service", "<td>4 (rolling out")

	c.get("/ui/jobs/nope", http.StatusNotFound)
	c.get("/ui/nodes/nope", http.StatusNotFound)
	c.get("/ui/nodes/n1/gpus/9", http.StatusNotFound)
	c.get("/ui/elsewhere", http.StatusNotFound)
	c.get("/ui/queue?page=0", http.StatusBadRequest)
	c.get("/ui/jobs?state=bogus", http.StatusBadRequest)
	c.get("/ui/jobs?after=garbage", http.StatusBadRequest)
	c.get("/ui/jobs/job-run-1?rank=5", http.StatusBadRequest)
}

// Another node's page asks that node for its GPUs' telemetry, within a
// bound, and says why it shows none; the overview asks no node.
func TestUI_AnotherNodesTelemetry_AskedOfItWithinABound(t *testing.T) {
	cases := []struct {
		name   string
		answer func(ctx context.Context) ([]gpu.Sample, error)
		down   bool
		want   string
	}{
		{name: "unreachable", answer: func(context.Context) ([]gpu.Sample, error) {
			return nil, errors.New("dial tcp 10.0.0.2:7470: connect: connection refused")
		}, want: "No utilisation: beta could not be asked for it: dial tcp 10.0.0.2:7470: connect: connection refused."},
		{name: "hangs", answer: func(ctx context.Context) ([]gpu.Sample, error) {
			<-ctx.Done() // a dead host: only the UI's bound ends the wait
			return nil, ctx.Err()
		}, want: "No utilisation: beta did not answer with its telemetry within 50ms."},
		{name: "reads none", answer: func(context.Context) ([]gpu.Sample, error) { return []gpu.Sample{}, nil },
			want: "No utilisation: beta reads no GPU telemetry."},
		{name: "down", down: true, want: "No utilisation: beta is down: its telemetry is not asked for."},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := cluster(t)
			if tc.down {
				st.status("n2", structs.NodeDown, "no heartbeat")
			}
			h := newHarness(t, st, localTelemetry())
			h.ui.telemetryWait = 50 * time.Millisecond
			if tc.answer != nil {
				h.remote["n2"] = tc.answer
			}
			c := h.client("reader-token")
			overview := c.get("/ui/", http.StatusOK)
			contains(t, overview, "overview", `class="gpu used u7" href="/ui/nodes/n1/gpus/0"`, `class="gpu free " href="/ui/nodes/n2/gpus/1"`)
			if len(h.asked) != 0 {
				t.Fatalf("the overview asked %v for their telemetry, want none", h.asked)
			}
			node := c.get("/ui/nodes/n2", http.StatusOK)
			contains(t, node, "beta's page", `id="telemetry-note"`, tc.want)
			lacks(t, node, "beta's page", "<th>Utilisation</th>")
			g := c.get("/ui/nodes/n2/gpus/1", http.StatusOK)
			contains(t, g, "beta's GPU", "No telemetry: "+strings.TrimPrefix(tc.want, "No utilisation: "))
			lacks(t, g, "beta's GPU", `id="gpu-util"`)
			wantAsked := []string{"n2", "n2"}
			if tc.down {
				wantAsked = nil
			}
			if !slices.Equal(h.asked, wantAsked) {
				t.Fatalf("asked %v for their telemetry, want %v", h.asked, wantAsked)
			}
		})
	}
}

func TestUI_NoTelemetry_NoUtilisationShown(t *testing.T) {
	h := newHarness(t, cluster(t), nil)
	c := h.client("operator-token")
	overview := c.get("/ui/", http.StatusOK)
	contains(t, overview, "overview", `class="gpu used " href="/ui/nodes/n1/gpus/0"`)
	lacks(t, overview, "overview", " u7", "73%")
	node := c.get("/ui/nodes/n1", http.StatusOK)
	contains(t, node, "local node", "This node reads no GPU telemetry")
	lacks(t, node, "local node", "<th>Utilisation</th>")
}

func TestUI_UserInputIsEscaped(t *testing.T) {
	h := newHarness(t, cluster(t), nil)
	c := h.client("operator-token")
	for _, page := range []string{"/ui/", "/ui/queue", "/ui/jobs", "/ui/jobs/job-run-1", "/ui/jobs/job-wait-1"} {
		body := c.get(page, http.StatusOK)
		lacks(t, body, page, "<script>alert", "<img src=x")
	}
	contains(t, c.get("/ui/jobs/job-run-1", http.StatusOK), "job page", "train &lt;script&gt;alert(&#34;name&#34;)&lt;/script&gt;",
		"&#34;&gt;&lt;script&gt;alert(&#34;env&#34;)&lt;/script&gt;")
	contains(t, c.get("/ui/queue", http.StatusOK), "queue", "&lt;img src=x onerror=alert(1)&gt;")
}

func TestUI_EnvValues_SecretsNeverAndOthersOnlyToWhoMayAct(t *testing.T) {
	h := newHarness(t, cluster(t), nil)
	for _, tc := range []struct {
		token     string
		seesValue bool
	}{
		{"reader-token", false},
		{"alice-token", true}, // the owner
		{"operator-token", true},
	} {
		page := h.client(tc.token).get("/ui/jobs/job-run-1", http.StatusOK)
		lacks(t, page, tc.token, secret)
		if got := strings.Contains(page, "alert(&#34;env&#34;)"); got != tc.seesValue {
			t.Errorf("%s sees the env value: %v, want %v", tc.token, got, tc.seesValue)
		}
	}
}

func TestUI_ActionsShowOnlyToRolesThatMayTakeThem(t *testing.T) {
	h := newHarness(t, cluster(t), nil)
	for _, tc := range []struct {
		token        string
		cancel       bool // on alice's running job
		cancelOthers bool // on bob's? it has ended: never
		cordon       bool
		logs         bool
	}{
		{"reader-token", false, false, false, false},
		{"alice-token", true, false, false, true},
		{"operator-token", true, false, true, true},
	} {
		c := h.client(tc.token)
		job := c.get("/ui/jobs/job-run-1", http.StatusOK)
		if got := strings.Contains(job, `id="cancel"`); got != tc.cancel {
			t.Errorf("%s: cancel button shown %v, want %v", tc.token, got, tc.cancel)
		}
		if got := strings.Contains(job, `id="log"`) || strings.Contains(job, "the whole log"); got != tc.logs {
			t.Errorf("%s: log tail shown %v, want %v", tc.token, got, tc.logs)
		}
		if strings.Contains(c.get("/ui/jobs/job-fail-1", http.StatusOK), `id="cancel"`) {
			t.Errorf("%s: cancel button on a job that ended", tc.token)
		}
		for _, page := range []string{"/ui/nodes/n1", "/ui/nodes/n1/gpus/3", "/ui/nodes/n1/gpus/0"} {
			body := c.get(page, http.StatusOK)
			if got := strings.Contains(body, "/cordon\"") || strings.Contains(body, "/uncordon\""); got != tc.cordon {
				t.Errorf("%s: cordon forms on %s shown %v, want %v", tc.token, page, got, tc.cordon)
			}
		}
	}
}

func TestUI_Post_NeedsTheSessionsCSRFToken(t *testing.T) {
	h := newHarness(t, cluster(t), nil)
	c := h.client("operator-token")
	csrf := csrfOf(t, c.get("/ui/jobs/job-run-1", http.StatusOK))
	other := h.client("operator-token")
	otherCSRF := csrfOf(t, other.get("/ui/jobs/job-run-1", http.StatusOK))
	if otherCSRF == csrf {
		t.Fatal("two sessions got one CSRF token")
	}
	h.api.reset() // the pages read the log tail through it
	for name, form := range map[string]url.Values{
		"none":               {},
		"empty":              {"csrf": {""}},
		"wrong":              {"csrf": {strings.Repeat("0", len(csrf))}},
		"another session's:": {"csrf": {otherCSRF}},
	} {
		if w := c.do(http.MethodPost, "/ui/jobs/job-run-1/cancel", form); w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "CSRF") {
			t.Errorf("%s CSRF token: %d %s, want 403 naming CSRF", name, w.Code, w.Body.String())
		}
	}
	// A session cookie alone, without the form's token, is not enough either.
	if w := c.do(http.MethodPost, "/ui/nodes/n1/gpus/0/cordon", url.Values{"reason": {"x"}}); w.Code != http.StatusForbidden {
		t.Errorf("cordon without a CSRF token: %d, want 403", w.Code)
	}
	if calls := h.api.called(); len(calls) != 0 {
		t.Fatalf("refused posts reached the API: %v", calls)
	}

	w := c.do(http.MethodPost, "/ui/jobs/job-run-1/cancel", url.Values{"csrf": {csrf}})
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/ui/jobs/job-run-1" {
		t.Fatalf("cancel: %d to %q, want 303 to the job", w.Code, w.Header().Get("Location"))
	}
	w = c.do(http.MethodPost, "/ui/nodes/n1/gpus/3/uncordon", url.Values{"csrf": {csrf}})
	if w.Code != http.StatusSeeOther {
		t.Fatalf("uncordon: %d, want 303: %s", w.Code, w.Body.String())
	}
	want := []string{"DELETE /v1/jobs/job-run-1", "POST /v1/gpus/uncordon"}
	if got := h.api.called(); !slices.Equal(got, want) {
		t.Fatalf("API calls %v, want %v", got, want)
	}
	if h.api.tokens[0] != "operator-token" {
		t.Fatalf("the cancel reached the API with token %q, want the session's", h.api.tokens[0])
	}
}

func TestUI_RefusedAction_ShowsTheAPIsAnswer(t *testing.T) {
	h := newHarness(t, cluster(t), nil)
	h.api.answers["DELETE /v1/jobs/job-run-1"] = fakeAnswer{http.StatusForbidden,
		`{"error":"permission denied: role reader lacks submit (cancel of another user's job)"}`}
	c := h.client("reader-token")
	csrf := csrfOf(t, c.get("/ui/jobs/job-run-1", http.StatusOK)) // the sign-out form
	w := c.do(http.MethodPost, "/ui/jobs/job-run-1/cancel", url.Values{"csrf": {csrf}})
	if w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "permission denied: role reader lacks submit") {
		t.Fatalf("a refused cancel: %d %s, want 403 with the API's words", w.Code, w.Body.String())
	}
}

func TestUI_Login_SetsAStrictHttpOnlyCookie_AndRefusesABadToken(t *testing.T) {
	h := newHarness(t, cluster(t), nil)
	c := h.client("")
	w := c.do(http.MethodGet, "/ui/jobs?state=failed", nil)
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/ui/login?next=%2Fui%2Fjobs%3Fstate%3Dfailed" {
		t.Fatalf("a page without a token: %d to %q, want 303 to the login page", w.Code, w.Header().Get("Location"))
	}
	login := c.get("/ui/login?next=/ui/jobs?state=failed", http.StatusOK)
	csrf := csrfOf(t, login)

	w = c.do(http.MethodPost, "/ui/login", url.Values{"csrf": {csrf}, "token": {"not-a-token"}, "next": {"/ui/jobs"}})
	if w.Code != http.StatusUnauthorized || !strings.Contains(w.Body.String(), errBadToken.Error()) {
		t.Fatalf("a bad token: %d, want 401 saying why:\n%s", w.Code, w.Body.String())
	}
	if _, ok := c.cookies[TokenCookie]; ok {
		t.Fatal("a bad token was kept in a cookie")
	}
	if w := c.do(http.MethodPost, "/ui/login", url.Values{"token": {"reader-token"}}); w.Code != http.StatusForbidden {
		t.Fatalf("a login without the CSRF token: %d, want 403", w.Code)
	}
	if w := c.do(http.MethodPost, "/ui/login", url.Values{"csrf": {csrf}, "token": {"  "}}); w.Code != http.StatusBadRequest {
		t.Fatalf("an empty token: %d, want 400", w.Code)
	}

	w = c.do(http.MethodPost, "/ui/login", url.Values{"csrf": {csrf}, "token": {"reader-token"}, "next": {"/ui/jobs?state=failed"}})
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/ui/jobs?state=failed" {
		t.Fatalf("a good token: %d to %q, want 303 back to the page", w.Code, w.Header().Get("Location"))
	}
	ck := c.cookies[TokenCookie]
	if ck == nil || ck.Value != "reader-token" || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Path != "/ui/" || ck.Secure {
		t.Fatalf("token cookie %+v: want the token, HttpOnly, SameSite=Strict, path /ui/, not Secure over plain HTTP", ck)
	}
	contains(t, c.get("/ui/jobs?state=failed", http.StatusOK), "signed-in page", "job-fail-1", "rita (reader)", "Sign out")

	// Over TLS the cookies are Secure.
	r := httptest.NewRequest(http.MethodGet, "https://alpha/ui/login", nil)
	rw := httptest.NewRecorder()
	h.ui.ServeHTTP(rw, r)
	for _, ck := range rw.Result().Cookies() {
		if !ck.Secure {
			t.Errorf("cookie %s over TLS is not Secure", ck.Name)
		}
	}

	logout := csrfOf(t, c.get("/ui/", http.StatusOK))
	if w := c.do(http.MethodPost, "/ui/logout", url.Values{"csrf": {logout}}); w.Code != http.StatusSeeOther {
		t.Fatalf("sign out: %d, want 303", w.Code)
	}
	if w := c.do(http.MethodGet, "/ui/", nil); w.Code != http.StatusSeeOther {
		t.Fatalf("after signing out: %d, want 303 to the login page", w.Code)
	}
}

func TestUI_WithoutTokenOrACLs_PagesJustWork(t *testing.T) {
	h := newHarness(t, cluster(t), nil)
	h.open = true
	page := h.client("").get("/ui/", http.StatusOK)
	contains(t, page, "overview", "alpha", "no ACLs: every permission")
}

func TestUI_Login_GoesOnlyToUIPages(t *testing.T) {
	for next, want := range map[string]string{
		"/ui/jobs?state=failed": "/ui/jobs?state=failed",
		"":                      "/ui/",
		"//evil.example/ui/":    "/ui/",
		"https://evil.example/": "/ui/",
		"/v1/jobs":              "/ui/",
		"/ui/login":             "/ui/",
		"/ui/\r\nSet-Cookie: x": "/ui/",
	} {
		if got := safeNext(next); got != want {
			t.Errorf("next %q: goes to %q, want %q", next, got, want)
		}
	}
}

func TestUI_Queue_PagesInSchedulingOrder(t *testing.T) {
	st := newState(t)
	st.node("n1", "alpha", 1)
	n := 2*queuePage + 7
	for i := range n {
		st.submit(fmt.Sprintf("q-%04d", i), "alice", structs.JobSpec{GPUs: 1, Priority: i % 2})
	}
	h := newHarness(t, st, nil)
	c := h.client("reader-token")
	var seen []string
	target := "/ui/queue"
	for pages := 0; target != ""; pages++ {
		if pages > 3 {
			t.Fatal("the queue's pages do not end")
		}
		body := c.get(target, http.StatusOK)
		contains(t, body, target, fmt.Sprintf("%d jobs wait", n))
		for _, m := range jobLink.FindAllStringSubmatch(body, -1) {
			seen = append(seen, m[1])
		}
		target = ""
		if m := nextLink.FindStringSubmatch(body); m != nil {
			target = strings.ReplaceAll(m[1], "&amp;", "&")
		}
	}
	if len(seen) != n {
		t.Fatalf("the pages list %d jobs, want %d", len(seen), n)
	}
	// Priority 1 first, each band by submission.
	for i, id := range seen {
		var k int
		fmt.Sscanf(id, "q-%d", &k)
		if wantOdd := i < n/2; (k%2 == 1) != wantOdd {
			t.Fatalf("position %d holds %s: the queue is not in priority order", i, id)
		}
	}
}

func TestUI_Jobs_PagesThroughEveryJobOnce(t *testing.T) {
	st := newState(t)
	st.node("n1", "alpha", 1)
	n := jobsPage + 30
	for i := range n {
		st.submit(fmt.Sprintf("j-%04d", i), "alice", structs.JobSpec{GPUs: 1})
	}
	h := newHarness(t, st, nil)
	c := h.client("reader-token")
	first := c.get("/ui/jobs?state=queued", http.StatusOK)
	m := nextLink.FindStringSubmatch(first)
	if m == nil {
		t.Fatal("the first page has no next link")
	}
	next := strings.ReplaceAll(m[1], "&amp;", "&")
	second := c.get(next, http.StatusOK)
	var ids []string
	for _, page := range []string{first, second} {
		for _, m := range jobLink.FindAllStringSubmatch(page, -1) {
			ids = append(ids, m[1])
		}
	}
	want := make([]string, n)
	for i := range want {
		want[i] = fmt.Sprintf("j-%04d", i)
	}
	if !slices.Equal(ids, want) {
		t.Fatalf("pages list %d jobs %v..., want every one of %d once, in order", len(ids), ids[:3], n)
	}
	if nextLink.MatchString(second) {
		t.Fatal("the last page has a next link")
	}
	if !strings.Contains(second, "state=queued") {
		t.Fatal("the second page lost the state filter")
	}
}

func TestUI_SetsASecurityPolicy(t *testing.T) {
	h := newHarness(t, cluster(t), nil)
	w := h.client("reader-token").do(http.MethodGet, "/ui/", nil)
	csp := w.Header().Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "script-src 'self'", "form-action 'self'", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("Content-Security-Policy %q lacks %q", csp, want)
		}
	}
	for _, asset := range []string{"/ui/static/style.css", "/ui/static/app.js", "/ui/static/favicon.svg"} {
		if w := h.client("").do(http.MethodGet, asset, nil); w.Code != http.StatusOK || w.Body.Len() == 0 {
			t.Errorf("%s: %d, %d bytes; want it served without a token", asset, w.Code, w.Body.Len())
		}
	}
}

// tailLog answers a log as the API does: only its last ?tail bytes, or
// all of it without (or when it is old, and knows no tail). It keeps the
// queries it was asked.
type tailLog struct {
	*fakeAPI
	log     string
	old     bool
	queries chan url.Values
}

func (l *tailLog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.HasSuffix(r.URL.Path, "/logs") {
		l.fakeAPI.ServeHTTP(w, r)
		return
	}
	q := r.URL.Query()
	l.queries <- q
	out := l.log
	if n, err := strconv.Atoi(q.Get("tail")); err == nil && n < len(out) && !l.old {
		out = out[len(out)-n:]
	}
	fmt.Fprint(w, out)
}

func TestUI_JobPage_ShowsTheEndOfTheLog(t *testing.T) {
	h := newHarness(t, cluster(t), nil)
	long := strings.Repeat("epoch 1 loss 0.9\n", 2000) + "<script>alert('log')</script>\nlast line\n"
	logs := &tailLog{fakeAPI: h.api, log: long, queries: make(chan url.Values, 1)}
	h.ui.srv.API = logs
	page := h.client("alice-token").get("/ui/jobs/job-run-1?stream=stderr", http.StatusOK)
	if q := <-logs.queries; q.Get("tail") != strconv.Itoa(logTailBytes+1) || q.Get("stream") != "stderr" || q.Get("rank") != "0" || q.Has("follow") {
		t.Fatalf("the job page asked for the log with %v, want the last %d bytes of rank 0's stderr", q, logTailBytes+1)
	}
	contains(t, page, "job page", "the start is cut", "last line", "&lt;script&gt;alert(&#39;log&#39;)",
		`href="/ui/jobs/job-run-1/log?rank=0&amp;stream=stderr"`)
	lacks(t, page, "job page", "<script>alert('log')")
	// Whole lines only: the byte before the 16 KiB shown tells whether they
	// begin with one.
	if n := strings.Count(page, "epoch 1 loss 0.9\n"); n == 0 || n != strings.Count(page, "epoch 1 loss") || n > logTailBytes/len("epoch 1 loss 0.9\n") {
		t.Fatalf("the tail holds %d whole lines of the log's start (and %d in all), want some, all whole, within %d KiB", n, strings.Count(page, "epoch 1 loss"), logTailBytes>>10)
	}

	// A log within the tail is shown whole, and not said to be cut.
	logs.log = "first line\nlast line\n"
	page = h.client("alice-token").get("/ui/jobs/job-run-1", http.StatusOK)
	<-logs.queries
	contains(t, page, "job page", "first line\nlast line\n")
	lacks(t, page, "job page", "the start is cut")

	// A node that knows no tail answers all of a long log: the page holds
	// none of it, and says why.
	logs.log, logs.old = long, true
	page = h.client("alice-token").get("/ui/jobs/job-run-1", http.StatusOK)
	<-logs.queries
	contains(t, page, "job page", "sent more than its end")
	lacks(t, page, "job page", "last line")
}

func TestShellJoin_QuotesWhatAShellWouldSplit(t *testing.T) {
	for _, tc := range []struct {
		argv []string
		want string
	}{
		{[]string{"python", "train.py", "--lr=0.1"}, "python train.py --lr=0.1"},
		{[]string{"sh", "-c", "echo hi; sleep 1"}, "sh -c 'echo hi; sleep 1'"},
		{[]string{"echo", "it's", ""}, `echo 'it'\''s' ''`},
	} {
		if got := shellJoin(tc.argv); got != tc.want {
			t.Errorf("shellJoin(%q) = %s, want %s", tc.argv, got, tc.want)
		}
	}
}

func TestTail_KeepsTheLastBytesFromALinesStart(t *testing.T) {
	for _, tc := range []struct {
		in       string
		n        int
		want     string
		wantsCut bool
	}{
		{"only\n", 16, "only\n", false},
		{"0123456789\n", 11, "0123456789\n", false},
		{"aa\nbbb\ncc\n", 8, "bbb\ncc\n", true}, // the 8 begin with aa's newline
		{"aa\nbbb\ncc\n", 7, "bbb\ncc\n", true}, // the 7 begin with bbb
		{"aa\nbbb\ncc\n", 6, "cc\n", true},      // the 6 begin within bbb
		{"aa\nbbbbbbbbbb", 6, "bbbbbb", true},   // no line starts within them
		{"aaaaaaaa\n", 3, "aa\n", true},         // nor here: its end is the last byte
	} {
		got, cut := tail([]byte(tc.in), tc.n)
		if string(got) != tc.want || cut != tc.wantsCut {
			t.Errorf("tail(%q, %d) = %q cut %v, want %q cut %v", tc.in, tc.n, got, cut, tc.want, tc.wantsCut)
		}
	}
}

// slowLog answers a log slowly, as a node that holds it and hangs would:
// its first bytes, then nothing until the request gives up.
type slowLog struct{ *fakeAPI }

func (s slowLog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.HasSuffix(r.URL.Path, "/logs") {
		s.fakeAPI.ServeHTTP(w, r)
		return
	}
	fmt.Fprint(w, "the start of a long log\n")
	<-r.Context().Done()
}

func TestUI_JobPage_ALogTailNotReadWithinItsWaitIsNotShown(t *testing.T) {
	h := newHarness(t, cluster(t), nil)
	h.ui.srv.API = slowLog{h.api}
	h.ui.logWait = 50 * time.Millisecond
	page := h.client("alice-token").get("/ui/jobs/job-run-1", http.StatusOK)
	contains(t, page, "job page", "the node that holds the log did not answer")
	lacks(t, page, "job page", "the start of a long log")
}

// A job restarted after a failure shows its running attempt as the
// current one, not its first (the issue: the page showed attempt 1).
func TestUI_ARestartedJobShowsItsRunningAttempt(t *testing.T) {
	st := newState(t)
	st.node("n1", "alpha", 4)
	st.node("n2", "beta", 4)
	st.submit("job-again", "alice", structs.JobSpec{GPUs: 1, Restarts: 2})
	st.run("job-again", "n1", 0)
	st.report("n1", "alloc-job-again", structs.AllocFailed, 3, "exit status 3")
	res := st.apply(structs.PlanApplyType, structs.PlanApplyRequest{At: st.at().Add(time.Hour), Plan: structs.Plan{Placements: []structs.JobPlacement{{
		JobID: "job-again", Allocations: []structs.Allocation{{ID: "alloc-job-again-2", NodeID: "n2", GPUs: []string{gpuUUID("n2", 1)}}},
	}}}}).(*structs.PlanResult)
	if len(res.Rejected) > 0 {
		t.Fatalf("place the second attempt: %v", res.Rejected)
	}
	st.report("n2", "alloc-job-again-2", structs.AllocRunning, 0, "")
	h := newHarness(t, st, localTelemetry())
	page := h.client("operator-token").get("/ui/jobs/job-again", http.StatusOK)
	contains(t, page, "a restarted job", "<p>Attempt 2, by rank:</p>", `href="/ui/nodes/n2">beta</a>`)
	lacks(t, page, "a restarted job", "<p>Attempt 1, by rank:</p>")
}

func TestUI_Queue_WithFairShareShowsTheSchedulersOrderAndFactors(t *testing.T) {
	st := newState(t)
	st.node("n1", "alpha", 1)
	for _, name := range []string{"ml", "cv"} {
		st.apply(structs.AccountSetType, structs.AccountRequest{Op: structs.AccountCreate, Name: name})
	}
	st.apply(structs.QoSSetType, structs.QoSRequest{Op: structs.QoSSet, QoS: structs.QoS{Name: "high"}})
	st.submit("q-alice", "alice", structs.JobSpec{GPUs: 1, Account: "ml"})
	st.submit("q-bob", "bob", structs.JobSpec{GPUs: 1, Account: "cv", QoS: "high"})
	h := newHarness(t, st, nil)
	// What the agent wires: the scheduler's order, bob's job first.
	h.ui.cfg.Priorities = func() *api.PrioInfo {
		return &api.PrioInfo{Weights: &structs.DefaultPriorityWeights, Total: 2, Jobs: []api.JobPriority{
			{JobID: "q-bob", Position: 1, Owner: "bob", Account: "cv", Priority: 10000, FairShare: 1},
			{JobID: "q-alice", Position: 2, Owner: "alice", Account: "ml", Priority: 5000, FairShare: 0.5},
		}}
	}
	body := h.client("reader-token").get("/ui/queue", http.StatusOK)
	contains(t, body, "queue", "by priority from fair share", "cv (high)", ">10000</span> <span class=\"factors\">fair share 1.00", "fair share 0.50")
	if strings.Index(body, "q-bob") > strings.Index(body, "q-alice") {
		t.Fatal("the queue is not in the scheduler's order: bob's job comes first")
	}
	page := h.client("reader-token").get("/ui/jobs/q-alice", http.StatusOK)
	contains(t, page, "queued job", "<dt>Account</dt><dd>ml</dd>", `id="job-queue">2 of 2, priority 5000: fair share 0.50`)
}
