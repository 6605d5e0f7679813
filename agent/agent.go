package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/skein-dev/skein/agent/cgroup"
	"github.com/skein-dev/skein/agent/engine"
	"github.com/skein-dev/skein/agent/ingress"
	"github.com/skein-dev/skein/agent/leader"
	"github.com/skein-dev/skein/agent/metrics"
	"github.com/skein-dev/skein/agent/node"
	"github.com/skein-dev/skein/agent/overload"
	"github.com/skein-dev/skein/agent/peer"
	"github.com/skein-dev/skein/agent/runner"
	"github.com/skein-dev/skein/agent/secure"
	"github.com/skein-dev/skein/agent/server"
	"github.com/skein-dev/skein/cluster"
	"github.com/skein-dev/skein/fsm"
	"github.com/skein-dev/skein/gpu"
	"github.com/skein-dev/skein/structs"
)

// Timeouts of the agent's own start and stop.
const (
	// applyTimeout bounds one Raft write.
	applyTimeout = 10 * time.Second
	// registerWait bounds how long a one-node cluster waits at start for
	// its own registration.
	registerWait = 30 * time.Second
	// serverDrain bounds how long requests in flight get at shutdown.
	serverDrain = 2 * time.Second
	// leaveTimeout bounds a graceful leave: handing over leadership and
	// waiting to be removed from Raft.
	leaveTimeout = 30 * time.Second
	// reportFlush bounds how long a leaving node waits for its last
	// allocation reports to be sent.
	reportFlush = 5 * time.Second
)

// Agent is one running skein node. It wires the parts together: the
// replicated state (fsm) and Raft with gossip (cluster), the leader's
// duties (agent/leader), this node's own duties (agent/node, with
// agent/runner), the HTTP surface (agent/server), and how nodes reach one
// another (agent/peer).
type Agent struct {
	cfg     Config
	logger  hclog.Logger
	nodeID  string
	dataDir string
	tempDir bool // dataDir was made for this run and is removed at shutdown
	audit   *server.AuditLog

	// load says whether this process is short of CPU (agent/overload).
	load *overload.Monitor

	inv    gpu.Inventory
	engine *engine.Docker // nil: no container engine is probed
	fsm    *fsm.FSM
	// view is this node's view (agent/node), made here so that what
	// comes before the node part (TLS checks revocations in it) reads it.
	view     *fsm.FSM
	metrics  *metrics.Metrics
	raft     *cluster.Cluster
	runner   *runner.Runner
	peers    *peer.Peers
	secure   *secure.Secure // nil in a plaintext cluster
	announce *peer.Announcer
	leader   *leader.Leader
	node     *node.Node
	server   *server.Server
	listener net.Listener
	// ingress serves the cluster's services on ingressListener through
	// proxy; all nil without --ingress-port.
	ingress         *ingress.Server
	ingressListener net.Listener
	proxy           *ingress.Proxy
	// conns limits the API's connections, ingressConns the ingress's;
	// nodes says which are nodes'.
	conns        *server.ConnLimiter
	ingressConns *server.ConnLimiter
	nodes        nodeAddrs
	// done is closed when the agent has left the cluster.
	done chan struct{}

	// telemetry reads this node's GPUs (telemetry_wiring.go) for the load
	// reports, metrics and the web UI; xids counts the critical XIDs its
	// monitor sees, for it.
	telemetry gpu.Telemetry
	xids      *gpu.XIDCounter

	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	leaving sync.Once
	// leaveErr is why the leave was not clean; nil when it was, or has
	// not happened.
	leaveErr atomic.Pointer[error]
	shutdown sync.Once
}

// New starts an agent: it opens the data dir, discovers GPUs, starts Raft,
// registers the node, re-adopts jobs left running by a previous run, and
// serves the API. Call Shutdown to stop it.
func New(cfg Config) (*Agent, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	a := &Agent{cfg: cfg, logger: cfg.Logger, done: make(chan struct{})}
	a.ctx, a.cancel = context.WithCancel(context.Background())
	if err := a.start(); err != nil {
		a.Shutdown()
		return nil, err
	}
	return a, nil
}

