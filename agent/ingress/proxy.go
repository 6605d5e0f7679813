package ingress

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/http/httputil"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/structs"
)

// Bounds of proxying one request.
const (
	// maxTries bounds the replicas one request is tried on.
	maxTries = 3
	// defaultDialTimeout bounds connecting to a replica: long enough for
	// one lost SYN to be sent again (Linux waits 1 s), so a live replica
	// is not set aside for a lost packet, and short enough that a request
	// sent to a dead node's replica goes on to another within 1.5 s.
	defaultDialTimeout = 1500 * time.Millisecond
	// idlePerReplica is how many idle connections to one replica are kept
	// for the next requests.
	idlePerReplica = 32
	// maxNameInError bounds a requested name quoted back in a 404.
	maxNameInError = 64
	// maxReplayBody bounds the body of a request the ingress holds to
	// send it again: a body of a known length up to this is read whole
	// before the first try, a longer or chunked one streams.
	maxReplayBody = 1 << 20
)

// State is what the ingress reads of the cluster's state: the node's
// view (agent/node), a *fsm.FSM. Every call returns copies.
type State interface {
	Service(name string) (*structs.Service, bool)
	// ServiceReplicas returns the service's replica jobs, live and ended.
	ServiceReplicas(name string) []*structs.Job
	Allocs(jobID string) []*structs.Allocation
	Node(id string) (*structs.Node, bool)
	// Index is the index of the state held; it moves when the state does.
	Index() uint64
}

// Authenticator admits a request or says why not; the user API's
// authenticator (agent/server) is one. Every caller it admits holds at
// least the read permission: every role does. An error with a
// RetryAfter() time.Duration method refuses a caller that failed too
// often: it is answered 429 with Retry-After, others 401.
type Authenticator interface {
	Authenticate(r *http.Request) (*http.Request, error)
}

// Config configures a Proxy.
type Config struct {
	State State
	// Auth admits the callers of services that are not public; nil
	// admits everyone.
	Auth Authenticator
	// Credential reports whether a token (an Authorization header's,
	// its "Bearer " taken off) is one of the cluster's credentials,
	// which no replica may see, whichever caller sends it: the agent's
	// recognises ACL tokens by their shape and the cluster's API token
	// where the node knows it. nil recognises none (X-Skein-Token and an
	// Authorization that admitted the caller are dropped all the same).
	Credential func(token string) bool
	// DialTimeout bounds connecting to a replica; 0 is 1.5s.
	DialTimeout time.Duration
	Logger      hclog.Logger
}

// Proxy is the ingress's handler: it routes a request to a service by
// its Host or its path, and sends it to one of the service's endpoints.
type Proxy struct {
	cfg Config
	log hclog.Logger
	rp  *httputil.ReverseProxy
	// now is the clock of endpoints' cooldowns and graces; nil is
	// time.Now.
	now func() time.Time

	mu sync.Mutex
	// views holds, by service name, its endpoints as of an index of the
	// state; a request at a later index makes them again.
	views map[string]*view
	// held counts, by service name, the requests held for a replica of
	// a service scaled to zero (see hold).
	held map[string]*atomic.Int64
}

// New returns a Proxy.
func New(cfg Config) *Proxy {
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = defaultDialTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.Credential == nil {
		cfg.Credential = func(string) bool { return false }
	}
	p := &Proxy{cfg: cfg, log: cfg.Logger, views: map[string]*view{}, held: map[string]*atomic.Int64{}}
	dialer := &net.Dialer{Timeout: cfg.DialTimeout, KeepAlive: 30 * time.Second}
	base := &http.Transport{
		// Replicas are reached directly, never through the agent's
		// HTTP_PROXY.
		Proxy: nil,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			conn, err := dialer.DialContext(ctx, network, addr)
			if err != nil {
				return nil, &dialError{err}
			}
			return &replicaConn{Conn: conn}, nil
		},
		MaxIdleConnsPerHost: idlePerReplica,
		IdleConnTimeout:     90 * time.Second,
		// Bodies pass as the replica encoded them.
		DisableCompression: true,
	}
	p.rp = &httputil.ReverseProxy{
		Rewrite:        p.rewrite,
		ModifyResponse: dropSkeinCookies,
		Transport:      &retrier{p: p, base: base},
		FlushInterval:  -1, // every write of the replica reaches the client at once
		ErrorHandler:   p.proxyError,
		ErrorLog:       cfg.Logger.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}),
	}
	return p
}

