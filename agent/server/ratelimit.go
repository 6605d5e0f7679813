package server

import (
	"container/list"
	"fmt"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Failed authentications are limited per client address (agent/DESIGN.md,
// "Bounded API"): a client may fail authFailBurst times in a row, and one
// more time every authFailEvery after that. A client with none left is
// answered 429 with Retry-After, without its credential being looked at,
// until it has one again. Requests from the cluster's nodes are never
// limited: a node forwards other clients' requests, and its own must
// never wait.
const (
	authFailBurst = 10
	authFailEvery = 3 * time.Second
	// authFailTracked bounds the client addresses remembered (about 100
	// bytes each); past it, the one that failed least recently is
	// forgotten.
	authFailTracked = 10000
)

// failLimiter counts failed authentications per client address.
type failLimiter struct {
	burst int
	every time.Duration
	max   int
	// byNode reports whether a request comes from one of the cluster's
	// nodes; it is asked only about clients that failed, and must not
	// compare a secret the request carries.
	byNode func(*http.Request) bool
	now    func() time.Time
	log    hclog.Logger

	mu      sync.Mutex
	clients map[netip.Addr]*list.Element
	// order holds *failures, the one that failed least recently first.
	order *list.List
	// limited counts the clients that ran out since the last log line.
	limited    int
	lastLogged time.Time
}

// failures is one client's record. Each failure pushes due on by every;
// the client is refused while due is more than burst-1 failures ahead of
// now, and forgotten once due has passed.
type failures struct {
	client netip.Addr
	due    time.Time
}

func newFailLimiter(byNode func(*http.Request) bool, log hclog.Logger) *failLimiter {
	return &failLimiter{burst: authFailBurst, every: authFailEvery, max: authFailTracked, byNode: byNode,
		now: time.Now, log: log, clients: map[netip.Addr]*list.Element{}, order: list.New()}
}

// refuse answers 429 and returns true when r's client has no failure left.
func (f *failLimiter) refuse(w http.ResponseWriter, r *http.Request) bool {
	client := f.clientOf(r)
	wait := f.wait(client)
	if wait <= 0 || f.exempt(r) {
		return false
	}
	secs := int((wait + time.Second - 1) / time.Second)
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	writeError(w, http.StatusTooManyRequests,
		fmt.Errorf("too many failed authentications from %s: try again in %ds", client, secs))
	return true
}

// failed charges one failed authentication to r's client.
func (f *failLimiter) failed(r *http.Request) {
	if !f.exempt(r) {
		f.fail(f.clientOf(r))
	}
}

// clientOf is the client r's failures count against: the address it came
// from, or, for a request a worker passed on (ProxiedHeader, from a node),
// the user's, which the worker names last in X-Forwarded-For. A worker
// checks no token itself, so its users' failures must count here, each
// against its own address.
func (f *failLimiter) clientOf(r *http.Request) netip.Addr {
	if r.Header.Get(ProxiedHeader) != "" && f.byNode(r) {
		fwd := r.Header.Values("X-Forwarded-For")
		if n := len(fwd); n > 0 {
			last := fwd[n-1]
			last = strings.TrimSpace(last[strings.LastIndexByte(last, ',')+1:])
			if ip, err := netip.ParseAddr(last); err == nil {
				return clientKey(ip.Unmap())
			}
		}
	}
	return requestClient(r)
}

// exempt reports whether r is a node's own request, which no failure is
// charged to (not one it passed on for a user).
func (f *failLimiter) exempt(r *http.Request) bool {
	return r.Header.Get(ProxiedHeader) == "" && f.byNode(r)
}

// limit serves a request through serve, charging a failure to its client
// when serve answers with the failure code, and refusing it at once when
// the client has none left.
func (f *failLimiter) limit(w http.ResponseWriter, r *http.Request, failure int, serve func(http.ResponseWriter)) {
	if f.refuse(w, r) {
		return
	}
	sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
	serve(sw)
	if sw.status == failure {
		f.failed(r)
	}
}

// wait is how long client must wait before it may try again; 0 or less
// when it may now.
func (f *failLimiter) wait(client netip.Addr) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.clients[client]
	if !ok {
		return 0
	}
	return e.Value.(*failures).due.Sub(f.now()) - time.Duration(f.burst-1)*f.every
}

// fail charges a failure to client.
func (f *failLimiter) fail(client netip.Addr) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	f.forgetPaid(now)
	e, ok := f.clients[client]
	if !ok {
		if f.order.Len() >= f.max {
			oldest := f.order.Front()
			delete(f.clients, oldest.Value.(*failures).client)
			f.order.Remove(oldest)
		}
		e = f.order.PushBack(&failures{client: client, due: now})
		f.clients[client] = e
	}
	rec := e.Value.(*failures)
	rec.due = later(rec.due, now).Add(f.every)
	f.order.MoveToBack(e)
	if rec.due.Sub(now) > time.Duration(f.burst-1)*f.every {
		// Out of failures: refused from now on, so this is the last
		// failure charged until it may try again.
		f.limited++
		if now.Sub(f.lastLogged) >= refusalLogEvery {
			f.log.Warn("too many failed authentications; refusing clients for a while", "clients", f.limited, "last", client.String())
			f.limited, f.lastLogged = 0, now
		}
	}
}

// forgetPaid drops the records at the front of the order (those that
// failed least recently) whose failures have all been paid for. One paid
// for behind one that is not waits its turn: the cap bounds them all.
func (f *failLimiter) forgetPaid(now time.Time) {
	for e := f.order.Front(); e != nil; e = f.order.Front() {
		rec := e.Value.(*failures)
		if rec.due.After(now) {
			return
		}
		delete(f.clients, rec.client)
		f.order.Remove(e)
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// requestClient is the client address a request is counted under.
func requestClient(r *http.Request) netip.Addr { return clientKey(requestIP(r)) }

// requestIP is the address a request came from; the zero Addr when that
// is not an IP address.
func requestIP(r *http.Request) netip.Addr {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}
