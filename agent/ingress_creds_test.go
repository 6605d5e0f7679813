package agent

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

// The ingress serves the cluster's services on every node's host, where
// the web UI is served too (another port: browsers keep cookies per host).
// A submitter's service must get none of the credentials of those who use
// the UI, the API or the ingress, and set none of the UI's cookies.

// doorsCluster is a 3-node cluster with TLS and ACLs, each node with an
// ingress, and a submitter's public service named "ui" whose replica is
// the test's own server (seen): what a submitter's replica would see.
type doorsCluster struct {
	*testCluster
	submitter string
	seen      *seenRequests
	replica   *structs.Allocation
}

// seenRequests records what the replica got.
type seenRequests struct {
	mu   sync.Mutex
	reqs []*http.Request
	// bodies counts the requests whose whole body came.
	bodies int
	// page is the replica's answer.
	page func(w http.ResponseWriter, r *http.Request)
}

func (s *seenRequests) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.reqs = append(s.reqs, r.Clone(context.Background()))
	page := s.page
	s.mu.Unlock()
	if _, err := io.Copy(io.Discard, r.Body); err == nil && r.ContentLength > 0 {
		s.mu.Lock()
		s.bodies++
		s.mu.Unlock()
	}
	if page != nil {
		page(w, r)
		return
	}
	fmt.Fprint(w, "replica")
}

// credentials is every credential the replica was sent: cookies,
// Authorization and X-Skein-Token, one a line.
func (s *seenRequests) credentials() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, r := range s.reqs {
		for _, c := range r.Cookies() {
			out = append(out, "cookie "+c.Name+"="+c.Value)
		}
		for _, h := range []string{"Authorization", api.TokenHeader} {
			if v := r.Header.Get(h); v != "" {
				out = append(out, h+": "+v)
			}
		}
	}
	return out
}

func (s *seenRequests) completeBodies() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bodies
}

func (s *seenRequests) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.reqs)
}

func startDoorsCluster(t *testing.T) *doorsCluster {
	t.Helper()
	tc := startClusterWith(t, 3, func(_ int, cfg *Config) {
		cfg.Security = SecurityTLS
		cfg.IngressPort = -1
	})
	dc := &doorsCluster{testCluster: tc, seen: &seenRequests{}}
	dc.submitter = userToken(t, tc.client(tc.agents[0]), "sam", structs.RoleSubmitter)
	sam := clientFor(t, tc.agents[0], dc.submitter)
	if _, err := sam.CreateService(context.Background(), api.ServiceCreateRequest{Name: "ui", Replicas: 1,
		Spec: structs.ServiceSpec{Public: true, Job: structs.JobSpec{Command: []string{"sleep", "1000"}}}}); err != nil {
		t.Fatalf("the submitter's public service: %v", err)
	}
	testutil.WaitFor(t, 30*time.Second, func() error {
		for _, a := range tc.agents {
			if got := runningReplicas(a, "ui", nil); len(got) != 1 {
				return fmt.Errorf("%s sees %d replicas of ui running, want 1", a.Name(), len(got))
			}
		}
		return nil
	})
	dc.replica = runningReplicas(tc.agents[0], "ui", nil)[0]
	// The replica's process sleeps; the test listens on its port in its
	// place, on the node's address (every test node's is loopback).
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(dc.replica.MasterPort)))
	if err != nil {
		t.Fatalf("listen on the replica's port: %v", err)
	}
	srv := &http.Server{Handler: dc.seen, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return dc
}

