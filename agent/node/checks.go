package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/go-hclog"

	"github.com/skein-dev/skein/agent/runner"
	"github.com/skein-dev/skein/structs"
)

// Bounds of a replica's health checks.
const (
	// minCheckInterval is the shortest interval a check runs at, whatever
	// its spec says: a node does not spin on a replica.
	minCheckInterval = 100 * time.Millisecond
	// maxHealthReason bounds the reason a health report carries.
	maxHealthReason = 200
	// checkBodyRead is how much of an HTTP check's answer is read, so
	// that the replica is not cut off mid-write.
	checkBodyRead = 4 << 10
)

// replicaCheckLoop keeps one health check running for every service
// replica on this node that has one (the service's Spec.Health) and runs:
// it looks at the node's live allocations at every applied entry, starts
// a check for a replica that began running and stops the check of one
// that ended or is asked to stop. Its cost per entry follows the node's
// live allocations: the job and service of each are looked up once.
func (n *Node) replicaCheckLoop() {
	defer n.checks.stopAll()
	// targets caches, by allocation, what to check of it; nil for a live
	// allocation that is no replica or has no health check.
	targets := map[string]*checkTarget{}
	for {
		_, changed := n.view.Watch()
		n.checks.sync(n.ctx, n.checkTargets(targets))
		select {
		case <-n.ctx.Done():
			return
		case <-changed:
		}
	}
}

// checkTargets returns the replicas of this node to check now, by
// allocation: running, not asked to stop, of a service with a health
// check. It updates the cache of what each live allocation needs.
func (n *Node) checkTargets(cache map[string]*checkTarget) map[string]checkTarget {
	live := n.view.NodeLiveAllocs(n.cfg.NodeID)
	isLive := make(map[string]bool, len(live))
	out := map[string]checkTarget{}
	for _, alloc := range live {
		isLive[alloc.ID] = true
		if alloc.State != structs.AllocRunning || alloc.DesiredState == structs.DesiredStop {
			continue
		}
		t, known := cache[alloc.ID]
		if !known {
			var ok bool
			if t, ok = n.checkTarget(alloc); !ok {
				continue // the service is not in the state yet: look again
			}
			cache[alloc.ID] = t
		}
		if t != nil {
			out[alloc.ID] = *t
		}
	}
	for id := range cache {
		if !isLive[id] {
			delete(cache, id)
		}
	}
	return out
}

// checkTarget is what to check of a running allocation: nil when it is
// no replica or its service has no health check; false when its service
// cannot be found.
func (n *Node) checkTarget(alloc *structs.Allocation) (*checkTarget, bool) {
	job, ok := n.view.Job(alloc.JobID)
	if !ok || job.Service == "" {
		return nil, true
	}
	svc, ok := n.view.Service(job.Service)
	if !ok {
		return nil, false
	}
	if svc.Spec.Health == nil {
		return nil, true
	}
	return &checkTarget{
		allocID:   alloc.ID,
		host:      n.ingressHost(),
		port:      masterPortOf(alloc, job),
		startedAt: alloc.StartedAt,
		check:     withCheckDefaults(*svc.Spec.Health),
	}, true
}

// withCheckDefaults fills a check's zero values with the defaults
// (structs.DefaultHealth*) and keeps its interval at or above
// minCheckInterval.
func withCheckDefaults(h structs.HealthCheck) structs.HealthCheck {
	if h.Interval <= 0 {
		h.Interval = structs.DefaultHealthInterval
	}
	h.Interval = max(h.Interval, structs.Duration(minCheckInterval))
	if h.Timeout <= 0 {
		h.Timeout = structs.DefaultHealthTimeout
	}
	if h.Failures <= 0 {
		h.Failures = structs.DefaultHealthFailures
	}
	h.Grace = max(h.Grace, 0)
	return h
}

// ingressHost is the host every node's ingress dials this node's
// replicas at (agent/ingress's endpointAddr): the host of its advertised
// address; "" when it has none yet.
func (n *Node) ingressHost() string {
	self, ok := n.view.Node(n.cfg.NodeID)
	if !ok {
		return ""
	}
	host, _, err := net.SplitHostPort(self.Addresses.Raft)
	if err != nil {
		return ""
	}
	return host
}

// checkTarget is one replica to check: its allocation, where the ingress
// reaches it (its node's host, "" for 127.0.0.1, and the port its
// allocation was given), when its job started (its grace runs from then)
// and its check, defaults filled in.
type checkTarget struct {
	allocID   string
	host      string
	port      int
	startedAt time.Time
	check     structs.HealthCheck
}

