package node

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/skein-dev/skein/agent/engine"
	"github.com/skein-dev/skein/agent/peer"
	"github.com/skein-dev/skein/agent/runner"
	"github.com/skein-dev/skein/cluster"
	"github.com/skein-dev/skein/fsm"
	"github.com/skein-dev/skein/gpu"
	"github.com/skein-dev/skein/structs"
)

// Raft is what a node needs of Raft.
type Raft interface {
	IsLeader() bool
	Servers() ([]cluster.RaftServer, error)
}

// Config configures a Node.
type Config struct {
	NodeID string
	Name   string
	// Inventory is what discovery found: GPUs and their source.
	Inventory gpu.Inventory
	// What the node registers besides its GPUs (see register).
	HTTPAddr string
	RaftAddr string
	// GossipAddr is where other members reach this node's gossip; a
	// restarted node without --join finds its peers by it.
	GossipAddr    string
	AdvertiseAddr string
	Labels        map[string]string
	Partitions    []string // the partitions the node is in (Node.Partitions)
	CPUs          int      // 0: detect
	MemoryMiB     int64    // 0: detect
	LinkMbps      int      // 0: detect
	MasterPorts   structs.PortRange
	// Engine probes the node's container engine; nil probes none.
	// AllowMounts and AllowCaps, reported with an engine that answers,
	// are the host directories image jobs may mount here and the
	// capabilities they may be given.
	Engine      engine.Prober
	AllowMounts []string
	AllowCaps   []string

	// FSM is the local copy of the cluster's state: the node reads its
	// view from it while it is a server (view.go).
	FSM *fsm.FSM
	// View is the FSM of this node's own that viewLoop keeps its view in
	// (fsm.LoadView), never Raft's. The agent makes it, so that what it
	// makes before the node (TLS, which checks peers against the view's
	// revocations) reads the same view.
	View   *fsm.FSM
	Raft   Raft
	Runner *runner.Runner
	// AllocDir is the runner's allocation directory.
	AllocDir string
	Peers    *peer.Peers
	// Announce carries the metadata this node announces by gossip.
	Announce *peer.Announcer
	// Apply writes an entry through Raft when this node leads.
	Apply func(structs.MessageType, any) (any, error)

	// Liveness timings (see the agent's Config): a server renews its
	// lease every HeartbeatInterval, a worker every WorkerHeartbeat.
	HeartbeatInterval time.Duration
	WorkerHeartbeat   time.Duration
	StopAfter         time.Duration
	FenceGrace        time.Duration
	// KillGrace is the time between SIGTERM and SIGKILL of a stopped job.
	KillGrace time.Duration
	// SweepInterval is how often the directories of allocations the
	// state dropped are removed.
	SweepInterval time.Duration
	// GPU health.
	GPUCleanPeriod     time.Duration
	AllowForeignGPUUse bool
	// GPUMonitor watches this node's GPUs; nil picks one for the inventory.
	GPUMonitor gpu.Monitor
	// LoadInterval is how often the node reports the load of autoscaled
	// services (loadLoop; 0 reports none): InFlight, when this node runs
	// an ingress, counts the requests it has in flight to a service's
	// replicas, and Loads takes the reports while this node leads.
	LoadInterval time.Duration
	InFlight     func(service string) map[string]int64
	Loads        LoadSink
	// Telemetry reads this node's GPUs: the utilisation of those a
	// service's replicas hold is its load on the gpu metric. nil reads
	// none.
	Telemetry gpu.Telemetry

	Logger hclog.Logger
}

// LoadSink takes nodes' reports of the autoscaled services' load
// (agent/leader).
type LoadSink interface {
	ReportLoads(nodeID string, loads []structs.ServiceLoad, at time.Time)
}

