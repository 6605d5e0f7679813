package sched

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/skein-dev/skein/structs"
)

// request is one job's spec digested once per pass, so the per-node filters
// do no parsing, lower-casing or map sorting.
type request struct {
	job    *structs.Job
	nodes  int
	gpus   int
	model  string // lower case; "" means any
	gpuMem int64
	cpus   int
	mem    int64
	// constraints are Spec.Constraints sorted by key.
	constraints []label
	// container is set for a job with an image: it needs an engine that
	// answers, one that hands out GPUs when it asks for some on real ones,
	// and a node that allows each of mounts, the mount sources, and
	// each of caps, the capabilities it is to be given.
	container bool
	mounts    []string
	caps      []string
	// holders says, per ledger node, whether it holds the job's image
	// (ledger.holders); nil when no node does.
	holders []bool
	// service is the ID of the service the job is a replica of ("" for
	// none), and replicas its live replicas per ledger node (nil: none
	// anywhere), which placement spreads.
	service  string
	replicas []int
	// modelOK says, per ledger model, whether it matches model.
	modelOK []bool
	// end is when the job would end if it started now (unix nanoseconds;
	// endUnknown without a time limit, and in a pass without backfill).
	end int64
	// mayUseReserved is set when the pass has no reservation or the job
	// ends before the reservation starts.
	mayUseReserved bool
	// exclusive is Spec.Exclusive: the job needs nodes that run nothing
	// else.
	exclusive bool
}

type label struct{ key, value string }

// newRequest digests a job. It returns an error for a spec whose numbers no
// node can satisfy because they are negative; Validate stops such specs at
// submission, so this only guards the scheduler against bad state.
func newRequest(j *structs.Job, l *ledger) (*request, error) {
	s := &j.Spec
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"gpus", int64(s.GPUs)},
		{"gpu_memory_min_mib", int64(s.GPUMemoryMinMiB)},
		{"cpus", int64(s.CPUs)},
		{"memory_mib", int64(s.MemoryMiB)},
	} {
		if f.v < 0 {
			return nil, fmt.Errorf("invalid spec: %s %d is negative", f.name, f.v)
		}
	}
	r := &request{
		job:       j,
		nodes:     max(s.Nodes, 1),
		gpus:      s.GPUs,
		model:     strings.ToLower(s.GPUModel),
		gpuMem:    int64(s.GPUMemoryMinMiB),
		cpus:      s.CPUs,
		mem:       int64(s.MemoryMiB),
		modelOK:   make([]bool, len(l.models)),
		exclusive: s.Exclusive,
	}
	for _, k := range slices.Sorted(maps.Keys(s.Constraints)) {
		r.constraints = append(r.constraints, label{k, s.Constraints[k]})
	}
	for i, m := range l.models {
		r.modelOK[i] = strings.Contains(m, r.model)
	}
	if s.Image != "" {
		r.container = true
		for _, m := range s.Mounts {
			r.mounts = append(r.mounts, m.Source)
		}
		r.caps = s.Caps
		r.holders = l.holders(s.Image)
	}
	if svc, ok := structs.ReplicaService(j.ID); ok && j.Service != "" {
		r.service, r.replicas = svc, l.replicas[svc]
	}
	return r, nil
}

// simulatedGPUs is the Node.GPUSource of simulated GPUs (gpu.SourceSimulated):
// a container needs no engine support to get them.
const simulatedGPUs = "simulated"

// containerFit checks the node's container engine for a job with an
// image: the engine answers, can hand out the node's GPUs when the job
// asks for some (simulated GPUs need nothing of it), and the node allows
// every mount source and every capability. It returns the first failing
// filter and, for a mount, its source, for a capability, its name.
func (r *request) containerFit(n *structs.Node) (reasonCode, string) {
	e := n.Containers
	switch {
	case e == nil || (e.Engine == "" && e.Error == ""):
		return reasonNoEngine, ""
	case !e.Answers():
		return reasonEngineDown, ""
	case r.gpus > 0 && !e.GPUs && n.GPUSource != simulatedGPUs:
		return reasonEngineGPUs, ""
	}
	for _, src := range r.mounts {
		if !structs.MountAllowed(src, e.AllowMounts) {
			return reasonMount, src
		}
	}
	for _, c := range r.caps {
		if !slices.Contains(e.AllowCaps, c) {
			return reasonCap, c
		}
	}
	return reasonNone, ""
}

// matches reports whether a GPU has the model and memory the job asks for.
func (r *request) matches(g *gpuSlot) bool {
	return r.modelOK[g.model] && g.memMiB >= r.gpuMem
}

// reasonCode names the filter that rejected a node. The order of the codes is
// the order the filters run in: cheap and static first, usage last.
type reasonCode uint8

