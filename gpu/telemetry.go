package gpu

import "time"

// Sample is one reading of one GPU's telemetry, taken on its node. It stays
// on that node (metrics, the web UI) except for the utilisation of the GPUs
// a service replica holds, which the node reports for autoscaling.
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
