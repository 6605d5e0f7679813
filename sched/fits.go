package sched

import (
	"fmt"
	"slices"
	"strings"

	"github.com/skein-dev/skein/structs"
)

// FitError says that no registered node could ever run one rank of a job.
// It wraps ErrNeverFits.
type FitError struct {
	// Field is the JobSpec field no node is big enough for ("gpus", "cpus",
	// "memory_mib") or has what it needs for ("image": a container engine
	// that answers; "gpus": one that hands out GPUs; "mounts", "caps": a
	// node that allows them), or "" when every field fits some node but no node fits
	// them all at once.
	Field string
	// Msg is the whole message, e.g. "no node has 12 GPUs; largest has 8".
	Msg string
}

func (e *FitError) Error() string { return e.Msg }

// Unwrap lets errors.Is(err, ErrNeverFits) match.
func (e *FitError) Unwrap() error { return ErrNeverFits }

// CheckFits returns an error when no node in nodes could EVER run one rank
// of spec, even idle, counting only per-node capacity in GPUs, CPUs and
// memory (healthy or not, ignoring usage, status, model and labels), and,
// for a job with an image, the node's container engine: it must answer,
// hand out the node's GPUs when the job asks for some, and the node must
// allow every mount and capability. A node that reports 0 CPUs (or 0
// memory) does not track them and fits any amount. With no nodes it returns ErrNoNodes;
// otherwise a *FitError, or nil when some node could.
func CheckFits(nodes []*structs.Node, spec structs.JobSpec) error {
	var registered []*structs.Node
	for _, n := range nodes {
		if n != nil {
			registered = append(registered, n)
		}
	}
	if len(registered) == 0 {
		return ErrNoNodes
	}
	if err := inPartition(registered, spec); err != nil {
		return err
	}
	hosts, who := registered, "node"
	if spec.Image != "" {
		var err error
		if hosts, err = containerHosts(registered, spec); err != nil {
			return err
		}
		if len(hosts) < len(registered) {
			who = "node that can run the container"
		}
	}
	var (
		maxGPUs, maxCPUs           int
		maxMem                     int64
		cpuUntracked, memUntracked bool
		mem                        = int64(spec.MemoryMiB)
	)
	if err := pidsFit(hosts, spec.PidsMax); err != nil {
		return err
	}
	for _, n := range hosts {
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
	case spec.GPUs > maxGPUs:
		return &FitError{Field: "gpus", Msg: fmt.Sprintf("no %s has %s; largest has %d", who, plural(spec.GPUs, "GPU"), maxGPUs)}
	case !cpuUntracked && spec.CPUs > maxCPUs:
		return &FitError{Field: "cpus", Msg: fmt.Sprintf("no %s has %s; largest has %d", who, plural(spec.CPUs, "CPU"), maxCPUs)}
	case !memUntracked && mem > maxMem:
		return &FitError{Field: "memory_mib", Msg: fmt.Sprintf("no %s has %s memory; largest has %s",
			who, structs.FormatMiB(mem), structs.FormatMiB(maxMem))}
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
	return &FitError{Msg: "no " + who + " has " + list + " together"}
}

// pidsFit is a *FitError when a job asks to hold more processes than any
// node lets a job hold (nodes from before the limit existed let it).
func pidsFit(nodes []*structs.Node, pids int64) error {
	if pids == 0 {
		return nil
	}
	var most int64
	for _, n := range nodes {
		if n.JobPidsMax == 0 || pids <= n.JobPidsMax {
			return nil
		}
		most = max(most, n.JobPidsMax)
	}
	return &FitError{Field: "pids_max", Msg: fmt.Sprintf("pids_max %d is above every node's limit of processes for a job; the highest is %d", pids, most)}
}

// containerHosts returns the nodes that could run the container of spec,
// a job with an image, as the placement filters judge their engines, or a
// *FitError naming the first thing no node has: an engine that answers, one
// that hands out GPUs, a node that allows the mounts, one that allows the
// capabilities.
func containerHosts(nodes []*structs.Node, spec structs.JobSpec) ([]*structs.Node, error) {
	var answering, withGPUs, withMounts, hosts []*structs.Node
	for _, n := range nodes {
		if !n.Containers.Answers() {
			continue
		}
		answering = append(answering, n)
		if spec.GPUs > 0 && !n.Containers.GPUs && n.GPUSource != simulatedGPUs {
			continue
		}
		withGPUs = append(withGPUs, n)
		if !mountsAllowed(spec.Mounts, n.Containers.AllowMounts) {
			continue
		}
		withMounts = append(withMounts, n)
		if structs.CapsAllowed(spec.Caps, n.Containers.AllowCaps) {
			hosts = append(hosts, n)
		}
	}
	switch {
	case len(answering) == 0:
		return nil, &FitError{Field: "image", Msg: fmt.Sprintf(
			"no node can run image %s: none has a container engine that answers (skein nodes shows each node's engine)", spec.Image)}
	case len(withGPUs) == 0:
		return nil, &FitError{Field: "gpus", Msg: "no node can give the container GPUs: " +
			"no node's container engine has the nvidia runtime or CDI"}
	case len(hosts) > 0:
		return hosts, nil
	}
	who := "node with a container engine"
	if len(withGPUs) < len(answering) {
		who = "node whose container engine can hand out GPUs"
	}
	if len(withMounts) == 0 {
		return nil, mountsFitError(who, withGPUs, spec.Mounts)
	}
	if len(spec.Mounts) > 0 {
		who += " that allows the mounts"
	}
	return nil, capsFitError(who, withMounts, spec.Caps)
}

// mountsFitError says which of mounts no node of nodes (described by
// who) allows, or that none allows them all.
func mountsFitError(who string, nodes []*structs.Node, mounts []structs.Mount) error {
	for _, m := range mounts {
		if !slices.ContainsFunc(nodes, func(n *structs.Node) bool {
			return structs.MountAllowed(m.Source, n.Containers.AllowMounts)
		}) {
			return &FitError{Field: "mounts", Msg: fmt.Sprintf("no %s allows mount %s in its allow_mounts", who, m.Source)}
		}
	}
	return &FitError{Field: "mounts", Msg: fmt.Sprintf("no %s allows all of the mounts %s in its allow_mounts",
		who, mountSources(mounts))}
}

// capsFitError says which of caps no node of nodes (described by who)
// allows, or that none allows them all, and what they allow.
func capsFitError(who string, nodes []*structs.Node, caps []string) error {
	var allowed []string
	for _, n := range nodes {
		for _, c := range n.Containers.AllowCaps {
			if !slices.Contains(allowed, c) {
				allowed = append(allowed, c)
			}
		}
	}
	slices.Sort(allowed)
	what := "they allow none"
	if len(allowed) > 0 {
		what = "they allow " + strings.Join(allowed, ", ")
	}
	for _, c := range caps {
		if !slices.Contains(allowed, c) {
			return &FitError{Field: "caps", Msg: fmt.Sprintf("no %s allows capability %s in its allow_caps: %s", who, c, what)}
		}
	}
	return &FitError{Field: "caps", Msg: fmt.Sprintf("no %s allows all of the capabilities %s in its allow_caps: %s",
		who, strings.Join(caps, ", "), what)}
}

// mountsAllowed reports whether every mount's source lies under a
// directory of allow.
func mountsAllowed(mounts []structs.Mount, allow []string) bool {
	for _, m := range mounts {
		if !structs.MountAllowed(m.Source, allow) {
			return false
		}
	}
	return true
}

// mountSources lists the sources of mounts for people: "/a, /b".
func mountSources(mounts []structs.Mount) string {
	srcs := make([]string, len(mounts))
	for i, m := range mounts {
		srcs[i] = m.Source
	}
	return strings.Join(srcs, ", ")
}

// inPartition checks the job's partition and the nodes it names exist:
// a partition no node is in is refused at submit, naming those that
// exist, as Slurm refuses an invalid partition; so is a --nodelist node
// no node is called.
func inPartition(nodes []*structs.Node, spec structs.JobSpec) error {
	if p := spec.Partition; p != "" && !slices.ContainsFunc(nodes, func(n *structs.Node) bool { return n.InPartition(p) }) {
		parts := structs.PartitionsOf(nodes)
		for i, q := range parts {
			if q == structs.DefaultPartition {
				parts[i] += " (the default)"
			}
		}
		return &FitError{Field: "partition", Msg: fmt.Sprintf("no partition %s; the cluster's: %s", p, strings.Join(parts, ", "))}
	}
	for _, name := range spec.NodeList {
		if !slices.ContainsFunc(nodes, func(n *structs.Node) bool { return n.Name == name }) {
			return &FitError{Field: "nodelist", Msg: "no node " + name}
		}
	}
	return nil
}
