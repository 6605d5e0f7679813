package agent

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/skein-dev/skein/agent/engine"
	"github.com/skein-dev/skein/agent/ingress"
	"github.com/skein-dev/skein/agent/runner"
	"github.com/skein-dev/skein/agent/server"
	"github.com/skein-dev/skein/cluster"
	"github.com/skein-dev/skein/gpu"
	"github.com/skein-dev/skein/structs"
)

// Default ports (docs/operations.md, "Ports"). DefaultIngressPort is the agent
// command's: an agent of a Config that gives none runs no ingress.
const (
	DefaultHTTPPort    = 7470
	DefaultRaftPort    = 7471
	DefaultGossipPort  = 7472
	DefaultIngressPort = 7480
)

// DefaultRaftTimeout is the Raft heartbeat and election timeout
// (--raft-timeout); see cluster.DefaultHeartbeatTimeout for why.
const DefaultRaftTimeout = cluster.DefaultHeartbeatTimeout

// Liveness defaults (docs/architecture.md, "Liveness and fencing"). A server renews its lease with the
// leader every HeartbeatInterval, a worker every WorkerHeartbeatInterval
// (a quarter of StopAfter: 625 ms by default). One that has had no answer
// for StopAfter stops
// its jobs, giving them FenceGrace between SIGTERM and SIGKILL; the leader
// marks a node down after StopAfter of silence and declares its allocations
// lost only after DownAfter, which must exceed StopAfter + FenceGrace so the
// node has stopped them first. StopAfter is well above a leader election
// (about 1 s), so a failover never stops jobs.
const (
	DefaultHeartbeatInterval = 250 * time.Millisecond
	DefaultStopAfter         = 2500 * time.Millisecond
	DefaultFenceGrace        = 500 * time.Millisecond
	DefaultDownAfter         = 3500 * time.Millisecond
)

// workerRenewalsPerLease is how many times in each StopAfter a worker
// renews its lease.
const workerRenewalsPerLease = 4

// WorkerHeartbeatInterval is how often a worker renews its lease: four
// times in each StopAfter, never more often than a server. A server
// renews four times a second: there are a few of them, and the leader
// counts on their heartbeats. Workers are most of a large cluster, and
// their renewals are most of the servers' work when it idles (each one
// an API request to a server that passes it on); at four renewals in
// each lease, one that is late still leaves three quarters of the lease
// to the next.
func WorkerHeartbeatInterval(heartbeat, stopAfter time.Duration) time.Duration {
	return max(heartbeat, stopAfter/workerRenewalsPerLease)
}

// MaxStandbys bounds --standbys: each standby replicates the whole log
// from the leader. DefaultStandbys keeps two beside the voters, so that a
// lost voter's vote can go to a node holding the whole log (the promoter
// takes the stable non-voter of lowest ID: the standby, or a worker that
// has taken the dead server's place and caught up by then), while
// every node past the fifth is a worker that costs the leader a watch and
// a share of a server's lease rounds, not a Raft follower (agent/DESIGN.md,
// "Servers and workers").
const (
	MaxStandbys     = 16
	DefaultStandbys = 2
)

// DefaultMaxWrites and MaxMaxWrites are --max-writes' default and bound
// (agent/server, busy.go).
const (
	DefaultMaxWrites = server.DefaultMaxWrites
	MaxMaxWrites     = server.MaxMaxWrites
)

// DefaultGPUCleanPeriod is how long a GPU must go without a fatal health
// event before it returns to service by itself (--gpu-clean-period).
const DefaultGPUCleanPeriod = 10 * time.Minute

// Log caps (--log-max): the most disk, in MiB, one allocation's stdout and
// stderr keep. The default keeps the recent tens of MiB of a long training
// run's output, while a thousand allocations kept for --job-retention fit
// in 100G of a node's disk.
const (
	DefaultLogMaxMiB = runner.DefaultLogMax >> 20
	MinLogMaxMiB     = 1
)