func (p *Proxy) clock() time.Time {
	if p.now != nil {
		return p.now()
	}
	return time.Now()
}

// route is where a request goes: the service, the path the replica sees
// and the prefix taken off it.
type route struct {
	v       *view
	path    string
	rawPath string
	prefix  string
	// stripAuth drops the Authorization header, which carried the
	// caller's skein token.
	stripAuth bool
}

type routeKey struct{}

// ServeHTTP implements http.Handler. A request for service NAME is
// either Host: NAME.<anything> (when a service of that name exists; the
// path is the replica's as it is), or /NAME/rest, which reaches the
// replica as /rest (query kept). The caller must be admitted by the
// authenticator unless the service is public; a service that does not
// exist is answered 404 only to callers admitted, so that names are not
// probed. Then: no endpoint is 503 saying why, and no replica that
// answered is 502.
// errNoToken answers a request for a service that is not public that
// carries no token at all.
var errNoToken = errors.New("this service needs a token: send one as Authorization: Bearer TOKEN, or in " + api.TokenHeader +
	" (skein acl token create makes one), or make the service public")

func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rt, name := p.route(r)
	public := rt.v != nil && rt.v.svc.Spec.Public
	if !public && p.cfg.Auth != nil {
		admitted, err := p.cfg.Auth.Authenticate(r)
		var retry interface{ RetryAfter() time.Duration }
		switch {
		case errors.As(err, &retry):
			w.Header().Set("Retry-After", strconv.Itoa(int((retry.RetryAfter()+time.Second-1)/time.Second)))
			http.Error(w, err.Error(), http.StatusTooManyRequests)
			return
		case err != nil:
			w.Header().Set("WWW-Authenticate", `Bearer realm="skein"`)
			if r.Header.Get(api.TokenHeader) == "" && r.Header.Get("Authorization") == "" {
				// The authenticator's word is for a token that failed;
				// this request sent none.
				err = errNoToken
			}
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		r = admitted
		// Without X-Skein-Token the authenticator read the token in
		// Authorization: the caller's credential.
		rt.stripAuth = r.Header.Get(api.TokenHeader) == ""
	}
	switch {
	case rt.v == nil && name == "":
		http.Error(w, "no service in the request: ask for /NAME/... or Host: NAME.<domain>", http.StatusNotFound)
		return
	case rt.v == nil:
		http.Error(w, fmt.Sprintf("service %q not found", clip(name, maxNameInError)), http.StatusNotFound)
		return
	case len(rt.v.ends) == 0 && rt.v.svc.ScalesToZero():
		v, why := p.hold(r.Context(), rt.v)
		if v == nil {
			http.Error(w, why, http.StatusServiceUnavailable)
			return
		}
		rt.v = v
	case len(rt.v.ends) == 0:
		http.Error(w, rt.v.whyNone(p.clock()), http.StatusServiceUnavailable)
		return
	}
	p.rp.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), routeKey{}, &rt)))
}

// route finds the service a request is for, and the name asked for
// ("" when the request names none).
func (p *Proxy) route(r *http.Request) (route, string) {
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if label, rest, ok := strings.Cut(host, "."); ok && rest != "" && structs.ValidateServiceName(label) == nil {
		if v, found := p.view(label); found {
			return route{v: v, path: r.URL.Path, rawPath: r.URL.RawPath}, label
		}
	}
	name, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	if name == "" || structs.ValidateServiceName(name) != nil {
		return route{}, name
	}
	v, found := p.view(name)
	if !found {
		return route{}, name
	}
	rt := route{v: v, path: "/" + rest, prefix: "/" + name}
	if raw := r.URL.RawPath; raw != "" {
		if rawRest, ok := strings.CutPrefix(raw, rt.prefix); ok && (rawRest == "" || rawRest[0] == '/') {
			rt.rawPath = "/" + strings.TrimPrefix(rawRest, "/")
		}
	}
	return rt, name
}

