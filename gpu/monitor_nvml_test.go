//go:build cgo

package gpu

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxb200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	"github.com/skein-dev/skein/gpu/nvmlmock"
	"github.com/skein-dev/skein/internal/testutil"
)

var checkTime = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// fakeEvents is an NVML event set that a test feeds.
type fakeEvents struct {
	ch    chan nvml.EventData
	freed atomic.Int32
}

func (f *fakeEvents) set() nvml.EventSet {
	return &mock.EventSet{
		WaitFunc: func(ms uint32) (nvml.EventData, nvml.Return) {
			select {
			case d := <-f.ch:
				return d, nvml.SUCCESS
			case <-time.After(time.Duration(ms) * time.Millisecond):
				return nvml.EventData{}, nvml.ERROR_TIMEOUT
			}
		},
		FreeFunc: func() nvml.Return {
			f.freed.Add(1)
			return nvml.SUCCESS
		},
	}
}

// healthy makes every health query of a wired mock server answer "all
// well": no pending retirement or remap, an idle clock, no processes.
// Events come from the returned fake set.
func healthy(srv *server.Server) *fakeEvents {
	fe := &fakeEvents{ch: make(chan nvml.EventData, 16)}
	srv.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) { return fe.set(), nvml.SUCCESS }
	for i := range srv.Devices {
		dev := nvmlmock.Device(srv, i)
		dev.GetSupportedEventTypesFunc = func() (uint64, nvml.Return) { return nvml.EventTypeAll, nvml.SUCCESS }
		dev.RegisterEventsFunc = func(uint64, nvml.EventSet) nvml.Return { return nvml.SUCCESS }
		dev.GetRetiredPagesPendingStatusFunc = func() (nvml.EnableState, nvml.Return) { return nvml.FEATURE_DISABLED, nvml.SUCCESS }
		dev.GetRemappedRowsFunc = func() (int, int, bool, bool, nvml.Return) { return 0, 0, false, false, nvml.SUCCESS }
		dev.GetCurrentClocksEventReasonsFunc = func() (uint64, nvml.Return) { return nvml.ClocksEventReasonGpuIdle, nvml.SUCCESS }
		dev.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return nil, nvml.SUCCESS }
		dev.GetGraphicsRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return nil, nvml.SUCCESS }
	}
	return fe
}

// monitorOf discovers srv and returns a monitor of what it found, with a
// fixed clock.
func monitorOf(t *testing.T, srv *server.Server, cfg MonitorConfig) *NVMLMonitor {
	t.Helper()
	inv, err := FromNVML(srv)
	if err != nil {
		t.Fatalf("FromNVML: %v", err)
	}
	if cfg.Now == nil {
		cfg.Now = func() time.Time { return checkTime }
	}
	return NewNVMLMonitor(srv, inv.GPUs, cfg)
}

// health is an event without its UUID, PIDs and time, for comparing.
type health struct {
	index  int
	kind   EventKind
	reason string
}

func (h health) String() string { return fmt.Sprintf("GPU %d %s %q", h.index, h.kind, h.reason) }

// verdicts are the Fatal and Warning events of evs.
func verdicts(evs []Event) []health {
	var out []health
	for _, ev := range evs {
		if ev.Kind != Processes {
			out = append(out, health{ev.Index, ev.Kind, ev.Reason})
		}
	}
	return out
}

func TestNVMLMonitor_HealthyGPUsReportOnlyTheirProcesses(t *testing.T) {
	for name, srv := range map[string]*server.Server{
		"DGX H100": dgxh100.New(), "DGX A100": dgxa100.New(), "DGX H200": dgxh200.New(), "DGX B200": dgxb200.New(),
	} {
		t.Run(name, func(t *testing.T) {
			srv := nvmlmock.Wire(srv)
			healthy(srv)
			evs := monitorOf(t, srv, MonitorConfig{}).check()
			if len(evs) != 8 {
				t.Fatalf("got %d events %v, want one Processes event per GPU", len(evs), evs)
			}
			for i, ev := range evs {
				if ev.Index != i || ev.UUID != nvmlmock.Device(srv, i).UUID || ev.Kind != Processes || ev.PIDs == nil ||
					len(ev.PIDs) != 0 || !ev.At.Equal(checkTime) {
					t.Errorf("event %d = %+v, want GPU %d idle (empty PIDs) at %v", i, ev, i, checkTime)
				}
			}
		})
	}
}

