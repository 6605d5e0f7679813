package runner

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/skein-dev/skein/agent/cgroup"
	"github.com/skein-dev/skein/agent/engine"
	"github.com/skein-dev/skein/structs"
)

// Errors of this package.
var (
	ErrNoAllocDir       = errors.New("no allocation directory configured")
	ErrInvalidAllocID   = errors.New("invalid allocation id")
	ErrNoCommand        = errors.New("empty command")
	ErrUnknownStream    = errors.New("unknown log stream")
	ErrNoLogs           = errors.New("no logs")
	ErrStillRunning     = errors.New("allocation still running")
	ErrNotRunning       = errors.New("allocation not running")
	ErrClosed           = errors.New("runner is shut down")
	ErrSupervised       = errors.New("held by another supervisor")
	ErrSupervisor       = errors.New("cannot start supervisor")
	ErrUnknownDriver    = errors.New("unknown driver")
	ErrJobUser          = errors.New("unusable job user")
	ErrRootRefused      = errors.New("refusing to run the job as root")
	ErrEnvAllow         = errors.New("invalid job environment allow-list entry")
	ErrNoEngine         = errors.New("no container engine on this node")
	ErrMountRefused     = errors.New("mount refused")
	ErrAllowMount       = errors.New("invalid allowed mount directory")
	ErrCapRefused       = errors.New("capability refused")
	ErrAllowCap         = errors.New("invalid allowed capability")
	errNoContainerSpec  = errors.New("spec has no container section")
	errForeignContainer = errors.New("a container of that name is not this allocation's")
	errBadStat          = errors.New("unexpected /proc stat format")
	errNoAccount        = errors.New("spec names no account to run the job as")
	errNotPlainFile     = errors.New("not a plain file")
)

const (
	defaultKillGrace = 10 * time.Second
	// pollInterval is how often a watched allocation's directory is looked
	// at until its job runs, and after that when its supervisor is one
	// adopted from an earlier agent; the runner's own supervisors wake it
	// at once on start and exit.
	pollInterval = 200 * time.Millisecond
	maxAllocID   = 128
	lostReason   = "lost: supervisor exited without recording a result"
	// pullReportInterval is how often, at most, an allocation's pull
	// progress is reported.
	pullReportInterval = time.Second
)

// Config configures a Runner.
type Config struct {
	// AllocDir holds one directory per allocation, e.g. <data-dir>/allocs.
	AllocDir string
	// SupervisorCmd is the argv prefix that starts a supervisor; the
	// allocation directory is appended. nil means
	// {os.Executable(), "supervise"}.
	SupervisorCmd []string
	// KillGrace is the time between SIGTERM and SIGKILL; 0 means 10s.
	KillGrace time.Duration
	// Report is called, from runner goroutines and never while a runner lock
	// is held, when an allocation starts running and when it ends. The same
	// state may be reported more than once (after Restore, for instance).
	// Report must not call Shutdown.
	Report func(structs.AllocUpdate)
	// Logger receives the runner's logs; nil discards them.
	Logger hclog.Logger
	// JobUser is the account a job runs as when its owner has no local
	// account of that name (see LookupJobUser); "" means DefaultJobUser.
	// It is used only when the runner is root: otherwise every job runs as
	// the runner's own user.
	JobUser string
	// JobUIDs is the range owners without a local account take uids of
	// their own from (owneruids.go); zero means DefaultJobUIDs.
	// ShareJobUser runs them all as JobUser instead.
	JobUIDs      UIDRange
	ShareJobUser bool
	// JobEnvAllow names the variables of AgentEnv that jobs get (names, or
	// prefixes ending in '*'; see CheckEnvAllow); nil means
	// DefaultJobEnvAllow. Jobs never get the rest of it.
	JobEnvAllow []string
	// AgentEnv is the environment JobEnvAllow picks from; nil means
	// os.Environ(). The agent's secrets (SKEIN_TOKEN, SKEIN_JOIN_TOKEN,
	// SKEIN_ENCRYPT) never pass.
	AgentEnv []string
	// LeasePath is the node's lease file (see RenewLease). When set, every
	// supervisor stops its job, with FenceGrace between SIGTERM and
	// SIGKILL, once the lease has expired. "" disables self-fencing.
	LeasePath  string
	FenceGrace time.Duration
	// LogMax is the most bytes one allocation's stdout and stderr keep on
	// disk, in all (logs.go); 0 means DefaultLogMax, and it is at least
	// MinLogMax.
	LogMax int64

	// What a task whose job names an image runs with (the container
	// driver). ContainerSocket is the engine's socket (engine.Host); ""
	// means this node runs no containers, and such a task fails to start.
	ContainerSocket string
	// AllowMounts are the host directories under which a container's
	// mounts must lie, by path component, symlinks followed; none: no
	// mounts. The scheduler places jobs by them already; this is the
	// node's own check.
	AllowMounts []string
	// AllowCaps are the capabilities a container may be given (each a
	// name structs.ParseCap reads): a job that asks for another
	// (JobSpec.Caps) fails to start. The scheduler places jobs by them
	// already; this is the node's own check.
	AllowCaps []string
	// DefaultShmSize is /dev/shm's size in bytes for a job that gives
	// none (JobSpec.ShmSizeMiB 0); 0 leaves it to the engine.
	DefaultShmSize int64
	// KeepFailed keeps the container of a job that failed by itself (a
	// non-zero exit the supervisor did not cause), for debugging; it
	// goes with its allocation's directory (CleanContainers).
	KeepFailed bool
	// ContainerHost, when set, names the container this runner itself
	// runs in: jobs' containers then live inside it as its processes do
	// (engine.ContainerSpec.Host), instead of on the host's network.
	ContainerHost string
	// SimulatedGPUs says the node's GPUs are simulated: a process job
	// holding some may write what it does with them to a file the runner
	// makes in its allocation directory, named in SimGPUUtilEnv.
	SimulatedGPUs bool
	// ContainerGPUs is how a container is handed its GPUs;
	// engine.GPUsNone (simulated GPUs) passes no devices, though the job
	// sees the same CUDA_VISIBLE_DEVICES.
	ContainerGPUs engine.GPUMode

	// How process jobs are confined (confine.go). Cgroups is where each
	// allocation's job gets a control group of its own (agent/cgroup);
	// nil: the node cannot confine jobs, Unconfined says why, and the
	// runner starts none unless AllowUnconfined lets them run unconfined.
	Cgroups         *cgroup.Hierarchy
	Unconfined      string
	AllowUnconfined bool
	// PidsMax is the most processes and threads one job may hold (a job
	// may ask for fewer); 0 means DefaultPidsMax.
	PidsMax int64
	// PinCPUs gives a job asking for CPUs a set of CPUs of its own
	// (cpuset) instead of a quota of CPU time on all of them.
	PinCPUs bool
	// GPUMinors are the device minors (NVIDIA's major 195) of the node's
	// GPUs, by UUID: a job may open its own GPUs' device nodes, not these
	// others'.
	GPUMinors map[string]uint32
}

