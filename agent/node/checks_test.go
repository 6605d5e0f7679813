package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/skein-dev/skein/agent/runner"
	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

// healthLog is a fake reporter: it keeps the health reports in order.
type healthLog struct {
	mu  sync.Mutex
	ups []structs.AllocUpdate
}

func (l *healthLog) add(u structs.AllocUpdate) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ups = append(l.ups, u)
}

func (l *healthLog) all() []structs.AllocUpdate {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]structs.AllocUpdate(nil), l.ups...)
}

func (l *healthLog) String() string {
	var b strings.Builder
	for _, u := range l.all() {
		fmt.Fprintf(&b, "[%s healthy=%v %q] ", u.State, u.Health.Healthy, u.Health.Reason)
	}
	return b.String()
}

// waitReports waits until n reports have come and returns them.
func (l *healthLog) waitReports(t *testing.T, n int) []structs.AllocUpdate {
	t.Helper()
	testutil.WaitFor(t, 15*time.Second, func() error {
		if got := len(l.all()); got < n {
			return fmt.Errorf("%d health reports, want %d: %s", got, n, l)
		}
		return nil
	})
	return l.all()
}

// wantReport checks one report: a running report of the allocation with
// the health given, its reason containing reason.
func wantReport(t *testing.T, u structs.AllocUpdate, allocID string, healthy bool, reason string) {
	t.Helper()
	if u.AllocID != allocID || u.State != structs.AllocRunning || u.Health == nil || u.At.IsZero() || !u.At.Equal(u.Health.At) {
		t.Fatalf("report %+v: want a running report of %s with its health and time", u, allocID)
	}
	if u.Health.Healthy != healthy || !strings.Contains(u.Health.Reason, reason) {
		t.Errorf("health %+v, want healthy=%v with a reason containing %q", *u.Health, healthy, reason)
	}
}

// testChecks is a replicaChecks that reports into a healthLog; exec is
// nil unless the test sets it.
func testChecks(t *testing.T) (*replicaChecks, *healthLog) {
	log := &healthLog{}
	c := newReplicaChecks(log.add, nil, hclog.NewNullLogger())
	t.Cleanup(c.stopAll)
	return c, log
}

// backend is an HTTP server whose answer the test sets, and that counts
// the checks it answered.
type backend struct {
	srv    *httptest.Server
	status atomic.Int32
	hits   atomic.Int32
}

func newBackend(t *testing.T, status int) *backend {
	b := &backend{}
	b.status.Store(int32(status))
	b.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/health" {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(int(b.status.Load()))
		b.hits.Add(1)
	}))
	t.Cleanup(b.srv.Close)
	return b
}

