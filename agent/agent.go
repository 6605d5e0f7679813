package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/skein-dev/skein/agent/runner"
	"github.com/skein-dev/skein/cluster"
	"github.com/skein-dev/skein/fsm"
	"github.com/skein-dev/skein/gpu"
	"github.com/skein-dev/skein/structs"
)

// applyTimeout bounds one Raft write.
const applyTimeout = 10 * time.Second

// Agent is one running skein node.
type Agent struct {
	cfg     Config
	logger  hclog.Logger
	nodeID  string
	dataDir string
	tempDir bool // dataDir was made for this run and is removed at shutdown

	inv     gpu.Inventory
	fsm     *fsm.FSM
	raft    *cluster.Cluster
	runner  *runner.Runner
	reports *reporter
	live    *liveness
	// registered is closed once this node's inventory is committed.
	registered chan struct{}
	// done is closed when the agent has left the cluster.
	done        chan struct{}
	meta        atomic.Pointer[[]byte] // gossip metadata, see members.go
	metaChanged chan struct{}
	localKick   chan struct{} // see kickLocal
	schedKick   chan struct{} // see kickSchedule
	// stopping holds the allocations asked to stop; only localLoop uses it.
	stopping map[string]bool

	// health turns GPU health events into reports (health.go); sim is the
	// monitor of simulated GPUs, into which `skein gpu fault` injects (nil
	// for real GPUs).
	health *healthTracker
	sim    *gpu.SimMonitor

	listener net.Listener
	server   *http.Server
	// forwardHTTP carries agent-to-agent requests, bounded by a timeout;
	// proxyHTTP streams other nodes' logs, unbounded.
	forwardHTTP *http.Client
	proxyHTTP   *http.Client

	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	leaving  sync.Once
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
	a := &Agent{cfg: cfg, logger: cfg.Logger}
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
	a.health = newHealthTracker(inv.GPUs, a.cfg.GPUCleanPeriod, a.cfg.AllowForeignGPUUse, now())

	var key []byte
	if a.cfg.EncryptKey != "" {
		if key, err = cluster.ParseKey(a.cfg.EncryptKey); err != nil {
			return fmt.Errorf("--encrypt: %w", err)
		}
	}
	a.fsm = fsm.New(a.logger.Named("fsm"))
	a.reports = newReporter(a)
	a.live = newLiveness()
	a.registered = make(chan struct{})
	a.done = make(chan struct{})
	a.metaChanged = make(chan struct{}, 1)
	a.localKick = make(chan struct{}, 1)
	a.schedKick = make(chan struct{}, 1)
	a.setMeta(a.localMeta())
	// The API listens first: gossip metadata carries its address.
	if err := a.listen(); err != nil {
		return err
	}
	a.forwardHTTP = a.peerHTTP(applyTimeout + 5*time.Second)
	a.proxyHTTP = a.peerHTTP(0)
	a.raft, err = cluster.New(cluster.Config{
		NodeID:          a.nodeID,
		DataDir:         a.dataDir,
		RaftBind:        net.JoinHostPort(a.cfg.BindAddr, portString(a.cfg.RaftPort)),
		RaftAdvertise:   a.advertise(a.cfg.RaftPort),
		GossipBind:      net.JoinHostPort(a.cfg.BindAddr, portString(a.cfg.GossipPort)),
		GossipAdvertise: a.advertise(a.cfg.GossipPort),
		FSM:             a.fsm,
		Logger:          a.logger,
		Bootstrap:       a.singleNode(),
		BootstrapExpect: a.cfg.BootstrapExpect,
		Voters:          a.cfg.Voters,
		EncryptKey:      key,
		Meta:            a.gossipMetaBytes,
		Timing:          a.cfg.Timing,
		GossipTiming:    a.cfg.GossipTiming,
		Network:         a.cfg.Network,
	})
	if err != nil {
		return err
	}

	a.runner, err = runner.New(runner.Config{
		AllocDir:      a.allocDir(),
		SupervisorCmd: a.supervisorCmd(),
		KillGrace:     a.cfg.KillGrace,
		Report:        a.reports.add,
		Logger:        a.logger.Named("runner"),
		LeasePath:     filepath.Join(a.dataDir, "lease.json"),
		FenceGrace:    a.cfg.FenceGrace,
	})
	if err != nil {
		return err
	}
	adopted, err := a.runner.Restore()
	if err != nil {
		return fmt.Errorf("restore running jobs: %w", err)
	}
	if len(adopted) > 0 {
		a.logger.Info("re-adopted running jobs", "allocations", len(adopted))
	}

	a.goLoop(a.reports.run)
	a.goLoop(a.localLoop)
	a.goLoop(a.leaderLoop)
	a.goLoop(a.memberLoop)
	a.goLoop(a.metaLoop)
	a.goLoop(a.heartbeatLoop)
	a.goLoop(a.registerLoop)
	healthEvents := make(chan gpu.Event, 64)
	if mon := a.newMonitor(); mon != nil {
		a.sim, _ = mon.(*gpu.SimMonitor)
		a.goLoop(func() { mon.Run(a.ctx, healthEvents) })
	}
	a.goLoop(func() { a.healthLoop(healthEvents) })
	if len(a.cfg.Join) > 0 {
		a.goLoop(a.joinLoop)
	}
	if a.singleNode() {
		// A one-node cluster is ready once it has registered itself, so
		// the first submit after start finds its GPUs.
		select {
		case <-a.registered:
		case <-time.After(30 * time.Second):
			return errors.New("the node did not register within 30s: see the raft log above")
		}
	}
	a.goLoop(a.serve)
	a.logger.Info("agent started", "node", a.cfg.Name, "id", structs.ShortID(a.nodeID),
		"api", a.HTTPAddr(), "gossip", a.raft.GossipAddr(), "data_dir", a.dataDir, "gpus", a.gpuSummary())
	return nil
}

