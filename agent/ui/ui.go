package ui

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"html/template"
	"io/fs"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/fsm"
	"github.com/skein-dev/skein/gpu"
	"github.com/skein-dev/skein/structs"
)

// Prefix is where the UI is served.
const Prefix = "/ui/"

// The UI's cookies (the package doc says why they are what they are).
// Both are HttpOnly and SameSite=Strict. Over TLS their names carry the
// __Host- prefix, which a browser takes only from a secure origin, with
// Secure, Path=/ and no Domain; over plain HTTP (a loopback or lab
// cluster) they are the bare names, on Prefix only. Each scheme reads
// its own names alone.
const (
	// TokenCookie holds the API token the login page was given.
	TokenCookie = "skein_token"
	// sessionCookie holds a random session ID, which with the token is
	// the key of the CSRF token of the UI's forms.
	sessionCookie = "skein_session"
	// hostPrefix is the prefix of the cookies' names over TLS.
	hostPrefix = "__Host-"
	// csrfField is the form field of the CSRF token.
	csrfField = "csrf"
)

// refreshSeconds is how often a page refreshes itself.
const refreshSeconds = 3

// recentEvents is how many of its latest events a job or node page lists.
const recentEvents = 20

// Page sizes of the lists.
const (
	queuePage    = 100
	jobsPage     = 100
	overviewHead = 10 // queued jobs the overview shows
)

// Errors of the UI's own checks; a refused action shows the API's error.
var (
	errCSRF      = errors.New("the form's CSRF token is missing or wrong: reload the page and try again")
	errOrigin    = errors.New("a change to the cluster is taken only from the UI's own pages: this one came from another origin")
	errNoToken   = errors.New("give an API token")
	errBadNumber = errors.New("not a number")
	errTooLong   = errors.New("the API's answer is longer than asked for")
)

//go:embed templates/*.html
var templateFiles embed.FS

//go:embed static
var staticFiles embed.FS

// Config is what the UI reads: this node's state and, for this node's
// GPUs, their telemetry.
type Config struct {
	FSM      *fsm.FSM
	NodeID   string
	NodeName string
	// Telemetry reads this node's GPUs; nil shows no utilisation of
	// them.
	Telemetry gpu.Telemetry
	// Priorities answers the queue in the scheduler's order with each
	// job's priority factors (GET /v1/prio's answer); nil, or an answer
	// without weights (no account or QoS), shows the queue the state
	// keeps, by --priority and submission.
	Priorities func() *api.PrioInfo
	Logger     hclog.Logger
}

// Host is what the UI needs of the API server that mounts it.
type Host struct {
	// API serves the user API to a request Authenticate let through,
	// whose identity is in its context; the UI's actions and log tails
	// go through it.
	API http.Handler
	// Authenticate checks token (the session cookie's, or "" without
	// one), as the user API would check it in a header, and returns the
	// request to serve, carrying the caller's identity, and who that is.
	Authenticate func(r *http.Request, token string) (*http.Request, Viewer, error)
	// Leader is the Raft leader's node ID, "" when there is none.
	Leader func() string
	// NodeTelemetry asks another node for the latest readings of its
	// GPUs, within ctx (the UI bounds it by telemetryWait); nil asks
	// none, and only this node's GPUs show their utilisation.
	NodeTelemetry func(ctx context.Context, nodeID string) ([]gpu.Sample, error)
}

// Viewer is who looks at the UI: what the server's Identity says.
type Viewer struct {
	// ACL is whether the cluster has ACLs; without, the caller holds
	// every permission and is no user.
	ACL  bool
	User string
	Role structs.Role
}

// Can reports whether the viewer holds p.
func (v Viewer) Can(p structs.Permission) bool { return v.Role.Can(p) }

// MayActFor reports whether the viewer may act on what owner owns (cancel
// a job, read its logs, see its environment), as the API decides it.
func (v Viewer) MayActFor(owner string) bool { return v.Role.MayActFor(v.User, owner) }

// UI serves the pages.
type UI struct {
	cfg Config
	srv Host
	log hclog.Logger
	mux *http.ServeMux
	// csrfKey signs session IDs into CSRF tokens; it is made at start, so
	// a form from before a restart is refused (reload it).
	csrfKey []byte
	now     func() time.Time
	// logWait bounds the wait for a log tail (logTailWait).
	logWait time.Duration
	// telemetryWait bounds the wait for another node's telemetry
	// (nodeTelemetryWait).
	telemetryWait time.Duration
}

// pageNames are the pages, each a template of its own on the layout.
var pageNames = []string{"overview", "queue", "jobs", "job", "node", "gpu", "services", "login", "message"}