func TestNVMLMonitor_PeriodicChecksFindEachCondition(t *testing.T) {
	tests := []struct {
		name   string
		inject func(srv *server.Server)
		want   []health
	}{
		{
			name: "row remap pending",
			inject: func(srv *server.Server) {
				nvmlmock.Device(srv, 3).GetRemappedRowsFunc = func() (int, int, bool, bool, nvml.Return) { return 0, 1, true, false, nvml.SUCCESS }
			},
			want: []health{{3, Fatal, reasonRemapPending}},
		},
		{
			name: "row remapping failed",
			inject: func(srv *server.Server) {
				nvmlmock.Device(srv, 3).GetRemappedRowsFunc = func() (int, int, bool, bool, nvml.Return) { return 0, 9, true, true, nvml.SUCCESS }
			},
			want: []health{{3, Fatal, reasonRemapFailed}},
		},
		{
			name: "retired pages pending",
			inject: func(srv *server.Server) {
				nvmlmock.Device(srv, 5).GetRetiredPagesPendingStatusFunc = func() (nvml.EnableState, nvml.Return) {
					return nvml.FEATURE_ENABLED, nvml.SUCCESS
				}
			},
			want: []health{{5, Fatal, reasonRetiredPending}},
		},
		{
			name: "retired pages not supported",
			inject: func(srv *server.Server) {
				nvmlmock.Device(srv, 5).GetRetiredPagesPendingStatusFunc = func() (nvml.EnableState, nvml.Return) {
					return nvml.FEATURE_DISABLED, nvml.ERROR_NOT_SUPPORTED
				}
			},
		},
		{
			name: "thermal throttling and power brake",
			inject: func(srv *server.Server) {
				nvmlmock.Device(srv, 1).GetCurrentClocksEventReasonsFunc = func() (uint64, nvml.Return) {
					return nvml.ClocksThrottleReasonHwThermalSlowdown | nvml.ClocksThrottleReasonHwPowerBrakeSlowdown, nvml.SUCCESS
				}
			},
			want: []health{{1, Warning, "clocks throttled: hardware thermal slowdown, hardware power brake"}},
		},
		{
			name: "ordinary clock limits are not throttling",
			inject: func(srv *server.Server) {
				nvmlmock.Device(srv, 1).GetCurrentClocksEventReasonsFunc = func() (uint64, nvml.Return) {
					return nvml.ClocksEventReasonGpuIdle | nvml.ClocksEventReasonSwPowerCap |
						nvml.ClocksEventReasonApplicationsClocksSetting | nvml.ClocksEventReasonSyncBoost, nvml.SUCCESS
				}
			},
		},
		{
			name: "older drivers report throttle reasons",
			inject: func(srv *server.Server) {
				dev := nvmlmock.Device(srv, 6)
				dev.GetCurrentClocksEventReasonsFunc = func() (uint64, nvml.Return) { return 0, nvml.ERROR_FUNCTION_NOT_FOUND }
				dev.GetCurrentClocksThrottleReasonsFunc = func() (uint64, nvml.Return) {
					return nvml.ClocksThrottleReasonHwSlowdown, nvml.SUCCESS
				}
			},
			want: []health{{6, Warning, "clocks throttled: hardware slowdown"}},
		},
		{
			name: "GPU lost before the checks",
			inject: func(srv *server.Server) {
				lost := nvmlmock.Device(srv, 2).UUID
				byUUID := srv.DeviceGetHandleByUUIDFunc
				srv.DeviceGetHandleByUUIDFunc = func(uuid string) (nvml.Device, nvml.Return) {
					if uuid == lost {
						return nil, nvml.ERROR_GPU_IS_LOST
					}
					return byUUID(uuid)
				}
			},
			want: []health{{2, Fatal, reasonLost}},
		},
		{
			name: "GPU lost during the checks",
			inject: func(srv *server.Server) {
				nvmlmock.Device(srv, 4).GetRemappedRowsFunc = func() (int, int, bool, bool, nvml.Return) {
					return 0, 0, false, false, nvml.ERROR_GPU_IS_LOST
				}
			},
			want: []health{{4, Fatal, reasonLost}},
		},
		{
			name: "GPU gone from NVML",
			inject: func(srv *server.Server) {
				srv.Devices = srv.Devices[:7]
			},
			want: []health{{7, Fatal, reasonVanished}},
		},
		{
			name: "a failing query",
			inject: func(srv *server.Server) {
				nvmlmock.Device(srv, 0).GetRetiredPagesPendingStatusFunc = func() (nvml.EnableState, nvml.Return) {
					return nvml.FEATURE_DISABLED, nvml.ERROR_UNKNOWN
				}
			},
			want: []health{{0, Warning, "health check GetRetiredPagesPendingStatus failed: ERROR_UNKNOWN"}},
		},
		{
			name: "MIG turned on since discovery",
			inject: func(srv *server.Server) {
				nvmlmock.Device(srv, 2).MigMode = nvml.DEVICE_MIG_ENABLE
			},
			want: []health{{2, Warning, "MIG mode is now enabled (disabled at discovery); restart the agent to register it again"}},
		},
		{
			name: "index changed since discovery",
			inject: func(srv *server.Server) {
				nvmlmock.Device(srv, 3).GetIndexFunc = func() (int, nvml.Return) { return 4, nvml.SUCCESS }
			},
			want: []health{{3, Warning, "GPU index changed from 3 to 4 since discovery; restart the agent to register it again"}},
		},
		{
			name: "NVLink changed since discovery",
			inject: func(srv *server.Server) {
				dev := nvmlmock.Device(srv, 0)
				dev.GetNvLinkStateFunc = func(link int) (nvml.EnableState, nvml.Return) {
					if link == 0 {
						return nvml.FEATURE_ENABLED, nvml.SUCCESS
					}
					return nvml.FEATURE_DISABLED, nvml.ERROR_INVALID_ARGUMENT
				}
				dev.GetNvLinkRemotePciInfoFunc = func(int) (nvml.PciInfo, nvml.Return) {
					var p nvml.PciInfo
					nvmlmock.PutCString(p.BusId[:], "00000000:01:00.0")
					return p, nvml.SUCCESS
				}
			},
			want: []health{{0, Warning, "NVLink changed since discovery: peers [1] (was no NVLink)"}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := nvmlmock.Wire(dgxh100.New())
			healthy(srv)
			m := monitorOf(t, srv, MonitorConfig{})
			tc.inject(srv)
			got := verdicts(m.check())
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestNVMLMonitor_ListsProcessesOfBothKinds(t *testing.T) {
	srv := nvmlmock.Wire(dgxh100.New())
	healthy(srv)
	m := monitorOf(t, srv, MonitorConfig{})
	dev := nvmlmock.Device(srv, 4)
	dev.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
		return []nvml.ProcessInfo{{Pid: 300}, {Pid: 100}}, nvml.SUCCESS
	}
	dev.GetGraphicsRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
		return []nvml.ProcessInfo{{Pid: 100}, {Pid: 200}}, nvml.SUCCESS
	}
	nvmlmock.Device(srv, 5).GetGraphicsRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
		return nil, nvml.ERROR_NOT_SUPPORTED
	}
	nvmlmock.Device(srv, 5).GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
		return []nvml.ProcessInfo{{Pid: 42}}, nvml.SUCCESS
	}
	for _, ev := range m.check() {
		var want []uint32
		switch ev.Index {
		case 4:
			want = []uint32{100, 200, 300}
		case 5:
			want = []uint32{42}
		}
		if ev.Kind != Processes || !slices.Equal(ev.PIDs, want) {
			t.Errorf("GPU %d: %s event with PIDs %v, want processes %v", ev.Index, ev.Kind, ev.PIDs, want)
		}
	}
}