func (a *Agent) start() error {
	if err := a.openDataDir(); err != nil {
		return err
	}
	fallback := "none"
	if a.cfg.Dev {
		fallback = DevGPUs
	}
	inv, err := gpu.Discover(a.cfg.GPUs, a.nodeID, fallback)
	if err != nil {
		return err
	}
	a.inv = inv
	if inv.Note != "" {
		a.logger.Warn(inv.Note)
	}
	if inv.Source == gpu.SourceNVML {
		a.logger.Info("GPUs found through NVML", "count", len(inv.GPUs), "driver", inv.Driver, "cuda", inv.CUDA)
	}
	var key []byte
	if a.cfg.EncryptKey != "" {
		if key, err = cluster.ParseKey(a.cfg.EncryptKey); err != nil {
			return fmt.Errorf("--encrypt: %w", err)
		}
	}
	a.fsm = fsm.New(a.logger.Named("fsm"))
	a.view = fsm.New(a.logger.Named("view"))
	sampler := a.newTelemetry() // before the metrics, which read it
	a.load = overload.New()
	a.newMetrics()
	var others [][]byte
	if a.cfg.secure() {
		if err := a.openTrust(key); err != nil {
			return err
		}
		if key, others, err = a.secure.GossipKeys(); err != nil {
			return err
		}
	}
	if a.cfg.Security == SecurityInsecure {
		a.logger.Warn("INSECURE CLUSTER (--insecure-cluster): no TLS, no node admission, gossip encrypted only with --encrypt; anyone who reaches these ports can join, read every job's environment and run jobs. Use it in a lab only.")
	}
	// The API listens first: gossip metadata carries its address.
	if err := a.listen(); err != nil {
		return err
	}
	if err := a.listenIngress(); err != nil {
		return err
	}
	a.announce = peer.NewAnnouncer(node.InventoryMeta(a.cfg.Name, a.HTTPAddr(), inv))
	a.raft, err = cluster.New(cluster.Config{
		NodeID:          a.nodeID,
		DataDir:         a.dataDir,
		RaftBind:        net.JoinHostPort(a.cfg.BindAddr, portString(a.cfg.RaftPort)),
		RaftAdvertise:   a.advertise(a.cfg.RaftPort),
		GossipBind:      net.JoinHostPort(a.cfg.BindAddr, portString(a.cfg.GossipPort)),
		GossipAdvertise: a.advertise(a.cfg.GossipPort),
		FSM:             a.raftFSM(),
		Logger:          a.logger,
		Bootstrap:       a.singleNode() && !a.cfg.Recover,
		Recover:         a.cfg.Recover,
		BootstrapExpect: a.cfg.BootstrapExpect,
		Voters:          a.cfg.Voters,
		Servers:         a.cfg.Servers,
		EncryptKey:      key,
		EncryptOthers:   others,
		Meta:            a.announce.Bytes,
		Timing:          a.cfg.Timing,
		GossipTiming:    a.cfg.GossipTiming,
		TrailingLogs:    a.cfg.TrailingLogs,
		Network:         a.cfg.Network,
		RaftTLS:         a.raftTLS(),
		Admitted:        a.admitted(),
		Revoked:         a.revoked(),
		CanVote:         a.canVote(),
		PrepareVoter:    a.prepareVoter(),
		ProbeRTT:        a.metrics.ProbeRTT,
	})
	if err != nil {
		return err
	}
	if a.cfg.ContainerSocket != "" {
		if a.engine, err = engine.NewDocker(a.cfg.ContainerSocket); err != nil {
			return err
		}
	}
	if a.runner, err = runner.New(a.runnerConfig(a.confinement())); err != nil {
		return err
	}
	a.peers = peer.New(peer.Config{
		NodeID:      a.nodeID,
		HTTPAddr:    a.HTTPAddr(),
		Local:       a.listener.Addr().String(),
		Raft:        a.raft,
		FSM:         a.fsm,
		Token:       a.cfg.Token,
		TLS:         a.peerTLS(),
		CheckPeer:   a.checkPeer(),
		CallTimeout: applyTimeout + 5*time.Second,
		DialFrom:    a.dialFrom(),
		Network:     a.cfg.Network,
		Done:        a.ctx.Done(),
	})
	a.leader = leader.New(leader.Config{
		NodeID:                  a.nodeID,
		FSM:                     a.fsm,
		Raft:                    a.raft,
		Apply:                   a.apply,
		Gossip:                  a.gossip,
		HeartbeatInterval:       a.cfg.HeartbeatInterval,
		WorkerHeartbeatInterval: WorkerHeartbeatInterval(a.cfg.HeartbeatInterval, a.cfg.StopAfter),
		StopAfter:               a.cfg.StopAfter,
		DownAfter:               a.cfg.DownAfter,
		StaleLeader:             a.raft.StaleLeaderBound(),
		JobRetention:            a.cfg.JobRetention,
		UsageHalfLife:           a.cfg.UsageHalfLife,
		UsageInterval:           a.cfg.UsageInterval,
		NodeGC:                  a.cfg.NodeGC,
		Forget:                  a.forgetNode,
		AutoscaleInterval:       a.cfg.AutoscaleInterval,
		Starved:                 a.starved,
		Mail:                    a.mailFunc(),
		Metrics:                 a.metrics,
		Logger:                  a.logger.Named("leader"),
	})
	a.node = node.New(a.nodeConfig())
	adopted, err := a.runner.Restore()
	if err != nil {
		return fmt.Errorf("restore running jobs: %w", err)
	}
	if len(adopted) > 0 {
		a.logger.Info("re-adopted running jobs", "allocations", len(adopted))
	}
	userAuth, nodeAuth := a.serverAuth()
	if a.audit, err = server.OpenAuditLog(filepath.Join(a.dataDir, "audit.log"), server.DefaultAuditMax); err != nil {
		return err
	}
	a.nodes.a = a
	a.conns = server.LimitConns(a.listener, server.ListenerConfig{
		Limits:      a.cfg.conns.API,
		IsNode:      a.nodes.has,
		HTTPRefusal: a.secure == nil,
		Logger:      a.logger.Named("http"),
	})
	a.server = server.New(server.Config{
		Mail:         a.cfg.MailProg != "",
		Listener:     a.tlsListener(a.conns),
		NodeID:       a.nodeID,
		NodeName:     a.cfg.Name,
		FSM:          a.fsm,
		View:         a.node.View(),
		Raft:         a.raft,
		Apply:        a.apply,
		Restore:      a.raft.Restore,
		Forget:       a.forgetNode,
		Depart:       a.departNode,
		Peers:        a.peers,
		Heartbeats:   a.leader,
		Autoscaler:   a.leader,
		Logs:         a.runner,
		Exec:         a.execInJob,
		ExecPTY:      a.execPTYInJob,
		Signal:       a.signalJob,
		Faults:       a.node,
		Telemetry:    a.telemetry,
		Leave:        a.Leave,
		JobRetention: a.cfg.JobRetention,
		Trust:        a.secure,
		Audit:        a.audit,
		UI:           a.uiConfig(),
		UserAuth:     userAuth,
		NodeAuth:     nodeAuth,
		IsNode:       a.nodes.has,
		IngressPort:  a.ingressPort(),
		Timeouts:     a.cfg.APITimeouts,
		Metrics:      a.metrics,
		MaxWrites:    a.cfg.MaxWrites,
		Starved:      a.starved,
		Logger:       a.logger.Named("http"),
	})
	if a.ingressListener != nil {
		a.ingress = a.newIngress()
	}

	a.node.Run(a.ctx)
	a.goLoop(func() { sampler.Run(a.ctx) })
	a.goLoop(func() { a.load.Run(a.ctx, a.node.Server) })
	if a.secure != nil {
		a.secure.Run(a.ctx, secure.Deps{Raft: a.raft, Peers: a.peers, Announce: a.announce, Audit: a.server.Record}, a.goLoop)
		a.goLoop(a.revocationLoop)
	}
	a.goLoop(func() { a.leader.Follow(a.ctx) })
	a.goLoop(a.memberLoop)
	if a.cfg.SnapshotEvery > 0 {
		a.goLoop(a.snapshotLoop)
	}
	a.goLoop(a.metaLoop)
	if len(a.joinAddrs()) > 0 {
		a.goLoop(a.joinLoop)
	} else {
		a.goLoop(a.rejoinLoop)
	}
	if a.singleNode() {
		// A one-node cluster is ready once it has registered itself, so
		// the first submit after start finds its GPUs.
		select {
		case <-a.node.Registered():
		case <-time.After(registerWait):
			return fmt.Errorf("the node did not register within %s: see the raft log above", registerWait)
		}
		// A secure one also has its trust state, so the first join
		// token can be made at once.
		if a.secure != nil {
			if err := a.secure.WaitTrust(a.ctx, registerWait); err != nil {
				return err
			}
		}
	}
	a.goLoop(a.server.Serve)
	if a.ingress != nil {
		a.goLoop(a.ingress.Serve)
	}
	a.logHowToUse()
	a.logger.Info("agent started", "node", a.cfg.Name, "id", structs.ShortID(a.nodeID),
		"api", a.HTTPAddr(), "ingress", a.IngressAddr(), "gossip", a.raft.GossipAddr(), "data_dir", a.dataDir, "gpus", a.gpuSummary())
	return nil
}

