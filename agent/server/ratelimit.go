package server

import (
	"container/list"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/skein-dev/skein/trust"
)

// Failed authentications are limited by who fails as well as by where
// from (agent/DESIGN.md, "Bounded API"), so that one client's bad tokens
// cannot lock out another's good one behind the same address (a NAT, a
// login node, a notebook server):
//
//   - Each failure is charged to the token presented (by a fingerprint,
//     a keyed hash of it that only this process can make) and to the
//     client's address. Either may fail authFailBurst times in a row,
//     and once more every authFailEvery after that; one with none left
//     is answered 429 with Retry-After, without its credential being
//     looked at.
//   - A token that authenticated on this node before (known good, the
//     last authGoodTracked of them) passes its address's limit: only its
//     own failures (a token revoked since) hold it back, and they are
//     charged to it alone, not to its address.
//   - An ACL token's secret cannot be guessed (256 random bits), so one
//     from an address out of failures is still checked, at once (without
//     waiting for a token not applied here yet): a colleague's new token
//     works from the address a stranger failed from. Only the cluster's
//     API token, which may be short, is held to its address's limit.
//
// Requests from the cluster's nodes are never limited: a node forwards
// other clients' requests, and its own must never wait.
const (
	authFailBurst = 10
	authFailEvery = 3 * time.Second
	// authFailTracked bounds the client addresses, and apart from them
	// the tokens, remembered (about 100 bytes each); past it, the one
	// that failed least recently is forgotten.
	authFailTracked = 10000
	// authGoodTracked bounds the tokens remembered as good; past it, the
	// one that authenticated least recently is forgotten.
	authGoodTracked = 10000
)

// failLimiter counts failed authentications per client address and per
// token.
type failLimiter struct {
	burst int
	every time.Duration
	// byNode reports whether a request comes from one of the cluster's
	// nodes; it is asked only about clients that failed, and must not
	// compare a secret the request carries.
	byNode func(*http.Request) bool
	// unguessable reports whether a token's secret is too long to
	// guess; nil is trust.LooksLikeACLToken.
	unguessable func(string) bool
	now         func() time.Time
	log         hclog.Logger
	// key makes the tokens' fingerprints.
	key []byte

	mu      sync.Mutex
	clients *failures[netip.Addr]
	tokens  *failures[fingerprint]
	good    *lru[fingerprint]
	// limited counts the clients and tokens that ran out since the last
	// log line.
	limited    int
	lastLogged time.Time
}

func newFailLimiter(byNode func(*http.Request) bool, log hclog.Logger) *failLimiter {
	key := make([]byte, 32)
	_, _ = rand.Read(key) // never fails (crypto/rand)
	return &failLimiter{burst: authFailBurst, every: authFailEvery, byNode: byNode, unguessable: trust.LooksLikeACLToken,
		now: time.Now, log: log, key: key, clients: newFailures[netip.Addr](authFailTracked),
		tokens: newFailures[fingerprint](authFailTracked), good: newLRU[fingerprint](authGoodTracked)}
}

// fingerprint names a token in the limiter's memory: a MAC of it under the
// limiter's key, which nobody outside can make or reverse.
type fingerprint [16]byte

// attempt is one request's authentication as the limiter sees it.
type attempt struct {
	// exempt is a node's own request, never limited.
	exempt bool
	client netip.Addr
	// hasToken is whether the request presents a token, token its
	// fingerprint.
	hasToken bool
	token    fingerprint
	// good is whether the token authenticated on this node before.
	good bool
	// unguessable is whether its secret cannot be guessed.
	unguessable bool
	// quick is an unguessable token checked though its address is out of
	// failures: at once, and its failure answered 429.
	quick bool
}

// attempt is the limiter's view of r, whose credential is requestToken's.
func (f *failLimiter) attempt(r *http.Request) *attempt {
	a := &attempt{exempt: f.exempt(r)}
	if a.exempt {
		return a
	}
	a.client = f.clientOf(r)
	if tok := requestToken(r); tok != "" {
		m := hmac.New(sha256.New, f.key)
		m.Write([]byte(tok))
		copy(a.token[:], m.Sum(nil))
		a.hasToken, a.unguessable = true, f.unguessable(tok)
		f.mu.Lock()
		a.good = f.good.has(a.token)
		f.mu.Unlock()
	}
	return a
}