// view returns the service's endpoints as of the state's last applied
// entry, made again only when an entry was applied since they were made.
func (p *Proxy) view(name string) (*view, bool) {
	index := p.cfg.State.Index()
	p.mu.Lock()
	defer p.mu.Unlock()
	old := p.views[name]
	if old != nil && old.index == index {
		return old, true
	}
	svc, ok := p.cfg.State.Service(name)
	if !ok {
		delete(p.views, name)
		return nil, false
	}
	v := makeView(p.cfg.State, svc, index, old)
	p.views[name] = v
	return v, true
}

// InFlight returns, by allocation ID, the requests this node's ingress
// has in flight at each endpoint of the service, and under "" those it
// holds for a replica of a service scaled to zero; nil for a service
// that does not exist.
func (p *Proxy) InFlight(service string) map[string]int64 {
	v, ok := p.view(service)
	if !ok {
		return nil
	}
	out := make(map[string]int64, len(v.ends)+1)
	for _, e := range v.ends {
		out[e.allocID] = e.inFlight.Load()
	}
	if n := p.heldCounter(service).Load(); n > 0 {
		out[""] = n
	}
	return out
}

// Holding requests for a service scaled to zero.
const (
	// holdPoll is how often a held request looks for an endpoint.
	holdPoll = 100 * time.Millisecond
	// minHold and maxHold bound how long a request is held: the
	// service's health grace (a model loading), within these.
	minHold = time.Minute
	maxHold = 10 * time.Minute
)

// hold keeps a request for a service that scales to zero and has no
// endpoint until one is there, counting it in InFlight so that the
// autoscaler sees the demand and starts a replica. It returns the view
// with the endpoint, or nil and why there is none when the request's
// context ends or it was held for the service's health grace (at least
// minHold, at most maxHold).
func (p *Proxy) hold(ctx context.Context, v *view) (*view, string) {
	name := v.svc.Name
	n := p.heldCounter(name)
	n.Add(1)
	defer n.Add(-1)
	var grace time.Duration
	if h := v.svc.Spec.Health; h != nil {
		grace = time.Duration(h.Grace)
	}
	wait := min(max(grace, minHold), maxHold)
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	tick := time.NewTicker(holdPoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, "service " + name + ": the request ended while held for a replica"
		case <-deadline.C:
			return nil, fmt.Sprintf("%s (the request was held %s for a replica)", v.whyNone(p.clock()), wait)
		case <-tick.C:
		}
		next, ok := p.view(name)
		switch {
		case !ok:
			return nil, fmt.Sprintf("service %q not found", name)
		case len(next.ends) > 0:
			return next, ""
		case !next.svc.ScalesToZero():
			return nil, next.whyNone(p.clock())
		}
		v = next
	}
}

// heldCounter is the count of requests held for the service.
func (p *Proxy) heldCounter(service string) *atomic.Int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := p.held[service]
	if n == nil {
		n = new(atomic.Int64)
		p.held[service] = n
	}
	return n
}

// rewrite makes the request the replica gets: the path without the
// service's prefix (X-Forwarded-Prefix says which), X-Forwarded-For,
// -Host and -Proto of this hop (those the client sent are dropped: the
// replica can trust them), and none of skein's credentials (see
// withoutCredentials). The replica's address is the retrier's to set.
func (p *Proxy) rewrite(pr *httputil.ProxyRequest) {
	rt := pr.In.Context().Value(routeKey{}).(*route)
	pr.Out.URL.Scheme = "http"
	pr.Out.URL.Host = rt.v.svc.Name
	pr.Out.URL.Path, pr.Out.URL.RawPath = rt.path, rt.rawPath
	pr.Out.Host = ""
	pr.SetXForwarded()
	if rt.prefix != "" {
		pr.Out.Header.Set("X-Forwarded-Prefix", rt.prefix)
	}
	withoutCredentials(pr.Out.Header, rt.stripAuth, p.cfg.Credential)
}