// runnerConfig is the configuration of the job runner, confining jobs in
// the hierarchy cgroups (nil: it cannot, for the reason unconfined). Its
// reports go to this node's reporter, which exists before the runner
// reports anything (Restore, after the node is made).
func (a *Agent) runnerConfig(cgroups *cgroup.Hierarchy, unconfined string) runner.Config {
	a.logConfinement(cgroups, unconfined)
	minors := make(map[string]uint32, len(a.inv.GPUs))
	for _, g := range a.inv.GPUs {
		minors[g.UUID] = uint32(g.Index)
	}
	return runner.Config{
		Cgroups:         cgroups,
		Unconfined:      unconfined,
		AllowUnconfined: a.cfg.AllowUnconfined,
		PidsMax:         a.cfg.JobPidsMax,
		PinCPUs:         a.cfg.PinCPUs,
		GPUMinors:       minors,
		AllocDir:        a.allocDir(),
		SupervisorCmd:   a.supervisorCmd(),
		KillGrace:       a.cfg.KillGrace,
		Report: func(u structs.AllocUpdate) {
			a.reportRunning(u)
			a.metrics.Used(u.Usage)
			a.node.Report(u)
		},
		Logger:       a.logger.Named("runner"),
		LeasePath:    filepath.Join(a.dataDir, "lease.json"),
		FenceGrace:   a.cfg.FenceGrace,
		JobUser:      a.cfg.JobUser,
		JobUIDs:      a.cfg.JobUIDs,
		ShareJobUser: a.cfg.ShareJobUser,
		JobEnvAllow:  a.cfg.JobEnvAllow,
		LogMax:       a.cfg.LogMaxMiB << 20,
		// Image jobs.
		ContainerSocket: a.cfg.ContainerSocket,
		AllowMounts:     a.cfg.AllowMounts,
		AllowCaps:       a.cfg.AllowCaps,
		DefaultShmSize:  a.shmSize(),
		KeepFailed:      a.cfg.KeepFailed,
		ContainerHost:   a.cfg.ContainerHost,
		ContainerGPUs:   a.containerGPUs(),
		SimulatedGPUs:   a.inv.Source == gpu.SourceSimulated,
	}
}

