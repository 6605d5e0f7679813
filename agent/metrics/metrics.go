package metrics

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/skein-dev/skein/cluster"
	"github.com/skein-dev/skein/fsm"
	"github.com/skein-dev/skein/gpu"
	"github.com/skein-dev/skein/structs"
)

// namespace prefixes every metric's name.
const namespace = "skein"

// Raft is what the metrics read of Raft and gossip at a scrape.
type Raft interface {
	IsLeader() bool
	// Stats returns raft's counters (hashicorp/raft's Raft.Stats).
	Stats() map[string]string
	Members() []cluster.Member
	// GossipHealth is memberlist's health score of this node.
	GossipHealth() int
	// Followers is, on the leader, what it last heard of the others.
	Followers() []cluster.Follower
}

// Config configures a node's Metrics.
type Config struct {
	// NodeID and NodeName are this node's; NodeName labels its GPUs.
	NodeID   string
	NodeName string
	// FSM is the local copy of the cluster's state, and HoldsState says
	// whether this node holds it (a server; nil: always). A worker's copy
	// is empty and its Raft in no configuration: it exports neither the
	// state's series nor Raft's, only its own (GPUs, gossip, its API,
	// its process).
	FSM        *fsm.FSM
	HoldsState func() bool
	// View is this node's view (agent/node), which holds its own record
	// and allocations on a server and a worker alike: the GPU series
	// read it.
	View *fsm.FSM
	Raft Raft
	// Inventory is this node's GPUs as discovered.
	Inventory gpu.Inventory
	// Telemetry reads this node's GPUs; nil: no telemetry series (the
	// GPUs' health and allocation series, from the state, stay).
	Telemetry gpu.Telemetry
	// TimerLag is the process's worst timer lag lately (agent/overload);
	// nil: no such series.
	TimerLag func() time.Duration
}

// holdsState is HoldsState, true when it is nil.
func (c Config) holdsState() bool { return c.HoldsState == nil || c.HoldsState() }

// Metrics is one node's metrics. The hooks (Pass, Placed, ...) are safe
// for concurrent use.
type Metrics struct {
	reg     *prometheus.Registry
	handler http.Handler

	passDuration    prometheus.Histogram
	passPlacements  prometheus.Histogram
	queueWait       *prometheus.HistogramVec
	preemptions     prometheus.Counter
	restarts        *prometheus.CounterVec
	submitToRunning prometheus.Histogram
	commit          *prometheus.HistogramVec
	fsmApply        *prometheus.HistogramVec
	snapDuration    prometheus.Histogram
	snapBytes       prometheus.Gauge
	leaderChanges   prometheus.Counter
	probeRTT        prometheus.Histogram
	requests        *prometheus.HistogramVec
	jobCPU          prometheus.Counter
	jobThrottled    prometheus.Counter
	jobOOMKills     prometheus.Counter
	jobMemoryPeak   prometheus.Histogram
}