const (
	reasonNone reasonCode = iota
	reasonStatus
	// reasonUnconfined: the node cannot confine jobs and takes none;
	// reasonPids: it lets a job hold fewer processes than this one asks.
	reasonUnconfined
	reasonPids
	// reasonPartition: the node is not in the job's partition;
	// reasonExcluded: the job's --exclude names it; reasonNotListed: its
	// --nodelist does not.
	reasonPartition
	reasonExcluded
	reasonNotListed
	reasonConstraint
	// The container filters of a job with an image: no engine, an engine
	// that does not answer, one that cannot hand out the node's GPUs, a
	// mount source or a capability the node does not allow.
	reasonNoEngine
	reasonEngineDown
	reasonEngineGPUs
	reasonMount
	reasonCap
	reasonModel
	reasonGPUMem
	// The node is not to be shared: an --exclusive job holds it, or the
	// job is --exclusive and the node runs other work.
	reasonHeldExclusive
	reasonNotIdle
	reasonGPUs
	reasonCPUs
	reasonMem
	// GPUs out of service: the node would have enough free matching GPUs
	// if these were in service; the most common cause on the node counts.
	reasonUnhealthy
	reasonCordoned
	reasonForeign
	// reasonReserved: the node passes every filter, but the job would take
	// what is reserved for the first job in line and may outlast the wait.
	reasonReserved
	numReasons
)

// fit is a node that passed every filter for one rank of a job.
type fit struct {
	node int // ledger index
	// gpusLeft is how many free matching GPUs the node keeps after the rank.
	gpusLeft int
	// cpusLeft is how many CPUs the node keeps after the rank; MaxInt when
	// the node does not track CPUs.
	cpusLeft int
	// siblings counts the live replicas of the job's service on the node.
	siblings int
	// cached is set when the node holds the job's image, so it starts
	// without a pull.
	cached bool
	score  float64
}

// check runs the filters for one rank of r on one node. It returns
// reasonNone and the fit when the node passes, else the first failing filter
// and its argument (the node status, the constraint key, or the mount
// source).
func (r *request) check(i int, ns *nodeState) (fit, reasonCode, string) {
	if code, arg := r.static(ns); code != reasonNone {
		return fit{}, code, arg
	}
	matching := ns.freeGPUs
	if r.model != "" || r.gpuMem > 0 {
		hasModel, hasMem := false, false
		matching = 0
		for s := range ns.gpus {
			g := &ns.gpus[s]
			if !r.modelOK[g.model] {
				continue
			}
			hasModel = true
			if g.memMiB < r.gpuMem {
				continue
			}
			hasMem = true
			if g.free {
				matching++
			}
		}
		if !hasModel {
			return fit{}, reasonModel, ""
		}
		if !hasMem {
			return fit{}, reasonGPUMem, ""
		}
	}
	if code := r.sharing(ns); code != reasonNone {
		return fit{}, code, ""
	}
	if matching < r.gpus {
		return fit{}, r.shortOf(ns, matching), ""
	}
	cpusLeft := math.MaxInt
	if ns.cpuTracked {
		if r.cpus > 0 && ns.freeCPUs < r.cpus {
			return fit{}, reasonCPUs, ""
		}
		cpusLeft = ns.freeCPUs - r.cpus
	}
	if ns.memTracked && r.mem > 0 && ns.freeMem < r.mem {
		return fit{}, reasonMem, ""
	}
	f := fit{node: i, gpusLeft: matching - r.gpus, cpusLeft: cpusLeft, cached: r.holders != nil && r.holders[i]}
	if r.replicas != nil {
		f.siblings = r.replicas[i]
	}
	return f, reasonNone, ""
}

// sharing is the --exclusive filter: no job joins a node an --exclusive
// job holds, and an --exclusive job takes only a node that runs nothing.
func (r *request) sharing(ns *nodeState) reasonCode {
	switch {
	case ns.exclusive > 0:
		return reasonHeldExclusive
	case r.exclusive && ns.live > 0:
		return reasonNotIdle
	}
	return reasonNone
}

// static runs the filters that look at the node alone, not at what is in
// use there: ready, every constraint, and the container engine and mounts
// of a job with an image. It returns the first failing filter and its
// argument, or reasonNone.
func (r *request) static(ns *nodeState) (reasonCode, string) {
	if !ns.ready {
		if ns.node.Status == structs.NodeReady && ns.node.Drain != nil {
			return reasonStatus, "draining"
		}
		return reasonStatus, string(ns.node.Status)
	}
	if ns.node.JobsRefused != "" {
		return reasonUnconfined, ""
	}
	if p := r.job.Spec.PidsMax; p > 0 && ns.node.JobPidsMax > 0 && p > ns.node.JobPidsMax {
		return reasonPids, ""
	}
	if p := r.job.Spec.Partition; p != "" && !ns.node.InPartition(p) {
		return reasonPartition, ""
	}
	if s := &r.job.Spec; slices.Contains(s.ExcludeNodes, ns.node.Name) {
		return reasonExcluded, ""
	} else if len(s.NodeList) > 0 && !slices.Contains(s.NodeList, ns.node.Name) {
		return reasonNotListed, ""
	}
	for _, c := range r.constraints {
		if v, ok := ns.node.Labels[c.key]; !ok || v != c.value {
			return reasonConstraint, c.key
		}
	}
	if r.container {
		return r.containerFit(ns.node)
	}
	return reasonNone, ""
}