// shmSize is an image job's /dev/shm, in bytes, when its spec gives none:
// --shm-size, else half the memory the node offers, as the host's own
// /dev/shm (tmpfs takes memory only as it is written).
func (a *Agent) shmSize() int64 {
	if a.cfg.ShmSizeMiB > 0 {
		return a.cfg.ShmSizeMiB << 20
	}
	mem := a.cfg.MemoryMiB
	if mem == 0 {
		mem = node.HostMemoryMiB()
	}
	return mem / 2 << 20
}

// containerGPUs is how image jobs get their GPUs: real GPUs as the engine
// takes them (engine.Docker.GPUMode: CDI names or the NVIDIA device
// request), simulated ones not at all (the job still sees their UUIDs in
// CUDA_VISIBLE_DEVICES).
func (a *Agent) containerGPUs() engine.GPUMode {
	if a.inv.Source != gpu.SourceNVML || a.engine == nil {
		return engine.GPUsNone
	}
	return a.engine.GPUMode(context.Background())
}

// nodeConfig is the configuration of this node's own duties.
func (a *Agent) nodeConfig() node.Config {
	var prober engine.Prober
	if a.engine != nil {
		prober = a.engine
	}
	return node.Config{
		Engine:             prober,
		AllowMounts:        a.cfg.AllowMounts,
		AllowCaps:          a.cfg.AllowCaps,
		NodeID:             a.nodeID,
		Name:               a.cfg.Name,
		Inventory:          a.inv,
		HTTPAddr:           a.HTTPAddr(),
		RaftAddr:           a.raft.Addr(),
		GossipAddr:         a.raft.GossipAddr(),
		AdvertiseAddr:      a.cfg.AdvertiseAddr,
		Labels:             a.cfg.Labels,
		Partitions:         a.cfg.Partitions,
		CPUs:               a.cfg.CPUs,
		MemoryMiB:          a.cfg.MemoryMiB,
		LinkMbps:           a.cfg.LinkMbps,
		MasterPorts:        a.cfg.MasterPorts,
		FSM:                a.fsm,
		View:               a.view,
		Raft:               a.raft,
		Runner:             a.runner,
		AllocDir:           a.allocDir(),
		Peers:              a.peers,
		Announce:           a.announce,
		Apply:              a.apply,
		HeartbeatInterval:  a.cfg.HeartbeatInterval,
		WorkerHeartbeat:    WorkerHeartbeatInterval(a.cfg.HeartbeatInterval, a.cfg.StopAfter),
		StopAfter:          a.cfg.StopAfter,
		FenceGrace:         a.cfg.FenceGrace,
		KillGrace:          a.cfg.KillGrace,
		SweepInterval:      leader.GCInterval(a.cfg.JobRetention),
		GPUCleanPeriod:     a.cfg.GPUCleanPeriod,
		AllowForeignGPUUse: a.cfg.AllowForeignGPUUse,
		GPUMonitor:         a.gpuMonitor(),
		Telemetry:          a.telemetry,
		LoadInterval:       cmp.Or(a.cfg.AutoscaleInterval, leader.DefaultAutoscaleInterval),
		InFlight:           a.ingressInFlight,
		Loads:              a.leader,
		Logger:             a.logger,
	}
}