func (b *backend) port(t *testing.T) int {
	u, err := url.Parse(b.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := strconv.Atoi(u.Port())
	return p
}

// waitHits waits until the backend has answered n checks.
func (b *backend) waitHits(t *testing.T, n int32) {
	t.Helper()
	testutil.WaitFor(t, 15*time.Second, func() error {
		if got := b.hits.Load(); got < n {
			return fmt.Errorf("%d checks answered, want %d", got, n)
		}
		return nil
	})
}

// fastCheck is a check of kind every 10ms (below what a spec gets), 3
// failures making a replica unhealthy.
func fastCheck(kind string) structs.HealthCheck {
	h := withCheckDefaults(structs.HealthCheck{Kind: kind, Path: "/health", Timeout: structs.Duration(5 * time.Second), Failures: 3})
	h.Interval = structs.Duration(10 * time.Millisecond)
	return h
}

func TestReplicaChecks_HTTPHealthyThenUnhealthyAfterFailuresInARowThenBackOnOneSuccess(t *testing.T) {
	c, log := testChecks(t)
	b := newBackend(t, http.StatusOK)
	target := checkTarget{allocID: "a1", port: b.port(t), startedAt: time.Now(), check: fastCheck(structs.HealthHTTP)}
	c.sync(context.Background(), map[string]checkTarget{"a1": target})
	ups := log.waitReports(t, 1)
	wantReport(t, ups[0], "a1", true, "GET /health: 200")

	b.status.Store(http.StatusServiceUnavailable)
	failedFrom := b.hits.Load()
	ups = log.waitReports(t, 2)
	wantReport(t, ups[1], "a1", false, "GET /health: 503 (3 failures in a row)")
	if n := b.hits.Load() - failedFrom; n < 3 {
		t.Errorf("unhealthy after %d failed checks, want 3", n)
	}

	b.status.Store(http.StatusFound) // a redirect answers too
	ups = log.waitReports(t, 3)
	wantReport(t, ups[2], "a1", true, "GET /health: 302")
	if len(ups) != 3 {
		t.Errorf("reports %s: want one per change", log)
	}
}

func TestReplicaChecks_FailuresWithinTheGraceDoNotCount(t *testing.T) {
	c, log := testChecks(t)
	var clock atomic.Int64
	start := time.Now()
	clock.Store(start.UnixNano())
	c.now = func() time.Time { return time.Unix(0, clock.Load()) }
	b := newBackend(t, http.StatusServiceUnavailable)
	check := fastCheck(structs.HealthHTTP)
	check.Grace = structs.Duration(time.Hour)
	c.sync(context.Background(), map[string]checkTarget{"a1": {allocID: "a1", port: b.port(t), startedAt: start, check: check}})

	// Many failures within the grace: starting, reported once.
	b.waitHits(t, int32(3*check.Failures))
	ups := log.waitReports(t, 1)
	wantReport(t, ups[0], "a1", false, "starting: within its grace of 1h0m0s: GET /health: 503")
	if len(ups) != 1 {
		t.Fatalf("reports %s: want one, starting", log)
	}

	// Past the grace, failures count.
	clock.Store(start.Add(time.Hour).UnixNano())
	ups = log.waitReports(t, 2)
	wantReport(t, ups[1], "a1", false, "GET /health: 503 (3 failures in a row)")

	// A healthy replica within its grace stays healthy through failures:
	// a new replica, the clock back at its start.
	clock.Store(start.UnixNano())
	ok := newBackend(t, http.StatusOK)
	c.sync(context.Background(), map[string]checkTarget{"a2": {allocID: "a2", port: ok.port(t), startedAt: start, check: check}})
	ups = log.waitReports(t, 3)
	wantReport(t, ups[2], "a2", true, "GET /health: 200")
	ok.status.Store(http.StatusServiceUnavailable)
	ok.waitHits(t, ok.hits.Load()+int32(3*check.Failures))
	if ups := log.all(); len(ups) != 3 {
		t.Errorf("reports %s: a healthy replica's failures within its grace changed its health", log)
	}
}

func TestReplicaChecks_TCPConnectsToThePort(t *testing.T) {
	c, log := testChecks(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			conn.Close()
		}
	}()
	port := l.Addr().(*net.TCPAddr).Port
	c.sync(context.Background(), map[string]checkTarget{"a1": {allocID: "a1", port: port, startedAt: time.Now(), check: fastCheck(structs.HealthTCP)}})
	ups := log.waitReports(t, 1)
	wantReport(t, ups[0], "a1", true, "connected to port "+strconv.Itoa(port))

	l.Close()
	ups = log.waitReports(t, 2)
	wantReport(t, ups[1], "a1", false, "connect to port "+strconv.Itoa(port))
	if !strings.Contains(ups[1].Health.Reason, "refused") {
		t.Errorf("reason %q: want the connection's refusal", ups[1].Health.Reason)
	}
}

func TestReplicaChecks_AFirstFailureReportsStartingAndATimeoutSaysSo(t *testing.T) {
	c, log := testChecks(t)
	hold := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-hold }))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(hold) })
	u, _ := url.Parse(srv.URL)
	port, _ := strconv.Atoi(u.Port())
	check := fastCheck(structs.HealthHTTP)
	check.Timeout = structs.Duration(50 * time.Millisecond)
	c.sync(context.Background(), map[string]checkTarget{"a1": {allocID: "a1", port: port, startedAt: time.Now(), check: check}})
	ups := log.waitReports(t, 2)
	wantReport(t, ups[0], "a1", false, "starting: GET /health: timed out after 50ms (1 of 3 failures)")
	wantReport(t, ups[1], "a1", false, "GET /health: timed out after 50ms (3 failures in a row)")
}