// Task is one allocation to run and the job it belongs to.
type Task struct {
	Alloc    structs.Allocation
	Job      structs.Job
	NodeName string
	// Peers are every rank of this attempt, in rank order, and MasterPort
	// the rendezvous port on rank 0's node; both feed the launch
	// environment (MASTER_ADDR, NODE_RANK, SLURM_*).
	Peers      []Peer
	MasterPort int
	// PortEnv, on a service replica's task, names the variable that
	// holds the replica's port (its allocation's MasterPort), which it
	// must listen on (structs.ServiceSpec.PortEnv).
	PortEnv string
	// SimGPUUtilFile, set by the runner on a process task holding
	// simulated GPUs, is the file the job writes its utilisation to
	// (SimGPUUtilEnv).
	SimGPUUtilFile string
	// GPUIndexes are the indexes on their node of Alloc.GPUs, in order
	// (SLURM_JOB_GPUS), and NodeCPUs the node's CPUs (SLURM_CPUS_ON_NODE
	// of a job that asks for none).
	GPUIndexes []int
	NodeCPUs   int
}

// Peer is one rank of a job: the node it runs on and that node's address.
type Peer struct {
	Rank int
	Node string
	Addr string // host (IP) other ranks reach the node at
}

// Runner starts, watches and stops this node's allocations.
type Runner struct {
	dir       string
	supCmd    []string
	killGrace time.Duration
	// leasePath and fenceGrace configure self-fencing (Config.LeasePath);
	// leaseFile is the lease file, open once written.
	leasePath  string
	fenceGrace time.Duration
	leaseMu    sync.Mutex
	leaseFile  *os.File
	report     func(structs.AllocUpdate)
	log        hclog.Logger
	// switchUser is whether jobs run as their own accounts (the runner is
	// root); jobUser is the account of owners without one, or the
	// runner's own account when it cannot switch.
	switchUser bool
	jobUser    Account
	// ownerUIDs gives owners without a local account uids of their own;
	// nil when they share the job user (or the runner cannot switch).
	ownerUIDs *ownerUIDs
	envAllow  []string
	agentEnv  []string
	logMax    int64
	// How image tasks run (Config.ContainerSocket and the rest).
	socket      string
	allowMounts []string
	allowCaps   []string
	shmSize     int64
	keepFailed  bool
	host        string
	gpuMode     engine.GPUMode
	simGPUs     bool
	// How process jobs are confined (Config.Cgroups and the rest).
	confine confinement

	mu       sync.Mutex
	allocs   map[string]*alloc // tracked: being started or watched
	closed   bool
	quit     chan struct{}
	wg       sync.WaitGroup
	shutdown sync.Once
}

// alloc is one tracked allocation.
type alloc struct {
	id  string
	dir string
	// mu orders Start's launch before any Stop of the same allocation.
	mu sync.Mutex
	// sup is the supervisor, when known; Stop reads supervisor.pid otherwise.
	sup procRecord
	// cpus are the CPUs the allocation's job is pinned to (Config.PinCPUs).
	cpus []int
}