// pages are the parsed templates; they are embedded, so one that does not
// parse is a programming error, found by every test that renders a page.
// They are parsed on first use, not when the program starts: the same
// binary is every command of the CLI and every job's supervisor, and
// parsing them was a fifth of its start (4 ms and 1 MB allocated).
var pages = sync.OnceValue(func() map[string]*template.Template {
	out := map[string]*template.Template{}
	for _, page := range pageNames {
		out[page] = template.Must(template.New("layout.html").Funcs(funcs).ParseFS(templateFiles,
			"templates/layout.html", "templates/parts.html", "templates/"+page+".html"))
	}
	return out
})

// static is the stylesheet, the script and the icon.
var static = func() fs.FS {
	sub, err := fs.Sub(staticFiles, "static")
	if err != nil {
		panic(err) // the embedded directory is there
	}
	return sub
}()

// New returns the UI's handler for Prefix.
func New(cfg Config, srv Host) *UI {
	u := &UI{cfg: cfg, srv: srv, log: cfg.Logger, now: time.Now, csrfKey: make([]byte, 32), logWait: logTailWait,
		telemetryWait: nodeTelemetryWait}
	if u.log == nil {
		u.log = hclog.NewNullLogger()
	}
	_, _ = rand.Read(u.csrfKey) // never fails (crypto/rand)
	mux := http.NewServeMux()
	mux.Handle("GET "+Prefix+"static/", http.StripPrefix(Prefix+"static/", http.FileServerFS(static)))
	mux.HandleFunc("GET "+Prefix+"login", u.handleLoginPage)
	mux.HandleFunc("POST "+Prefix+"login", u.handleLogin)
	mux.HandleFunc("POST "+Prefix+"logout", u.handleLogout)
	mux.HandleFunc("GET "+Prefix+"{$}", u.page(u.handleOverview))
	mux.HandleFunc("GET "+Prefix+"queue", u.page(u.handleQueue))
	mux.HandleFunc("GET "+Prefix+"jobs", u.page(u.handleJobs))
	mux.HandleFunc("GET "+Prefix+"jobs/{id}", u.page(u.handleJob))
	mux.HandleFunc("GET "+Prefix+"jobs/{id}/log", u.page(u.handleLogStream))
	mux.HandleFunc("POST "+Prefix+"jobs/{id}/cancel", u.page(u.handleCancel))
	mux.HandleFunc("GET "+Prefix+"nodes/{id}", u.page(u.handleNode))
	mux.HandleFunc("GET "+Prefix+"nodes/{id}/gpus/{index}", u.page(u.handleGPU))
	mux.HandleFunc("POST "+Prefix+"nodes/{id}/gpus/{index}/cordon", u.page(u.handleCordon))
	mux.HandleFunc("POST "+Prefix+"nodes/{id}/gpus/{index}/uncordon", u.page(u.handleCordon))
	mux.HandleFunc("GET "+Prefix+"services", u.page(u.handleServices))
	mux.HandleFunc(Prefix, u.page(func(w http.ResponseWriter, r *http.Request, v *view) {
		u.fail(w, r, v, http.StatusNotFound, errors.New("no such page: "+r.URL.Path))
	}))
	u.mux = mux
	return u
}

// ServeHTTP implements http.Handler.
func (u *UI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self'; "+
		"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	if !strings.HasPrefix(r.URL.Path, Prefix+"static/") {
		h.Set("Cache-Control", "no-store")
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead && !sameOrigin(r) {
		u.fail(w, r, &view{NodeName: u.cfg.NodeName, Now: u.now().UTC()}, http.StatusForbidden, errOrigin)
		return
	}
	u.mux.ServeHTTP(w, r)
}

// sameOrigin reports whether a request that changes something comes from
// the UI's own pages. A browser's Fetch metadata says so (Sec-Fetch-Site,
// which a page cannot set): only "same-origin" is. A page of the ingress
// on the UI's host, at another port, is "same-site", which SameSite
// cookies do not tell apart. A browser that sends no Fetch metadata is
// asked its Origin, which must be the UI's own (scheme, host and port);
// a client that sends neither is no browser, whose requests no other
// site's page can make: the CSRF token is checked for it as for all.
func sameOrigin(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" {
		return site == "same-origin"
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	scheme := "http://"
	if r.TLS != nil {
		scheme = "https://"
	}
	return strings.EqualFold(origin, scheme+r.Host)
}

// view is what every page's template gets besides its own data.
type view struct {
	Viewer   Viewer
	NodeName string
	// CSRF is the token the page's forms post.
	CSRF string
	// Refresh is how often the page refreshes itself, in seconds; 0 for
	// none.
	Refresh int
	Now     time.Time
	Title   string
	Nav     string
	// SignedIn is whether the browser holds a token (it may sign out).
	SignedIn bool
}

