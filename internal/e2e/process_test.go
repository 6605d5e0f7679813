package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

// skeinBin is the binary built once for the whole package.
var skeinBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "skein-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	skeinBin = filepath.Join(dir, "skein")
	build := exec.Command("go", "build", "-o", skeinBin, "github.com/skein-dev/skein")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build skein: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	testutil.RemoveCgroups()
	os.Exit(code)
}

// agentDir is a data dir for the agents of t: a JobDir whose
// supervisors are stopped once the agents are (cleanups run last-in
// first-out), since jobs outlive their agent by design; none then writes
// into the dir while it is removed.
func agentDir(t testing.TB) string {
	t.Helper()
	dir := testutil.JobDir(t)
	t.Cleanup(func() { testutil.StopSupervisors(t, dir) })
	return dir
}

// agentProc is one `skein agent` process.
type agentProc struct {
	cmd  *exec.Cmd
	addr string
	log  *bytes.Buffer
	// env is added to the environment of every CLI call through this
	// agent (a secure cluster's SKEIN_CACERT and token).
	env []string
}

// startAgent runs `skein agent` on ip with the given data dir and waits
// until its API answers.
func startAgent(t testing.TB, ip, dataDir string, httpPort, raftPort int, extra ...string) *agentProc {
	t.Helper()
	return startAgentWith(t, ip, dataDir, httpPort, raftPort, "http", nil, extra...)
}

// startAgentWith is startAgent for an API at scheme (http or https), with
// env added to every CLI call through the agent.
func startAgentWith(t testing.TB, ip, dataDir string, httpPort, raftPort int, scheme string, env []string, extra ...string) *agentProc {
	t.Helper()
	return runAgent(t, exec.Command(skeinBin, agentArgs(ip, dataDir, httpPort, raftPort, extra...)...),
		fmt.Sprintf("%s://%s:%d", scheme, ip, httpPort), env)
}

// agentArgs are the arguments of `skein agent` on ip. Its jobs are
// confined in groups of the test binary's, where tests may make cgroups,
// and run unconfined elsewhere.
func agentArgs(ip, dataDir string, httpPort, raftPort int, extra ...string) []string {
	args := []string{"agent", "--name", "node-" + ip, "--data-dir", dataDir,
		"--bind", ip, "--http-port", fmt.Sprint(httpPort), "--raft-port", fmt.Sprint(raftPort),
		"--gpus", "sim:4xH100-80", "--kill-grace", "1s", "--master-ports", masterPorts(ip), "--allow-unconfined"}
	if parent := testutil.AgentCgroupParent(); parent != "" {
		args = append(args, "--cgroup-parent", parent)
	}
	return append(args, extra...)
}

// masterPorts is a MASTER_PORT range of the agent on ip's own. The
// agents of a test share one host, where each checks its gang's port is
// free on every address: with the default range for all, two nodes'
// gangs could be given the same port, and the second could not start.
// The ranges stay below the default range (29500-29999) that other
// tests' agents use, and Linux's ephemeral ports.
func masterPorts(ip string) string {
	a := net.ParseIP(ip).To4()
	base := 20000 + (int(a[2])*256+int(a[3]))%592*16
	return fmt.Sprintf("%d-%d", base, base+15)
}

// testACL is the ACLs of one test's cluster: the first agent the test
// starts bootstraps them, as every real cluster's admin does, and the CLI
// through every agent of the test then holds the admin token.
type testACL struct {
	off  bool   // the test runs without ACLs (withoutACL)
	file string // the admin token's file, once bootstrapped
}

// acls holds each running test's testACL.
var acls sync.Map // testing.TB -> *testACL

func aclOf(t testing.TB) *testACL {
	acl, loaded := acls.LoadOrStore(t, &testACL{})
	if !loaded {
		t.Cleanup(func() { acls.Delete(t) })
	}
	return acl.(*testACL)
}

// withoutACL makes t's agents run without ACLs: for tests of the
// cluster's API token, or that bootstrap the ACLs themselves.
func withoutACL(t testing.TB) { aclOf(t).off = true }

// adminToken is the admin token of t's cluster.
func adminToken(t testing.TB) string {
	t.Helper()
	acl := aclOf(t)
	if acl.file == "" {
		t.Fatal("the test's cluster has no ACLs")
	}
	b, err := os.ReadFile(acl.file)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// tokenClient is an HTTP client, with a timeout of 10 s, whose requests
// carry the admin token of t's cluster: for requests to an ingress.
func tokenClient(t testing.TB) *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: tokenTransport{token: adminToken(t), next: &http.Transport{MaxIdleConnsPerHost: 64}}}
}

