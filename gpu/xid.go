package gpu

import "fmt"

// xidInfo is what skein makes of one XID: the event kind it becomes ("" for
// errors that belong to the application, which leave the GPU in service)
// and a few words for people.
type xidInfo struct {
	kind EventKind
	what string
}

// xids are the XID errors skein knows by number. The wording is skein's;
// NVIDIA's XID catalogue has the full story for each.
var xids = map[uint64]xidInfo{
	// The application's own faults: the job fails, the GPU is fine.
	13: {"", "graphics engine exception, usually the application's own error"},
	31: {"", "GPU memory page fault, usually an illegal address in the application"},
	43: {"", "GPU stopped processing after an application fault"},
	45: {"", "preemptive cleanup after an application stopped"},
	69: {"", "graphics engine class error, usually the application's own error"},

	// Worth showing, GPU stays in service.
	63: {Warning, "memory page retirement or row remap recorded; reset the GPU when it is idle"},
	92: {Warning, "high rate of single-bit ECC errors"},
	94: {Warning, "contained ECC error; the affected application was stopped"},

	// The GPU needs a reset, a reboot or service.
	48:  {Fatal, "double-bit ECC error"},
	61:  {Fatal, "internal micro-controller breakpoint; reset the GPU"},
	62:  {Fatal, "internal micro-controller halted; reset the GPU"},
	64:  {Fatal, "memory page retirement or row remap failed"},
	74:  {Fatal, "NVLink error"},
	79:  {Fatal, "GPU has fallen off the bus"},
	95:  {Fatal, "uncontained ECC error"},
	119: {Fatal, "GSP firmware did not answer in time"},
	120: {Fatal, "GSP firmware error"},
}

// ClassifyXID says what an XID error that NVML reports as critical means
// for the GPU: Fatal, Warning, or "" when it is the application's fault
// and the GPU stays in service. The reason reads "XID 79: GPU has fallen
// off the bus". XIDs skein does not know are Fatal: NVML only reports
// critical ones.
func ClassifyXID(xid uint64) (EventKind, string) {
	if info, ok := xids[xid]; ok {
		return info.kind, fmt.Sprintf("XID %d: %s", xid, info.what)
	}
	return Fatal, fmt.Sprintf("XID %d: critical error (not in skein's table; see NVIDIA's XID catalogue)", xid)
}