// New creates a runner and its allocation directory (0711: jobs pass
// through it to their working directories, and may not list it). It
// resolves the job user, and refuses one that does not exist or is root.
func New(cfg Config) (*Runner, error) {
	if cfg.AllocDir == "" {
		return nil, ErrNoAllocDir
	}
	if cfg.LogMax == 0 {
		cfg.LogMax = DefaultLogMax
	}
	if cfg.LogMax < MinLogMax {
		return nil, fmt.Errorf("log cap %d bytes: must be at least %d", cfg.LogMax, MinLogMax)
	}
	dir, err := filepath.Abs(cfg.AllocDir)
	if err != nil {
		return nil, fmt.Errorf("allocation directory %s: %w", cfg.AllocDir, err)
	}
	if err := os.MkdirAll(dir, allocDirMode); err != nil {
		return nil, fmt.Errorf("create allocation directory: %w", err)
	}
	if err := os.Chmod(dir, allocDirMode); err != nil {
		return nil, fmt.Errorf("allocation directory: %w", err)
	}
	envAllow := DefaultJobEnvAllow
	if cfg.JobEnvAllow != nil {
		envAllow = cfg.JobEnvAllow
	}
	if err := CheckEnvAllow(envAllow); err != nil {
		return nil, err
	}
	if cfg.ContainerSocket != "" {
		if _, err := engine.Host(cfg.ContainerSocket); err != nil {
			return nil, err
		}
	}
	for _, d := range cfg.AllowMounts {
		if !filepath.IsAbs(d) {
			return nil, fmt.Errorf("%w %q: want an absolute path", ErrAllowMount, d)
		}
	}
	allowCaps := make([]string, len(cfg.AllowCaps))
	for i, c := range cfg.AllowCaps {
		name, err := structs.ParseCap(c)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrAllowCap, err)
		}
		allowCaps[i] = name
	}
	if cfg.DefaultShmSize < 0 {
		return nil, fmt.Errorf("default shm size %d bytes: must not be negative", cfg.DefaultShmSize)
	}
	r := &Runner{
		dir:         dir,
		supCmd:      slices.Clone(cfg.SupervisorCmd),
		killGrace:   cfg.KillGrace,
		leasePath:   cfg.LeasePath,
		fenceGrace:  cfg.FenceGrace,
		report:      cfg.Report,
		log:         cfg.Logger,
		switchUser:  os.Geteuid() == 0,
		envAllow:    slices.Clone(envAllow),
		agentEnv:    slices.Clone(cfg.AgentEnv),
		logMax:      cfg.LogMax,
		socket:      cfg.ContainerSocket,
		allowMounts: slices.Clone(cfg.AllowMounts),
		allowCaps:   allowCaps,
		shmSize:     cfg.DefaultShmSize,
		keepFailed:  cfg.KeepFailed,
		host:        cfg.ContainerHost,
		gpuMode:     cfg.ContainerGPUs,
		simGPUs:     cfg.SimulatedGPUs,
		allocs:      make(map[string]*alloc),
		quit:        make(chan struct{}),
	}
	if len(r.supCmd) == 0 {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("find the skein binary for supervisors: %w", err)
		}
		r.supCmd = []string{exe, "supervise"}
	}
	if r.killGrace <= 0 {
		r.killGrace = defaultKillGrace
	}
	if r.report == nil {
		r.report = func(structs.AllocUpdate) {}
	}
	if r.log == nil {
		r.log = hclog.NewNullLogger()
	}
	if cfg.AgentEnv == nil {
		r.agentEnv = os.Environ()
	}
	if err := r.setJobUser(cfg.JobUser, dir); err != nil {
		return nil, err
	}
	if r.switchUser && !cfg.ShareJobUser {
		span := cfg.JobUIDs
		if span == (UIDRange{}) {
			span = DefaultJobUIDs
		}
		if r.ownerUIDs, err = newOwnerUIDs(span, dir); err != nil {
			return nil, err
		}
	}
	if r.confine, err = newConfinement(cfg); err != nil {
		return nil, err
	}
	return r, nil
}

// setJobUser resolves the job user, and says at once what will keep jobs
// from running as their owners: a runner that is not root, or an
// allocation directory the job user cannot reach.
func (r *Runner) setJobUser(name, dir string) error {
	if !r.switchUser {
		r.jobUser = currentAccount()
		r.log.Info("not running as root: every job runs as this agent's own user, whoever owns it",
			"user", r.jobUser.Name, "uid", r.jobUser.UID)
		return nil
	}
	var err error
	if r.jobUser, err = LookupJobUser(name); err != nil {
		return fmt.Errorf("job user %q: %w", name, err)
	}
	if p, mode, owner := closedTo(dir, r.jobUser); p != "" {
		r.log.Warn("jobs cannot reach their working directories in the allocation directory: give the directories above it o+x, or give every job a --workdir",
			"dir", p, "mode", fmt.Sprintf("%04o", mode), "owner_uid", owner, "job_user", r.jobUser.Name)
	}
	return nil
}