func TestNVMLMonitor_PersistentConditionRepeatsUntilCleared(t *testing.T) {
	srv := nvmlmock.Wire(dgxa100.New())
	healthy(srv)
	m := monitorOf(t, srv, MonitorConfig{})
	var pending atomic.Bool
	nvmlmock.Device(srv, 6).GetRemappedRowsFunc = func() (int, int, bool, bool, nvml.Return) {
		return 0, 1, pending.Load(), false, nvml.SUCCESS
	}
	fatal := []health{{6, Fatal, reasonRemapPending}}
	steps := []struct {
		pending bool
		want    []health
	}{{false, nil}, {true, fatal}, {true, fatal}, {true, fatal}, {false, nil}, {false, nil}}
	for i, s := range steps {
		pending.Store(s.pending)
		if got := verdicts(m.check()); !slices.Equal(got, s.want) {
			t.Errorf("check %d (pending %t): got %v, want %v", i, s.pending, got, s.want)
		}
	}
}

func TestClassifyXID_SeparatesGPUFaultsFromApplicationErrors(t *testing.T) {
	tests := []struct {
		xid    uint64
		kind   EventKind
		reason string
	}{
		{79, Fatal, "XID 79: GPU has fallen off the bus"},
		{48, Fatal, "XID 48: double-bit ECC error"},
		{74, Fatal, "XID 74: NVLink error"},
		{95, Fatal, "XID 95: uncontained ECC error"},
		{119, Fatal, "XID 119: GSP firmware did not answer in time"},
		{13, "", "XID 13: graphics engine exception, usually the application's own error"},
		{31, "", "XID 31: GPU memory page fault, usually an illegal address in the application"},
		{43, "", "XID 43: GPU stopped processing after an application fault"},
		{63, Warning, "XID 63: memory page retirement or row remap recorded; reset the GPU when it is idle"},
		{94, Warning, "XID 94: contained ECC error; the affected application was stopped"},
		{999, Fatal, "XID 999: critical error (not in skein's table; see NVIDIA's XID catalogue)"},
	}
	for _, tc := range tests {
		kind, reason := ClassifyXID(tc.xid)
		if kind != tc.kind || reason != tc.reason {
			t.Errorf("ClassifyXID(%d) = %q, %q; want %q, %q", tc.xid, kind, reason, tc.kind, tc.reason)
		}
	}
}