func (a *Agent) goLoop(f func()) {
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		f()
	}()
}

// openDataDir creates the data dir (0700) and loads or creates the node ID.
func (a *Agent) openDataDir() error {
	a.dataDir = a.cfg.DataDir
	if a.dataDir == "" {
		if !a.cfg.Dev {
			return errors.New("--data-dir is required outside dev mode")
		}
		dir, err := os.MkdirTemp("", "skein-dev-")
		if err != nil {
			return fmt.Errorf("make a temporary data dir: %w", err)
		}
		a.dataDir, a.tempDir = dir, true
	}
	if err := os.MkdirAll(a.dataDir, 0o700); err != nil {
		return fmt.Errorf("create data dir %s: %w", a.dataDir, err)
	}
	if err := os.Chmod(a.dataDir, 0o700); err != nil {
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
	a.server = &http.Server{
		Handler:           a.routes(),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          a.logger.Named("http").StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}),
	}
	return nil
}

func (a *Agent) serve() {
	if err := a.server.Serve(a.listener); err != nil && !errors.Is(err, http.ErrServerClosed) {
		a.logger.Error("api server stopped", "error", err)
	}
}

// HTTPAddr is the base URL of this agent's API.
func (a *Agent) HTTPAddr() string {
	port := a.listener.Addr().(*net.TCPAddr).Port
	return "http://" + net.JoinHostPort(a.cfg.AdvertiseAddr, fmt.Sprint(port))
}

// NodeID is this node's stable ID.
func (a *Agent) NodeID() string { return a.nodeID }

// DataDir is where this agent keeps its state.
func (a *Agent) DataDir() string { return a.dataDir }

// register records this node's inventory in the replicated state.
func (a *Agent) register() error {
	cpus, mem := a.cfg.CPUs, a.cfg.MemoryMiB
	if cpus == 0 {
		cpus = runtime.NumCPU()
	}
	if mem == 0 {
		mem = hostMemoryMiB()
	}
	link := a.cfg.LinkMbps
	if link == 0 {
		link = linkMbps(a.cfg.AdvertiseAddr)
	}
	node := structs.Node{
		ID:   a.nodeID,
		Name: a.cfg.Name,
		Addresses: structs.Addresses{
			HTTP: a.HTTPAddr(),
			Raft: a.raft.Addr(),
		},
		Labels:      a.cfg.Labels,
		CPUs:        cpus,
		MemoryMiB:   mem,
		GPUs:        a.inv.GPUs,
		GPUSource:   a.inv.Source,
		GPUDriver:   a.inv.Driver,
		CUDAVersion: a.inv.CUDA,
		LinkMbps:    link,
		MasterPorts: a.cfg.MasterPorts,
		Status:      structs.NodeReady,
		Version:     structs.Version,
	}
	if err := a.writeRegister(node); err != nil {
		return fmt.Errorf("register node: %w", err)
	}
	return nil
}