func (a *Agent) goLoop(f func()) {
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		f()
	}()
}

// openDataDir creates the data dir and loads or creates the node ID. The
// data dir is 0711: jobs, which run as other users, pass through it to
// their working directories under allocs/; everything else in it is 0600
// or 0700.
func (a *Agent) openDataDir() error {
	a.dataDir = a.cfg.DataDir
	if a.dataDir == "" { // dev mode: withDefaults refuses it otherwise
		dir, err := os.MkdirTemp("", "skein-dev-")
		if err != nil {
			return fmt.Errorf("make a temporary data dir: %w", err)
		}
		a.dataDir, a.tempDir = dir, true
	}
	if err := os.MkdirAll(a.dataDir, 0o711); err != nil {
		return fmt.Errorf("create data dir %s: %w", a.dataDir, err)
	}
	if err := os.Chmod(a.dataDir, 0o711); err != nil {
		return fmt.Errorf("restrict data dir %s: %w", a.dataDir, err)
	}
	idPath := filepath.Join(a.dataDir, "node-id")
	b, err := os.ReadFile(idPath)
	switch {
	case err == nil:
		a.nodeID = strings.TrimSpace(string(b))
		if a.nodeID == "" {
			return fmt.Errorf("node id file %s is empty", idPath)
		}
	case errors.Is(err, os.ErrNotExist):
		a.nodeID = structs.NewID()
		if err := os.WriteFile(idPath, []byte(a.nodeID+"\n"), 0o600); err != nil {
			return fmt.Errorf("write node id %s: %w", idPath, err)
		}
	default:
		return fmt.Errorf("read node id %s: %w", idPath, err)
	}
	return nil
}