// Start launches the allocation if the runner does not already track it; it
// is idempotent. It reports AllocRunning (with the start time) once the
// supervisor has the job started, or a terminal AllocFailed with the "start
// failed: ..." reason and exit code (127, or 126 for a program that may not
// be run).
//
// An allocation whose directory already exists is never started again: Start
// then does what Restore does for it (adopt its supervisor, or report its
// recorded or lost outcome).
//
// An error means the runner could not launch a supervisor; nothing is
// reported for it then (the caller reports), and the directory records the
// failure so that it is not retried.
func (r *Runner) Start(t Task) error {
	id := t.Alloc.ID
	if err := checkID(id); err != nil {
		return err
	}
	if len(t.Job.Spec.Command) == 0 || t.Job.Spec.Command[0] == "" {
		return fmt.Errorf("start allocation %s: %w", id, ErrNoCommand)
	}
	a, err := r.claim(id)
	if a == nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := os.Mkdir(a.dir, allocDirMode); err != nil {
		if errors.Is(err, fs.ErrExist) {
			r.attach(a)
			return nil
		}
		r.release(a)
		return fmt.Errorf("start allocation %s: %w", id, err)
	}
	if err := r.launch(a, t); err != nil {
		r.release(a)
		st := status{State: structs.AllocFailed, ExitCode: exitUnknown,
			Reason: "start failed: " + err.Error(), FinishedAt: time.Now().UTC()}
		if werr := writeJSONAtomic(filepath.Join(a.dir, statusFile), st); werr != nil {
			r.log.Error("cannot record start failure", "alloc", id, "error", werr)
		}
		return fmt.Errorf("start allocation %s: %w", id, err)
	}
	return nil
}

// claim starts tracking id; it returns nil when id is tracked already or the
// runner is shut down (with ErrClosed).
func (r *Runner) claim(id string) (*alloc, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, ErrClosed
	}
	if _, ok := r.allocs[id]; ok {
		return nil, nil
	}
	a := &alloc{id: id, dir: filepath.Join(r.dir, id)}
	r.allocs[id] = a
	return a, nil
}

// release stops tracking a.
func (r *Runner) release(a *alloc) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.allocs[a.id] == a {
		delete(r.allocs, a.id)
	}
}

// spawn runs f in a goroutine that Shutdown waits for; false when shut down.
func (r *Runner) spawn(f func()) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		f()
	}()
	return true
}

// SimGPUUtilFile is where the job of an allocation on simulated GPUs
// writes its utilisation (SimGPUUtilEnv; gpu.SimTelemetry reads it): a
// file of the job's account in the allocation's directory.
func (r *Runner) SimGPUUtilFile(allocID string) string {
	return filepath.Join(r.dir, allocID, simGPUUtilFile)
}

// account is the account a task's job runs as: its owner's, the job
// user's, or the runner's own when the runner is not root.
func (r *Runner) account(t Task) (Account, error) {
	if !r.switchUser {
		return r.jobUser, nil
	}
	return resolveAccount(t.Job.Owner, t.Job.AllowRoot, r.jobUser, r.ownerUIDs)
}

// launch writes the spec and starts the supervisor for a new allocation.
func (r *Runner) launch(a *alloc, t Task) error {
	// Made before anything else, so the directory always has a mode the
	// runner chose, whatever the umask.
	if err := os.Chmod(a.dir, allocDirMode); err != nil {
		return fmt.Errorf("allocation directory: %w", err)
	}
	acct, err := r.account(t)
	if err != nil {
		return err
	}
	sp := spec{
		AllocID:     a.id,
		CreateIndex: t.Alloc.CreateIndex,
		Driver:      processDriverName,
		Argv:        slices.Clone(t.Job.Spec.Command),
		User:        &acct,
		Workdir:     t.Job.Spec.Workdir,
		TimeLimit:   t.Job.Spec.TimeLimit,
		KillGrace:   structs.Duration(r.killGrace),
		LeasePath:   r.leasePath,
		FenceGrace:  structs.Duration(r.fenceGrace),
		LogMax:      r.logMax,
	}
	if sp.Limits, sp.Cgroup, err = r.limits(a, t); err != nil {
		return err
	}
	if sig := t.Job.Spec.Signal; sig != nil && sp.TimeLimit > 0 {
		sp.Signal, sp.SignalBefore = sig.Name, sig.Before
	}
	if t.Job.Spec.Image != "" {
		// The image's PATH and HOME stay the image's, and so does its
		// working directory unless the job names one.
		sp.Driver = containerDriverName
		sp.Env = BuildEnv(t, containerBaseEnv(acct, r.envAllow, r.agentEnv))
		if sp.Container, err = r.containerSpec(t, acct); err != nil {
			return err
		}
	} else {
		if r.simGPUs && len(t.Alloc.GPUs) > 0 {
			t.SimGPUUtilFile = r.SimGPUUtilFile(a.id)
			if err := makeJobFile(t.SimGPUUtilFile, acct, r.switchUser); err != nil {
				return err
			}
		}
		sp.Env = BuildEnv(t, jobBaseEnv(acct, r.envAllow, r.agentEnv))
		if sp.Workdir == "" {
			sp.Workdir = filepath.Join(a.dir, workDirName)
			if err := makeWorkdir(sp.Workdir, acct, r.switchUser); err != nil {
				return err
			}
		}
	}
	if err := writeJSONAtomic(filepath.Join(a.dir, specFile), sp); err != nil {
		return err
	}

	// The lock is taken before the fork and inherited, so the supervisor
	// holds it from its first instant.
	lock, err := os.OpenFile(filepath.Join(a.dir, lockFile), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrSupervisor, err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return fmt.Errorf("%w: lock: %w", ErrSupervisor, err)
	}
	logf, err := os.OpenFile(filepath.Join(a.dir, supervisorLogFile), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrSupervisor, err)
	}
	defer logf.Close()
	readyR, readyW, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("%w: %w", ErrSupervisor, err)
	}
	defer readyW.Close()

	argv := append(slices.Clone(r.supCmd), a.dir)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = a.dir
	// One thread runs a supervisor's Go code: it waits on its job and
	// copies its output, and a start with fewer threads and processors to
	// set up costs about a tenth less CPU (docs/benchmarks-history.md,
	// "2026-12-05 morning: where the burst's CPU goes; workers renew less;
	// supervisors wake less"). The
	// job's environment is built apart (jobBaseEnv) and never holds it.
	cmd.Env = append(withoutSecrets(os.Environ()), readyFDEnv+"=3", lockFDEnv+"=4", "GOMAXPROCS=1")
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.ExtraFiles = []*os.File{readyW, lock}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		readyR.Close()
		return fmt.Errorf("%w: %w", ErrSupervisor, err)
	}
	started := time.Now().UTC()
	a.sup, err = newProcRecord(cmd.Process.Pid, started)
	if err != nil {
		// Stop falls back to supervisor.pid.
		r.log.Warn("cannot read supervisor start time", "alloc", a.id, "error", err)
	}
	r.log.Info("started supervisor", "alloc", a.id, "pid", cmd.Process.Pid, "user", acct.Name, "uid", acct.UID)

	// Reap the supervisor whenever it ends, even after Shutdown.
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait() // its outcome is in status.json
		close(exited)
	}()
	ready := make(chan struct{})
	if !r.spawn(func() {
		_, _ = io.Copy(io.Discard, readyR) // returns when the supervisor closes its end
		close(ready)
	}) {
		readyR.Close()
		return nil
	}
	if !r.spawn(func() {
		defer readyR.Close()
		r.watch(a, ready, exited)
	}) {
		readyR.Close()
	}
	return nil
}