// DefaultNodeGC is how long a node down or left stays listed before the
// leader forgets it (--node-gc).
const DefaultNodeGC = 72 * time.Hour

// DefaultSnapshotKeep is how many periodic backups a server keeps
// (--snapshot-keep).
const DefaultSnapshotKeep = 24

// DefaultJobRetention is how long a finished job, with its allocations and
// their logs, stays in the cluster (--job-retention).
const DefaultJobRetention = 24 * time.Hour

// DefaultContainerSocket is the container engine's socket the agent
// command probes unless told otherwise, and NoContainerSocket turns the
// probe off (--container-socket).
const (
	DefaultContainerSocket = engine.DefaultSocket
	NoContainerSocket      = "none"
)

// Security modes (Config.Security).
type Security string

const (
	// SecurityAuto is secure unless in dev mode or bound to loopback.
	SecurityAuto Security = ""
	// SecurityTLS is secure even on loopback (--tls).
	SecurityTLS Security = "tls"
	// SecurityInsecure is plaintext beyond loopback, for labs only
	// (--insecure-cluster); the agent says so loudly.
	SecurityInsecure Security = "insecure"
)

// DefaultCertTTL is how long a node certificate is valid.
const DefaultCertTTL = 30 * 24 * time.Hour

// DevGPUs is the simulated inventory a dev agent uses when NVML is absent.
const DevGPUs = "sim:8xH100-80"