// refusal is how long a must wait before its credential is looked at, and
// why; 0 when it may go on now (a.quick then says how).
func (f *failLimiter) refusal(a *attempt) (time.Duration, string) {
	if a.exempt {
		return 0, ""
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	if a.hasToken {
		if wait := f.tokens.wait(a.token, now, f.burst, f.every); wait > 0 {
			return wait, fmt.Sprintf("too many failed authentications with this token: try again in %ds", seconds(wait))
		}
		if a.good {
			return 0, ""
		}
	}
	wait := f.clients.wait(a.client, now, f.burst, f.every)
	switch {
	case wait <= 0:
		return 0, ""
	case a.unguessable:
		a.quick = true
		return 0, ""
	}
	return wait, fmt.Sprintf("too many failed authentications from %s: try again in %ds", a.client, seconds(wait))
}

// clientWait is how long a's address must wait, and why.
func (f *failLimiter) clientWait(a *attempt) (time.Duration, string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	wait := max(f.clients.wait(a.client, f.now(), f.burst, f.every), time.Second)
	return wait, fmt.Sprintf("too many failed authentications from %s: try again in %ds", a.client, seconds(wait))
}

// refuse answers 429 and returns true when a may not be looked at now.
func (f *failLimiter) refuse(w http.ResponseWriter, a *attempt) bool {
	wait, why := f.refusal(a)
	if wait <= 0 {
		return false
	}
	tooMany(w, wait, why)
	return true
}

// tooMany answers 429 with Retry-After.
func tooMany(w http.ResponseWriter, wait time.Duration, why string) {
	w.Header().Set("Retry-After", strconv.Itoa(seconds(wait)))
	writeError(w, http.StatusTooManyRequests, fmt.Errorf("%s", why))
}

func seconds(d time.Duration) int { return int((d + time.Second - 1) / time.Second) }

// failed charges a's failure: to its token, and to its address unless the
// token was known good (one revoked since: its user's, not a guess) or
// was checked only because it cannot be guessed.
func (f *failLimiter) failed(a *attempt) {
	if a.exempt {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	if a.hasToken {
		f.good.remove(a.token)
		if f.tokens.fail(a.token, now, f.burst, f.every) {
			f.ranOut(now, "a token")
		}
	}
	if !a.good && !a.quick && f.clients.fail(a.client, now, f.burst, f.every) {
		f.ranOut(now, a.client.String())
	}
}

// succeeded remembers a's token as good.
func (f *failLimiter) succeeded(a *attempt) {
	if a.exempt || !a.hasToken {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.good.add(a.token)
}

// ranOut logs, at most every refusalLogEvery, that clients or tokens ran
// out of failures; last names the latest.
func (f *failLimiter) ranOut(now time.Time, last string) {
	f.limited++
	if now.Sub(f.lastLogged) >= refusalLogEvery {
		f.log.Warn("too many failed authentications; refusing clients or tokens for a while", "count", f.limited, "last", last)
		f.limited, f.lastLogged = 0, now
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
// the client has none left. The credential is in the body (a join token),
// so only the address counts.
func (f *failLimiter) limit(w http.ResponseWriter, r *http.Request, failure int, serve func(http.ResponseWriter)) {
	a := &attempt{exempt: f.exempt(r), client: f.clientOf(r)}
	if f.refuse(w, a) {
		return
	}
	sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
	serve(sw)
	if sw.status == failure {
		f.failed(a)
	}
}

// authenticate checks r with auth within the limits: it returns the
// request to serve, or an error, a *RetryError when the caller must wait.
func (f *failLimiter) authenticate(auth Authenticator, r *http.Request) (*http.Request, error) {
	a := f.attempt(r)
	if wait, why := f.refusal(a); wait > 0 {
		return nil, &RetryError{Wait: wait, Msg: why}
	}
	checked := r
	if a.quick {
		checked = r.WithContext(context.WithValue(r.Context(), quickKey{}, true))
	}
	req, err := auth.Authenticate(checked)
	if err != nil {
		f.failed(a)
		if a.quick {
			wait, why := f.clientWait(a)
			return nil, &RetryError{Wait: wait, Msg: why}
		}
		return nil, err
	}
	f.succeeded(a)
	return req, nil
}

// RetryError refuses a caller that failed to authenticate too often: it
// may try again after Wait.
type RetryError struct {
	Wait time.Duration
	Msg  string
}

func (e *RetryError) Error() string { return e.Msg }

// RetryAfter is how long the caller must wait.
func (e *RetryError) RetryAfter() time.Duration { return e.Wait }

// quickKey marks, in a request's context, a credential checked at once:
// an ACL token not applied here yet is not waited for.
type quickKey struct{}

func quickCheck(ctx context.Context) bool {
	q, _ := ctx.Value(quickKey{}).(bool)
	return q
}

// failures is the failure records of keys of one kind, bounded. Each
// failure pushes a key's due on by every; the key is refused while due is
// more than burst-1 failures ahead of now, and forgotten once due has
// passed.
type failures[K comparable] struct {
	max  int
	keys map[K]*list.Element
	// order holds *record[K], the one that failed least recently first.
	order *list.List
}

type record[K comparable] struct {
	key K
	due time.Time
}

func newFailures[K comparable](max int) *failures[K] {
	return &failures[K]{max: max, keys: map[K]*list.Element{}, order: list.New()}
}

// wait is how long k must wait before it may try again; 0 or less when it
// may now.
func (b *failures[K]) wait(k K, now time.Time, burst int, every time.Duration) time.Duration {
	e, ok := b.keys[k]
	if !ok {
		return 0
	}
	return e.Value.(*record[K]).due.Sub(now) - time.Duration(burst-1)*every
}

// fail charges a failure to k; it returns true when k has none left.
func (b *failures[K]) fail(k K, now time.Time, burst int, every time.Duration) bool {
	b.forgetPaid(now)
	e, ok := b.keys[k]
	if !ok {
		if b.order.Len() >= b.max {
			oldest := b.order.Front()
			delete(b.keys, oldest.Value.(*record[K]).key)
			b.order.Remove(oldest)
		}
		e = b.order.PushBack(&record[K]{key: k, due: now})
		b.keys[k] = e
	}
	rec := e.Value.(*record[K])
	rec.due = later(rec.due, now).Add(every)
	b.order.MoveToBack(e)
	return rec.due.Sub(now) > time.Duration(burst-1)*every
}

// forgetPaid drops the records at the front of the order (those that
// failed least recently) whose failures have all been paid for. One paid
// for behind one that is not waits its turn: the cap bounds them all.
func (b *failures[K]) forgetPaid(now time.Time) {
	for e := b.order.Front(); e != nil; e = b.order.Front() {
		rec := e.Value.(*record[K])
		if rec.due.After(now) {
			return
		}
		delete(b.keys, rec.key)
		b.order.Remove(e)
	}
}

func (b *failures[K]) len() int { return b.order.Len() }

// lru is a bounded set that forgets the key added least recently.
type lru[K comparable] struct {
	max   int
	keys  map[K]*list.Element
	order *list.List // of K, least recent first
}

func newLRU[K comparable](max int) *lru[K] {
	return &lru[K]{max: max, keys: map[K]*list.Element{}, order: list.New()}
}

func (s *lru[K]) has(k K) bool {
	_, ok := s.keys[k]
	return ok
}

func (s *lru[K]) add(k K) {
	if e, ok := s.keys[k]; ok {
		s.order.MoveToBack(e)
		return
	}
	if s.order.Len() >= s.max {
		oldest := s.order.Front()
		delete(s.keys, oldest.Value.(K))
		s.order.Remove(oldest)
	}
	s.keys[k] = s.order.PushBack(k)
}

func (s *lru[K]) remove(k K) {
	if e, ok := s.keys[k]; ok {
		delete(s.keys, k)
		s.order.Remove(e)
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