// attach takes over an allocation whose directory exists: it watches a live
// supervisor, or reports the recorded (or lost) outcome. It reports whether
// a live supervisor was adopted.
func (r *Runner) attach(a *alloc) bool {
	held, err := lockHeld(a.dir)
	if err != nil {
		r.log.Warn("cannot tell if the supervisor lives; watching it", "alloc", a.id, "error", err)
	}
	if held {
		var sup procRecord
		if found, err := readJSON(filepath.Join(a.dir, supervisorPIDFile), &sup); found && err == nil {
			a.sup = sup
		}
		r.adoptCPUs(a)
		if !r.spawn(func() { r.watch(a, nil, nil) }) {
			r.release(a)
			return false
		}
		r.log.Info("adopted supervisor", "alloc", a.id, "pid", a.sup.PID)
		return true
	}
	r.release(a)
	// The lock is free, so status.json is final if it exists.
	r.spawn(func() { r.settle(a) })
	return false
}

// watch follows a tracked allocation until it ends or the runner shuts
// down. ready and exited (nil for an adopted supervisor) wake it early.
// Once the job runs, a supervisor this runner started is not polled: its
// exit is what ends the allocation, and exited says so.
func (r *Runner) watch(a *alloc, ready, exited <-chan struct{}) {
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	var w watchState
	for {
		if r.check(a, &w) {
			return
		}
		poll := tick.C
		if w.running && exited != nil {
			poll = nil
		}
		select {
		case <-r.quit:
			return
		case <-ready:
			ready = nil
		case <-exited:
			exited = nil
		case <-poll:
		}
	}
}

// watchState is what watch remembers of an allocation between checks.
type watchState struct {
	running bool
	// pull is the pull progress last reported, at pullAt.
	pull   structs.PullProgress
	pullAt time.Time
}

// check looks at an allocation's directory once; true when it is over.
func (r *Runner) check(a *alloc, w *watchState) bool {
	// The lock first: status.json is written before the lock is released.
	held, err := lockHeld(a.dir)
	if err != nil {
		r.log.Warn("cannot test supervisor lock", "alloc", a.id, "error", err)
	}
	var st status
	found, err := readJSON(filepath.Join(a.dir, statusFile), &st)
	if err != nil || found || !held {
		// A job that started and ended since the last look ran all
		// the same: running is reported before how it ended.
		r.reportStarted(a, w)
		r.release(a)
		r.settle(a)
		return true
	}
	if !r.reportStarted(a, w) {
		r.reportPull(a, w)
	}
	return false
}

// reportStarted reports the allocation running, once, when its supervisor
// has recorded the job's start (job.pid); it says whether the job started.
func (r *Runner) reportStarted(a *alloc, w *watchState) bool {
	if w.running {
		return true
	}
	var job jobRecord
	if found, err := readJSON(filepath.Join(a.dir, jobPIDFile), &job); !found || err != nil {
		return false
	}
	w.running = true
	r.log.Info("job running", "alloc", a.id, "pid", job.PID, "container", job.ContainerName)
	r.report(structs.AllocUpdate{AllocID: a.id, State: structs.AllocRunning, At: job.StartedAt, RunAs: runsAs(a.dir)})
	return true
}

