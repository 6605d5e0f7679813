package ui

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// A service of the cluster is served by the ingress on the UI's host (any
// port of it: browsers keep cookies per host). Whatever it makes the
// browser hold or send, it must not act as the one signed in to the UI.

func TestUI_CSRFToken_IsBoundToTheSignedInToken_APlantedSessionGetsNothing(t *testing.T) {
	h := newHarness(t, cluster(t), nil)
	// The attacker's own browser: a session, and the login page's CSRF
	// token for it, and the CSRF token of its pages once signed in.
	attacker := h.client("")
	loginCSRF := csrfOf(t, attacker.get("/ui/login", http.StatusOK))
	session := attacker.cookies[sessionCookie].Value
	attacker.cookies[TokenCookie] = &http.Cookie{Name: TokenCookie, Value: "alice-token"}
	ownCSRF := csrfOf(t, attacker.get("/ui/", http.StatusOK))
	if ownCSRF == loginCSRF {
		t.Fatal("a session's CSRF token is the same signed in and out")
	}

	// The operator's browser holds the attacker's session, planted by a
	// service's Set-Cookie or script, and the operator's own token.
	victim := h.client("operator-token")
	victim.cookies[sessionCookie] = &http.Cookie{Name: sessionCookie, Value: session}
	h.api.reset()
	for name, csrf := range map[string]string{"the login page's": loginCSRF, "the attacker's own pages'": ownCSRF} {
		w := victim.do(http.MethodPost, "/ui/nodes/n1/gpus/0/cordon", url.Values{"csrf": {csrf}, "reason": {"pwned"}})
		if w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "CSRF") {
			t.Errorf("a cordon with %s CSRF token of the planted session: %d, want 403 naming CSRF", name, w.Code)
		}
	}
	if calls := h.api.called(); len(calls) != 0 {
		t.Fatalf("posts with a planted session's CSRF token reached the API: %v", calls)
	}
	// The operator's own page gives the token that works.
	csrf := csrfOf(t, victim.get("/ui/nodes/n1", http.StatusOK))
	if w := victim.do(http.MethodPost, "/ui/nodes/n1/gpus/0/cordon", url.Values{"csrf": {csrf}, "reason": {"fan"}}); w.Code != http.StatusSeeOther {
		t.Fatalf("the operator's own cordon: %d, want 303:\n%s", w.Code, w.Body.String())
	}
}

func TestUI_StateChangesFromAnotherOrigin_AreRefused(t *testing.T) {
	h := newHarness(t, cluster(t), nil)
	c := h.client("operator-token")
	csrf := csrfOf(t, c.get("/ui/nodes/n1", http.StatusOK))
	login := h.client("")
	loginCSRF := csrfOf(t, login.get("/ui/login", http.StatusOK))
	post := func(c *client, path string, form url.Values, header http.Header) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, "http://alpha:7470"+path, strings.NewReader(form.Encode()))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		for k, v := range header {
			r.Header[k] = v
		}
		for _, ck := range c.cookies {
			r.AddCookie(ck)
		}
		w := httptest.NewRecorder()
		h.ui.ServeHTTP(w, r)
		return w
	}
	cordon := url.Values{"csrf": {csrf}, "reason": {"x"}}
	h.api.reset()
	for name, header := range map[string]http.Header{
		"a page of the ingress on the same host (Fetch metadata)": {"Sec-Fetch-Site": {"same-site"}, "Origin": {"http://alpha:7480"}},
		"another site (Fetch metadata)":                           {"Sec-Fetch-Site": {"cross-site"}},
		"the ingress's origin, without Fetch metadata":            {"Origin": {"http://alpha:7480"}},
		"an opaque origin":                                        {"Origin": {"null"}},
		"the UI's origin over https, served over http":            {"Origin": {"https://alpha:7470"}},
	} {
		if w := post(c, "/ui/nodes/n1/gpus/0/cordon", cordon, header); w.Code != http.StatusForbidden {
			t.Errorf("a cordon from %s: %d, want 403", name, w.Code)
		}
		if w := post(login, "/ui/login", url.Values{"csrf": {loginCSRF}, "token": {"reader-token"}}, header); w.Code != http.StatusForbidden {
			t.Errorf("a sign-in from %s: %d, want 403", name, w.Code)
		}
		if w := post(c, "/ui/logout", url.Values{"csrf": {csrf}}, header); w.Code != http.StatusForbidden {
			t.Errorf("a sign-out from %s: %d, want 403", name, w.Code)
		}
	}
	if calls := h.api.called(); len(calls) != 0 {
		t.Fatalf("posts from other origins reached the API: %v", calls)
	}
	for name, header := range map[string]http.Header{
		"the UI's own page (Fetch metadata)":       {"Sec-Fetch-Site": {"same-origin"}, "Origin": {"http://alpha:7470"}},
		"the UI's own origin, no Fetch metadata":   {"Origin": {"http://alpha:7470"}},
		"a client that is no browser (no headers)": {},
	} {
		if w := post(c, "/ui/nodes/n1/gpus/0/cordon", cordon, header); w.Code != http.StatusSeeOther {
			t.Errorf("a cordon from %s: %d, want 303:\n%s", name, w.Code, w.Body.String())
		}
	}
}