// registerLoop records this node's inventory, retrying until a leader takes it.
func (a *Agent) registerLoop() {
	backoff := 100 * time.Millisecond
	for {
		err := a.register()
		if err == nil {
			close(a.registered)
			return
		}
		a.logger.Debug("registration not accepted yet; retrying", "error", err)
		select {
		case <-a.ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// joinLoop joins the cluster through the --join addresses, retrying with
// backoff until one of them answers.
func (a *Agent) joinLoop() {
	backoff := 250 * time.Millisecond
	for {
		n, err := a.raft.Join(a.cfg.Join)
		if n > 0 {
			a.logger.Info("joined the cluster", "through", n)
			return
		}
		a.logger.Warn("cannot join yet; retrying", "addrs", a.cfg.Join, "error", err, "retry_in", backoff)
		select {
		case <-a.ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 10*time.Second)
	}
}

// apply writes one message through Raft and returns what the FSM returned.
func (a *Agent) apply(t structs.MessageType, msg any) (any, error) {
	buf, err := structs.Encode(t, msg)
	if err != nil {
		return nil, err
	}
	return a.raft.Apply(buf, applyTimeout)
}

func (a *Agent) gpuSummary() string {
	if len(a.inv.GPUs) == 0 {
		return "none"
	}
	s := fmt.Sprintf("%d x %s (%s)", len(a.inv.GPUs), a.inv.GPUs[0].Model, structs.FormatMiB(a.inv.GPUs[0].MemoryMiB))
	if a.inv.Source == "simulated" {
		s += ", simulated"
	}
	return s
}

// Shutdown stops the agent. Jobs keep running under their supervisors and
// are re-adopted by the next agent on the same data dir, except in dev mode
// with a temporary data dir, where they are stopped and the dir is removed.
func (a *Agent) Shutdown() { a.stop(true) }

// stop shuts the agent down; a leader hands leadership over first when
// handover is set, so the cluster does not wait out an election. Tests
// pass false to stop a node the way a crash would.
func (a *Agent) stop(handover bool) {
	a.shutdown.Do(func() {
		if a.tempDir && a.runner != nil {
			a.stopAllJobs("agent shutting down")
		}
		if handover && a.raft != nil && a.raft.IsLeader() && !a.alone() {
			if err := a.raft.LeadershipTransfer(); err != nil {
				a.logger.Warn("hand leadership over before shutting down", "error", err)
			}
		}
		if a.server != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_ = a.server.Shutdown(ctx)
			cancel()
		} else if a.listener != nil {
			_ = a.listener.Close()
		}
		a.cancel()
		a.wg.Wait()
		if a.runner != nil {
			a.runner.Shutdown()
		}
		if a.raft != nil {
			if err := a.raft.Shutdown(); err != nil {
				a.logger.Error("raft shutdown", "error", err)
			}
		}
		if a.tempDir {
			_ = os.RemoveAll(a.dataDir)
		}
	})
}

// stopAllJobs stops every local job and waits (bounded) for them to end.
func (a *Agent) stopAllJobs(reason string) {
	for _, id := range a.runner.Tracked() {
		a.runner.Stop(id, reason)
	}
	deadline := time.Now().Add(a.cfg.KillGrace + 2*time.Second)
	for len(a.runner.Tracked()) > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
}

func now() time.Time { return time.Now().UTC() }

// GenerateKey returns a new gossip encryption key for --encrypt.
func GenerateKey() (string, error) { return cluster.GenerateKey() }

// Name is this node's name.
func (a *Agent) Name() string { return a.cfg.Name }
