package agent

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/structs"
)

// uiBrowser is a cookie-keeping HTTP client of one agent's web UI that
// does not follow redirects, so that each answer can be looked at.
type uiBrowser struct {
	t    *testing.T
	base string
	c    *http.Client
}

func newUIBrowser(t *testing.T, a *Agent) *uiBrowser {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	if a.secure != nil { // trust the cluster's CA, as a browser told to would
		conf, err := api.ClusterTLS([]byte(strings.Join(a.secure.CA().CACerts, "")))
		if err != nil {
			t.Fatal(err)
		}
		hc.Transport = &http.Transport{TLSClientConfig: conf}
	}
	return &uiBrowser{t: t, base: a.HTTPAddr(), c: hc}
}

// do sends a request (a form when form is not nil) and returns the status,
// the Location header and the body.
func (b *uiBrowser) do(method, path string, form url.Values) (int, string, string) {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, b.base+path, body)
	if err != nil {
		b.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Location"), string(data)
}

var uiCSRF = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

// login signs in with token and returns the status of the answer.
func (b *uiBrowser) login(token string) (int, string) {
	b.t.Helper()
	code, _, body, _ := b.loginCookies(token)
	return code, body
}

// loginCookies signs in with token and returns the answer and the cookies
// it set.
func (b *uiBrowser) loginCookies(token string) (int, string, string, []*http.Cookie) {
	b.t.Helper()
	_, _, page := b.do(http.MethodGet, "/ui/login", nil)
	m := uiCSRF.FindStringSubmatch(page)
	if m == nil {
		b.t.Fatalf("the login page has no CSRF token:\n%s", page)
	}
	req, err := http.NewRequest(http.MethodPost, b.base+"/ui/login", strings.NewReader(url.Values{"csrf": {m[1]}, "token": {token}}.Encode()))
	if err != nil {
		b.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatalf("login: %v", err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Location"), string(data), resp.Cookies()
}

// csrf is the CSRF token of a page's forms.
func (b *uiBrowser) csrf(path string) string {
	b.t.Helper()
	_, _, page := b.do(http.MethodGet, path, nil)
	m := uiCSRF.FindStringSubmatch(page)
	if m == nil {
		b.t.Fatalf("%s has no form:\n%s", path, page)
	}
	return m[1]
}

func TestUI_ACLs_CookieLoginRolesAndActionsThroughTheAPI(t *testing.T) {
	t.Parallel()
	a, admin := aclAgent(t)
	job, err := admin.SubmitJob(context.Background(), api.SubmitRequest{Spec: structs.JobSpec{Name: "long", Command: []string{"sleep", "300"}, GPUs: 1}})
	if err != nil {
		t.Fatal(err)
	}
	waitJobState(t, admin, job.ID, structs.JobRunning)
	reader := userToken(t, admin, "rita", structs.RoleReader)
	operator := userToken(t, admin, "olga", structs.RoleOperator)
	jobPage := "/ui/jobs/" + job.ID

	b := newUIBrowser(t, a)
	if code, loc, _ := b.do(http.MethodGet, jobPage, nil); code != http.StatusSeeOther || !strings.HasPrefix(loc, "/ui/login?next=") {
		t.Fatalf("a page without a token: %d to %q, want 303 to the login page", code, loc)
	}
	// The agent's API token stopped working for users at the bootstrap.
	if code, body := b.login("legacy"); code != http.StatusUnauthorized || !strings.Contains(body, "this cluster has ACLs") {
		t.Fatalf("login with the old API token: %d, want 401 saying why:\n%s", code, body)
	}
	if code, body := b.login(reader); code != http.StatusSeeOther {
		t.Fatalf("login as a reader: %d:\n%s", code, body)
	}
	code, _, page := b.do(http.MethodGet, jobPage, nil)
	if code != http.StatusOK || !strings.Contains(page, job.ID) || !strings.Contains(page, "rita (reader)") {
		t.Fatalf("the job page for a reader: %d:\n%s", code, page)
	}
	if strings.Contains(page, `id="cancel"`) || strings.Contains(page, `id="log"`) {
		t.Fatal("a reader is offered the cancel button or the log")
	}
	// A reader's cancel, CSRF token and all, is refused by the API.
	code, _, page = b.do(http.MethodPost, jobPage+"/cancel", url.Values{"csrf": {b.csrf(jobPage)}})
	if code != http.StatusForbidden || !strings.Contains(page, "permission denied") {
		t.Fatalf("a reader's cancel: %d, want 403 from the API:\n%s", code, page)
	}

	// The cookie works for the UI alone: the API does not take it.
	req, _ := http.NewRequest(http.MethodGet, a.HTTPAddr()+"/v1/jobs", nil)
	req.AddCookie(&http.Cookie{Name: "skein_token", Value: operator})
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the API with the UI's cookie: %d, want 401", resp.StatusCode)
	}

	op := newUIBrowser(t, a)
	if code, body := op.login(operator); code != http.StatusSeeOther {
		t.Fatalf("login as an operator: %d:\n%s", code, body)
	}
	csrf := op.csrf(jobPage)
	if code, _, page := op.do(http.MethodGet, jobPage, nil); code != http.StatusOK || !strings.Contains(page, `id="cancel"`) {
		t.Fatalf("the operator's job page: %d, no cancel button:\n%s", code, page)
	}
	if code, _, _ := op.do(http.MethodPost, jobPage+"/cancel", url.Values{}); code != http.StatusForbidden {
		t.Fatalf("a cancel without the CSRF token: %d, want 403", code)
	}
	if code, loc, page := op.do(http.MethodPost, jobPage+"/cancel", url.Values{"csrf": {csrf}}); code != http.StatusSeeOther || loc != jobPage {
		t.Fatalf("the operator's cancel: %d to %q:\n%s", code, loc, page)
	}
	waitJobState(t, admin, job.ID, structs.JobCancelled)
	audit, err := admin.Audit(context.Background(), api.AuditQuery{})
	if err != nil {
		t.Fatal(err)
	}
	var cancels []string
	for _, rec := range audit.Records {
		if rec.Method == http.MethodDelete && rec.Path == "/v1/jobs/"+job.ID {
			cancels = append(cancels, rec.User+" "+http.StatusText(rec.Status))
		}
	}
	if strings.Join(cancels, ", ") != "rita Forbidden, olga OK" {
		t.Fatalf("the audit log holds the UI's cancels as %q, want rita's refused and olga's", cancels)
	}
}

func TestUI_NoACLsNoToken_TheUIJustWorks(t *testing.T) {
	t.Parallel()
	a, c := startAgentWithoutACL(t, testConfig(t, t.TempDir())) // the UI of a cluster before its bootstrap
	job := submit(t, c, 1, "sleep", "300")
	waitJobState(t, c, job.ID, structs.JobRunning)
	b := newUIBrowser(t, a)
	for _, path := range []string{"/ui/", "/ui/queue", "/ui/jobs", "/ui/jobs/" + job.ID, "/ui/nodes/" + a.nodeID, "/ui/nodes/" + a.nodeID + "/gpus/0", "/ui/services"} {
		if code, _, page := b.do(http.MethodGet, path, nil); code != http.StatusOK || !strings.Contains(page, "test-node") {
			t.Errorf("%s: %d, want the page:\n%s", path, code, page)
		}
	}
	if code, loc, _ := b.do(http.MethodGet, "/ui", nil); code != http.StatusMovedPermanently || loc != "/ui/" {
		t.Errorf("/ui: %d to %q, want a redirect to /ui/", code, loc)
	}
}

func TestUI_SecureCluster_SignsInOverTLSWithSecureCookies(t *testing.T) {
	t.Parallel()
	tc := startSecureCluster(t, 1)
	a := tc.agents[0]
	if !strings.HasPrefix(a.HTTPAddr(), "https://") {
		t.Fatalf("a secure agent serves %s, want https", a.HTTPAddr())
	}
	b := newUIBrowser(t, a)
	code, _, body, cookies := b.loginCookies(tc.admin)
	if code != http.StatusSeeOther {
		t.Fatalf("login with the admin token: %d:\n%s", code, body)
	}
	var names []string
	for _, c := range cookies {
		names = append(names, c.Name)
		if !c.Secure || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode {
			t.Errorf("cookie %s: Secure %v, HttpOnly %v, SameSite %v; want all three strict", c.Name, c.Secure, c.HttpOnly, c.SameSite)
		}
	}
	if !strings.Contains(strings.Join(names, " "), "skein_token") {
		t.Fatalf("the login set cookies %v, want the token's", names)
	}
	if code, _, page := b.do(http.MethodGet, "/ui/", nil); code != http.StatusOK || !strings.Contains(page, "node0") {
		t.Fatalf("the overview over TLS: %d:\n%s", code, page)
	}
}
