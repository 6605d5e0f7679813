package api

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// How long a client waits on an agent before it turns to another.
const (
	// DefaultHedgeAfter is how long a request that may be sent twice
	// waits for an agent's answer before it is sent to the next agent
	// too; the first answer is taken. A node that froze (SIGSTOP, a hung
	// disk or kernel) still completes connections, in its kernel, and
	// then answers nothing: only time tells it from a slow one.
	DefaultHedgeAfter = 500 * time.Millisecond
	// DefaultAnswerWait is how long the CLI waits, in all, for the
	// headers of an answer (a stream's body may then go on for as long
	// as it has something to say).
	DefaultAnswerWait = 30 * time.Second
	// connectTimeout bounds one connection to an agent, and its TLS
	// handshake: a dead host answers nothing at all.
	connectTimeout = 3 * time.Second
	// pingPath is what a write that must reach one agent once asks
	// first, to find one that answers: it is cheap, takes no token and
	// is answered by the agent itself.
	pingPath = "/v1/acl/whoami"
)

// sendMode says how a request may be sent to a client's agents.
type sendMode int

const (
	// sendAny is for a read, or a write whose repeat does nothing more
	// (a submission with its request ID): when the agent asked has not
	// answered within hedgeAfter, or cannot be reached, it is sent to
	// the next one too, and the first answer is taken.
	sendAny sendMode = iota
	// sendOnce is for a write that must be done once: every agent is
	// pinged as sendAny sends, and the write goes to the one that
	// answered, alone; it moves on only when it could not connect.
	sendOnce
	// sendPinned is for a request about the agent it is sent to (join,
	// leave): that agent, the first named, alone.
	sendPinned
)

// modeOf is how a request is sent unless its call says otherwise: a read
// as sendAny, a write as sendOnce.
func modeOf(method string) sendMode {
	if method == http.MethodGet || method == http.MethodHead {
		return sendAny
	}
	return sendOnce
}

// newTransport is the client's default transport: Go's, with connections
// and handshakes bounded by connectTimeout.
func newTransport() *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = (&net.Dialer{Timeout: connectTimeout, KeepAlive: 30 * time.Second}).DialContext
	tr.TLSHandshakeTimeout = connectTimeout
	return tr
}

// WithTimeouts returns a copy of the client that sends a request that may
// be sent twice to the next agent too after hedge without an answer, and
// waits at most answer in all for an answer's headers (0: as long as the
// request's context allows).
func (c *Client) WithTimeouts(hedge, answer time.Duration) *Client {
	cp := *c
	cp.hedgeAfter, cp.answerWait = hedge, answer
	return &cp
}

// order is the indices of the client's agents, the one that answered last
// first, then the others as named.
func (c *Client) order() []int {
	first := int(c.pref.Load()) % len(c.bases)
	out := make([]int, 0, len(c.bases))
	for i := range c.bases {
		out = append(out, (first+i)%len(c.bases))
	}
	return out
}

// passOver makes the agent at host the last asked from now on, when it
// is the first: FollowEvents moves on from a stream that broke.
func (c *Client) passOver(host string) {
	first := int(c.pref.Load()) % len(c.bases)
	if c.bases[first].Host == host {
		c.pref.CompareAndSwap(int32(first), int32((first+1)%len(c.bases)))
	}
}

// sendOnce performs a request, once on each agent at most, as its mode
// allows, and turns transport failures and non-2xx answers into errors
// that say what to do.
func (c *Client) sendOnce(ctx context.Context, mode sendMode, method, path string, q url.Values, body []byte) (*http.Response, error) {
	var (
		resp *http.Response
		err  error
	)
	switch {
	case mode == sendPinned || len(c.bases) == 1:
		resp, err = c.sendBounded(ctx, c.bases[0], method, path, q, body)
		if err != nil {
			err = reachError(c.tlsSet, []tryError{{c.bases[0], err}})
		}
	case mode == sendOnce:
		resp, err = c.sendToOne(ctx, method, path, q, body)
	default:
		resp, err = c.hedged(ctx, method, path, q, body)
	}
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	err = ReadError(resp)
	if resp.StatusCode == http.StatusBadRequest && resp.Request.URL.Scheme == "http" &&
		strings.Contains(err.Error(), "HTTP request to an HTTPS server") { // what Go's TLS server answers to plaintext
		host := resp.Request.URL.Host
		return nil, fmt.Errorf("the skein agent at %s serves https: use https://%s in --addr or SKEIN_ADDR", host, host)
	}
	return nil, err
}