func (a *Agent) allocDir() string { return filepath.Join(a.dataDir, "allocs") }

func (a *Agent) supervisorCmd() []string {
	if a.cfg.SupervisorCmd != nil {
		return a.cfg.SupervisorCmd
	}
	exe, err := os.Executable()
	if err != nil {
		exe = os.Args[0]
	}
	return []string{exe, "supervise"}
}

// advertise is the host:port others reach a listener at; "" for a port
// picked at bind time, which the listener then reports.
func (a *Agent) advertise(port int) string {
	if port < 0 {
		return ""
	}
	return net.JoinHostPort(a.cfg.AdvertiseAddr, portString(port))
}

// holdsState reports whether this node is in its own Raft configuration:
// a server, whose FSM holds the cluster's state. A worker's holds nothing
// (its node part reads its view, agent/node).
func (a *Agent) holdsState() bool {
	servers, err := a.raft.Servers()
	return cluster.HoldsState(servers, err, a.nodeID)
}

// singleNode reports whether this agent founds a one-node cluster: it was
// given nobody to join and no bootstrap-expect.
func (a *Agent) singleNode() bool {
	return len(a.cfg.Join) == 0 && a.cfg.BootstrapExpect == 0
}

// Done is closed when the agent has left the cluster (skein leave) and its
// process should exit.
func (a *Agent) Done() <-chan struct{} { return a.done }

func (a *Agent) listen() error {
	addr := net.JoinHostPort(a.cfg.BindAddr, portString(a.cfg.HTTPPort))
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen for the API on %s: %w", addr, err)
	}
	a.listener = l
	return nil
}

// dialFrom is the address this node calls other nodes from: its bind
// address when it is one, so that they know the calls for a node's; nil
// when bound to every address, where the kernel picks the one on the
// route, which is the advertised one on the usual single network.
func (a *Agent) dialFrom() net.IP {
	if ip := net.ParseIP(a.cfg.BindAddr); !ip.IsUnspecified() {
		return ip
	}
	return nil
}

// ConnStats counts the API's connections.
func (a *Agent) ConnStats() server.ConnStats { return a.conns.Stats() }

// HTTPAddr is the base URL of this agent's API.
func (a *Agent) HTTPAddr() string {
	port := a.listener.Addr().(*net.TCPAddr).Port
	scheme := "http://"
	if a.cfg.secure() {
		scheme = "https://"
	}
	return scheme + net.JoinHostPort(a.cfg.AdvertiseAddr, fmt.Sprint(port))
}

// NodeID is this node's stable ID.
func (a *Agent) NodeID() string { return a.nodeID }

// DataDir is where this agent keeps its state.
func (a *Agent) DataDir() string { return a.dataDir }

// Name is this node's name.
func (a *Agent) Name() string { return a.cfg.Name }

