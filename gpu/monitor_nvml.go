//go:build cgo

package gpu

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/skein-dev/skein/structs"
)

// watchedEvents are the NVML event types the monitor registers for, where
// the device supports them.
const watchedEvents = nvml.EventTypeXidCriticalError | nvml.EventTypeDoubleBitEccError |
	nvml.EventTypeSingleBitEccErrorStorm | nvml.EventTypeDramRetirementEvent |
	nvml.EventTypeDramRetirementFailure | nvml.EventTypeNonFatalPoisonError |
	nvml.EventTypeFatalPoisonError | nvml.EventTypeGpuUnavailableError |
	nvml.EventTypeGpuRecoveryAction

// Clock event reasons that mean the GPU is slowed by a fault or by heat,
// not by idling, application clock settings or the normal power cap.
var throttleReasons = []struct {
	bit  uint64
	what string
}{
	{nvml.ClocksThrottleReasonHwSlowdown, "hardware slowdown"},
	{nvml.ClocksThrottleReasonHwThermalSlowdown, "hardware thermal slowdown"},
	{nvml.ClocksThrottleReasonHwPowerBrakeSlowdown, "hardware power brake"},
	{nvml.ClocksEventReasonSwThermalSlowdown, "software thermal slowdown"},
}

// Reasons of the conditions the periodic checks find.
const (
	reasonVanished       = "GPU no longer visible to NVML"
	reasonLost           = "GPU is lost: NVML can no longer reach it; reset the GPU or reboot the node"
	reasonRetiredPending = "retired memory pages pending; reset the GPU to retire them"
	reasonRemapPending   = "row remap pending; reset the GPU to apply it"
	reasonRemapFailed    = "row remapping failed; the GPU needs service"
)

// NVMLMonitor watches a node's real GPUs through NVML: events as they come
// (critical XIDs, double-bit ECC, memory retirement, poison, recovery
// actions) and periodic checks (device lost or gone, pages or rows waiting
// for a reset, throttling, running processes, changes since discovery).
type NVMLMonitor struct {
	lib nvml.Interface
	// gpus is the inventory the agent registered, the baseline of checks.
	gpus []structs.GPU
	// byBus maps bus keys to GPU indexes, to read NVLink peers again.
	byBus map[string]int
	cfg   MonitorConfig
}

// NewNVMLMonitor watches gpus, the inventory FromNVML read from lib.
func NewNVMLMonitor(lib nvml.Interface, gpus []structs.GPU, cfg MonitorConfig) *NVMLMonitor {
	byBus := make(map[string]int, len(gpus))
	for _, g := range gpus {
		byBus[busKey(g.PCIBusID)] = g.Index
	}
	return &NVMLMonitor{lib: lib, gpus: gpus, byBus: byBus, cfg: cfg.withDefaults()}
}

func newNVMLMonitor(gpus []structs.GPU, cfg MonitorConfig) Monitor {
	return NewNVMLMonitor(nvml.New(), gpus, cfg)
}