// reportPull reports how far the supervisor got pulling the allocation's
// image (pull.json), when that changed, at most once per
// pullReportInterval.
func (r *Runner) reportPull(a *alloc, w *watchState) {
	var p structs.PullProgress
	if found, err := readJSON(filepath.Join(a.dir, pullFile), &p); !found || err != nil {
		return
	}
	if p.Image == w.pull.Image && p.Bytes == w.pull.Bytes && p.Total == w.pull.Total ||
		time.Since(w.pullAt) < pullReportInterval {
		return
	}
	w.pull, w.pullAt = p, time.Now()
	r.report(structs.AllocUpdate{AllocID: a.id, State: structs.AllocPending, At: p.At, Pull: &p})
}

// settle reports the outcome of an allocation whose supervisor is gone:
// status.json, or, when there is none, lost, after killing whatever the
// supervisor left running.
func (r *Runner) settle(a *alloc) {
	var st status
	found, err := readJSON(filepath.Join(a.dir, statusFile), &st)
	switch {
	case err != nil:
		r.log.Error("unreadable status", "alloc", a.id, "error", err)
		st = status{State: structs.AllocFailed, ExitCode: exitUnknown,
			Reason: "lost: unreadable status: " + err.Error(), FinishedAt: time.Now().UTC()}
	case !found:
		st = r.lostStatus(a)
		if err := writeJSONAtomic(filepath.Join(a.dir, statusFile), st); err != nil {
			r.log.Error("cannot record lost allocation", "alloc", a.id, "error", err)
		}
	}
	r.log.Info("allocation over", "alloc", a.id, "state", st.State, "exit_code", st.ExitCode,
		"reason", st.Reason)
	r.report(st.update(a.id))
}

// lostStatus is the outcome of an allocation whose supervisor died without
// recording one, after killing what it left. A stop that reached the
// supervisor before it started the job leaves no job.pid: that allocation
// was killed, not lost.
func (r *Runner) lostStatus(a *alloc) status {
	now := time.Now().UTC()
	started := r.killOrphan(a)
	var req stopRequest
	if stopFound, _ := readJSON(filepath.Join(a.dir, stopFile), &req); stopFound && !started {
		return status{State: structs.AllocKilled, ExitCode: exitUnknown,
			Reason: "killed: " + req.Reason, FinishedAt: now}
	}
	return status{State: structs.AllocLost, ExitCode: exitUnknown, Reason: lostReason, FinishedAt: now}
}

// killOrphan kills, through the driver its spec names, whatever a job whose
// supervisor died still runs, and reports whether job.pid records that
// the job was started. The driver is asked even without job.pid: the
// supervisor may have died while it was starting the job (a container
// created, its ID not yet recorded).
func (r *Runner) killOrphan(a *alloc) bool {
	var job jobRecord
	_, err := os.Stat(filepath.Join(a.dir, jobPIDFile))
	started := !errors.Is(err, fs.ErrNotExist)
	if started {
		if _, err := readJSON(filepath.Join(a.dir, jobPIDFile), &job); err != nil {
			r.log.Error("unreadable job record; looking for the job without it", "alloc", a.id, "error", err)
		}
	}
	sp, d, err := specDriver(a.dir)
	if err != nil {
		if started {
			r.log.Error("cannot kill the job left without a supervisor", "alloc", a.id, "error", err)
		}
		return started
	}
	if started {
		r.log.Warn("job left without a supervisor; killing what remains of it", "alloc", a.id, "driver", sp.Driver)
	}
	if err := d.killOrphan(sp, a.dir, job); err != nil {
		r.log.Error("cannot kill the job left without a supervisor", "alloc", a.id, "error", err)
	}
	return started
}

// specDriver reads an allocation's spec and the driver it names.
func specDriver(dir string) (spec, driver, error) {
	var sp spec
	found, err := readJSON(filepath.Join(dir, specFile), &sp)
	if err == nil && !found {
		err = fmt.Errorf("read %s: %w", specFile, fs.ErrNotExist)
	}
	if err != nil {
		return spec{}, nil, err
	}
	d, err := driverNamed(sp.Driver)
	return sp, d, err
}

// RenewLease extends the node's lease until the given time, or forever for
// a zero time. Supervisors read it from Config.LeasePath. It is rewritten
// in place, several times a second, and never synced to disk: after the
// machine restarts no supervisor is left to read it, and the agent's
// first renewal replaces it. A new file, a rename and two syncs for each
// of four renewals a second were most of an idle worker's own work in
// its CPU profile, and the syncs held up the Raft log's on a shared disk
// (docs/benchmarks-history.md, "Scale — what a pass and an idle worker pay
// per member (2026-12-04)"). See lease for how a supervisor reads it.
func (r *Runner) RenewLease(until time.Time) error {
	if r.leasePath == "" {
		return nil
	}
	data, err := encodeLease(until)
	if err != nil {
		return err
	}
	r.leaseMu.Lock()
	defer r.leaseMu.Unlock()
	opened := r.leaseFile == nil
	if opened {
		if r.leaseFile, err = os.OpenFile(r.leasePath, os.O_RDWR|os.O_CREATE, 0o600); err != nil {
			return fmt.Errorf("open the lease file: %w", err)
		}
	}
	_, err = r.leaseFile.WriteAt(data, 0)
	if err == nil && opened {
		err = r.leaseFile.Truncate(leaseFileSize) // what an older agent wrote may be longer
	}
	if err != nil {
		_ = r.leaseFile.Close()
		r.leaseFile = nil
		return fmt.Errorf("write the lease file: %w", err)
	}
	return nil
}