// replicaChecks runs the health checks of a node's replicas, one
// goroutine for each, and reports what they find through report: the
// first result, and every change between starting, healthy and unhealthy
// (checkState). sync and stopAll are called from one goroutine.
type replicaChecks struct {
	report func(structs.AllocUpdate)
	// exec runs an exec check's command beside the replica's job
	// (runner.Runner.Exec).
	exec func(ctx context.Context, allocID string, argv []string) (runner.ExecResult, error)
	// now is the clock the grace is measured by; nil is time.Now.
	now  func() time.Time
	log  hclog.Logger
	http *http.Client

	running map[string]context.CancelFunc
	wg      sync.WaitGroup
}

func newReplicaChecks(report func(structs.AllocUpdate), exec func(context.Context, string, []string) (runner.ExecResult, error),
	log hclog.Logger) *replicaChecks {
	return &replicaChecks{
		report: report,
		exec:   exec,
		log:    log,
		// A fresh connection for each check, and a redirect is an
		// answer (3xx is healthy), not something to follow.
		http: &http.Client{
			Transport:     &http.Transport{DisableKeepAlives: true},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		running: map[string]context.CancelFunc{},
	}
}

// sync makes the running checks those of targets: it starts the missing
// ones and stops those no longer wanted. A check's target does not change
// while its allocation runs.
func (c *replicaChecks) sync(ctx context.Context, targets map[string]checkTarget) {
	for id, cancel := range c.running {
		if _, ok := targets[id]; !ok {
			cancel()
			delete(c.running, id)
		}
	}
	for id, t := range targets {
		if _, ok := c.running[id]; ok {
			continue
		}
		cctx, cancel := context.WithCancel(ctx)
		c.running[id] = cancel
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			c.run(cctx, t)
		}()
	}
}

// stopAll stops every check and waits for them.
func (c *replicaChecks) stopAll() {
	for id, cancel := range c.running {
		cancel()
		delete(c.running, id)
	}
	c.wg.Wait()
}

func (c *replicaChecks) clock() time.Time {
	if c.now != nil {
		return c.now()
	}
	return time.Now()
}

// run checks one replica every interval until ctx ends.
func (c *replicaChecks) run(ctx context.Context, t checkTarget) {
	var st checkState
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		ok, detail := c.probe(ctx, t)
		if ctx.Err() != nil {
			return
		}
		if h, changed := st.observe(t.check, t.startedAt, ok, detail, c.clock()); changed {
			c.log.Debug("replica health", "alloc", structs.ShortID(t.allocID), "healthy", h.Healthy, "reason", h.Reason)
			c.report(structs.AllocUpdate{AllocID: t.allocID, State: structs.AllocRunning, At: h.At, Health: &h})
		}
		timer.Reset(time.Duration(t.check.Interval))
	}
}

// probe runs the check once, within its timeout, and says whether it
// passed and what it found. An HTTP or TCP check goes where the ingress
// goes, the node's address: a replica that answers on 127.0.0.1 alone is
// unreachable through the ingress, and one that answers on the node's
// address alone is reachable. When that fails, the replica is tried on
// 127.0.0.1 too, to say so if it answers there only.
func (c *replicaChecks) probe(ctx context.Context, t checkTarget) (bool, string) {
	timeout := time.Duration(t.check.Timeout)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var try func(addr, where string) (bool, string)
	switch t.check.Kind {
	case structs.HealthHTTP:
		try = func(addr, where string) (bool, string) { return c.probeHTTP(ctx, addr, where, t.check.Path, timeout) }
	case structs.HealthTCP:
		try = func(addr, where string) (bool, string) { return probeTCP(ctx, addr, where, timeout) }
	case structs.HealthExec:
		return c.probeExec(ctx, t.allocID, t.check.Command, timeout)
	default:
		return false, fmt.Sprintf("unknown health check kind %q", t.check.Kind)
	}
	local := localAddr(t.port)
	if t.host == "" || t.host == "127.0.0.1" {
		return try(local, "")
	}
	addr := net.JoinHostPort(t.host, strconv.Itoa(t.port))
	ok, detail := try(addr, addr)
	if !ok {
		if answers, _ := try(local, local); answers {
			detail += "; it answers on 127.0.0.1 only: listen on the node's address"
		}
	}
	return ok, detail
}

