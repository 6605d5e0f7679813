package gpu

import (
	"context"
	"slices"
	"sync/atomic"
	"time"

	"github.com/skein-dev/skein/structs"
)

// Sample is one reading of one GPU's telemetry, taken on its node. It stays
// on that node (metrics, the web UI) except for the utilisation of the GPUs
// a service replica holds, which the node reports for autoscaling, and the
// readings another node's web UI asks for to show this node's page.
//
// A reading the device or driver does not support is left out of Has, and
// its field is zero: a GPU without a power sensor has no power series,
// rather than a power of 0 W.
type Sample struct {
	Index int
	UUID  string
	Model string
	// Simulated is true for a simulated GPU, whose readings are made up
	// (see SimTelemetry) and labelled as such wherever they are shown.
	Simulated bool
	// Has says which of the readings below were taken.
	Has Readings
	// UtilPercent is the share of the last sample period a kernel ran,
	// 0-100 (NVML's utilization.gpu); MemUtilPercent that of memory
	// reads and writes.
	UtilPercent    float64
	MemUtilPercent float64
	MemUsedMiB     int64
	MemTotalMiB    int64
	TempC          float64
	PowerW         float64
	// ECCCorrected and ECCUncorrected are the volatile ECC error counts
	// since the driver loaded; XIDs counts the critical XID events this
	// agent has seen on the GPU since it started.
	ECCCorrected   uint64
	ECCUncorrected uint64
	XIDs           uint64
	At             time.Time
}

// Readings is a set of the optional readings of a Sample.
type Readings uint16

// The optional readings of a Sample.
const (
	HasUtil Readings = 1 << iota
	HasMemUtil
	HasMemory
	HasTemp
	HasPower
	HasECC
)

// Telemetry reads the GPUs of one node. Sample is cheap (it returns the
// last readings, taken in the background at a modest period) and safe for
// concurrent use, so a metrics scrape never waits on a device.
type Telemetry interface {
	// Sample returns the latest reading of every GPU, in index order; nil
	// before the first reading or on a node without GPUs.
	Sample() []Sample
}

// Sampler is a Telemetry that takes its readings while Run runs.
type Sampler interface {
	Telemetry
	// Run takes a reading at once and then every period until ctx ends.
	Run(ctx context.Context)
}

// DefaultTelemetryPeriod is how often a sampler reads its GPUs when its
// config does not say: a few NVML queries per GPU, well apart.
const DefaultTelemetryPeriod = 5 * time.Second

// TelemetryConfig tunes a sampler. Zero values mean production defaults.
type TelemetryConfig struct {
	// Period is the time between readings (DefaultTelemetryPeriod).
	Period time.Duration
	// XIDs, shared with the GPUs' monitor (MonitorConfig.XIDs), counts
	// the critical XID events seen on each GPU; nil counts none.
	XIDs *XIDCounter
	// Holders, for simulated GPUs, names the utilisation file of the job
	// holding each GPU, by UUID (see SimTelemetry); nil: none is held.
	Holders func() map[string]string
	// Now stamps readings (time.Now).
	Now func() time.Time
}

func (c TelemetryConfig) withDefaults() TelemetryConfig {
	if c.Period <= 0 {
		c.Period = DefaultTelemetryPeriod
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// NewTelemetry returns the sampler that fits inv: NVML's for GPUs NVML
// found, and a *SimTelemetry otherwise (which, on a node without GPUs,
// samples nothing). A binary built without NVML support lists NVML GPUs
// with no readings.
func NewTelemetry(inv Inventory, cfg TelemetryConfig) Sampler {
	if inv.Source == SourceNVML {
		return newNVMLTelemetry(inv.GPUs, cfg)
	}
	return NewSimTelemetry(inv.GPUs, cfg)
}

// XIDCounter counts the critical XID events of each GPU of a node, by
// index. The NVML monitor adds to it as events come and the telemetry
// reads it, so that a count needs neither a second event registration
// nor a channel between them. It is safe for concurrent use.
type XIDCounter struct {
	counts []atomic.Uint64
}

// NewXIDCounter counts for GPUs 0..gpus-1.
func NewXIDCounter(gpus int) *XIDCounter {
	return &XIDCounter{counts: make([]atomic.Uint64, max(gpus, 0))}
}

// Add counts one XID event on GPU index; an index out of range, or a nil
// counter, counts nothing.
func (c *XIDCounter) Add(index int) {
	if c != nil && index >= 0 && index < len(c.counts) {
		c.counts[index].Add(1)
	}
}

// Count is how many XID events GPU index has had; 0 for a nil counter.
func (c *XIDCounter) Count(index int) uint64 {
	if c == nil || index < 0 || index >= len(c.counts) {
		return 0
	}
	return c.counts[index].Load()
}

// latest holds a sampler's last readings, so that Sample never waits on
// the reading in progress.
type latest struct {
	p atomic.Pointer[[]Sample]
}

func (l *latest) store(s []Sample) { l.p.Store(&s) }

// load returns a copy of the last readings; nil before the first.
func (l *latest) load() []Sample {
	p := l.p.Load()
	if p == nil || len(*p) == 0 {
		return nil
	}
	return slices.Clone(*p)
}

// blank is a sample of g with no readings yet, but its XID count.
func blank(g structs.GPU, xids *XIDCounter, at time.Time) Sample {
	return Sample{Index: g.Index, UUID: g.UUID, Model: g.Model, Simulated: g.Simulated, XIDs: xids.Count(g.Index), At: at}
}