// apply writes one message through Raft and returns what the FSM returned.
func (a *Agent) apply(t structs.MessageType, msg any) (any, error) {
	if err := a.everyNodeApplies(t); err != nil {
		return nil, err
	}
	if t != structs.JobNumbersStartType {
		a.startJobNumbers()
	}
	buf, err := structs.Encode(t, msg)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	defer func() { a.metrics.Committed(t, time.Since(start)) }()
	return a.raft.Apply(buf, applyTimeout)
}

// startJobNumbers turns job numbers on, before the leader's first write
// once every node applies the entry that does (until then, a node of a
// release before is in the cluster; jobs wait for their numbers, which
// the entry gives every job made so far). Once they are on it costs a
// read.
func (a *Agent) startJobNumbers() {
	if a.fsm.JobNumbersOn() || a.everyNodeApplies(structs.JobNumbersStartType) != nil {
		return
	}
	buf, err := structs.Encode(structs.JobNumbersStartType, struct{}{})
	if err != nil {
		return
	}
	if _, err := a.raft.Apply(buf, applyTimeout); err != nil {
		a.logger.Warn("cannot turn job numbers on; the next write tries again", "error", err)
	}
}

func (a *Agent) gpuSummary() string {
	if len(a.inv.GPUs) == 0 {
		return "none"
	}
	s := fmt.Sprintf("%d x %s (%s)", len(a.inv.GPUs), a.inv.GPUs[0].Model, structs.FormatMiB(a.inv.GPUs[0].MemoryMiB))
	if a.inv.Source == gpu.SourceSimulated {
		s += ", simulated"
	}
	return s
}

// Shutdown stops the agent. From its first moment no new work starts
// here: this node schedules nothing more and starts no allocation. Jobs
// keep running under their supervisors and are re-adopted by the next
// agent on the same data dir, except in dev mode with a temporary data
// dir, where they are stopped and the dir is removed.
func (a *Agent) Shutdown() { a.stop(true) }

// stop shuts the agent down; a leader hands leadership over first when
// handover is set, so the cluster does not wait out an election. Tests
// pass false to stop a node the way a crash would.
func (a *Agent) stop(handover bool) {
	a.shutdown.Do(func() {
		a.stopLaunching()
		if a.tempDir && a.node != nil {
			a.node.StopAll("agent shutting down")
		}
		if handover && a.node != nil && a.raft.IsLeader() && !a.node.Alone() {
			if err := a.raft.LeadershipTransfer(); err != nil {
				a.logger.Warn("hand leadership over before shutting down", "error", err)
			}
		}
		if a.server != nil {
			ctx, cancel := context.WithTimeout(context.Background(), serverDrain)
			a.server.Shutdown(ctx)
			cancel()
		} else if a.listener != nil {
			_ = a.listener.Close()
		}
		a.stopIngress()
		a.cancel()
		a.wg.Wait()
		if a.node != nil {
			a.node.Wait()
		}
		if a.runner != nil {
			a.runner.Shutdown()
		}
		if a.engine != nil {
			_ = a.engine.Close()
		}
		if a.raft != nil {
			if err := a.raft.Shutdown(); err != nil {
				a.logger.Error("raft shutdown", "error", err)
			}
		}
		if a.audit != nil {
			_ = a.audit.Close()
		}
		if a.tempDir {
			_ = os.RemoveAll(a.dataDir)
		}
	})
}

// stopLaunching keeps new work from starting here, for an agent on its
// way out: the leader's scheduling ends and the node starts no
// allocation, so that what frees GPUs (StopAll) frees them for good.
func (a *Agent) stopLaunching() {
	if a.leader != nil {
		a.leader.StopScheduling()
	}
	if a.node != nil {
		a.node.StopStarting()
	}
}

// GenerateKey returns a new gossip encryption key for --encrypt.
func GenerateKey() (string, error) { return cluster.GenerateKey() }

// starved reports whether this node's process is short of CPU:
// Config.Starved when set, else its timer lag (agent/overload).
func (a *Agent) starved() bool {
	if a.cfg.Starved != nil {
		return a.cfg.Starved()
	}
	return a.load.Starved()
}