func TestUI_OverTLS_CookiesAreHostPrefixed_AndPlainOnesAreNotRead(t *testing.T) {
	h := newHarness(t, cluster(t), nil)
	do := func(method, target string, form url.Values, cookies []*http.Cookie) *http.Response {
		var r *http.Request
		if form != nil {
			r = httptest.NewRequest(method, target, strings.NewReader(form.Encode()))
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		} else {
			r = httptest.NewRequest(method, target, nil)
		}
		for _, ck := range cookies {
			r.AddCookie(ck)
		}
		w := httptest.NewRecorder()
		h.ui.ServeHTTP(w, r)
		return w.Result()
	}
	page := do(http.MethodGet, "https://alpha:7470/ui/login", nil, nil)
	session := page.Cookies()
	if len(session) != 1 || session[0].Name != "__Host-skein_session" || session[0].Path != "/" || !session[0].Secure ||
		!session[0].HttpOnly || session[0].SameSite != http.SameSiteStrictMode || session[0].Domain != "" {
		t.Fatalf("the login page over TLS set %+v, want one __Host-skein_session: Path=/, Secure, HttpOnly, SameSite=Strict, no Domain", session)
	}
	body := new(strings.Builder)
	buf := make([]byte, 64<<10)
	n, _ := page.Body.Read(buf)
	body.Write(buf[:n])
	csrf := csrfOf(t, body.String())
	res := do(http.MethodPost, "https://alpha:7470/ui/login", url.Values{"csrf": {csrf}, "token": {"operator-token"}}, session)
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign in over TLS: %d", res.StatusCode)
	}
	var names []string
	for _, ck := range res.Cookies() {
		names = append(names, ck.Name)
		if !strings.HasPrefix(ck.Name, "__Host-skein_") || ck.Path != "/" || !ck.Secure || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode {
			t.Errorf("sign in over TLS set %+v, want a __Host- cookie: Path=/, Secure, HttpOnly, SameSite=Strict", ck)
		}
	}
	if strings.Join(names, " ") != "__Host-skein_token __Host-skein_session" {
		t.Errorf("sign in over TLS set %v, want the token's and a new session's", names)
	}
	// The plain names are not read over TLS: a cookie of them can be set
	// by any plain-HTTP page of the host.
	if res := do(http.MethodGet, "https://alpha:7470/ui/", nil, []*http.Cookie{{Name: TokenCookie, Value: "operator-token"}}); res.StatusCode != http.StatusSeeOther {
		t.Errorf("over TLS with the plain token cookie: %d, want 303 to the login page", res.StatusCode)
	}
	if res := do(http.MethodGet, "https://alpha:7470/ui/", nil, []*http.Cookie{{Name: "__Host-skein_token", Value: "operator-token"}}); res.StatusCode != http.StatusOK {
		t.Errorf("over TLS with the __Host- token cookie: %d, want the page", res.StatusCode)
	}
}