// Stop asks an allocation's supervisor to stop its job: SIGTERM to the job
// (a process job's whole process group), SIGKILL after the kill grace. The
// terminal state (AllocKilled, reason "killed: <reason>") is reported when
// the job is gone. An unknown allocation is left alone.
func (r *Runner) Stop(allocID, reason string) {
	r.StopWithin(allocID, reason, 0)
}

// StopWithin is Stop with a kill grace of at most grace (0: the configured
// kill grace).
func (r *Runner) StopWithin(allocID, reason string, grace time.Duration) {
	r.stop(allocID, stopRequest{Reason: reason, Grace: structs.Duration(grace)})
}

// StopAfter is Stop with a kill grace of exactly grace, longer or shorter
// than the configured one (0: the configured kill grace): a preempted job
// gets the grace it asked for.
func (r *Runner) StopAfter(allocID, reason string, grace time.Duration) {
	r.stop(allocID, stopRequest{Reason: reason, Grace: structs.Duration(grace), Exact: grace > 0})
}

// StopSignalled is StopAfter with signal (a name from
// structs.TimeSignals; empty: SIGTERM) sent first: a job moved off a
// draining node gets its --signal to checkpoint.
func (r *Runner) StopSignalled(allocID, reason string, grace time.Duration, signal string) {
	r.stop(allocID, stopRequest{Reason: reason, Grace: structs.Duration(grace), Exact: grace > 0, Signal: signal})
}

func (r *Runner) stop(allocID string, req stopRequest) {
	if checkID(allocID) != nil {
		return
	}
	r.mu.Lock()
	a := r.allocs[allocID]
	r.mu.Unlock()
	if a == nil {
		return
	}
	if req.Reason == "" {
		req.Reason = "stop requested"
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	// The request goes to disk first: a supervisor that has not started the
	// job yet finds it there and never starts it.
	req.At = time.Now().UTC()
	if err := writeJSONAtomic(filepath.Join(a.dir, stopFile), req); err != nil {
		r.log.Warn("cannot record stop request", "alloc", a.id, "error", err)
	}
	sup := a.sup
	if sup.PID == 0 {
		if found, err := readJSON(filepath.Join(a.dir, supervisorPIDFile), &sup); !found || err != nil {
			return
		}
		a.sup = sup
	}
	if !sup.alive() {
		return
	}
	r.log.Info("stopping allocation", "alloc", a.id, "reason", req.Reason)
	if err := syscall.Kill(sup.PID, syscall.SIGTERM); err != nil {
		r.log.Warn("cannot signal supervisor", "alloc", a.id, "pid", sup.PID, "error", err)
	}
}

// Restore scans the allocation directory after an agent restart. It
// re-adopts every allocation whose supervisor still lives and watches it as
// if it had started it; it reports the recorded outcome of every allocation
// that has one (again: receivers treat reports as idempotent); and it
// reports AllocFailed, reason "lost: supervisor exited without recording a
// result", for one whose supervisor died without a result, after killing any
// job it left. It returns the IDs it adopted.
func (r *Runner) Restore() ([]string, error) {
	r.mu.Lock()
	closed := r.closed
	r.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	entries, err := os.ReadDir(r.dir)
	if err != nil {
		return nil, fmt.Errorf("scan allocations: %w", err)
	}
	var adopted []string
	for _, e := range entries {
		if !e.IsDir() || checkID(e.Name()) != nil {
			continue
		}
		a, err := r.claim(e.Name())
		if err != nil {
			return adopted, err
		}
		if a == nil {
			continue
		}
		a.mu.Lock()
		if r.attach(a) {
			adopted = append(adopted, a.id)
		}
		a.mu.Unlock()
	}
	return adopted, nil
}

// Tracked returns the IDs of the allocations being started or watched,
// sorted.
func (r *Runner) Tracked() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	ids := make([]string, 0, len(r.allocs))
	for id := range r.allocs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// LogPath returns the file holding an allocation's newest output; stream
// is "stdout" or "stderr" (OpenLog also reads what was rotated out of it).
// ErrNoLogs means the job has written no such file (yet, or ever).
func (r *Runner) LogPath(allocID, stream string) (string, error) {
	dir, name, err := r.logDir(allocID, stream)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, name)
	if _, err := os.Stat(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("allocation %s %s: %w", allocID, stream, ErrNoLogs)
		}
		return "", fmt.Errorf("allocation %s %s: %w", allocID, stream, err)
	}
	return path, nil
}