// Run checks at once and then every interval, and forwards NVML events as
// they come, until ctx ends. While NVML does not initialise, every GPU is
// Fatal at every check; NVML is tried again at each one.
func (m *NVMLMonitor) Run(ctx context.Context, out chan<- Event) {
	ticker := time.NewTicker(m.cfg.Interval)
	defer ticker.Stop()
	up := false
	var stopEvents func()
	defer func() {
		if stopEvents != nil {
			stopEvents()
		}
		if up {
			m.lib.Shutdown()
		}
	}()
	for {
		var evs []Event
		if !up {
			if ret := m.lib.Init(); ret != nvml.SUCCESS {
				reason := fmt.Sprintf("%v: %s", ErrNVMLUnavailable, initReason(ret))
				evs = reportAll(m.gpus, Fatal, reason, m.cfg.Now())
			} else {
				up = true
				var warnings []Event
				stopEvents, warnings = m.watch(ctx, out)
				evs = warnings
			}
		}
		if up {
			evs = append(evs, m.check()...)
		}
		if !send(ctx, out, evs...) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// watch registers for events on every GPU and forwards them from a
// goroutine until the returned stop is called or ctx ends. GPUs that cannot
// be watched get a Warning; their periodic checks still run.
func (m *NVMLMonitor) watch(ctx context.Context, out chan<- Event) (stop func(), warnings []Event) {
	now := m.cfg.Now()
	set, ret := m.lib.EventSetCreate()
	if ret != nvml.SUCCESS {
		reason := fmt.Sprintf("NVML events unavailable (EventSetCreate: %v); periodic checks only", ret)
		return func() {}, reportAll(m.gpus, Warning, reason, now)
	}
	handles := make(map[nvml.Device]int, len(m.gpus))
	for i, g := range m.gpus {
		dev, ret := m.lib.DeviceGetHandleByUUID(g.UUID)
		if ret != nvml.SUCCESS {
			// The periodic check reports the GPU as lost or gone.
			continue
		}
		mask := uint64(watchedEvents)
		if supported, ret := dev.GetSupportedEventTypes(); ret == nvml.SUCCESS {
			mask &= supported
		}
		if mask == 0 {
			continue
		}
		if ret := dev.RegisterEvents(mask, set); ret != nvml.SUCCESS {
			warnings = append(warnings, Event{Index: g.Index, UUID: g.UUID, Kind: Warning, At: now,
				Reason: fmt.Sprintf("NVML events unavailable (RegisterEvents: %v); periodic checks only", ret)})
			continue
		}
		handles[dev] = i
	}

	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		wait := uint32(m.cfg.EventWait.Milliseconds())
		for ctx.Err() == nil {
			data, ret := set.Wait(wait)
			switch ret {
			case nvml.SUCCESS:
				if ev, ok := m.translate(handles, data); ok && !send(ctx, out, ev) {
					return
				}
			case nvml.ERROR_TIMEOUT:
			default:
				// A failed wait (a GPU lost, say) shows in the periodic
				// checks; pause so a failing wait does not spin.
				select {
				case <-ctx.Done():
				case <-time.After(m.cfg.EventWait):
				}
			}
		}
	}()
	return func() {
		cancel()
		wg.Wait()
		set.Free()
	}, warnings
}

// translate turns an NVML event into a health event; ok is false for
// events that say nothing about the GPU's health. It counts every
// critical XID in cfg.XIDs, the application's own too.
func (m *NVMLMonitor) translate(handles map[nvml.Device]int, data nvml.EventData) (Event, bool) {
	i, ok := handles[data.Device]
	if !ok {
		return Event{}, false
	}
	g := m.gpus[i]
	if data.EventType == nvml.EventTypeXidCriticalError {
		m.cfg.XIDs.Add(g.Index)
	}
	kind, reason := classifyEvent(data.EventType, data.EventData)
	if kind == "" {
		return Event{}, false
	}
	return Event{Index: g.Index, UUID: g.UUID, Kind: kind, Reason: reason, At: m.cfg.Now()}, true
}

// classifyEvent says what one NVML event means: Fatal, Warning, or "" when
// the GPU's health is not at stake.
func classifyEvent(eventType, data uint64) (EventKind, string) {
	switch eventType {
	case nvml.EventTypeXidCriticalError:
		return ClassifyXID(data)
	case nvml.EventTypeDoubleBitEccError:
		return Fatal, "double-bit ECC error: uncorrectable memory error"
	case nvml.EventTypeSingleBitEccErrorStorm:
		return Warning, "storm of single-bit ECC errors"
	case nvml.EventTypeDramRetirementEvent:
		return Warning, "memory page retired; it takes effect at the next GPU reset"
	case nvml.EventTypeDramRetirementFailure:
		return Fatal, "memory page retirement failed"
	case nvml.EventTypeNonFatalPoisonError:
		return Warning, "contained memory poison error"
	case nvml.EventTypeFatalPoisonError:
		return Fatal, "uncontained memory poison error"
	case nvml.EventTypeGpuUnavailableError:
		return Fatal, "GPU unavailable"
	case nvml.EventTypeGpuRecoveryAction:
		return classifyRecovery(nvml.DeviceGpuRecoveryAction(data))
	}
	return "", ""
}

// classifyRecovery reads the recovery action the driver asks for.
func classifyRecovery(action nvml.DeviceGpuRecoveryAction) (EventKind, string) {
	switch action {
	case nvml.GPU_RECOVERY_ACTION_NONE:
		return "", ""
	case nvml.GPU_RECOVERY_ACTION_GPU_RESET:
		return Fatal, "driver asks for a GPU reset"
	case nvml.GPU_RECOVERY_ACTION_BUS_RESET:
		return Fatal, "driver asks for a PCIe bus reset"
	case nvml.GPU_RECOVERY_ACTION_NODE_REBOOT, nvml.GPU_RECOVERY_ACTION_SYSTEM_REBOOT:
		return Fatal, "driver asks for a node reboot"
	case nvml.GPU_RECOVERY_ACTION_DRAIN_P2P:
		return Fatal, "driver asks to drain peer-to-peer traffic"
	case nvml.GPU_RECOVERY_ACTION_DRAIN_AND_RESET:
		return Fatal, "driver asks to drain the GPU and reset it"
	case nvml.GPU_RECOVERY_ACTION_RECOVER_IMEX_DOMAIN:
		return Warning, "driver asks to recover the IMEX domain"
	}
	return Fatal, fmt.Sprintf("driver asks for recovery action %d", action)
}

// check runs the periodic checks on every GPU of the inventory.
func (m *NVMLMonitor) check() []Event {
	now := m.cfg.Now()
	var evs []Event
	for _, g := range m.gpus {
		c := gpuCheck{g: g, at: now}
		dev, ret := m.lib.DeviceGetHandleByUUID(g.UUID)
		switch ret {
		case nvml.SUCCESS:
			m.checkDevice(&c, dev)
		case nvml.ERROR_GPU_IS_LOST:
			c.report(Fatal, reasonLost, nil)
		case nvml.ERROR_NOT_FOUND, nvml.ERROR_INVALID_ARGUMENT:
			c.report(Fatal, reasonVanished, nil)
		default:
			c.report(Fatal, fmt.Sprintf("NVML cannot open the GPU: %v", ret), nil)
		}
		evs = append(evs, c.evs...)
	}
	return evs
}

// gpuCheck collects what the periodic checks of one GPU find.
type gpuCheck struct {
	g    structs.GPU
	at   time.Time
	evs  []Event
	lost bool
}

func (c *gpuCheck) report(kind EventKind, reason string, pids []uint32) {
	c.evs = append(c.evs, Event{Index: c.g.Index, UUID: c.g.UUID, Kind: kind, Reason: reason, PIDs: pids, At: c.at})
}

// ok says whether a query answered. One the device does not support is
// skipped quietly; a lost GPU is reported once and nothing more is asked of
// it; any other failure is a Warning.
func (c *gpuCheck) ok(call string, ret nvml.Return) bool {
	switch {
	case c.lost:
		return false
	case ret == nvml.SUCCESS:
		return true
	case unsupported(ret):
		return false
	case ret == nvml.ERROR_GPU_IS_LOST:
		c.lost = true
		c.report(Fatal, reasonLost, nil)
		return false
	}
	c.report(Warning, fmt.Sprintf("health check %s failed: %v", call, ret), nil)
	return false
}

// checkDevice runs the periodic checks of one GPU.
func (m *NVMLMonitor) checkDevice(c *gpuCheck, dev nvml.Device) {
	g := c.g
	if index, ret := dev.GetIndex(); c.ok("GetIndex", ret) && index != g.Index {
		c.report(Warning, fmt.Sprintf("GPU index changed from %d to %d since discovery; restart the agent to register it again", g.Index, index), nil)
	}
	if pending, ret := dev.GetRetiredPagesPendingStatus(); c.ok("GetRetiredPagesPendingStatus", ret) && pending == nvml.FEATURE_ENABLED {
		c.report(Fatal, reasonRetiredPending, nil)
	}
	if _, _, pending, failure, ret := dev.GetRemappedRows(); c.ok("GetRemappedRows", ret) {
		switch {
		case failure:
			c.report(Fatal, reasonRemapFailed, nil)
		case pending:
			c.report(Fatal, reasonRemapPending, nil)
		}
	}
	reasons, ret := dev.GetCurrentClocksEventReasons()
	if unsupported(ret) {
		reasons, ret = dev.GetCurrentClocksThrottleReasons()
	}
	if c.ok("GetCurrentClocksEventReasons", ret) {
		var what []string
		for _, r := range throttleReasons {
			if reasons&r.bit != 0 {
				what = append(what, r.what)
			}
		}
		if len(what) > 0 {
			c.report(Warning, "clocks throttled: "+strings.Join(what, ", "), nil)
		}
	}
	if mig, ret := migMode(dev); c.ok("GetMigMode", ret) && mig != g.MIGMode {
		c.report(Warning, fmt.Sprintf("MIG mode is now %s (%s at discovery); restart the agent to register it again", mig, orUnknown(g.MIGMode)), nil)
	}
	if !c.lost {
		peers, nvswitch, err := nvlinks(dev, g.Index, m.byBus)
		switch {
		case err != nil:
			c.report(Warning, fmt.Sprintf("health check of NVLink failed: %v", err), nil)
		case !slices.Equal(peers, g.NVLinkPeers) || nvswitch != g.NVSwitch:
			c.report(Warning, fmt.Sprintf("NVLink changed since discovery: %s (was %s)",
				describeLinks(peers, nvswitch), describeLinks(g.NVLinkPeers, g.NVSwitch)), nil)
		}
	}
	compute, cret := dev.GetComputeRunningProcesses()
	computeOK := c.ok("GetComputeRunningProcesses", cret)
	graphics, gret := dev.GetGraphicsRunningProcesses()
	graphicsOK := c.ok("GetGraphicsRunningProcesses", gret)
	if computeOK || graphicsOK {
		pids := []uint32{}
		for _, p := range slices.Concat(compute, graphics) {
			pids = append(pids, p.Pid)
		}
		slices.Sort(pids)
		c.report(Processes, "", slices.Compact(pids))
	}
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// describeLinks says in words what a GPU's NVLinks reach.
func describeLinks(peers []int, nvswitch bool) string {
	var parts []string
	if nvswitch {
		parts = append(parts, "NVSwitch")
	}
	if len(peers) > 0 {
		parts = append(parts, fmt.Sprintf("peers %v", peers))
	}
	if len(parts) == 0 {
		return "no NVLink"
	}
	return strings.Join(parts, " and ")
}
