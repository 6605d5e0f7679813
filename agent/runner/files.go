package runner

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/skein-dev/skein/agent/cgroup"
	"github.com/skein-dev/skein/agent/engine"
	"github.com/skein-dev/skein/structs"
)

// Names of the files in an allocation directory (see the package doc).
const (
	specFile          = "spec.json"
	lockFile          = "supervisor.lock"
	supervisorPIDFile = "supervisor.pid"
	supervisorLogFile = "supervisor.log"
	jobPIDFile        = "job.pid"
	stdoutFile        = "stdout.log"
	stderrFile        = "stderr.log"
	stopFile          = "stop.json"
	statusFile        = "status.json"
	pullFile          = "pull.json"
	workDirName       = "work"
	simGPUUtilFile    = "sim-gpu-util"
)

// exitUnknown is the exit code recorded when no process reported one.
const exitUnknown = -1

// allocDirMode is the mode of the allocation directory and of each
// allocation's own: root's, searchable so that a job reaches its work/
// and its logs, listable by no one else. Everything in them is 0600 but
// work/ (0700) and the logs, which belong to the job's account.
const allocDirMode fs.FileMode = 0o711

// spec is what a supervisor runs. The runner writes it before it starts the
// supervisor; the env is final (BuildEnv) so the supervisor adds nothing.
type spec struct {
	AllocID string `json:"alloc_id"`
	// CreateIndex is the Raft index of the entry that created the
	// allocation (0 in specs written before it was recorded): Sweep
	// tells by it an allocation the state dropped from one the state has
	// not reached yet.
	CreateIndex uint64 `json:"create_index,omitempty"`
	// Driver names the driver that runs the job (driver.go); a spec
	// written before specs named one has none, and runs a process.
	Driver string `json:"driver"`
	// User is the account the job runs as, resolved once by the runner; a
	// spec written before it was recorded has none, and the process
	// driver refuses to run it.
	User      *Account         `json:"user,omitempty"`
	Argv      []string         `json:"argv"`
	Env       []string         `json:"env"`
	Workdir   string           `json:"workdir"`
	TimeLimit structs.Duration `json:"time_limit,omitempty"`
	// Signal names the signal (structs.TimeSignals) sent to the job
	// SignalBefore its time limit; "" sends none.
	Signal       string           `json:"signal,omitempty"`
	SignalBefore structs.Duration `json:"signal_before,omitempty"`
	KillGrace    structs.Duration `json:"kill_grace"`
	// LeasePath names the node's lease file; "" means the job never
	// fences itself. FenceGrace is the kill grace when the lease expires.
	LeasePath  string           `json:"lease_path,omitempty"`
	FenceGrace structs.Duration `json:"fence_grace,omitempty"`
	// LogMax is the most bytes the job's logs may hold on disk (logs.go);
	// a spec written before specs had one takes DefaultLogMax.
	LogMax int64 `json:"log_max,omitempty"`
	// Container is what the container driver runs the job with; only a
	// spec of that driver has it.
	Container *containerSpec `json:"container,omitempty"`
	// Limits are what the job may use of the node; a spec written before
	// jobs were confined has none.
	Limits *limits `json:"limits,omitempty"`
	// Cgroup, on a process job of a node that confines jobs, is where the
	// supervisor makes the allocation's control group, named after it.
	Cgroup *cgroup.Hierarchy `json:"cgroup,omitempty"`
}

// limits is what one allocation may use of its node, resolved by the
// runner: the allocation's cgroup holds a process job to it, the engine a
// container's.
type limits struct {
	// CPUs is the allocation's CPU count, enforced as a quota of that
	// many CPUs' time (0: no CPU limit); Cpuset, when the node pins
	// jobs to CPUs, is the CPUs it runs on ("0-3,8").
	CPUs   int    `json:"cpus,omitempty"`
	Cpuset string `json:"cpuset,omitempty"`
	// MemoryBytes is the hard limit on memory, swap included (0: none).
	MemoryBytes int64 `json:"memory_bytes,omitempty"`
	// PidsMax is the most processes and threads the job may have (0: no
	// limit).
	PidsMax int64 `json:"pids_max,omitempty"`
	// DenyGPUMinors are the device minors, under NVIDIA's major 195, of
	// the node's GPUs that are not the allocation's: the job may not
	// open them.
	DenyGPUMinors []uint32 `json:"deny_gpu_minors,omitempty"`
}