// Forget removes the directory of an allocation that is over. It refuses
// (ErrStillRunning) while the allocation is tracked or its supervisor lives.
// The caller must not Start the allocation again afterwards: with its
// directory gone, it would run anew.
func (r *Runner) Forget(allocID string) error {
	if err := checkID(allocID); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.allocs[allocID]; ok {
		return fmt.Errorf("forget allocation %s: %w", allocID, ErrStillRunning)
	}
	dir := filepath.Join(r.dir, allocID)
	if held, err := lockHeld(dir); held {
		if err != nil {
			return fmt.Errorf("forget allocation %s: %w", allocID, err)
		}
		return fmt.Errorf("forget allocation %s: %w", allocID, ErrStillRunning)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("forget allocation %s: %w", allocID, err)
	}
	return nil
}

// Sweep removes the directories, logs included, of the allocations that
// are over and that the state has dropped: held reports whether the state
// still holds an allocation, and applied is an index the state has
// applied. A directory goes when the runner does not track its
// allocation, no supervisor holds it, it records an outcome, the state
// does not hold the allocation, and the entry that created it (its spec's
// CreateIndex) is at or below applied: the state dropped the allocation,
// it has not merely not reached it yet (an agent restarted on an older
// snapshot). A directory whose spec records no index is kept. Sweep
// returns how many directories it removed and the first error.
func (r *Runner) Sweep(held func(allocID string) bool, applied uint64) (int, error) {
	entries, err := os.ReadDir(r.dir)
	if err != nil {
		return 0, fmt.Errorf("scan allocations: %w", err)
	}
	removed := 0
	var first error
	for _, e := range entries {
		id := e.Name()
		if !e.IsDir() || checkID(id) != nil || held(id) {
			continue
		}
		dir := filepath.Join(r.dir, id)
		var sp spec
		var st status
		if found, err := readJSON(filepath.Join(dir, specFile), &sp); !found || err != nil || sp.CreateIndex == 0 || sp.CreateIndex > applied {
			continue
		}
		if found, err := readJSON(filepath.Join(dir, statusFile), &st); !found || err != nil {
			continue
		}
		switch err := r.Forget(id); {
		case err == nil:
			removed++
		case errors.Is(err, ErrStillRunning):
		case first == nil:
			first = err
		}
	}
	return removed, first
}

// Shutdown stops watching and reporting. It does not stop jobs: they keep
// running under their supervisors, and a new runner's Restore adopts them.
// Start and Restore fail with ErrClosed afterwards. A supervisor this runner
// started is still reaped by a goroutine when it exits.
func (r *Runner) Shutdown() {
	r.shutdown.Do(func() {
		r.mu.Lock()
		r.closed = true
		close(r.quit)
		r.mu.Unlock()
		r.wg.Wait()
		r.leaseMu.Lock()
		if r.leaseFile != nil {
			_ = r.leaseFile.Close()
			r.leaseFile = nil
		}
		r.leaseMu.Unlock()
	})
}

// checkID accepts IDs that are safe as one path component.
func checkID(id string) error {
	if id == "" || len(id) > maxAllocID {
		return fmt.Errorf("%w %q", ErrInvalidAllocID, id)
	}
	for i, c := range id {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			i > 0 && (c == '-' || c == '_' || c == '.')
		if !ok {
			return fmt.Errorf("%w %q: use letters, digits, '-', '_' and '.'", ErrInvalidAllocID, id)
		}
	}
	return nil
}

// CreateIndex returns the Raft index that created an allocation this
// runner started (its spec's), and false when it holds no record of it.
func (r *Runner) CreateIndex(allocID string) (uint64, bool) {
	if checkID(allocID) != nil {
		return 0, false
	}
	var sp spec
	found, err := readJSON(filepath.Join(r.dir, allocID, specFile), &sp)
	if !found || err != nil || sp.CreateIndex == 0 {
		return 0, false
	}
	return sp.CreateIndex, true
}

// Outcome returns how an allocation that is no longer tracked ended, as
// its supervisor recorded it, so that it can be reported again: the
// state a backup restored holds it as live. False while it is tracked,
// or without a record.
func (r *Runner) Outcome(allocID string) (structs.AllocUpdate, bool) {
	if checkID(allocID) != nil {
		return structs.AllocUpdate{}, false
	}
	r.mu.Lock()
	_, tracked := r.allocs[allocID]
	r.mu.Unlock()
	if tracked {
		return structs.AllocUpdate{}, false
	}
	var st status
	found, err := readJSON(filepath.Join(r.dir, allocID, statusFile), &st)
	if !found || err != nil {
		return structs.AllocUpdate{}, false
	}
	return st.update(allocID), true
}

// Started returns the running report of a tracked allocation whose job
// has started, as its supervisor recorded it (job.pid), so that it can be
// sent again: the state a backup restored holds it as still pending.
// False while the job has not started, or for one not tracked.
func (r *Runner) Started(allocID string) (structs.AllocUpdate, bool) {
	r.mu.Lock()
	a := r.allocs[allocID]
	r.mu.Unlock()
	if a == nil {
		return structs.AllocUpdate{}, false
	}
	var job jobRecord
	if found, err := readJSON(filepath.Join(a.dir, jobPIDFile), &job); !found || err != nil {
		return structs.AllocUpdate{}, false
	}
	return structs.AllocUpdate{AllocID: allocID, State: structs.AllocRunning, At: job.StartedAt, RunAs: runsAs(a.dir)}, true
}