// withoutCredentials takes skein's credentials out of the headers of a
// request to a replica, public or not: X-Skein-Token, every cookie of
// skein's namespace (the web UI's: a browser sends them to every port of
// the UI's host, the ingress's too), and Authorization when it carried
// the caller's skein token (stripAuth: it admitted the caller) or holds
// anything credential says is one. What is left is the service's own.
func withoutCredentials(h http.Header, stripAuth bool, credential func(string) bool) {
	h.Del(api.TokenHeader)
	if auth := h.Get("Authorization"); auth != "" {
		token := strings.TrimSpace(auth)
		if scheme, rest, ok := strings.Cut(token, " "); ok && strings.EqualFold(scheme, "Bearer") {
			token = strings.TrimSpace(rest)
		}
		if stripAuth || credential(token) {
			h.Del("Authorization")
		}
	}
	if cookies := h.Values("Cookie"); len(cookies) > 0 {
		h.Del("Cookie")
		if kept := api.WithoutSkeinCookies(strings.Join(cookies, "; ")); kept != "" {
			h.Set("Cookie", kept)
		}
	}
}

// dropSkeinCookies takes out of a replica's answer every Set-Cookie of
// skein's namespace: a service may neither replace the web UI's session
// nor plant one of its own.
func dropSkeinCookies(res *http.Response) error {
	set := res.Header.Values("Set-Cookie")
	if len(set) == 0 {
		return nil
	}
	res.Header.Del("Set-Cookie")
	for _, c := range set {
		if !api.SetsSkeinCookie(c) {
			res.Header.Add("Set-Cookie", c)
		}
	}
	return nil
}

// proxyError answers a request no replica answered.
func (p *Proxy) proxyError(w http.ResponseWriter, r *http.Request, err error) {
	var pe *proxyErr
	if !errors.As(err, &pe) {
		rt := r.Context().Value(routeKey{}).(*route)
		pe = &proxyErr{status: http.StatusBadGateway, msg: "service " + rt.v.svc.Name + ": " + err.Error()}
	}
	if r.Context().Err() == nil {
		p.log.Debug("request not served", "path", r.URL.Path, "status", pe.status, "error", pe.msg)
	}
	http.Error(w, pe.msg, pe.status)
}

// proxyErr is an answer the ingress gives itself.
type proxyErr struct {
	status int
	msg    string
}

func (e *proxyErr) Error() string { return e.msg }

// dialError is a connection to a replica that could not be made: nothing
// of the request was sent.
type dialError struct{ err error }

func (e *dialError) Error() string { return e.err.Error() }
func (e *dialError) Unwrap() error { return e.err }

// retrier sends a request to an endpoint of its service, the one with
// the fewest requests in flight, and sends it again when nothing of it
// can have reached a replica: to another endpoint when the connection to
// one could not be made (a dial error), or once more, the same endpoint
// included, on a fresh connection when the kept-alive connection it was
// given had been closed by the replica before a byte of it was written
// (a replica's keep-alive timeout shorter than the ingress's). A GET, HEAD or OPTIONS
// without a body that lost its connection before any answer goes to
// another endpoint too (retriable). A request whose bytes may have
// reached a replica is otherwise never sent twice: the replica may have
// acted on it.
//
// To be sent again a body must still be there: one of a known length up
// to maxReplayBody is read whole first and given to each try; a longer or
// chunked one streams through and is sent again only when no try read a
// byte of it (always so after a dial error).
type retrier struct {
	p    *Proxy
	base http.RoundTripper
}