// probeHTTP GETs path at addr; where, when set, is addr as the result
// names it.
func (c *replicaChecks) probeHTTP(ctx context.Context, addr, where, path string, timeout time.Duration) (bool, string) {
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	what := "GET " + path
	if where != "" {
		what += " on " + where
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		return false, what + ": " + err.Error()
	}
	req.Header.Set("User-Agent", "skein-health-check")
	resp, err := c.http.Do(req)
	if err != nil {
		return false, what + ": " + checkError(ctx, err, timeout)
	}
	_, _ = io.CopyN(io.Discard, resp.Body, checkBodyRead)
	resp.Body.Close()
	ok := resp.StatusCode >= 200 && resp.StatusCode < 400
	return ok, what + ": " + strconv.Itoa(resp.StatusCode)
}

// probeTCP connects to addr; where, when set, is addr as the result names
// it (else its port alone).
func probeTCP(ctx context.Context, addr, where string, timeout time.Duration) (bool, string) {
	if where == "" {
		_, port, _ := net.SplitHostPort(addr)
		where = "port " + port
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return false, "connect to " + where + ": " + checkError(ctx, err, timeout)
	}
	conn.Close()
	return true, "connected to " + where
}

func (c *replicaChecks) probeExec(ctx context.Context, allocID string, argv []string, timeout time.Duration) (bool, string) {
	if len(argv) == 0 {
		return false, "exec: the check has no command"
	}
	what := "exec " + argv[0]
	res, err := c.exec(ctx, allocID, argv)
	if err != nil {
		return false, what + ": " + checkError(ctx, err, timeout)
	}
	detail := what + ": exit " + strconv.Itoa(res.ExitCode)
	if res.ExitCode != 0 {
		if last := lastLine(res.Output); last != "" {
			detail += ": " + last
		}
	}
	return res.ExitCode == 0, detail
}

// checkError says in few words why a check failed: its timeout (an exec
// check's command is then killed, with what it started), or the error
// without the URL or address the check itself knows.
func checkError(ctx context.Context, err error, timeout time.Duration) string {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return "timed out after " + timeout.String()
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Op == "dial" {
		err = oe.Err // the address is said already
	}
	return err.Error()
}

func localAddr(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

func lastLine(s string) string {
	s = strings.TrimRight(s, "\n")
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return strings.TrimSpace(s)
}

// Phases of a replica's health, as its checks found it.
type checkPhase int

const (
	phaseUnknown   checkPhase = iota // no result yet
	phaseStarting                    // never passed, and not failed enough to be unhealthy
	phaseHealthy                     // passed, and not failed enough since
	phaseUnhealthy                   // failed Failures times in a row past the grace
)

// checkState is what a replica's check found so far. One success makes a
// replica healthy; Failures failures in a row make it unhealthy, but a
// failure within the grace after the replica's start does not count: it
// leaves a healthy or unhealthy replica as it was, and one that never
// passed starting. Only changes of phase are reported, and the first
// result, so a replica's health costs a Raft entry only when it changes.
type checkState struct {
	phase checkPhase
	fails int
}

// observe records one result and returns the health to report, and
// whether it is to be reported.
func (s *checkState) observe(h structs.HealthCheck, startedAt time.Time, ok bool, detail string, now time.Time) (structs.AllocHealth, bool) {
	grace := time.Duration(h.Grace)
	inGrace := now.Sub(startedAt) < grace
	next, reason := s.phase, detail
	switch {
	case ok:
		s.fails = 0
		next = phaseHealthy
	case inGrace:
		if s.phase == phaseUnknown || s.phase == phaseStarting {
			next = phaseStarting
			reason = fmt.Sprintf("starting: within its grace of %s: %s", grace, detail)
		}
	default:
		s.fails++
		switch {
		case s.fails >= h.Failures:
			next = phaseUnhealthy
			reason = fmt.Sprintf("%s (%d failures in a row)", detail, s.fails)
		case s.phase == phaseUnknown || s.phase == phaseStarting:
			next = phaseStarting
			reason = fmt.Sprintf("starting: %s (%d of %d failures)", detail, s.fails, h.Failures)
		}
	}
	if next == s.phase {
		return structs.AllocHealth{}, false
	}
	s.phase = next
	return structs.AllocHealth{Healthy: next == phaseHealthy, Starting: next == phaseStarting, Reason: clipReason(reason), At: now.UTC()}, true
}

// clipReason bounds a reason to maxHealthReason bytes, on a rune boundary.
func clipReason(s string) string {
	if len(s) <= maxHealthReason {
		return s
	}
	s = s[:maxHealthReason]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}