// page serves h to callers the server authenticates by the session
// cookie's token and who may read the cluster; others are sent to the
// login page (a GET) or refused.
func (u *UI) page(h func(http.ResponseWriter, *http.Request, *view)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		token := signedInToken(r)
		v := u.newView(w, r, token)
		req, who, err := u.srv.Authenticate(r, token)
		if err != nil {
			if r.Method == http.MethodGet {
				http.Redirect(w, r, Prefix+"login?next="+urlEscape(r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
			u.fail(w, r, v, http.StatusUnauthorized, err)
			return
		}
		v.Viewer, v.SignedIn = who, token != ""
		if !who.Can(structs.PermRead) {
			u.fail(w, r, v, http.StatusForbidden, &structs.PermissionError{Role: who.Role, Need: structs.PermRead, What: "see the cluster"})
			return
		}
		if r.Method == http.MethodPost && !u.csrfOK(r, token) {
			u.fail(w, r, v, http.StatusForbidden, errCSRF)
			return
		}
		h(w, req, v)
	}
}

// newView starts a page's view, with its session (a new one when the
// request brings none) and the CSRF token of that session and token (the
// signed-in one; "" for none).
func (u *UI) newView(w http.ResponseWriter, r *http.Request, token string) *view {
	session, ok := sessionOf(r)
	if !ok {
		session = u.newSession(w, r)
	}
	return &view{NodeName: u.cfg.NodeName, CSRF: u.csrfToken(session, token), Now: u.now().UTC()}
}

// newSession sets a new session cookie and returns its ID.
func (u *UI) newSession(w http.ResponseWriter, r *http.Request) string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	id := hex.EncodeToString(b)
	setCookie(w, r, sessionCookie, id, 0)
	return id
}

// sessionOf is the request's session ID, when it carries a valid one.
func sessionOf(r *http.Request) (string, bool) {
	c, err := r.Cookie(cookieName(r, sessionCookie))
	if err != nil || !validSession(c.Value) {
		return "", false
	}
	return c.Value, true
}

// signedInToken is the token of the request's token cookie; "" without.
func signedInToken(r *http.Request) string {
	if c, err := r.Cookie(cookieName(r, TokenCookie)); err == nil {
		return c.Value
	}
	return ""
}

func validSession(s string) bool {
	_, err := hex.DecodeString(s)
	return len(s) == 32 && err == nil
}

// csrfToken is the CSRF token of a session and the token signed in with
// it ("" before signing in): a MAC of both, so it need not be kept. A
// session ID a service planted in the browser (with a script of its own
// on the UI's host) gives its planter no token that works with the token
// of the one signed in.
func (u *UI) csrfToken(session, token string) string {
	m := hmac.New(sha256.New, u.csrfKey)
	m.Write([]byte(session))
	m.Write([]byte{0})
	m.Write([]byte(token))
	return hex.EncodeToString(m.Sum(nil))
}

// csrfOK reports whether a form carries the CSRF token of its session and
// token.
func (u *UI) csrfOK(r *http.Request, token string) bool {
	session, ok := sessionOf(r)
	if !ok {
		return false
	}
	got := r.PostFormValue(csrfField)
	return got != "" && hmac.Equal([]byte(got), []byte(u.csrfToken(session, token)))
}

// cookieName is the name of one of the UI's cookies in a request's
// scheme: __Host- prefixed over TLS.
func cookieName(r *http.Request, name string) string {
	if r.TLS != nil {
		return hostPrefix + name
	}
	return name
}

// setCookie sets one of the UI's cookies; maxAge < 0 deletes it, 0 makes
// it last for the browser's session. Over TLS it is a __Host- cookie
// (Secure, Path=/, no Domain), over plain HTTP one of Prefix.
func setCookie(w http.ResponseWriter, r *http.Request, name, value string, maxAge int) {
	c := &http.Cookie{Name: cookieName(r, name), Value: value, Path: Prefix, MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteStrictMode}
	if r.TLS != nil {
		c.Path, c.Secure = "/", true
	}
	http.SetCookie(w, c)
}

// render writes a page, or an error page if its template fails.
func (u *UI) render(w http.ResponseWriter, status int, page string, v *view, data any) {
	var buf bytes.Buffer
	if err := pages()[page].Execute(&buf, struct {
		*view
		Data any
	}{v, data}); err != nil {
		u.log.Error("render a page", "page", page, "error", err)
		http.Error(w, "the page could not be rendered: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// fail shows an error page.
func (u *UI) fail(w http.ResponseWriter, _ *http.Request, v *view, status int, err error) {
	v.Title = http.StatusText(status)
	u.render(w, status, "message", v, struct {
		Status int
		Error  string
	}{status, err.Error()})
}
