package runner

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

// superviseEnv makes the test binary act as the supervisor. Tests start it
// through env(1) so that only supervisors see the variable.
const superviseEnv = "SKEIN_TEST_SUPERVISE"

func TestMain(m *testing.M) {
	// Both the supervisors and the runners under test know the fake driver.
	drivers[fakeDriverName] = fakeDriver{}
	if os.Getenv(superviseEnv) != "" {
		os.Exit(Supervise(os.Args[len(os.Args)-1]))
	}
	code := testutil.RunWithoutLeaks(m)
	testutil.RemoveCgroups()
	os.Exit(code)
}

// recorder collects reports.
type recorder struct {
	mu  sync.Mutex
	ups []structs.AllocUpdate
}

func (rec *recorder) add(u structs.AllocUpdate) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.ups = append(rec.ups, u)
}

func (rec *recorder) of(id string) []structs.AllocUpdate {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var out []structs.AllocUpdate
	for _, u := range rec.ups {
		if u.AllocID == id {
			out = append(out, u)
		}
	}
	return out
}

func (rec *recorder) count(id string, state structs.AllocState) int {
	n := 0
	for _, u := range rec.of(id) {
		if u.State == state {
			n++
		}
	}
	return n
}

func (rec *recorder) String() string {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return fmt.Sprintf("%+v", rec.ups)
}

// waitFor polls cond until it holds or the deadline passes, then fails the
// test with cond's last description of the state.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s; last state: %s", timeout, what, state)
		}
		<-tick.C
	}
}

// waitState waits for an allocation to be reported in state and returns the report.
func waitState(t *testing.T, rec *recorder, id string, state structs.AllocState) structs.AllocUpdate {
	t.Helper()
	var got structs.AllocUpdate
	waitFor(t, 15*time.Second, fmt.Sprintf("%s to be %s", id, state), func() (bool, string) {
		for _, u := range rec.of(id) {
			if u.State == state {
				got = u
				return true, ""
			}
		}
		return false, rec.String()
	})
	return got
}

// waitTerminal waits for an allocation's first terminal report.
func waitTerminal(t *testing.T, rec *recorder, id string) structs.AllocUpdate {
	t.Helper()
	var got structs.AllocUpdate
	waitFor(t, 15*time.Second, id+" to end", func() (bool, string) {
		for _, u := range rec.of(id) {
			if u.State.Terminal() {
				got = u
				return true, ""
			}
		}
		return false, rec.String()
	})
	return got
}

type testEnv struct {
	allocDir   string
	grace      time.Duration
	leasePath  string // "" unless a test sets it
	fenceGrace time.Duration
	logMax     int64 // 0: the default
}

// newEnv makes an allocation directory that jobs can reach and, at
// cleanup, kills every job and supervisor left in it, before the directory
// is removed.
func newEnv(t *testing.T) *testEnv {
	t.Helper()
	return newEnvIn(t, testutil.JobDir(t))
}

// newEnvIn is newEnv with the allocation directory in dataDir, as an
// agent keeps it in its data dir.
func newEnvIn(t *testing.T, dataDir string) *testEnv {
	t.Helper()
	e := &testEnv{allocDir: filepath.Join(dataDir, "allocs"), grace: 2 * time.Second}
	t.Cleanup(func() { killLeftovers(e.allocDir) })
	return e
}

// runner starts a runner on the environment's directory, its config
// changed by opts; Shutdown at cleanup.
func (e *testEnv) runner(t *testing.T, opts ...func(*Config)) (*Runner, *recorder) {
	t.Helper()
	rec := &recorder{}
	cfg := Config{
		AllocDir:      e.allocDir,
		SupervisorCmd: []string{"/usr/bin/env", superviseEnv + "=1", os.Args[0]},
		KillGrace:     e.grace,
		Report:        rec.add,
		AgentEnv:      []string{"PATH=/agent/bin", "SKEIN_TOKEN=secret", "HOME=/agent", "LC_TEST=agent"},
		LeasePath:     e.leasePath,
		FenceGrace:    e.fenceGrace,
		LogMax:        e.logMax,
	}
	// Jobs are confined as on a node, where the machine lets tests make
	// cgroups; elsewhere they run unconfined, which tests allow.
	cfg.Cgroups, cfg.Unconfined = testutil.Cgroups()
	cfg.AllowUnconfined = cfg.Cgroups == nil
	for _, o := range opts {
		o(&cfg)
	}
	r, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(r.Shutdown)
	return r, rec
}

// unconfined is a runner option: jobs run without cgroups.
func unconfined(c *Config) {
	c.Cgroups, c.Unconfined, c.AllowUnconfined = nil, "the test runs jobs unconfined", true
}

// jobUser is the account of the default job user, for specs a test writes
// itself.
func jobUser(t *testing.T) *Account {
	t.Helper()
	a, err := LookupJobUser("")
	if err != nil {
		t.Fatal(err)
	}
	return &a
}

func killLeftovers(allocDir string) {
	dirs, _ := filepath.Glob(filepath.Join(allocDir, "*"))
	for _, d := range dirs {
		for _, name := range []string{supervisorPIDFile, jobPIDFile} {
			var p procRecord
			if found, err := readJSON(filepath.Join(d, name), &p); found && err == nil && p.alive() {
				if name == jobPIDFile {
					_ = syscall.Kill(-p.PID, syscall.SIGKILL)
				}
				_ = syscall.Kill(p.PID, syscall.SIGKILL)
			}
		}
	}
}

var idSeq struct {
	sync.Mutex
	n int
}

// idPrefix makes this test binary's allocation IDs its own: containers
// are named after them, and other tests may share the engine.
var idPrefix = fmt.Sprintf("alloc%06x-", rand.Uint32()&0xffffff)

// newAllocID returns an allocation ID no other test uses.
func newAllocID() string {
	idSeq.Lock()
	defer idSeq.Unlock()
	idSeq.n++
	return fmt.Sprintf("%s%04d", idPrefix, idSeq.n)
}

// task builds a task running argv with a unique allocation ID.
func task(argv ...string) Task {
	id := newAllocID()
	return Task{
		Alloc:    structs.Allocation{ID: id, JobID: "job" + id, Rank: 0, Attempt: 1},
		Job:      structs.Job{ID: "job" + id, Spec: structs.JobSpec{Command: argv, Nodes: 1}},
		NodeName: "node-a",
	}
}

// sh builds a task running a shell script; tests use a shell for scripting,
// the runner itself never adds one.
func sh(script string) Task { return task("/bin/sh", "-c", script) }

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return string(b)
}

// waitFile waits until path exists and contains want.
func waitFile(t *testing.T, path, want string) {
	t.Helper()
	waitFor(t, 15*time.Second, path+" to contain "+want, func() (bool, string) {
		b, err := os.ReadFile(path)
		if err != nil {
			return false, err.Error()
		}
		return strings.Contains(string(b), want), string(b)
	})
}

func mustStart(t *testing.T, r *Runner, tk Task) {
	t.Helper()
	if err := r.Start(tk); err != nil {
		t.Fatalf("Start(%s): %v", tk.Alloc.ID, err)
	}
}

func tracked(r *Runner, id string) bool { return slices.Contains(r.Tracked(), id) }
