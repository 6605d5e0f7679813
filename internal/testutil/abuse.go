package testutil

import (
	"bufio"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// AbuseConfig says how an Abuse attacks an HTTP server.
type AbuseConfig struct {
	// Addr is the server's host:port.
	Addr string
	// From are the loopback addresses the connections come from, taken in
	// turn; none: the kernel's choice.
	From []string
	// Idle connections send nothing; KeepAlive ones send one request with
	// no credentials, read the answer and stay open; Slowloris ones send
	// a request's headers one byte every SlowEvery, never ending them.
	Idle, KeepAlive, Slowloris int
	SlowEvery                  time.Duration
	// Redial is about how long a connection that was closed (refused,
	// timed out) waits before it is dialed again, jittered by half.
	Redial time.Duration
	// Dialing bounds the dials in flight, so that the kernel's accept
	// queue is not flooded (0: 256).
	Dialing int
}

// AbuseStats counts what an Abuse saw.
type AbuseStats struct {
	// Connected counts connections made, Refused those the server
	// answered 503 at once (a connection limit), Answered the requests of
	// keep-alive connections it answered otherwise (401, 429).
	Connected, Refused, Answered uint64
	// Open is the connections open now.
	Open int64
}

// Abuse is a client that holds connections to an HTTP server without
// using them, as a careless or hostile one does, and dials each again once
// the server closes it: idle connections, idle keep-alive connections and
// slowloris headers.
type Abuse struct {
	cfg                          AbuseConfig
	stop                         chan struct{}
	stopped                      sync.Once
	wg                           sync.WaitGroup
	dialing                      chan struct{}
	connected, refused, answered atomic.Uint64
	open                         atomic.Int64
	mu                           sync.Mutex
	conns                        map[net.Conn]struct{}
}

// StartAbuse starts an attack; Stop ends it.
func StartAbuse(cfg AbuseConfig) *Abuse {
	if cfg.Dialing == 0 {
		cfg.Dialing = 256
	}
	if cfg.SlowEvery == 0 {
		cfg.SlowEvery = 100 * time.Millisecond
	}
	a := &Abuse{cfg: cfg, stop: make(chan struct{}), dialing: make(chan struct{}, cfg.Dialing), conns: map[net.Conn]struct{}{}}
	slot := 0
	for _, kind := range []struct {
		n    int
		hold func(net.Conn)
	}{{cfg.Idle, a.idle}, {cfg.KeepAlive, a.keepAlive}, {cfg.Slowloris, a.slowloris}} {
		for range kind.n {
			from := ""
			if len(cfg.From) > 0 {
				from = cfg.From[slot%len(cfg.From)]
			}
			slot++
			a.wg.Add(1)
			go a.run(from, kind.hold)
		}
	}
	return a
}

// Stats returns the counts so far.
func (a *Abuse) Stats() AbuseStats {
	return AbuseStats{Connected: a.connected.Load(), Refused: a.refused.Load(), Answered: a.answered.Load(), Open: a.open.Load()}
}

// Stop closes every connection and waits for the attack to end; calls
// after the first return at once.
func (a *Abuse) Stop() {
	a.stopped.Do(func() {
		close(a.stop)
		a.mu.Lock()
		for c := range a.conns {
			c.Close()
		}
		a.mu.Unlock()
		a.wg.Wait()
	})
}

// run keeps one connection from from open, held by hold, until Stop.
func (a *Abuse) run(from string, hold func(net.Conn)) {
	defer a.wg.Done()
	d := net.Dialer{Timeout: 5 * time.Second}
	if from != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(from)}
	}
	for {
		if c := a.dial(&d); c != nil {
			hold(c)
			a.forget(c)
		}
		select {
		case <-a.stop:
			return
		case <-time.After(a.cfg.Redial/2 + rand.N(a.cfg.Redial+1)):
		}
	}
}

func (a *Abuse) dial(d *net.Dialer) net.Conn {
	select {
	case <-a.stop:
		return nil
	case a.dialing <- struct{}{}:
	}
	c, err := d.Dial("tcp", a.cfg.Addr)
	<-a.dialing
	if err != nil {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	select {
	case <-a.stop:
		c.Close()
		return nil
	default:
	}
	a.conns[c] = struct{}{}
	a.connected.Add(1)
	a.open.Add(1)
	return c
}

func (a *Abuse) forget(c net.Conn) {
	c.Close()
	a.mu.Lock()
	delete(a.conns, c)
	a.mu.Unlock()
	a.open.Add(-1)
}

// idle sends nothing and waits for the server to close the connection.
func (a *Abuse) idle(c net.Conn) {
	a.waitClosed(bufio.NewReaderSize(c, 16))
}

// keepAlive sends one request without credentials, reads the answer and
// keeps the connection open until the server closes it.
func (a *Abuse) keepAlive(c net.Conn) {
	if _, err := io.WriteString(c, "GET /v1/status HTTP/1.1\r\nHost: skein\r\n\r\n"); err != nil {
		return
	}
	r := bufio.NewReaderSize(c, 512)
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		return
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode == http.StatusServiceUnavailable {
		a.refused.Add(1)
		return
	}
	a.answered.Add(1)
	a.waitClosed(r)
}

// slowloris sends a request's headers a byte at a time, never ending
// them, until the server closes the connection.
func (a *Abuse) slowloris(c net.Conn) {
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		a.waitClosed(bufio.NewReaderSize(c, 16))
	}()
	head := "GET /v1/status HTTP/1.1\r\nHost: skein\r\nX-Slow: "
	tick := time.NewTicker(a.cfg.SlowEvery)
	defer tick.Stop()
	for i := 0; ; i++ {
		b := byte('a')
		if i < len(head) {
			b = head[i]
		}
		if _, err := c.Write([]byte{b}); err != nil {
			break
		}
		select {
		case <-closed:
			return
		case <-tick.C:
		}
	}
	<-closed
}

// waitClosed reads until the server closes the connection; a refusal it
// reads on the way is counted.
func (a *Abuse) waitClosed(r *bufio.Reader) {
	if b, err := r.Peek(12); err == nil && string(b) == "HTTP/1.1 503" {
		a.refused.Add(1)
	}
	_, _ = io.Copy(io.Discard, r)
}
