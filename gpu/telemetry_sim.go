package gpu

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/skein-dev/skein/structs"
)

// SimUtilFileEnv names the variable that tells a job on simulated GPUs
// where to write what it does with them (see SimTelemetry).
const SimUtilFileEnv = "SKEIN_SIM_GPU_UTIL_FILE"

// maxSimUtilBytes bounds what is read of a utilisation file.
const maxSimUtilBytes = 64

// SimTelemetry is the telemetry of simulated GPUs, which have no sensors:
// every sample is marked Simulated and has only the readings a simulated
// GPU can honestly give, utilisation and memory, never a temperature, a
// power or ECC counts.
//
// A free GPU reads 0 % and no memory used. A held one reads what the job
// holding it says in its utilisation file (TelemetryConfig.Holders; the
// agent names it to the job in SKEIN_SIM_GPU_UTIL_FILE): one line, the
// utilisation in percent and, optionally, the memory used in MiB,
// separated by a space ("75" or "75 40960"), applied to every GPU the job
// holds. The utilisation is clamped to 0-100 and the memory to the GPU's.
// A file that is absent or does not parse reads 0; an empty one (a
// rewrite caught half-way) keeps the GPU's last reading.
type SimTelemetry struct {
	gpus []structs.GPU
	cfg  TelemetryConfig
	last latest
}

// NewSimTelemetry samples simulated gpus.
func NewSimTelemetry(gpus []structs.GPU, cfg TelemetryConfig) *SimTelemetry {
	return &SimTelemetry{gpus: gpus, cfg: cfg.withDefaults()}
}

// Sample returns the last readings.
func (t *SimTelemetry) Sample() []Sample { return t.last.load() }

// Run reads at once and then every period until ctx ends; on a node
// without GPUs it reads nothing.
func (t *SimTelemetry) Run(ctx context.Context) {
	if len(t.gpus) == 0 {
		return
	}
	ticker := time.NewTicker(t.cfg.Period)
	defer ticker.Stop()
	for {
		t.last.store(t.read(t.last.load()))
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// read takes one reading of every GPU; prev is the last one (nil at
// first), which an empty utilisation file keeps.
func (t *SimTelemetry) read(prev []Sample) []Sample {
	var holders map[string]string
	if t.cfg.Holders != nil {
		holders = t.cfg.Holders()
	}
	at := t.cfg.Now()
	out := make([]Sample, len(t.gpus))
	for i, g := range t.gpus {
		s := blank(g, t.cfg.XIDs, at)
		s.Simulated = true
		s.Has = HasUtil | HasMemory
		s.MemTotalMiB = g.MemoryMiB
		if file, ok := holders[g.UUID]; ok {
			util, mem, err := readSimUtil(file)
			switch {
			case errors.Is(err, errEmptyUtil) && i < len(prev):
				s.UtilPercent, s.MemUsedMiB = prev[i].UtilPercent, prev[i].MemUsedMiB
			case err == nil:
				s.UtilPercent, s.MemUsedMiB = util, min(mem, g.MemoryMiB)
			}
		}
		out[i] = s
	}
	return out
}

// readSimUtil reads a utilisation file: "UTIL [MEM_MIB]". The job owns
// the file, so it is read only when it is a regular file, not through a
// symbolic link and without blocking: a job cannot make the agent read
// another file, or hang its sampler on a FIFO.
func readSimUtil(path string) (util float64, memMiB int64, err error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return 0, 0, err
	} else if !fi.Mode().IsRegular() {
		return 0, 0, fmt.Errorf("%w: %s is not a regular file", errBadUtil, path)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxSimUtilBytes))
	if err != nil {
		return 0, 0, err
	}
	return parseSimUtil(string(b))
}

// parseSimUtil parses the content of a utilisation file (see
// SimTelemetry): the utilisation clamped to 0-100 and the memory used,
// at least 0.
func parseSimUtil(s string) (util float64, memMiB int64, err error) {
	fields := strings.Fields(s)
	if len(fields) == 0 {
		return 0, 0, errEmptyUtil
	}
	if len(fields) > 2 {
		return 0, 0, fmt.Errorf("%w: want UTIL [MEM_MIB]", errBadUtil)
	}
	util, err = strconv.ParseFloat(fields[0], 64)
	if err != nil || math.IsNaN(util) {
		return 0, 0, fmt.Errorf("%w: the utilisation %q is not a number", errBadUtil, fields[0])
	}
	if len(fields) == 2 {
		if memMiB, err = strconv.ParseInt(fields[1], 10, 64); err != nil {
			return 0, 0, fmt.Errorf("%w: the memory used %q is not a whole number of MiB", errBadUtil, fields[1])
		}
	}
	return min(max(util, 0), 100), max(memMiB, 0), nil
}