// containerSpec is spec.json's container section: what the container
// driver needs besides the job's argv, env and workdir. The runner
// resolves all of it (mounts checked against the node's allowed
// directories, capabilities against the node's, the shm size and the
// account's ids), so the supervisor looks nothing up: it only opens the
// mounts' sources again, to hand the engine what it opened.
type containerSpec struct {
	// Socket is the engine's socket (engine.Host).
	Socket string             `json:"socket"`
	Image  string             `json:"image"`
	Pull   structs.PullPolicy `json:"pull"`
	// Mounts are as the runner checked them (container_mounts.go).
	Mounts []containerMount `json:"mounts,omitempty"`
	// ShmSize is /dev/shm's size in bytes; 0 is the engine's default.
	ShmSize int64 `json:"shm_size,omitempty"`
	// GPUs are the allocation's GPU UUIDs, handed to the container as
	// GPUMode says (engine.GPUsNone: no devices, simulated GPUs).
	GPUs    []string       `json:"gpus,omitempty"`
	GPUMode engine.GPUMode `json:"gpu_mode,omitempty"`
	// Caps are the capabilities the container is given, each one the
	// node allows; it has no other.
	Caps []string `json:"caps,omitempty"`
	// Host names the container the runner runs in, that the job's
	// container lives inside; "" runs it on the host's network.
	Host string `json:"host,omitempty"`
	// KeepFailed keeps the container of a job that failed by itself.
	KeepFailed bool `json:"keep_failed,omitempty"`
	// User is "UID:GID" of the job's account, and Groups its
	// supplementary group IDs.
	User   string   `json:"user"`
	Groups []string `json:"groups,omitempty"`
}

// lease is the node's right to run its jobs, renewed by the agent while
// it is in contact with the leader. A supervisor stops its job when the
// lease has expired, even if the agent itself is frozen or dead.
//
// The agent rewrites the file in place (RenewLease says why), so a
// supervisor may read one half written: Check, a checksum of
// ExpiresAt as written, tells it so, and it reads again. The file is
// padded with spaces to leaseFileSize, so a shorter lease leaves nothing
// of a longer one behind.
type lease struct {
	// ExpiresAt zero means the lease never expires (a one-node cluster,
	// where no other node could take the job over).
	ExpiresAt time.Time `json:"expires_at"`
	Check     string    `json:"check,omitempty"`
}

// leaseFileSize is the size of the lease file: the longest lease encoded
// is about 90 bytes.
const leaseFileSize = 128

// errTornLease: a lease read while the agent rewrote it, or damaged.
var errTornLease = errors.New("lease does not match its check (read while it was written)")

// leaseCheck is the check of a lease expiring at the time encoded as t.
func leaseCheck(t []byte) string {
	return strconv.FormatUint(uint64(crc32.ChecksumIEEE(t)), 16)
}

// encodeLease is the content of the lease file for a lease until until.
func encodeLease(until time.Time) ([]byte, error) {
	t, err := until.UTC().MarshalText()
	if err != nil {
		return nil, fmt.Errorf("encode lease: %w", err)
	}
	data, err := json.Marshal(lease{ExpiresAt: until.UTC(), Check: leaseCheck(t)})
	if err != nil || len(data) >= leaseFileSize {
		return nil, fmt.Errorf("encode lease: %d bytes (%v)", len(data), err)
	}
	buf := bytes.Repeat([]byte{' '}, leaseFileSize)
	copy(buf, data)
	buf[leaseFileSize-1] = '\n'
	return buf, nil
}

// readLease reads the lease file, again while what it reads does not
// match its check (a file written before the check existed has none, and
// is taken as it is).
func readLease(path string) (l lease, found bool, err error) {
	for range 3 {
		l = lease{}
		if found, err = readJSON(path, &l); !found || err != nil {
			return l, found, err
		}
		if l.Check == "" {
			return l, true, nil
		}
		t, _ := l.ExpiresAt.MarshalText()
		if leaseCheck(t) == l.Check {
			return l, true, nil
		}
		err = fmt.Errorf("read %s: %w", path, errTornLease)
	}
	return l, true, err
}

// procRecord names one process so that a reused pid is never mistaken for
// it: StartTime is field 22 of /proc/<pid>/stat (clock ticks after boot).
type procRecord struct {
	PID       int       `json:"pid"`
	StartTime uint64    `json:"start_time"`
	StartedAt time.Time `json:"started_at"`
}

// stopRequest is written by Stop before it signals the supervisor.
type stopRequest struct {
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
	// Grace, when set and shorter than the spec's kill grace, replaces it
	// (fencing stops jobs faster than a user's cancel). With Exact it
	// replaces it even when longer (a preempted job's own grace).
	Grace structs.Duration `json:"grace,omitempty"`
	Exact bool             `json:"exact,omitempty"`
	// Signal, when set, is sent first instead of SIGTERM (a name from
	// structs.TimeSignals: a drained job's --signal, to checkpoint).
	Signal string `json:"signal,omitempty"`
}

// status is the outcome of an allocation, written once.
type status struct {
	State    structs.AllocState `json:"state"`
	ExitCode int                `json:"exit_code"`
	Signal   string             `json:"signal,omitempty"`
	Reason   string             `json:"reason"`
	// SignalledAt is when the spec's signal went out before the time
	// limit (zero: it did not).
	SignalledAt time.Time `json:"signalled_at,omitzero"`
	StartedAt   time.Time `json:"started_at,omitzero"`
	FinishedAt  time.Time `json:"finished_at"`
	// Usage is what the job used, as its cgroup counted; nil for a job
	// that ran unconfined or never started.
	Usage *structs.AllocUsage `json:"usage,omitempty"`
}

func (s status) update(allocID string) structs.AllocUpdate {
	return structs.AllocUpdate{AllocID: allocID, State: s.State, ExitCode: s.ExitCode,
		Reason: s.Reason, At: s.FinishedAt, Usage: s.Usage}
}