// shortOf names why a node has too few free matching GPUs: the most common
// out-of-service cause among its matching GPUs (ties to the lower code)
// when putting them back in service would be enough, else plain usage.
func (r *request) shortOf(ns *nodeState, matching int) reasonCode {
	var out [numReasons]int
	total := 0
	for s := range ns.gpus {
		if g := &ns.gpus[s]; g.out != reasonNone && r.matches(g) {
			out[g.out]++
			total++
		}
	}
	if matching+total < r.gpus {
		return reasonGPUs
	}
	best := reasonUnhealthy
	for _, c := range []reasonCode{reasonCordoned, reasonForeign} {
		if out[c] > out[best] {
			best = c
		}
	}
	return best
}

// tally counts, for one job, how many nodes each filter rejected.
type tally struct {
	counts [numReasons]int
	// byArg splits the reasons that carry an argument (status, constraint,
	// the mount source, the capability, the reservation's text).
	byArg map[reasonKey]int
}

type reasonKey struct {
	code reasonCode
	arg  string
}

func (t *tally) add(code reasonCode, arg string) {
	if code == reasonStatus || code == reasonConstraint || code == reasonMount || code == reasonCap || code == reasonReserved {
		if t.byArg == nil {
			t.byArg = make(map[reasonKey]int)
		}
		t.byArg[reasonKey{code, arg}]++
		return
	}
	t.counts[code]++
}

// render writes the tally for people: "3 nodes: not enough free GPUs;
// 1 node: gpu_model A100 required", most frequent reason first, ties by text.
func (t *tally) render(r *request) string {
	type line struct {
		n    int
		text string
	}
	var lines []line
	for k, n := range t.byArg {
		lines = append(lines, line{n, reasonText(r, k.code, k.arg)})
	}
	for c, n := range t.counts {
		if n > 0 {
			lines = append(lines, line{n, reasonText(r, reasonCode(c), "")})
		}
	}
	slices.SortFunc(lines, func(a, b line) int {
		return cmp.Or(cmp.Compare(b.n, a.n), cmp.Compare(a.text, b.text))
	})
	parts := make([]string, len(lines))
	for i, l := range lines {
		parts[i] = plural(l.n, "node") + ": " + l.text
	}
	return strings.Join(parts, "; ")
}

// reasonText names a filter's rejection the way `skein job` shows it.
func reasonText(r *request, code reasonCode, arg string) string {
	switch code {
	case reasonStatus:
		if arg == "" {
			arg = "status unknown"
		}
		return "node " + arg
	case reasonUnconfined:
		return "cannot confine jobs and takes none (its agent does not allow unconfined jobs)"
	case reasonPids:
		return fmt.Sprintf("lets a job hold fewer processes than pids_max %d", r.job.Spec.PidsMax)
	case reasonPartition:
		return "not in partition " + r.job.Spec.Partition
	case reasonExcluded:
		return "excluded by the job's exclude list"
	case reasonNotListed:
		return "not in the job's nodelist"
	case reasonConstraint:
		return "missing constraint " + arg + "=" + r.job.Spec.Constraints[arg]
	case reasonNoEngine:
		return "no container engine"
	case reasonEngineDown:
		return "container engine not answering"
	case reasonEngineGPUs:
		return "container engine cannot hand out NVIDIA GPUs"
	case reasonMount:
		return "mount " + arg + " not under the node's allow_mounts"
	case reasonCap:
		return "capability " + arg + " not in the node's allow_caps"
	case reasonModel:
		return "gpu_model " + r.job.Spec.GPUModel + " required"
	case reasonGPUMem:
		return "gpu memory < " + structs.FormatMiB(r.gpuMem)
	case reasonHeldExclusive:
		return "held by an exclusive job"
	case reasonNotIdle:
		return "runs other jobs (this job is exclusive)"
	case reasonGPUs:
		return "not enough free GPUs"
	case reasonCPUs:
		return "not enough free CPUs"
	case reasonMem:
		return "not enough free memory"
	case reasonUnhealthy:
		return "not enough free GPUs: some unhealthy"
	case reasonCordoned:
		return "not enough free GPUs: some cordoned"
	case reasonForeign:
		return "not enough free GPUs: some in use by processes skein did not start"
	case reasonReserved:
		return arg
	}
	return "unknown reason"
}

// plural renders a count with its noun: "1 node", "3 nodes".
func plural(n int, noun string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