func (t *retrier) RoundTrip(req *http.Request) (*http.Response, error) {
	rt := req.Context().Value(routeKey{}).(*route)
	v := rt.v
	body, err := newTryBody(req)
	if err != nil {
		return nil, &proxyErr{status: http.StatusBadRequest, msg: "service " + v.svc.Name + ": reading the request's body: " + err.Error()}
	}
	tried := map[*endpoint]bool{}
	resent := false // whether a try was sent again on a fresh connection
	var last error
	for len(tried) < maxTries {
		e := v.pick(tried, t.p.clock())
		if e == nil {
			break
		}
		tried[e] = true
		if e.dial.failedAt.Load() != 0 {
			e.dial.probing.Store(true)
		}
		sent := &sendLog{}
		out := req.WithContext(httptrace.WithClientTrace(req.Context(), sent.trace()))
		u := *req.URL
		u.Host = e.addr
		out.URL = &u
		if body != nil {
			out.Body = body.reader()
		}
		e.inFlight.Add(1)
		res, err := t.base.RoundTrip(out)
		if err == nil {
			e.dial.connected()
			res.Body = counted(res.Body, e.inFlight)
			return res, nil
		}
		e.inFlight.Add(-1)
		e.dial.probing.Store(false)
		last = err
		switch {
		case req.Context().Err() != nil:
		case !resent && sent.keptAlive() && sent.sentNothing() && body.replayable():
			resent = true
			delete(tried, e)
			t.p.log.Debug("replica had closed a kept-alive connection; sending again on a fresh one", "service", v.svc.Name, "addr", e.addr, "error", err)
			continue
		case retriable(req, body, err):
			e.dial.failed(t.p.clock())
			t.p.log.Debug("replica refused a connection; trying another", "service", v.svc.Name, "addr", e.addr, "error", err)
			continue
		}
		return nil, &proxyErr{status: http.StatusBadGateway,
			msg: fmt.Sprintf("service %s: replica %s failed: %v", v.svc.Name, e.addr, err)}
	}
	return nil, &proxyErr{status: http.StatusBadGateway,
		msg: fmt.Sprintf("service %s: no replica answered (tried %d of %d): %v", v.svc.Name, len(tried), len(v.ends), last)}
}

// retriable reports whether a try that failed with err may go to another
// replica: when its connection could not be made, so nothing was sent
// (and the body, if any, is still there), or when a request without a
// body whose method is idempotent lost its connection before any answer:
// a kept-alive connection to a replica that died since, which the replica
// may have reset before or after it got the request, and which the same
// GET again cannot harm.
func retriable(req *http.Request, body *tryBody, err error) bool {
	var de *dialError
	if errors.As(err, &de) {
		return body.replayable()
	}
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
	default:
		return false
	}
	return body == nil && (errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF))
}

// tryBody is a request's body given to one try after another: held whole
// (buf), or streamed once (once). A nil *tryBody is no body.
type tryBody struct {
	buf  []byte
	once *onceBody
}

// newTryBody holds the body of req when its length is known and at most
// maxReplayBody, and streams it otherwise; nil when req has none.
func newTryBody(req *http.Request) (*tryBody, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return nil, nil
	}
	if req.ContentLength <= 0 || req.ContentLength > maxReplayBody {
		return &tryBody{once: &onceBody{rc: req.Body}}, nil
	}
	buf := make([]byte, req.ContentLength)
	if _, err := io.ReadFull(req.Body, buf); err != nil {
		return nil, err
	}
	return &tryBody{buf: buf}, nil
}

// reader is the body for the next try.
func (b *tryBody) reader() io.ReadCloser {
	if b.once != nil {
		return b.once
	}
	return io.NopCloser(bytes.NewReader(b.buf))
}

// replayable reports whether the body can be given whole to another try:
// there is none, it is held, or no try read a byte of it.
func (b *tryBody) replayable() bool {
	return b == nil || b.once == nil || !b.once.read.Load()
}

// onceBody is a streamed body handed to one try after another: it
// records whether a try read from it, and closing it is left to the
// server that owns it.
type onceBody struct {
	rc   io.ReadCloser
	read atomic.Bool
}

func (b *onceBody) Read(p []byte) (int, error) {
	b.read.Store(true)
	return b.rc.Read(p)
}

func (b *onceBody) Close() error { return nil }

// counted wraps a replica's answer so that its request leaves the
// endpoint's count when the answer is closed; an upgraded connection
// (101) stays writable.
func counted(body io.ReadCloser, n *atomic.Int64) io.ReadCloser {
	c := &countedBody{ReadCloser: body, n: n}
	if rwc, ok := body.(io.ReadWriteCloser); ok {
		return &countedConn{countedBody: c, w: rwc}
	}
	return c
}

type countedBody struct {
	io.ReadCloser
	n    *atomic.Int64
	done atomic.Bool
}

func (c *countedBody) Close() error {
	if !c.done.Swap(true) {
		c.n.Add(-1)
	}
	return c.ReadCloser.Close()
}

type countedConn struct {
	*countedBody
	w io.Writer
}

func (c *countedConn) Write(p []byte) (int, error) { return c.w.Write(p) }

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}