// makeWorkdir creates a job's default working directory: 0700, and owned
// by the job's account when the runner switches users.
func makeWorkdir(dir string, a Account, chown bool) error {
	if err := os.Mkdir(dir, 0o700); err != nil {
		return fmt.Errorf("create workdir: %w", err)
	}
	if chown {
		if err := os.Chown(dir, int(a.UID), int(a.GID)); err != nil {
			return fmt.Errorf("give workdir to %s: %w", a.Name, err)
		}
	}
	return nil
}

// makeJobFile makes an empty file at path for the job to write: 0600,
// and its account's when chown is set.
func makeJobFile(path string, a Account, chown bool) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("create %s: %w", filepath.Base(path), err)
	}
	defer f.Close()
	if chown {
		if err := f.Chown(int(a.UID), int(a.GID)); err != nil {
			return fmt.Errorf("give %s to %s: %w", filepath.Base(path), a.Name, err)
		}
	}
	return nil
}

// writeJSONAtomic writes v to path through a temporary file and a rename, so
// a reader sees the old content or the new one, never a part.
func writeJSONAtomic(path string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s: %w", filepath.Base(path), err)
	}
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, ".tmp-"+filepath.Base(path)+"-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	_, err = tmp.Write(append(data, '\n'))
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}

// readJSON reads path into v. A missing file is not an error: found is false.
func readJSON(path string, v any) (found bool, err error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read %s: %w", path, err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return false, fmt.Errorf("decode %s: %w", path, err)
	}
	return true, nil
}

// procStat returns the state letter and start time of a process.
func procStat(pid int) (state byte, start uint64, err error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, fmt.Errorf("read process %d: %w", pid, err)
	}
	// The command name (field 2) is in parentheses and may hold spaces or
	// parentheses itself; the fields after the last ')' start with field 3.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("process %d: %w", pid, errBadStat)
	}
	fields := bytes.Fields(data[i+1:])
	if len(fields) < 20 || len(fields[0]) != 1 {
		return 0, 0, fmt.Errorf("process %d: %w", pid, errBadStat)
	}
	start, err = strconv.ParseUint(string(fields[19]), 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("process %d: %w", pid, errBadStat)
	}
	return fields[0][0], start, nil
}

// newProcRecord describes a running process.
func newProcRecord(pid int, at time.Time) (procRecord, error) {
	_, start, err := procStat(pid)
	if err != nil {
		return procRecord{}, err
	}
	return procRecord{PID: pid, StartTime: start, StartedAt: at}, nil
}

// alive reports whether the recorded process still runs: same pid, same
// start time, and not a zombie.
func (p procRecord) alive() bool {
	if p.PID <= 0 {
		return false
	}
	state, start, err := procStat(p.PID)
	return err == nil && start == p.StartTime && state != 'Z' && state != 'X'
}

// lockHeld reports whether a supervisor holds the allocation directory's
// lock. When the answer cannot be found out it says held, so a supervisor
// is never declared dead by mistake.
func lockHeld(dir string) (bool, error) {
	f, err := os.Open(filepath.Join(dir, lockFile))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return true, fmt.Errorf("open supervisor lock: %w", err)
	}
	defer f.Close()
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return true, nil
	}
	if err != nil {
		return true, fmt.Errorf("test supervisor lock: %w", err)
	}
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return false, nil
}

// timeSignals maps structs.TimeSignals to their numbers.
var timeSignals = map[string]syscall.Signal{
	"HUP": syscall.SIGHUP, "INT": syscall.SIGINT, "QUIT": syscall.SIGQUIT,
	"USR1": syscall.SIGUSR1, "USR2": syscall.SIGUSR2, "ALRM": syscall.SIGALRM,
	"TERM": syscall.SIGTERM, "URG": syscall.SIGURG, "WINCH": syscall.SIGWINCH,
	"CONT": syscall.SIGCONT,
}

// signalNames names the signals a job is commonly ended by.
var signalNames = map[syscall.Signal]string{
	syscall.SIGHUP: "SIGHUP", syscall.SIGINT: "SIGINT", syscall.SIGQUIT: "SIGQUIT",
	syscall.SIGILL: "SIGILL", syscall.SIGTRAP: "SIGTRAP", syscall.SIGABRT: "SIGABRT",
	syscall.SIGBUS: "SIGBUS", syscall.SIGFPE: "SIGFPE", syscall.SIGKILL: "SIGKILL",
	syscall.SIGUSR1: "SIGUSR1", syscall.SIGSEGV: "SIGSEGV", syscall.SIGUSR2: "SIGUSR2",
	syscall.SIGPIPE: "SIGPIPE", syscall.SIGALRM: "SIGALRM", syscall.SIGTERM: "SIGTERM",
	syscall.SIGXCPU: "SIGXCPU", syscall.SIGXFSZ: "SIGXFSZ",
}

func signalName(s syscall.Signal) string {
	if n, ok := signalNames[s]; ok {
		return n
	}
	return "signal " + strconv.Itoa(int(s))
}