// Node carries out this node's duties.
type Node struct {
	cfg Config
	log hclog.Logger
	// view is this node's view of the state, which every loop reads
	// (view.go); server says whether it is the local Raft state itself.
	view    *fsm.FSM
	server  atomic.Bool
	runner  *runner.Runner
	reports *reporter
	// checks runs the health checks of this node's service replicas.
	checks *replicaChecks
	// health turns GPU health events into reports; sim is the monitor of
	// simulated GPUs, into which faults are injected (nil for real GPUs).
	health *healthTracker
	sim    *gpu.SimMonitor
	// registered is closed once this node's inventory is committed.
	registered chan struct{}
	localKick  chan struct{}
	// stopping holds the allocations asked to stop, and portBusy the
	// port each rank 0 was last reported unable to start on (ports.go);
	// only localLoop uses them.
	stopping map[string]bool
	portBusy map[string]int
	// startMu is held by each local reconcile; noStarts, set under it by
	// StopStarting, keeps every later one from starting an allocation.
	startMu  sync.Mutex
	noStarts bool

	mu sync.Mutex
	// lastAck is when this node's lease was last renewed, and leaseEnd
	// when the lease its supervisors read runs out (zero: never); fenced
	// is set while it has no valid lease (see lease.go).
	lastAck  time.Time
	leaseEnd time.Time
	fenced   bool
	// engine is the container engine's last probe, and engineRegistered
	// the one carried by the last registration (see containers.go).
	engine           *structs.ContainerEngine
	engineRegistered *structs.ContainerEngine

	ctx context.Context
	wg  sync.WaitGroup
}

// New returns a Node; Run starts its loops. It starts fenced: until its
// first heartbeat is answered a node has no valid lease (the one on disk
// may be a stale one from before a restart) and starts no job.
func New(cfg Config) *Node {
	n := &Node{
		cfg:        cfg,
		log:        cfg.Logger,
		view:       cfg.View,
		runner:     cfg.Runner,
		health:     newHealthTracker(cfg.Inventory.GPUs, cfg.GPUCleanPeriod, cfg.AllowForeignGPUUse, now()),
		registered: make(chan struct{}),
		localKick:  make(chan struct{}, 1),
		stopping:   map[string]bool{},
		lastAck:    time.Now(),
		fenced:     true,
	}
	n.reports = newReporter(n)
	n.checks = newReplicaChecks(n.reports.add, cfg.Runner.Exec, cfg.Logger)
	return n
}

// Run starts the node's loops; they stop when ctx ends, and Wait waits
// for them.
func (n *Node) Run(ctx context.Context) {
	n.ctx = ctx
	hash := ""
	if n.isServer() {
		// The loops start from the local state as it is.
		n.server.Store(true)
		if v, err := n.cfg.FSM.NodeView(n.cfg.NodeID); err == nil {
			hash = n.loadView(v, hash)
		}
	}
	n.goLoop(func() { n.viewLoop(hash) })
	n.goLoop(n.reports.run)
	n.goLoop(n.localLoop)
	n.goLoop(n.heartbeatLoop)
	n.goLoop(n.registerLoop)
	n.goLoop(n.sweepLoop)
	n.goLoop(n.replicaCheckLoop)
	n.goLoop(n.loadLoop)
	if n.cfg.Engine != nil {
		n.goLoop(n.engineLoop)
	}
	events := make(chan gpu.Event, 64)
	if mon := n.newMonitor(); mon != nil {
		n.sim, _ = mon.(*gpu.SimMonitor)
		n.goLoop(func() { mon.Run(ctx, events) })
	}
	n.goLoop(func() { n.healthLoop(events) })
}

// Wait waits for the loops Run started.
func (n *Node) Wait() { n.wg.Wait() }

func (n *Node) goLoop(f func()) {
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		f()
	}()
}

// Registered is closed once this node's inventory is committed.
func (n *Node) Registered() <-chan struct{} { return n.registered }

// StopStarting makes this node start no allocation from now on, for an
// agent that is leaving or shutting down: what is placed here meanwhile
// starts after its restart, or elsewhere once the node is gone. When it
// returns, no start is under way either.
func (n *Node) StopStarting() {
	n.startMu.Lock()
	defer n.startMu.Unlock()
	n.noStarts = true
}

// StopAll stops every local job and waits (bounded) for them to end.
func (n *Node) StopAll(reason string) {
	for _, id := range n.runner.Tracked() {
		n.runner.Stop(id, reason)
	}
	deadline := time.Now().Add(n.cfg.KillGrace + 2*time.Second)
	for len(n.runner.Tracked()) > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
}

// Report queues an allocation's progress for the leader; it never blocks.
func (n *Node) Report(u structs.AllocUpdate) { n.reports.add(u) }

// FlushReports waits (bounded) until every queued allocation report has
// been sent.
func (n *Node) FlushReports(timeout time.Duration) { n.reports.flush(timeout) }

func now() time.Time { return time.Now().UTC() }