// New returns a node's metrics, registered in a registry of their own.
func New(cfg Config) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	m.passDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: namespace, Subsystem: "sched", Name: "pass_duration_seconds",
		Help:    "Time one scheduling pass took on the leader, its commit included.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
	})
	m.passPlacements = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: namespace, Subsystem: "sched", Name: "pass_placements",
		Help:    "Jobs one scheduling pass placed.",
		Buckets: []float64{0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 5000},
	})
	m.queueWait = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: namespace, Subsystem: "sched", Name: "queue_wait_seconds",
		Help:    "Time from a job's submission to its first placement, by the GPUs it asks for in all.",
		Buckets: prometheus.ExponentialBuckets(0.01, 2, 20),
	}, []string{"gpus"})
	m.preemptions = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: "sched", Name: "preemptions_total",
		Help: "Running jobs this node, as leader, stopped to make room for jobs of higher priority.",
	})
	m.restarts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: "sched", Name: "restarts_total",
		Help: "Jobs this node, as leader, placed again after an attempt ended, by what ended it.",
	}, []string{"cause"})
	m.submitToRunning = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: namespace, Subsystem: "jobs", Name: "submit_to_running_seconds",
		Help:    "Time from a job's submission to its first attempt running, observed on the node running its rank 0.",
		Buckets: prometheus.ExponentialBuckets(0.01, 2, 20),
	})
	m.commit = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: namespace, Subsystem: "raft", Name: "commit_duration_seconds",
		Help:    "Time one write by this node took to commit and apply through Raft, by entry type.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
	}, []string{"type"})
	m.fsmApply = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: namespace, Subsystem: "fsm", Name: "apply_duration_seconds",
		Help:    "Time the state machine took to apply one committed entry, by entry type.",
		Buckets: prometheus.ExponentialBuckets(0.00001, 2, 18),
	}, []string{"type"})
	m.snapDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: namespace, Subsystem: "raft", Name: "snapshot_duration_seconds",
		Help:    "Time writing one snapshot of the state took.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
	})
	m.snapBytes = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: namespace, Subsystem: "raft", Name: "snapshot_size_bytes",
		Help: "Size of the last snapshot of the state this node wrote.",
	})
	m.leaderChanges = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: "raft", Name: "leader_changes_total",
		Help: "Times this node became or stopped being the leader.",
	})
	// No label for the member probed, and no gauge of each member's last
	// round trip: at 1,000 nodes either is 999 series on every node, a
	// million in all, and each would move once every few minutes (a node
	// probes one member per probe interval, 1,000 × 400 ms apart). The
	// histogram is 17 series a node, whatever the cluster's size.
	m.probeRTT = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: namespace, Subsystem: "gossip", Name: "probe_rtt_seconds",
		Help:    "Round trip of one of this node's gossip probes of another member, answered within the probe timeout.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 14),
	})
	m.requests = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: namespace, Subsystem: "http", Name: "request_duration_seconds",
		Help:    "Time the API took to answer a request, by API (user or internal), route pattern and status code.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
	}, []string{"api", "route", "code"})
	m.jobCPU = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: "jobs", Name: "cpu_seconds_total",
		Help: "CPU time used by the allocations that ended on this node, as their cgroups counted.",
	})
	m.jobThrottled = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: "jobs", Name: "cpu_throttled_seconds_total",
		Help: "Time the CPU quotas (--cpus) of the allocations that ended on this node held them back.",
	})
	m.jobOOMKills = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: "jobs", Name: "oom_kills_total",
		Help: "Processes of the allocations that ended on this node that the kernel killed for their memory limit (--mem).",
	})
	m.jobMemoryPeak = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: namespace, Subsystem: "jobs", Name: "memory_peak_bytes",
		Help:    "The most memory each allocation that ended on this node held at once, as its cgroup counted.",
		Buckets: prometheus.ExponentialBuckets(16<<20, 2, 16),
	})
	m.reg.MustRegister(
		m.passDuration, m.passPlacements, m.queueWait, m.preemptions, m.restarts,
		m.submitToRunning, m.commit, m.fsmApply, m.snapDuration, m.snapBytes, m.leaderChanges, m.probeRTT, m.requests,
		m.jobCPU, m.jobThrottled, m.jobOOMKills, m.jobMemoryPeak,
		&stateCollector{fsm: cfg.FSM, holds: cfg.holdsState},
		&raftCollector{raft: cfg.Raft, fsm: cfg.FSM, holds: cfg.holdsState},
		&gpuCollector{cfg: cfg},
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	if cfg.TimerLag != nil {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: namespace, Subsystem: "agent", Name: "timer_lag_seconds",
			Help: "Worst lateness of a timer the agent set in its last 20 ticks (a second on a server, 10 s on a worker); two ticks 0.1 s late among them make the node short of CPU.",
		}, func() float64 { return cfg.TimerLag().Seconds() }))
	}
	m.handler = promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
	return m
}

// Registry is where the metrics are registered.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// ServeHTTP answers a scrape in Prometheus's text format (or in the
// format the scraper asks for).
func (m *Metrics) ServeHTTP(w http.ResponseWriter, r *http.Request) { m.handler.ServeHTTP(w, r) }