// tokenTransport sets its token on every request it sends through next.
type tokenTransport struct {
	token string
	next  http.RoundTripper
}

func (tt tokenTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(api.TokenHeader, tt.token)
	return tt.next.RoundTrip(r)
}

// runAgent starts cmd, an agent whose API is at addr, and waits until the
// API answers; the first agent of a test (unless withoutACL) bootstraps
// the cluster's ACLs, and the CLI through every agent holds the admin
// token.
func runAgent(t testing.TB, cmd *exec.Cmd, addr string, env []string) *agentProc {
	t.Helper()
	testutil.Long(t, "starts agent processes")
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	// A supervisor the agent started outlives it by design; it must not
	// hold Wait up by its copy of the agent's output.
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &agentProc{cmd: cmd, addr: addr, log: &log, env: env}
	acl := aclOf(t)
	if acl.file != "" {
		// A later node's API refuses the token until it has caught up.
		p.env = append(slices.Clip(p.env), "SKEIN_TOKEN_FILE="+acl.file)
	}
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Signal(syscall.SIGCONT) // in case a test froze it
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
			// An agent that does not leave within a minute is killed, so
			// that a stuck leave fails its test instead of hanging the
			// package until its timeout.
			stuck := time.AfterFunc(time.Minute, func() {
				t.Errorf("agent %s did not exit within a minute of SIGTERM: killed", p.addr)
				_ = p.cmd.Process.Kill()
			})
			_ = p.cmd.Wait()
			stuck.Stop()
		}
		if t.Failed() {
			t.Logf("agent %s output:\n%s", p.addr, p.log.String())
		}
	})
	testutil.WaitFor(t, 20*time.Second, func() error {
		_, err := p.skein(t, "status")
		return err
	})
	if !acl.off && acl.file == "" {
		out, err := p.skein(t, "acl", "bootstrap")
		if err != nil {
			t.Fatal(err)
		}
		acl.file = filepath.Join(t.TempDir(), "admin-token")
		if err := os.WriteFile(acl.file, []byte(out), 0o600); err != nil {
			t.Fatal(err)
		}
		p.env = append(slices.Clip(p.env), "SKEIN_TOKEN_FILE="+acl.file)
	}
	return p
}

// skein runs the CLI against this agent and returns its stdout.
func (p *agentProc) skein(t testing.TB, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(skeinBin, args...)
	cmd.Env = append(append(os.Environ(), "SKEIN_ADDR="+p.addr), p.env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("skein %s: %v: %s", strings.Join(args, " "), err, errb.String())
	}
	return out.String(), nil
}

func (p *agentProc) job(t testing.TB, id string) api.JobDetail {
	t.Helper()
	d, err := p.tryJob(t, id)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func (p *agentProc) tryJob(t testing.TB, id string) (api.JobDetail, error) {
	t.Helper()
	var d api.JobDetail
	out, err := p.skein(t, "job", "--json", id)
	if err != nil {
		return d, err
	}
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		return d, fmt.Errorf("skein job --json: %v\n%s", err, out)
	}
	return d, nil
}

// waitJob waits until the job, once this agent has it, satisfies ok.
func (p *agentProc) waitJob(t testing.TB, id string, ok func(api.JobDetail) error) api.JobDetail {
	t.Helper()
	var d api.JobDetail
	testutil.WaitFor(t, 20*time.Second, func() error {
		var err error
		if d, err = p.tryJob(t, id); err != nil {
			return err
		}
		return ok(d)
	})
	return d
}

func jobIs(state structs.JobState) func(api.JobDetail) error {
	return func(d api.JobDetail) error {
		if d.Job.State != state {
			return fmt.Errorf("job %s is %s (%s), want %s", structs.ShortID(d.Job.ID), d.Job.State, d.Job.Reason, state)
		}
		return nil
	}
}

func allocRunning(d api.JobDetail) error {
	if len(d.Allocations) == 0 || d.Allocations[len(d.Allocations)-1].State != structs.AllocRunning {
		return fmt.Errorf("job %s has no running allocation yet", structs.ShortID(d.Job.ID))
	}
	return nil
}

// handedOut holds the ports freePort has handed out, as ip:port.
var handedOut sync.Map