// Config is everything an agent needs to start. Zero values mean defaults.
type Config struct {
	// Dev runs a one-node cluster on loopback, with data in a temporary
	// directory unless DataDir is set and simulated GPUs when NVML is absent.
	Dev     bool
	Name    string // node name; default the host name
	DataDir string
	// BindAddr is the IP the HTTP API and Raft listen on; AdvertiseAddr is
	// the IP other nodes use to reach this one (default BindAddr).
	BindAddr      string
	AdvertiseAddr string
	HTTPPort      int // 0 = DefaultHTTPPort; -1 = any free port (tests)
	RaftPort      int // 0 = DefaultRaftPort; -1 = any free port (tests)
	// IngressPort is where the ingress (agent/ingress) serves the
	// cluster's services, on the bind address: 0 = no ingress (the agent
	// command defaults it to DefaultIngressPort); -1 = any free port.
	IngressPort int
	// GPUs is the --gpus mode: auto, nvml, none or sim:COUNTxMODEL[-MEMGB][:TOPOLOGY].
	GPUs   string
	Labels map[string]string
	// MailProg is the program that sends the mail jobs ask for with
	// --mail-type (--mail-prog, as Slurm's MailProg: PROG -s SUBJECT
	// USER, the body on stdin); the leader's runs. "" sends none.
	MailProg string
	// Partitions are the Slurm partitions the node is in (--partition);
	// none means the default one (structs.DefaultPartition).
	Partitions []string
	// CPUs and MemoryMiB override the detected node capacity (0 = detect).
	CPUs      int
	MemoryMiB int64
	// LinkMbps overrides the detected speed of the advertised network
	// link (0 = detect from /sys/class/net), e.g. for an InfiniBand fabric
	// the kernel's Ethernet view does not show. Rank 0 of a gang goes to
	// the fastest node.
	LinkMbps int
	// MasterPorts is the range gangs with rank 0 here get MASTER_PORT
	// from (zero: structs.DefaultMasterPorts).
	MasterPorts structs.PortRange
	// ContainerSocket is the container engine's API socket (a path or
	// unix://PATH) the node probes and reports in its registration; ""
	// or "none" probes none. The agent command defaults it to
	// DefaultContainerSocket.
	ContainerSocket string
	// AllowMounts are the host directories under which image jobs' mounts
	// may lie (--allow-mount); none: image jobs mount nothing.
	AllowMounts []string
	// AllowCaps are the capabilities image jobs' containers may be given
	// here (--allow-cap), with or without CAP_; the check spells them as
	// structs.Capabilities does. None: no job here gets one.
	AllowCaps []string
	// ShmSizeMiB is an image job's /dev/shm when its spec gives none;
	// 0 = half the node's memory, as the host's own /dev/shm.
	ShmSizeMiB int64
	// KeepFailed keeps the containers of failed jobs for debugging; a
	// finished container is otherwise removed.
	KeepFailed bool
	// ContainerHost names the container the agent itself runs in
	// (--in-container): image jobs' containers then live inside it as its
	// processes do, sharing its network, its process namespace (they die
	// with it) and, with the engine's cgroupfs driver, its cgroup (they
	// freeze with it). "": the agent runs on the machine, and image jobs
	// on the host's network.
	ContainerHost string
	// Token, when set, is required on every API request. A non-loopback API
	// without a token is refused unless Insecure is set. In a secure
	// cluster the founder's token (or one it makes) is the cluster's: other
	// nodes check the hash the cluster keeps and need none of their own.
	Token    string
	Insecure bool
	// Security says whether the cluster is secure: a CA, admitted nodes,
	// mutual TLS and encrypted gossip. The default is secure unless in dev
	// mode or bound to loopback.
	Security Security
	// JoinToken admits this node to a secure cluster on its first start
	// (`skein join-token create` makes one); a node that holds a
	// certificate already needs none.
	JoinToken string
	// CertTTL is how long node certificates are valid; 0 = DefaultCertTTL.
	// Nodes renew theirs when two thirds of it have passed.
	CertTTL time.Duration
	// CertClock is the clock a node judges its certificate's age by; nil
	// is time.Now (tests move it ahead).
	CertClock func() time.Time
	// KillGrace is the time between SIGTERM and SIGKILL when a job is stopped.
	KillGrace time.Duration
	// LogMaxMiB is the most disk one allocation's stdout and stderr keep
	// (each stream its newest output, up to half); 0 = DefaultLogMaxMiB.
	LogMaxMiB int64
	// SupervisorCmd starts an allocation's supervisor (the alloc dir is
	// appended); nil means this executable with "supervise".
	SupervisorCmd []string
	// JobUser is the account a job runs as when its owner has no local
	// account of that name: a user name or UID[:GID]; "" means
	// runner.DefaultJobUser (nobody). It must exist and must not be root.
	// An agent that is not root runs every job as itself instead.
	JobUser string
	// JobUIDs is the range owners without a local account take uids of
	// their own from (zero: runner.DefaultJobUIDs); ShareJobUser runs
	// them all as JobUser instead (--job-uid-range none).
	JobUIDs      runner.UIDRange
	ShareJobUser bool
	// How jobs are confined (agent/cgroup, runner.Config). CgroupParent
	// is the group, below each cgroup hierarchy's root, that holds this
	// node's group and its jobs' groups in it ("" = DefaultCgroupParent).
	// AllowUnconfined runs jobs unconfined where the node cannot confine
	// them (no cgroups, not root); without it such a node takes no jobs.
	// JobPidsMax is the most processes and threads a job may hold (0: a
	// default, DefaultJobPidsMax or a quarter of the kernel's pid space,
	// whichever is less). PinCPUs gives a job asking for CPUs CPUs of its
	// own instead of a quota (--cpu-limit cpuset).
	CgroupParent    string
	AllowUnconfined bool
	JobPidsMax      int64
	PinCPUs         bool
	// JobEnvAllow names the variables of the agent's environment that jobs
	// get (names, or prefixes ending in '*'); nil means
	// runner.DefaultJobEnvAllow, empty means none.
	JobEnvAllow []string
	// GossipPort is the memberlist port (TCP and UDP); 0 = DefaultGossipPort,
	// -1 = any free port (tests).
	GossipPort int
	// Join lists gossip addresses of existing members ("host" or
	// "host:port"); the agent retries them with backoff until one answers.
	Join []string
	// BootstrapExpect, when set, waits for that many nodes before one Raft
	// bootstrap; otherwise a node with no Join bootstraps a one-node cluster.
	BootstrapExpect int
	// Voters is the number of Raft voters to keep (default 3).
	Voters int
	// Servers, when not 0, is how many servers (the voters and non-voting
	// standbys, `--standbys`) Raft holds; every other node is a worker
	// outside Raft that learns its work by watching a server
	// (agent/DESIGN.md, "Servers and workers").
	// 0: every node is a server.
	Servers int
	// EncryptKey is the base64 32-byte gossip encryption key from `skein
	// keygen` ("": unencrypted).
	EncryptKey string
	// Liveness timings; zero values take the defaults above.
	HeartbeatInterval time.Duration
	StopAfter         time.Duration
	FenceGrace        time.Duration
	DownAfter         time.Duration
	// RaftTimeout, when set, is the Raft heartbeat and election timeout
	// (--raft-timeout); the leader lease scales with it. Timing, when set,
	// overrides every Raft timeout (tests tighten them).
	RaftTimeout time.Duration
	Timing      cluster.Timing
	// GossipTiming overrides memberlist's probe timings (tests tighten them).
	GossipTiming cluster.GossipTiming
	// TrailingLogs, when set, is how many entries a Raft snapshot leaves
	// in the log (cluster.Config.TrailingLogs; 0: its default). No flag
	// sets it: tests lower it so that a server added late must be brought
	// up to date from a snapshot.
	TrailingLogs uint64
	// GPUCleanPeriod is how long a GPU must go without a fatal health event
	// before it returns to service by itself; 0 = DefaultGPUCleanPeriod.
	GPUCleanPeriod time.Duration
	// AllowForeignGPUUse lets work be placed on GPUs that processes skein
	// did not start are using; they are still shown.
	AllowForeignGPUUse bool
	// JobRetention is how long a finished job, with its allocations and
	// their logs, is kept; 0 = DefaultJobRetention. The leader's applies,
	// so give every node the same.
	JobRetention time.Duration
	// UsageHalfLife is how long the usage fair share counts takes to
	// count for half (--usage-half-life); 0 = the default, 7 days. The
	// leader stamps its own into each charge, so give every server the
	// same. UsageInterval is how often the leader charges it; 0 =
	// leader.DefaultUsageInterval. Tests shorten it.
	UsageHalfLife time.Duration
	UsageInterval time.Duration
	// Recover rebuilds a cluster of this node alone from the Raft state in
	// its data directory (cluster.Config.Recover): for a quorum lost for
	// good.
	Recover bool
	// NodeGC is how long a node down or left stays in the state, once
	// nothing live is on it, before the leader forgets it (and takes it
	// out of Raft); 0 = DefaultNodeGC, negative = never.
	NodeGC time.Duration
	// SnapshotEvery, when set, has a server write a backup of its state
	// (as skein snapshot save writes one) into SnapshotDir that often,
	// keeping the newest SnapshotKeep (0 = DefaultSnapshotKeep).
	SnapshotEvery time.Duration
	SnapshotDir   string
	SnapshotKeep  int
	// AutoscaleInterval is how often nodes report the load of autoscaled
	// services and the leader looks at it; 0 =
	// leader.DefaultAutoscaleInterval. Tests shorten it.
	AutoscaleInterval time.Duration
	// GPUMonitor watches this node's GPUs; nil picks one for the inventory
	// (see newMonitor).
	GPUMonitor gpu.Monitor
	// TelemetryPeriod is how often this node reads its GPUs' telemetry
	// (telemetry_wiring.go); 0 = gpu.DefaultTelemetryPeriod. Tests
	// shorten it.
	TelemetryPeriod time.Duration
	// MaxConns bounds the API connections held at once from clients that
	// are not the cluster's nodes, IngressMaxConns the ingress's, and
	// MaxConnsPerClient those from one client address at each; 0 sizes
	// them from the file-descriptor limit (conns.go). The nodes'
	// connections have a reserve of their own.
	MaxConns          int
	IngressMaxConns   int
	MaxConnsPerClient int
	// Starved reports whether this node's process is short of CPU, which
	// makes a leader put off what can wait; nil: the process's own timer
	// lag (agent/overload). Tests whose agents share one process set it.
	Starved func() bool
	// MaxWrites bounds the submitters' writes the node carries out at
	// once while it leads (--max-writes); 0 is server.DefaultMaxWrites.
	MaxWrites int
	// APITimeouts bound how long one API connection may wait for headers,
	// a body, a reader of its answer, or its next request; zero fields
	// take the server's defaults. Tests shorten them.
	APITimeouts server.Timeouts
	// IngressTimeouts bound how long one ingress connection may wait for
	// headers or its next request, and how slowly a body may come; zero
	// fields take the ingress's defaults. Tests change them.
	IngressTimeouts ingress.Timeouts
	// Network lets tests cut this node off from others; nil in production.
	Network *cluster.Partitioner
	Logger  hclog.Logger

	// conns is the API's and the ingress's connection limits, resolved
	// by withDefaults.
	conns connBudgets
}