func TestClassifyEvent_NamesEachFatalClass(t *testing.T) {
	tests := []struct {
		name      string
		eventType uint64
		data      uint64
		kind      EventKind
		reason    string
	}{
		{"critical XID", nvml.EventTypeXidCriticalError, 79, Fatal, "XID 79: GPU has fallen off the bus"},
		{"application XID", nvml.EventTypeXidCriticalError, 13, "", "XID 13: graphics engine exception, usually the application's own error"},
		{"double-bit ECC", nvml.EventTypeDoubleBitEccError, 0, Fatal, "double-bit ECC error: uncorrectable memory error"},
		{"retirement failure", nvml.EventTypeDramRetirementFailure, 0, Fatal, "memory page retirement failed"},
		{"retirement", nvml.EventTypeDramRetirementEvent, 0, Warning, "memory page retired; it takes effect at the next GPU reset"},
		{"fatal poison", nvml.EventTypeFatalPoisonError, 0, Fatal, "uncontained memory poison error"},
		{"contained poison", nvml.EventTypeNonFatalPoisonError, 0, Warning, "contained memory poison error"},
		{"GPU unavailable", nvml.EventTypeGpuUnavailableError, 0, Fatal, "GPU unavailable"},
		{"reset asked", nvml.EventTypeGpuRecoveryAction, uint64(nvml.GPU_RECOVERY_ACTION_GPU_RESET), Fatal, "driver asks for a GPU reset"},
		{"reboot asked", nvml.EventTypeGpuRecoveryAction, uint64(nvml.GPU_RECOVERY_ACTION_NODE_REBOOT), Fatal, "driver asks for a node reboot"},
		{"no recovery needed", nvml.EventTypeGpuRecoveryAction, uint64(nvml.GPU_RECOVERY_ACTION_NONE), "", ""},
		{"performance state", nvml.EventTypePState, 0, "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			kind, reason := classifyEvent(tc.eventType, tc.data)
			if kind != tc.kind || reason != tc.reason {
				t.Errorf("got %q, %q; want %q, %q", kind, reason, tc.kind, tc.reason)
			}
		})
	}
}

// collector drains a monitor's output in the test goroutine.
type collector struct {
	out  chan Event
	seen []Event
}

func (c *collector) drain() {
	for {
		select {
		case ev := <-c.out:
			c.seen = append(c.seen, ev)
		default:
			return
		}
	}
}

// waitFor waits until an event satisfying ok has arrived and returns its
// position in seen.
func (c *collector) waitFor(t *testing.T, what string, ok func(Event) bool) int {
	t.Helper()
	at := -1
	testutil.WaitFor(t, 10*time.Second, func() error {
		c.drain()
		if at = slices.IndexFunc(c.seen, ok); at < 0 {
			return fmt.Errorf("no %s among %d events", what, len(c.seen))
		}
		return nil
	})
	return at
}

// start runs m until the test ends, then checks that Run returned.
func start(t *testing.T, m *NVMLMonitor) *collector {
	t.Helper()
	c := &collector{out: make(chan Event, 1024)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.Run(ctx, c.out)
	}()
	t.Cleanup(func() {
		cancel()
		testutil.WaitFor(t, 10*time.Second, func() error {
			select {
			case <-done:
				return nil
			default:
				c.drain()
				return fmt.Errorf("Run has not returned")
			}
		})
	})
	return c
}