// tlsClient is an HTTP client that trusts the cluster's CA, keeps
// cookies in jar (nil: none) and does not follow redirects.
func (dc *doorsCluster) tlsClient(jar http.CookieJar) *http.Client {
	conf, err := api.ClusterTLS([]byte(strings.Join(dc.agents[0].secure.CA().CACerts, "")))
	if err != nil {
		dc.t.Fatal(err)
	}
	return &http.Client{Jar: jar, Timeout: time.Minute, Transport: &http.Transport{TLSClientConfig: conf},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// skeinCredentials are those of creds that are skein's: a cookie of its
// namespace, or anything that holds an ACL token.
func skeinCredentials(creds []string) []string {
	var out []string
	for _, c := range creds {
		if strings.Contains(c, "SKA1.") || strings.Contains(strings.ToLower(c), "skein_") || strings.HasPrefix(c, api.TokenHeader) {
			out = append(out, c)
		}
	}
	return out
}

func TestIngress_AServiceGetsNoneOfTheUIsCookies_AndSetsNone(t *testing.T) {
	t.Parallel()
	dc := startDoorsCluster(t)
	ui := dc.agents[1]
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	admin := &uiBrowser{t: t, base: ui.HTTPAddr(), c: dc.tlsClient(jar)}
	if code, body := admin.login(dc.admin); code != http.StatusSeeOther {
		t.Fatalf("the admin's sign-in: %d:\n%s", code, body)
	}
	uiURL, _ := url.Parse(ui.HTTPAddr() + "/ui/")
	signedIn := jar.Cookies(uiURL)
	if len(signedIn) != 2 {
		t.Fatalf("signed in, the browser holds %v, want a token and a session", signedIn)
	}

	// The replica answers with cookies of the UI's names: the session
	// of the attacker's own sign-in page, which it knows the CSRF token of.
	attacker := &uiBrowser{t: t, base: ui.HTTPAddr(), c: dc.tlsClient(mustJar(t))}
	attackerCSRF := attacker.csrf("/ui/login")
	attackerSession := ""
	for _, c := range attacker.c.Jar.Cookies(uiURL) {
		if strings.Contains(c.Name, "skein_session") {
			attackerSession = c.Value
		}
	}
	dc.seen.page = func(w http.ResponseWriter, r *http.Request) {
		for _, name := range []string{"skein_session", "__Host-skein_session"} {
			http.SetCookie(w, &http.Cookie{Name: name, Value: attackerSession, Path: "/", Secure: true})
			http.SetCookie(w, &http.Cookie{Name: name, Value: attackerSession, Path: "/ui/", Secure: true})
		}
		fmt.Fprint(w, "a page of the submitter's")
	}

	// The admin follows a link to the service, through every node's ingress.
	for _, a := range dc.agents {
		code, _, body := (&uiBrowser{t: t, base: a.IngressAddr(), c: admin.c}).do(http.MethodGet, "/ui/nodes", nil)
		if code != http.StatusOK || body != "a page of the submitter's" {
			t.Fatalf("the service through %s's ingress: %d %q", a.Name(), code, body)
		}
	}
	if n := dc.seen.count(); n != 3 {
		t.Fatalf("the replica got %d requests, want 3", n)
	}
	if got := skeinCredentials(dc.seen.credentials()); len(got) > 0 {
		t.Errorf("the submitter's replica got the admin's credentials: %q", got)
	}
	if after := jar.Cookies(uiURL); !slices.EqualFunc(after, signedIn, func(a, b *http.Cookie) bool { return a.Name == b.Name && a.Value == b.Value }) {
		t.Errorf("the service changed the UI's cookies from %v to %v", signedIn, after)
	}

	// Had it planted its session anyway (a script of its page can),
	// the attacker's CSRF token does not act as the admin.
	for _, c := range signedIn {
		if strings.Contains(c.Name, "skein_session") {
			jar.SetCookies(uiURL, []*http.Cookie{{Name: c.Name, Value: attackerSession, Path: "/", Secure: true}})
		}
	}
	gpuPath := "/ui/nodes/" + dc.agents[2].NodeID() + "/gpus/0/cordon"
	if code, _, body := admin.do(http.MethodPost, gpuPath, url.Values{"csrf": {attackerCSRF}, "reason": {"pwned"}}); code != http.StatusForbidden {
		t.Errorf("a cordon with the planted session's CSRF token: %d, want 403:\n%s", code, body)
	}
	gpus, err := dc.client(dc.agents[0]).GPUs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range gpus {
		if g.Health == "cordoned" {
			t.Fatalf("GPU %d of %s was cordoned: %+v", g.Index, g.Node, g)
		}
	}
}

func mustJar(t *testing.T) http.CookieJar {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return jar
}

func TestIngress_APublicServiceGetsNoSkeinToken(t *testing.T) {
	t.Parallel()
	dc := startDoorsCluster(t)
	hc := dc.tlsClient(nil)
	for _, a := range dc.agents {
		for _, h := range []http.Header{
			{"Authorization": {"Bearer " + dc.admin}},
			{"Authorization": {dc.admin}},
			{api.TokenHeader: {dc.admin}},
			{"Authorization": {"Bearer sk-the-services-own"}, api.TokenHeader: {dc.admin}},
		} {
			req, err := http.NewRequest(http.MethodGet, a.IngressAddr()+"/ui/v1/models", nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header = h
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("the public service through %s: %d", a.Name(), resp.StatusCode)
			}
		}
	}
	creds := dc.seen.credentials()
	if got := skeinCredentials(creds); len(got) > 0 {
		t.Errorf("the public service's replica got skein tokens: %q", got)
	}
	if n := strings.Count(strings.Join(creds, "\n"), "Authorization: Bearer sk-the-services-own"); n != 3 {
		t.Errorf("the service's own key reached its replica %d times, want 3: %q", n, creds)
	}
}