// Config errors.
var (
	ErrNoToken     = errors.New("refusing to serve the API beyond loopback without a token: set --token (or SKEIN_TOKEN), or pass --insecure")
	ErrBadBindAddr = errors.New("invalid bind address")
	ErrFDLimit     = errors.New("file-descriptor limit too low")
	// ErrJoinTokenPlaintext: a join token given to an agent that would run
	// without TLS, which no secure cluster admits.
	ErrJoinTokenPlaintext = errors.New("--join-token-file (or SKEIN_JOIN_TOKEN): a join token admits a node to a secure cluster, and this agent would run without TLS: on loopback add --tls, and drop --insecure-cluster")
)

// withDefaults returns a copy of cfg with defaults filled in, or an error
// naming the setting that is wrong.
func (cfg Config) withDefaults() (Config, error) {
	if cfg.Dev && cfg.BindAddr == "" {
		cfg.BindAddr = "127.0.0.1"
	}
	if cfg.BindAddr == "" {
		cfg.BindAddr = "0.0.0.0"
	}
	bind := net.ParseIP(cfg.BindAddr)
	if bind == nil {
		return cfg, fmt.Errorf("--bind %q: %w: want an IP address", cfg.BindAddr, ErrBadBindAddr)
	}
	if cfg.Dev && !bind.IsLoopback() {
		return cfg, fmt.Errorf("--bind %q: dev mode listens on loopback only", cfg.BindAddr)
	}
	switch cfg.Security {
	case SecurityAuto:
		if !cfg.Dev && !bind.IsLoopback() {
			cfg.Security = SecurityTLS
		}
	case SecurityTLS, SecurityInsecure:
	default:
		return cfg, fmt.Errorf("security %q: want tls or insecure", cfg.Security)
	}
	if !cfg.secure() && !bind.IsLoopback() && cfg.Token == "" && !cfg.Insecure {
		return cfg, ErrNoToken
	}
	if !cfg.secure() && cfg.JoinToken != "" {
		return cfg, ErrJoinTokenPlaintext
	}
	if cfg.secure() && cfg.BootstrapExpect > 0 {
		return cfg, errors.New("--bootstrap-expect: a cluster with TLS starts from one node, which creates its CA; start it alone and add the others with --join and a join token (`skein join-token create`)")
	}
	if cfg.CertTTL == 0 {
		cfg.CertTTL = DefaultCertTTL
	}
	if cfg.CertTTL < time.Minute || cfg.CertTTL > 365*24*time.Hour {
		return cfg, fmt.Errorf("--cert-ttl %s: out of range 1m..8760h", cfg.CertTTL)
	}
	if cfg.AdvertiseAddr == "" {
		cfg.AdvertiseAddr = cfg.BindAddr
		if bind.IsUnspecified() {
			ip, err := firstPrivateIP()
			if err != nil {
				return cfg, fmt.Errorf("--advertise: none given and %w", err)
			}
			cfg.AdvertiseAddr = ip
		}
	}
	if ip := net.ParseIP(cfg.AdvertiseAddr); ip == nil || ip.IsUnspecified() {
		return cfg, fmt.Errorf("--advertise %q: want a reachable IP address", cfg.AdvertiseAddr)
	}
	if cfg.HTTPPort == 0 {
		cfg.HTTPPort = DefaultHTTPPort
	}
	if cfg.RaftPort == 0 {
		cfg.RaftPort = DefaultRaftPort
	}
	for name, p := range map[string]int{"--http-port": cfg.HTTPPort, "--raft-port": cfg.RaftPort, "--ingress-port": cfg.IngressPort} {
		if p < -1 || p > 65535 {
			return cfg, fmt.Errorf("%s %d: out of range 1..65535", name, p)
		}
	}
	if cfg.GossipPort == 0 {
		cfg.GossipPort = DefaultGossipPort
	}
	if cfg.GossipPort < -1 || cfg.GossipPort > 65535 {
		return cfg, fmt.Errorf("--gossip-port %d: out of range 1..65535", cfg.GossipPort)
	}
	if cfg.Dev && (len(cfg.Join) > 0 || cfg.BootstrapExpect > 0) {
		return cfg, errors.New("--dev runs a one-node cluster: drop --join and --bootstrap-expect")
	}
	if cfg.BootstrapExpect < 0 || cfg.BootstrapExpect > 7 {
		return cfg, fmt.Errorf("--bootstrap-expect %d: out of range 1..7 (voters beyond that only slow commits)", cfg.BootstrapExpect)
	}
	if cfg.Voters == 0 {
		cfg.Voters = 3
	}
	if cfg.Voters < 1 || cfg.Voters > 7 || cfg.Voters%2 == 0 {
		return cfg, fmt.Errorf("--voters %d: want an odd number from 1 to 7", cfg.Voters)
	}
	if cfg.Servers != 0 && (cfg.Servers < cfg.Voters || cfg.Servers > cfg.Voters+MaxStandbys) {
		return cfg, fmt.Errorf("--standbys %d: want 0 to %d standbys beside the %d voters (or none given: every node a server)",
			cfg.Servers-cfg.Voters, MaxStandbys, cfg.Voters)
	}
	if cfg.HeartbeatInterval == 0 {
		cfg.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if cfg.StopAfter == 0 {
		cfg.StopAfter = DefaultStopAfter
	}
	if cfg.FenceGrace == 0 {
		cfg.FenceGrace = DefaultFenceGrace
	}
	if cfg.DownAfter == 0 {
		cfg.DownAfter = DefaultDownAfter
	}
	if cfg.HeartbeatInterval < 0 || cfg.StopAfter <= 2*cfg.HeartbeatInterval {
		return cfg, fmt.Errorf("--stop-after %s: must be more than twice the heartbeat interval (%s)", cfg.StopAfter, cfg.HeartbeatInterval)
	}
	if cfg.FenceGrace < 0 || cfg.DownAfter <= cfg.StopAfter+cfg.FenceGrace {
		return cfg, fmt.Errorf("--down-after %s: must exceed --stop-after (%s) plus the fence grace (%s), so a cut-off node has stopped its jobs before they run elsewhere",
			cfg.DownAfter, cfg.StopAfter, cfg.FenceGrace)
	}
	if cfg.RaftTimeout != 0 && cfg.Timing == (cluster.Timing{}) {
		if cfg.RaftTimeout < 50*time.Millisecond || cfg.RaftTimeout > time.Minute {
			return cfg, fmt.Errorf("--raft-timeout %s: out of range 50ms..1m", cfg.RaftTimeout)
		}
		cfg.Timing = cluster.Timing{
			HeartbeatTimeout: cfg.RaftTimeout,
			ElectionTimeout:  cfg.RaftTimeout,
			// The default lease is 5/6 of the default timeout; keep that ratio.
			LeaderLeaseTimeout: cfg.RaftTimeout * cluster.DefaultLeaderLeaseTimeout / cluster.DefaultHeartbeatTimeout,
		}
	}
	if cfg.GPUs == "" {
		cfg.GPUs = "auto"
	}
	if cfg.GPUCleanPeriod == 0 {
		cfg.GPUCleanPeriod = DefaultGPUCleanPeriod
	}
	if cfg.GPUCleanPeriod < time.Second {
		return cfg, fmt.Errorf("--gpu-clean-period %s: must be at least 1s", cfg.GPUCleanPeriod)
	}
	if cfg.JobRetention == 0 {
		cfg.JobRetention = DefaultJobRetention
	}
	if cfg.JobRetention < time.Second {
		return cfg, fmt.Errorf("--job-retention %s: must be at least 1s", cfg.JobRetention)
	}
	if cfg.UsageHalfLife == 0 {
		cfg.UsageHalfLife = structs.DefaultUsageHalfLife
	}
	if cfg.UsageHalfLife < time.Minute {
		return cfg, fmt.Errorf("--usage-half-life %s: must be at least 1m", cfg.UsageHalfLife)
	}
	switch {
	case cfg.NodeGC == 0:
		cfg.NodeGC = DefaultNodeGC
	case cfg.NodeGC < 0:
		cfg.NodeGC = 0
	}
	if err := checkSnapshots(&cfg); err != nil {
		return cfg, err
	}
	if cfg.Name == "" {
		h, err := os.Hostname()
		if err != nil || h == "" {
			h = "skein"
		}
		cfg.Name = h
	}
	if cfg.KillGrace == 0 {
		cfg.KillGrace = 10 * time.Second
	}
	if cfg.KillGrace < 0 {
		return cfg, fmt.Errorf("--kill-grace %s: must not be negative", cfg.KillGrace)
	}
	// Only a root agent switches users; any other runs jobs as itself.
	if os.Geteuid() == 0 {
		if _, err := runner.LookupJobUser(cfg.JobUser); err != nil {
			return cfg, fmt.Errorf("--job-user %q: %w", cfg.JobUser, err)
		}
	}
	if cfg.CgroupParent == "" {
		cfg.CgroupParent = DefaultCgroupParent
	}
	if strings.Contains(cfg.CgroupParent, "..") {
		return cfg, fmt.Errorf("--cgroup-parent %q: must not hold \"..\"", cfg.CgroupParent)
	}
	if cfg.JobPidsMax == 0 {
		cfg.JobPidsMax = defaultJobPidsMax()
	}
	if cfg.JobPidsMax < structs.MinPidsMax || cfg.JobPidsMax > structs.MaxPidsMax {
		return cfg, fmt.Errorf("--job-pids-max %d: out of range %d..%d", cfg.JobPidsMax, structs.MinPidsMax, structs.MaxPidsMax)
	}
	if err := runner.CheckEnvAllow(cfg.JobEnvAllow); err != nil {
		return cfg, fmt.Errorf("--job-env-allow: %w", err)
	}
	if cfg.LogMaxMiB == 0 {
		cfg.LogMaxMiB = DefaultLogMaxMiB
	}
	if cfg.LogMaxMiB < MinLogMaxMiB || cfg.LogMaxMiB > structs.MaxMemoryMiB {
		return cfg, fmt.Errorf("--log-max %s: out of range %s..%s", structs.FormatMiB(cfg.LogMaxMiB),
			structs.FormatMiB(MinLogMaxMiB), structs.FormatMiB(structs.MaxMemoryMiB))
	}
	if cfg.CPUs < 0 || cfg.MemoryMiB < 0 {
		return cfg, errors.New("--cpus and --memory must not be negative")
	}
	if cfg.LinkMbps < 0 {
		return cfg, fmt.Errorf("--link-mbps %d: must not be negative", cfg.LinkMbps)
	}
	if cfg.MasterPorts != (structs.PortRange{}) {
		if err := cfg.MasterPorts.Validate(); err != nil {
			return cfg, fmt.Errorf("--master-ports: %w", err)
		}
	}
	if cfg.ContainerSocket == NoContainerSocket {
		cfg.ContainerSocket = ""
	}
	if cfg.ContainerSocket != "" {
		if _, err := engine.Host(cfg.ContainerSocket); err != nil {
			return cfg, fmt.Errorf("--container-socket: %w", err)
		}
	}
	if err := checkContainerConfig(&cfg); err != nil {
		return cfg, err
	}
	if cfg.DataDir == "" && !cfg.Dev {
		return cfg, errors.New("--data-dir is required outside dev mode")
	}
	nofile, err := fdLimit()
	if err != nil {
		return cfg, err
	}
	if cfg.conns, err = connLimits(nofile, cfg.MaxConns, cfg.IngressMaxConns, cfg.MaxConnsPerClient); err != nil {
		return cfg, err
	}
	cfg.MaxConns, cfg.IngressMaxConns, cfg.MaxConnsPerClient = cfg.conns.API.Users, cfg.conns.Ingress.Users, cfg.conns.API.PerClient
	if cfg.Logger == nil {
		cfg.Logger = hclog.New(&hclog.LoggerOptions{Name: "skein", Level: hclog.Info})
	}
	return cfg, nil
}

// Check reports what New would refuse in cfg, without starting anything:
// the error names the setting that is wrong.
func (cfg Config) Check() error {
	_, err := cfg.withDefaults()
	return err
}

// secure reports whether the cluster runs with its CA, mutual TLS and
// encrypted gossip; withDefaults has resolved SecurityAuto.
func (cfg Config) secure() bool { return cfg.Security == SecurityTLS }

// firstPrivateIP picks the address to advertise when bound to 0.0.0.0.
func firstPrivateIP() (string, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return "", fmt.Errorf("list interfaces: %w", err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
			return n.IP.String(), nil
		}
	}
	return "", errors.New("no non-loopback IPv4 address found")
}