func TestReplicaChecks_ExecPassesOnExitZeroAndSaysWhyItFailed(t *testing.T) {
	c, log := testChecks(t)
	var code atomic.Int32
	var calls atomic.Int32
	c.exec = func(ctx context.Context, allocID string, argv []string) (runner.ExecResult, error) {
		calls.Add(1)
		if allocID != "a1" || strings.Join(argv, " ") != "check --fast" {
			return runner.ExecResult{}, fmt.Errorf("exec of %s %v", allocID, argv)
		}
		return runner.ExecResult{ExitCode: int(code.Load()), Output: "loading\nmodel not ready\n"}, nil
	}
	check := fastCheck(structs.HealthExec)
	check.Command = []string{"check", "--fast"}
	c.sync(context.Background(), map[string]checkTarget{"a1": {allocID: "a1", startedAt: time.Now(), check: check}})
	ups := log.waitReports(t, 1)
	wantReport(t, ups[0], "a1", true, "exec check: exit 0")
	code.Store(2)
	ups = log.waitReports(t, 2)
	wantReport(t, ups[1], "a1", false, "exec check: exit 2: model not ready (3 failures in a row)")
}

func TestReplicaChecks_ACheckStopsWithItsAllocation(t *testing.T) {
	c, log := testChecks(t)
	b := newBackend(t, http.StatusOK)
	c.sync(context.Background(), map[string]checkTarget{"a1": {allocID: "a1", port: b.port(t), startedAt: time.Now(), check: fastCheck(structs.HealthHTTP)}})
	log.waitReports(t, 1)
	c.sync(context.Background(), nil)
	if len(c.running) != 0 {
		t.Fatalf("checks still running: %v", c.running)
	}
	stopped := make(chan struct{})
	go func() {
		c.wg.Wait()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(15 * time.Second):
		t.Fatal("the check of an allocation no longer wanted did not stop")
	}
}

func TestWithCheckDefaults_FillsZerosAndBoundsTheInterval(t *testing.T) {
	got := withCheckDefaults(structs.HealthCheck{Kind: structs.HealthTCP, Grace: -1})
	want := structs.HealthCheck{Kind: structs.HealthTCP, Interval: structs.DefaultHealthInterval,
		Timeout: structs.DefaultHealthTimeout, Failures: structs.DefaultHealthFailures}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("defaults: %+v, want %+v", got, want)
	}
	if got := withCheckDefaults(structs.HealthCheck{Interval: 1}); got.Interval != structs.Duration(minCheckInterval) {
		t.Errorf("interval of 1ns became %s, want %s", got.Interval, minCheckInterval)
	}
}

