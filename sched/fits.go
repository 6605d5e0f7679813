package sched

import (
	"fmt"
	"strings"

	"github.com/skein-dev/skein/structs"
)

// FitError says that no registered node could ever run one rank of a job.
// It wraps ErrNeverFits.
type FitError struct {
	// Field is the JobSpec field no node is big enough for ("gpus", "cpus",
	// "memory_mib"), or "" when every field fits some node but no node
	// fits them all at once.
	Field string
	// Msg is the whole message, e.g. "no node has 12 GPUs; largest has 8".
	Msg string
}

func (e *FitError) Error() string { return e.Msg }

// Unwrap lets errors.Is(err, ErrNeverFits) match.
func (e *FitError) Unwrap() error { return ErrNeverFits }

// CheckFits returns an error when no node in nodes could EVER run one rank
// of spec, even idle, counting only per-node capacity in GPUs, CPUs and
// memory (healthy or not, ignoring usage, status, model and labels). A node
// that reports 0 CPUs (or 0 memory) does not track them and fits any amount.
// With no nodes it returns ErrNoNodes; otherwise a *FitError, or nil when
// some node could.
func CheckFits(nodes []*structs.Node, spec structs.JobSpec) error {
	var (
		found                      bool
		maxGPUs, maxCPUs           int
		maxMem                     int64
		cpuUntracked, memUntracked bool
		mem                        = int64(spec.MemoryMiB)
	)
	for _, n := range nodes {
		if n == nil {
			continue
		}
		found = true
		gpusOK := spec.GPUs <= len(n.GPUs)
		cpusOK := n.CPUs == 0 || spec.CPUs <= n.CPUs
		memOK := n.MemoryMiB == 0 || mem <= n.MemoryMiB
		if gpusOK && cpusOK && memOK {
			return nil
		}
		maxGPUs = max(maxGPUs, len(n.GPUs))
		maxCPUs = max(maxCPUs, n.CPUs)
		maxMem = max(maxMem, n.MemoryMiB)
		cpuUntracked = cpuUntracked || n.CPUs == 0
		memUntracked = memUntracked || n.MemoryMiB == 0
	}
	switch {
	case !found:
		return ErrNoNodes
	case spec.GPUs > maxGPUs:
		return &FitError{Field: "gpus", Msg: fmt.Sprintf("no node has %s; largest has %d", plural(spec.GPUs, "GPU"), maxGPUs)}
	case !cpuUntracked && spec.CPUs > maxCPUs:
		return &FitError{Field: "cpus", Msg: fmt.Sprintf("no node has %s; largest has %d", plural(spec.CPUs, "CPU"), maxCPUs)}
	case !memUntracked && mem > maxMem:
		return &FitError{Field: "memory_mib", Msg: fmt.Sprintf("no node has %s memory; largest has %s",
			structs.FormatMiB(mem), structs.FormatMiB(maxMem))}
	}
	var parts []string
	if spec.GPUs > 0 {
		parts = append(parts, plural(spec.GPUs, "GPU"))
	}
	if spec.CPUs > 0 {
		parts = append(parts, plural(spec.CPUs, "CPU"))
	}
	if mem > 0 {
		parts = append(parts, structs.FormatMiB(mem)+" memory")
	}
	last := len(parts) - 1
	list := strings.Join(parts[:last], ", ") + " and " + parts[last]
	return &FitError{Msg: "no node has " + list + " together"}
}