func portString(p int) string {
	if p < 0 {
		return "0"
	}
	return fmt.Sprint(p)
}

// validContainerName is the engine's rule for a container's name.
func validContainerName(n string) bool {
	for i, r := range n {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || i > 0 && strings.ContainsRune("_.-", r)
		if !ok {
			return false
		}
	}
	return len(n) <= 128
}

// checkContainerConfig checks and cleans what image jobs get on this node:
// the directories they may mount, the capabilities they may be given,
// their default /dev/shm and the container the agent runs in.
func checkContainerConfig(cfg *Config) error {
	if len(cfg.AllowMounts) > structs.MaxMounts {
		return fmt.Errorf("--allow-mount: %d directories, more than the limit of %d", len(cfg.AllowMounts), structs.MaxMounts)
	}
	for i, dir := range cfg.AllowMounts {
		if !filepath.IsAbs(dir) || len(dir) > structs.MaxMountPathLen {
			return fmt.Errorf("--allow-mount %q: want an absolute directory of at most %d bytes", dir, structs.MaxMountPathLen)
		}
		cfg.AllowMounts[i] = filepath.Clean(dir)
	}
	var caps []string
	for _, c := range cfg.AllowCaps {
		name, err := structs.ParseCap(c)
		if err != nil {
			return fmt.Errorf("--allow-cap: %w", err)
		}
		if !slices.Contains(caps, name) {
			caps = append(caps, name)
		}
	}
	cfg.AllowCaps = caps
	if cfg.ShmSizeMiB < 0 {
		return fmt.Errorf("--shm-size %d MiB: must not be negative", cfg.ShmSizeMiB)
	}
	if n := cfg.ContainerHost; n != "" && !validContainerName(n) {
		return fmt.Errorf("--in-container %q: want a container name or ID (letters, digits, '_', '.', '-')", n)
	}
	return nil
}