// processReplica starts a process replica, allocation id, that sleeps,
// with env, through a real runner, and returns the runner once its job
// runs (an exec for it works).
func processReplica(t *testing.T, id string, env map[string]string) *runner.Runner {
	t.Helper()
	dir := testutil.JobDir(t)
	r, err := runner.New(runner.Config{AllocDir: filepath.Join(dir, "allocs"), SupervisorCmd: []string{"/usr/bin/env", superviseEnv + "=1", os.Args[0]}, AllowUnconfined: true,
		KillGrace: time.Second, AgentEnv: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Shutdown)
	if err := r.Start(runner.Task{
		Alloc: structs.Allocation{ID: id, JobID: "svc-r0", Attempt: 1},
		Job: structs.Job{ID: "svc-r0", Service: "svc", Spec: structs.JobSpec{Command: []string{"sleep", "3600"}, Nodes: 1,
			Env: env}},
		NodeName: "node-a",
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		r.Stop(id, "test over")
		testutil.WaitFor(t, 15*time.Second, func() error {
			if len(r.Tracked()) > 0 {
				return errors.New("the replica still runs")
			}
			return nil
		})
	})
	return r
}

// An exec check of a process replica, through a real runner: the command
// runs as the job, with its environment.
func TestReplicaChecks_ExecRunsBesideAProcessReplica(t *testing.T) {
	shared := testutil.SharedDir(t)
	id := "replica-" + strconv.Itoa(os.Getpid())
	r := processReplica(t, id, map[string]string{"READY_FILE": filepath.Join(shared, "ready")})
	log := &healthLog{}
	c := newReplicaChecks(log.add, r.Exec, hclog.NewNullLogger())
	t.Cleanup(c.stopAll)
	check := fastCheck(structs.HealthExec)
	check.Command = []string{"sh", "-c", `test -e "$READY_FILE" || { echo "no $READY_FILE"; exit 1; }`}
	check.Grace = structs.Duration(time.Hour) // until the job has started, exec fails
	c.sync(context.Background(), map[string]checkTarget{id: {allocID: id, startedAt: time.Now(), check: check}})
	ups := log.waitReports(t, 1)
	wantReport(t, ups[0], id, false, "starting: within its grace")

	if err := os.WriteFile(filepath.Join(shared, "ready"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	ups = log.waitReports(t, 2)
	wantReport(t, ups[1], id, true, "exec sh: exit 0")
}

// An exec check of a process replica whose command outlives the check's
// timeout fails, saying so, and the command is killed with what it
// started (its process group).
func TestReplicaChecks_AnExecCheckPastItsTimeoutFailsAndItsCommandIsKilledWithItsGroup(t *testing.T) {
	shared := testutil.SharedDir(t)
	childFile := filepath.Join(shared, "child.pid")
	id := "replica-" + strconv.Itoa(os.Getpid())
	r := processReplica(t, id, map[string]string{"CHILD_FILE": childFile})
	testutil.WaitFor(t, 15*time.Second, func() error {
		_, err := r.Exec(context.Background(), id, []string{"true"})
		return err
	})
	log := &healthLog{}
	c := newReplicaChecks(log.add, r.Exec, hclog.NewNullLogger())
	t.Cleanup(c.stopAll)
	check := fastCheck(structs.HealthExec)
	check.Command = []string{"sh", "-c", `sleep 600 & echo $! > "$CHILD_FILE"; wait`}
	check.Timeout, check.Failures = structs.Duration(300*time.Millisecond), 1
	check.Interval = structs.Duration(time.Hour) // one run
	c.sync(context.Background(), map[string]checkTarget{id: {allocID: id, startedAt: time.Now(), check: check}})
	ups := log.waitReports(t, 1)
	wantReport(t, ups[0], id, false, "exec sh: timed out after 300ms (1 failures in a row)")
	b, err := os.ReadFile(childFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 15*time.Second, func() error {
		if gone(pid) {
			return nil
		}
		return fmt.Errorf("the check's child %d still runs", pid)
	})
}

// gone reports whether process pid has ended (it may wait to be reaped).
func gone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return true
	}
	i := strings.LastIndexByte(string(b), ')')
	return i >= 0 && i+2 < len(b) && b[i+2] == 'Z'
}

// listenHealth serves /health (200) on addr alone, and returns its port.
func listenHealth(t *testing.T, addr string) int {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return l.Addr().(*net.TCPAddr).Port
}

// A check goes where the ingress goes, the node's address: a replica that
// listens there alone is healthy, and one that listens on 127.0.0.1 alone
// is not, the reason saying so (the issue: the first was never healthy,
// the second healthy and unreachable).
func TestReplicaChecks_ProbeTheAddressTheIngressDials(t *testing.T) {
	for _, kind := range []string{structs.HealthHTTP, structs.HealthTCP} {
		t.Run(kind, func(t *testing.T) {
			c, log := testChecks(t)
			nodeOnly := listenHealth(t, "127.0.0.2:0")
			c.sync(context.Background(), map[string]checkTarget{"a1": {allocID: "a1", host: "127.0.0.2", port: nodeOnly, startedAt: time.Now(), check: fastCheck(kind)}})
			wantReport(t, log.waitReports(t, 1)[0], "a1", true, "127.0.0.2:"+strconv.Itoa(nodeOnly))

			c2, log2 := testChecks(t)
			loopOnly := listenHealth(t, "127.0.0.1:0")
			c2.sync(context.Background(), map[string]checkTarget{"a2": {allocID: "a2", host: "127.0.0.3", port: loopOnly, startedAt: time.Now(), check: fastCheck(kind)}})
			ups := log2.waitReports(t, 2)
			want := fmt.Sprintf("127.0.0.3:%d: connect: connection refused; it answers on 127.0.0.1 only: listen on the node's address (3 failures in a row)", loopOnly)
			wantReport(t, ups[1], "a2", false, want)
		})
	}
}