// Pass records one scheduling pass: how long it took and how many jobs
// it placed.
func (m *Metrics) Pass(took time.Duration, placed int) {
	m.passDuration.Observe(took.Seconds())
	m.passPlacements.Observe(float64(placed))
}

// Placed records a job the leader placed: the wait of its first
// placement, or the cause of a restart, read from previous, the
// allocations of its attempt before.
func (m *Metrics) Placed(job *structs.Job, previous []*structs.Allocation, at time.Time) {
	if job.Attempts == 0 {
		m.queueWait.WithLabelValues(sizeLabel(max(job.Spec.Nodes, 1) * job.Spec.GPUs)).Observe(at.Sub(job.SubmittedAt).Seconds())
		return
	}
	m.restarts.WithLabelValues(restartCause(job, previous)).Inc()
}

// Used records what an allocation that ended on this node used, as its
// cgroup counted (nil: it ran unconfined or never started).
func (m *Metrics) Used(u *structs.AllocUsage) {
	if u == nil {
		return
	}
	m.jobCPU.Add(time.Duration(u.CPUTime).Seconds())
	m.jobThrottled.Add(time.Duration(u.CPUThrottled).Seconds())
	m.jobOOMKills.Add(float64(u.OOMKills))
	m.jobMemoryPeak.Observe(float64(u.MemoryPeakBytes))
}

// Preempted records jobs the leader stopped to make room for others.
func (m *Metrics) Preempted(victims int) { m.preemptions.Add(float64(victims)) }

// Leading records that this node became or stopped being the leader.
func (m *Metrics) Leading(bool) { m.leaderChanges.Inc() }

// Running records an allocation this node started: the first attempt's
// rank 0 marks its job running, so a job is counted once.
func (m *Metrics) Running(job *structs.Job, alloc *structs.Allocation, at time.Time) {
	if alloc.Rank == 0 && alloc.Attempt == 1 {
		m.submitToRunning.Observe(at.Sub(job.SubmittedAt).Seconds())
	}
}

// ProbeRTT records the round trip of one answered gossip probe (the
// cluster's Config.ProbeRTT). The member is not recorded: see New.
func (m *Metrics) ProbeRTT(_ string, rtt time.Duration) { m.probeRTT.Observe(rtt.Seconds()) }

// Committed records one write through Raft by this node.
func (m *Metrics) Committed(t structs.MessageType, took time.Duration) {
	m.commit.WithLabelValues(t.String()).Observe(took.Seconds())
}

// ObserveRequest records one API request: api is "user" or "internal",
// route the pattern that matched it ("GET /v1/jobs/{id}"), never its path.
func (m *Metrics) ObserveRequest(api, route string, code int, took time.Duration) {
	m.requests.WithLabelValues(api, route, strconv.Itoa(code)).Observe(took.Seconds())
}

// sizeLabel buckets a job's GPUs for the queue wait's label: 0, 1, 2,
// 4, 8, 16, 32, 64 (each the bucket's top) or "more".
func sizeLabel(gpus int) string {
	for _, top := range []int{0, 1, 2, 4, 8, 16, 32, 64} {
		if gpus <= top {
			return strconv.Itoa(top)
		}
	}
	return "more"
}

// restartCause says what ended a job's attempt before: a GPU fault, the
// loss of a node, a preemption, a failure of the job (or its time
// limit), or something else (a replica stopped by its service).
func restartCause(job *structs.Job, previous []*structs.Allocation) string {
	cause := "other"
	for _, a := range previous {
		switch {
		case a.GPUFault != "":
			return "gpu_fault"
		case a.State == structs.AllocLost:
			cause = "node_lost"
		case (a.State == structs.AllocFailed || a.State == structs.AllocTimedOut) && cause != "node_lost":
			cause = "failure"
		}
	}
	if cause == "other" && job.Preemptions > 0 {
		return "preempted"
	}
	return cause
}