// freePort finds a port free for TCP and UDP on ip (gossip takes both)
// and never hands the same one out twice: the kernel may offer a port it
// just gave, and a node's ports are picked one after another before its
// agent binds any of them.
func freePort(t testing.TB, ip string) int {
	t.Helper()
	for {
		l, err := net.Listen("tcp", ip+":0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		u, err := net.ListenPacket("udp", net.JoinHostPort(ip, strconv.Itoa(port)))
		_ = l.Close()
		if err != nil {
			continue // its UDP twin is taken
		}
		_ = u.Close()
		if _, taken := handedOut.LoadOrStore(net.JoinHostPort(ip, strconv.Itoa(port)), true); !taken {
			return port
		}
	}
}

// TestProcess_AgentKilledAndRestarted_JobAdoptedAndHistoryKept SIGKILLs a
// real agent while a job runs, restarts it on the same data dir, and checks
// that the job was never stopped, reports its real exit code, and that the
// finished job's history survived.
func TestProcess_AgentKilledAndRestarted_JobAdoptedAndHistoryKept(t *testing.T) {
	t.Parallel()
	const ip = "127.0.0.11"
	dataDir := agentDir(t)
	httpPort, raftPort := freePort(t, ip), freePort(t, ip)
	a := startAgent(t, ip, dataDir, httpPort, raftPort)

	out, err := a.skein(t, "submit", "--gpus", "1", "--", "sh", "-c", "echo done-early")
	if err != nil {
		t.Fatal(err)
	}
	early := strings.TrimSpace(out)
	a.waitJob(t, early, jobIs(structs.JobSucceeded))

	marker := filepath.Join(testutil.JobDir(t), "release")
	beats := filepath.Join(testutil.SharedDir(t), "beats")
	script := fmt.Sprintf(`while [ ! -e %s ]; do echo beat >> %s; sleep 0.05; done; exit 9`, marker, beats)
	out, err = a.skein(t, "submit", "--gpus", "2", "--", "sh", "-c", script)
	if err != nil {
		t.Fatal(err)
	}
	long := strings.TrimSpace(out)
	a.waitJob(t, long, allocRunning)

	if err := a.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = a.cmd.Wait()
	// The job keeps running with no agent at all.
	before := countLines(t, beats)
	testutil.WaitFor(t, 5*time.Second, func() error {
		if n := countLines(t, beats); n <= before {
			return fmt.Errorf("job made no progress while the agent was down (%d beats)", n)
		}
		return nil
	})

	b := startAgent(t, ip, dataDir, httpPort, raftPort)
	d := b.job(t, early)
	if d.Job.State != structs.JobSucceeded || len(d.Allocations) != 1 {
		t.Fatalf("history after restart: %s with %d allocations", d.Job.State, len(d.Allocations))
	}
	if d := b.job(t, long); d.Job.State != structs.JobRunning {
		t.Fatalf("adopted job is %s (%s) after restart, want running", d.Job.State, d.Job.Reason)
	}
	if err := os.WriteFile(marker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	d = b.waitJob(t, long, jobIs(structs.JobFailed))
	if d.Job.ExitCode != 9 {
		t.Fatalf("adopted job exit code %d (%s), want 9", d.Job.ExitCode, d.Job.Reason)
	}
}

// TestProcess_CancelKillsTheWholeProcessGroup checks through the real binary
// that cancel reaches a job's children, not just the process skein started.
func TestProcess_CancelKillsTheWholeProcessGroup(t *testing.T) {
	t.Parallel()
	const ip = "127.0.0.12"
	a := startAgent(t, ip, agentDir(t), freePort(t, ip), freePort(t, ip))
	pidFile := filepath.Join(testutil.SharedDir(t), "child.pid")
	out, err := a.skein(t, "submit", "--", "sh", "-c", fmt.Sprintf(`trap '' TERM; sleep 300 & echo $! > %s; wait`, pidFile))
	if err != nil {
		t.Fatal(err)
	}
	id := strings.TrimSpace(out)
	a.waitJob(t, id, allocRunning)
	var child int
	testutil.WaitFor(t, 5*time.Second, func() error {
		b, err := os.ReadFile(pidFile)
		if err != nil {
			return err
		}
		_, err = fmt.Sscan(string(b), &child)
		return err
	})
	if _, err := a.skein(t, "cancel", id); err != nil {
		t.Fatal(err)
	}
	d := a.waitJob(t, id, jobIs(structs.JobCancelled))
	if st := d.Allocations[0].State; st != structs.AllocKilled {
		t.Fatalf("allocation is %s after cancel, want killed", st)
	}
	testutil.WaitFor(t, 5*time.Second, func() error {
		if err := syscall.Kill(child, 0); err == nil {
			return fmt.Errorf("child %d of the cancelled job is still alive", child)
		}
		return nil
	})
}

func countLines(t testing.TB, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return bytes.Count(b, []byte("\n"))
}