func TestNVMLMonitor_RunForwardsEventsAndChecks(t *testing.T) {
	srv := nvmlmock.Wire(dgxh100.New())
	fe := healthy(srv)
	m := monitorOf(t, srv, MonitorConfig{Interval: 5 * time.Millisecond, EventWait: 5 * time.Millisecond})
	t.Run("events and checks", func(t *testing.T) {
		c := start(t, m)
		c.waitFor(t, "Processes event of GPU 7", func(ev Event) bool { return ev.Index == 7 && ev.Kind == Processes })
		fe.ch <- nvml.EventData{Device: srv.Devices[2], EventType: nvml.EventTypeXidCriticalError, EventData: 13}
		fe.ch <- nvml.EventData{Device: srv.Devices[6], EventType: nvml.EventTypeXidCriticalError, EventData: 79}
		fe.ch <- nvml.EventData{Device: dgxh100.NewDevice(9), EventType: nvml.EventTypeDoubleBitEccError}
		fe.ch <- nvml.EventData{Device: srv.Devices[1], EventType: nvml.EventTypeDoubleBitEccError}
		xid := c.waitFor(t, "XID 79 on GPU 6", func(ev Event) bool {
			return ev.Index == 6 && ev.Kind == Fatal && ev.Reason == "XID 79: GPU has fallen off the bus"
		})
		dbe := c.waitFor(t, "double-bit ECC on GPU 1", func(ev Event) bool {
			return ev.Index == 1 && ev.Kind == Fatal && ev.Reason == "double-bit ECC error: uncorrectable memory error"
		})
		if xid > dbe {
			t.Errorf("events out of order: XID 79 at %d, double-bit ECC at %d", xid, dbe)
		}
		if got := verdicts(c.seen); len(got) != 2 {
			t.Errorf("got verdicts %v, want only the XID 79 and the double-bit ECC error", got)
		}
	})
	if n := fe.freed.Load(); n != 1 {
		t.Errorf("event set freed %d times, want 1", n)
	}
	if n := len(srv.ShutdownCalls()); n != 2 {
		t.Errorf("Shutdown called %d times, want 2 (discovery, then monitor)", n)
	}
	for i := range srv.Devices {
		if n := len(nvmlmock.Device(srv, i).RegisterEventsCalls()); n != 1 {
			t.Errorf("GPU %d registered for events %d times, want 1", i, n)
		}
	}
}

func TestNVMLMonitor_MissingLibraryIsFatalUntilItLoads(t *testing.T) {
	srv := nvmlmock.Wire(dgxb200.New())
	healthy(srv)
	m := monitorOf(t, srv, MonitorConfig{Interval: 5 * time.Millisecond, EventWait: 5 * time.Millisecond})
	var loaded atomic.Bool
	srv.InitFunc = func() nvml.Return {
		if loaded.Load() {
			return nvml.SUCCESS
		}
		return nvml.ERROR_LIBRARY_NOT_FOUND
	}
	c := start(t, m)
	const reason = "NVML unavailable: libnvidia-ml.so.1 not found"
	for i := range 8 {
		c.waitFor(t, fmt.Sprintf("Fatal for GPU %d", i), func(ev Event) bool {
			return ev.Index == i && ev.Kind == Fatal && ev.Reason == reason
		})
	}
	if got := slices.IndexFunc(c.seen, func(ev Event) bool { return ev.Kind != Fatal }); got >= 0 {
		t.Fatalf("event %+v while NVML is missing, want only Fatal events", c.seen[got])
	}
	loaded.Store(true)
	first := c.waitFor(t, "a check after NVML loads", func(ev Event) bool { return ev.Kind == Processes })
	testutil.WaitFor(t, 10*time.Second, func() error {
		c.drain()
		if n := len(c.seen) - first; n < 16 {
			return fmt.Errorf("%d events since NVML loaded, want two checks' worth", n)
		}
		return nil
	})
	if got := verdicts(c.seen[first:]); len(got) != 0 {
		t.Errorf("verdicts after NVML loaded: %v, want none", got)
	}
}

func TestNVMLMonitor_WithoutEventsKeepsChecking(t *testing.T) {
	srv := nvmlmock.Wire(dgxh200.New())
	healthy(srv)
	srv.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) { return nil, nvml.ERROR_NOT_SUPPORTED }
	m := monitorOf(t, srv, MonitorConfig{Interval: 5 * time.Millisecond, EventWait: 5 * time.Millisecond})
	var pending atomic.Bool
	nvmlmock.Device(srv, 0).GetRemappedRowsFunc = func() (int, int, bool, bool, nvml.Return) {
		return 0, 1, pending.Load(), false, nvml.SUCCESS
	}
	c := start(t, m)
	c.waitFor(t, "a Warning that events are unavailable", func(ev Event) bool {
		return ev.Index == 3 && ev.Kind == Warning &&
			ev.Reason == "NVML events unavailable (EventSetCreate: ERROR_NOT_SUPPORTED); periodic checks only"
	})
	pending.Store(true)
	c.waitFor(t, "the remap found by a check", func(ev Event) bool {
		return ev.Index == 0 && ev.Kind == Fatal && ev.Reason == reasonRemapPending
	})
}