// errNoAnswer is an agent that took the connection and did not answer in
// time.
var errNoAnswer = errors.New("no answer")

// sendBounded sends a request to one agent, waiting for its answer's
// headers at most answerWait (when set).
func (c *Client) sendBounded(ctx context.Context, base *url.URL, method, path string, q url.Values, body []byte) (*http.Response, error) {
	if c.answerWait <= 0 {
		return c.sendTo(ctx, base, method, path, q, body)
	}
	actx, cancel := context.WithCancel(ctx)
	var late atomic.Bool
	timer := time.AfterFunc(c.answerWait, func() { late.Store(true); cancel() })
	resp, err := c.sendTo(actx, base, method, path, q, body)
	timer.Stop()
	if err != nil {
		cancel()
		if late.Load() && ctx.Err() == nil {
			return nil, fmt.Errorf("%w in %s", errNoAnswer, c.answerWait)
		}
		return nil, err
	}
	resp.Body = &cancelBody{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

// cancelBody ends its request's context once its body is closed.
type cancelBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

// tryError is why one agent gave no answer.
type tryError struct {
	base *url.URL
	err  error
}

// result is what one agent's try gave.
type result struct {
	k    int // its place in the order tried
	resp *http.Response
	err  error
}

// hedged sends a request to the first agent of the order, to the next
// one too when that has not answered within hedgeAfter or failed, and so
// on, and returns the first answer: the others are abandoned. It gives
// up when every agent failed, or answerWait (when set) has passed.
func (c *Client) hedged(ctx context.Context, method, path string, q url.Values, body []byte) (*http.Response, error) {
	order := c.order()
	results := make(chan result, len(order))
	cancels := make([]context.CancelFunc, 0, len(order))
	start := func() {
		k := len(cancels)
		actx, cancel := context.WithCancel(ctx)
		cancels = append(cancels, cancel)
		go func() {
			resp, err := c.sendTo(actx, c.bases[order[k]], method, path, q, body)
			results <- result{k, resp, err}
		}()
	}
	// abandon ends every try but keep's (-1: all) and closes what the
	// others still answer.
	pending := 0
	abandon := func(keep int) {
		for k, cancel := range cancels {
			if k != keep {
				cancel()
			}
		}
		go func(n int) {
			for range n {
				if r := <-results; r.resp != nil && r.k != keep {
					r.resp.Body.Close()
				}
			}
		}(pending)
	}
	start()
	pending++
	hedge := time.NewTimer(c.hedgeAfter)
	defer hedge.Stop()
	var deadline <-chan time.Time
	if c.answerWait > 0 {
		t := time.NewTimer(c.answerWait)
		defer t.Stop()
		deadline = t.C
	}
	failed := make([]error, len(order))
	for {
		select {
		case r := <-results:
			pending--
			if r.err == nil {
				abandon(r.k)
				c.pref.Store(int32(order[r.k]))
				r.resp.Body = &cancelBody{ReadCloser: r.resp.Body, cancel: cancels[r.k]}
				return r.resp, nil
			}
			failed[r.k] = r.err
			if isTrustError(r.err) {
				// Not this agent's state but the client's setup: the
				// others would say the same.
				abandon(-1)
				return nil, reachError(c.tlsSet, []tryError{{c.bases[order[r.k]], r.err}})
			}
			if len(cancels) < len(order) {
				start()
				pending++
				hedge.Reset(c.hedgeAfter)
				continue
			}
			if pending == 0 {
				return nil, reachError(c.tlsSet, tries(c, order, failed))
			}
		case <-hedge.C:
			if len(cancels) < len(order) {
				start()
				pending++
				hedge.Reset(c.hedgeAfter)
			}
		case <-deadline:
			abandon(-1)
			for k := range cancels {
				if failed[k] == nil {
					failed[k] = fmt.Errorf("%w in %s", errNoAnswer, c.answerWait)
				}
			}
			return nil, reachError(c.tlsSet, tries(c, order[:len(cancels)], failed))
		case <-ctx.Done():
			abandon(-1)
			return nil, ctx.Err()
		}
	}
}

// tries pairs the agents of order with their errors, those that have one.
func tries(c *Client, order []int, failed []error) []tryError {
	var out []tryError
	for k, i := range order {
		if failed[k] != nil {
			out = append(out, tryError{c.bases[i], failed[k]})
		}
	}
	return out
}

// sendToOne sends a write that must be done once: it finds an agent that
// answers (a hedged ping) and sends the write there alone. Only when the
// write could not even connect (nothing was sent) does it try the next.
func (c *Client) sendToOne(ctx context.Context, method, path string, q url.Values, body []byte) (*http.Response, error) {
	ping, err := c.hedged(ctx, http.MethodGet, pingPath, nil, nil)
	if err != nil {
		return nil, err
	}
	ping.Body.Close()
	var failed []tryError
	for _, i := range c.order() { // the one that answered the ping first
		resp, err := c.sendBounded(ctx, c.bases[i], method, path, q, body)
		if err == nil {
			return resp, nil
		}
		failed = append(failed, tryError{c.bases[i], err})
		if !isDialError(err) {
			break
		}
	}
	err = reachError(c.tlsSet, failed)
	if last := failed[len(failed)-1].err; errors.Is(last, errNoAnswer) || !isDialError(last) && ctx.Err() == nil {
		err = fmt.Errorf("%w: it was sent, and may have been done: look before you send it again", err)
	}
	return nil, err
}

// isDialError reports whether err is a failure to connect: nothing was
// sent.
func isDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// isTrustError reports whether err is a certificate the client does not
// trust.
func isTrustError(err error) bool {
	var (
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
	)
	return errors.As(err, &unknown) || errors.As(err, &hostname)
}

// reachError says why no agent answered, and what to do: each agent's
// failure in turn.
func reachError(tlsSet bool, failed []tryError) error {
	if len(failed) == 1 {
		return reachOne(tlsSet, failed[0].base, failed[0].err)
	}
	msgs := make([]string, len(failed))
	var wrapped []error
	for i, f := range failed {
		msgs[i] = reachOne(tlsSet, f.base, f.err).Error()
		wrapped = append(wrapped, f.err)
	}
	return &multiReach{msg: strings.Join(msgs, "; "), errs: wrapped}
}

// multiReach is the failures of several agents, told as one.
type multiReach struct {
	msg  string
	errs []error
}

func (e *multiReach) Error() string   { return e.msg }
func (e *multiReach) Unwrap() []error { return e.errs }

// reachOne says why the agent at where gave no answer.
func reachOne(tlsSet bool, where *url.URL, err error) error {
	var (
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
	)
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("cannot reach a skein agent at %s: connection refused (is `skein agent` running? set --addr or SKEIN_ADDR)", where)
	case errors.Is(err, errNoAnswer):
		return fmt.Errorf("the skein agent at %s took the connection but gave %w (is its machine frozen, or its disk hung? set several addresses, separated by commas, in --addr or SKEIN_ADDR)", where, err)
	case !tlsSet && (errors.As(err, &unknown) || errors.As(err, &hostname)):
		// Go checks the name before the chain: a cluster certificate
		// names a node ID, so either failure says the same.
		return fmt.Errorf("cannot verify the skein agent at %s with the system's roots (a skein cluster's certificates are signed by its own CA and name node IDs): "+
			"set SKEIN_CACERT or --ca-cert to the file `skein ca export` writes (%w)", where, err)
	case errors.As(err, &unknown):
		return fmt.Errorf("cannot verify the skein agent at %s: its certificate is not signed by the CA bundle given (--ca-cert or SKEIN_CACERT): "+
			"is the bundle this cluster's? (%w)", where, err)
	}
	return fmt.Errorf("cannot reach a skein agent at %s: %w", where, err)
}

// Only returns a copy of the client for the one of its agents at host
// (host:port, as LogStream.Host names it), or nil when it has none there:
// to ask whether the agent that sends a stream still answers.
func (c *Client) Only(host string) *Client {
	for _, b := range c.bases {
		if b.Host == host {
			cp := *c
			cp.bases, cp.pref = []*url.URL{b}, new(atomic.Int32)
			return &cp
		}
	}
	return nil
}
