package structs

import (
	"fmt"
	"regexp"
	"slices"
)

// DefaultPartition is the partition of the nodes that declare none
// (`skein agent` without --partition), marked * in sinfo.
const DefaultPartition = "skein"

// MaxPartitionNameLen is the longest partition name.
const MaxPartitionNameLen = 64

var partitionName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)

// ValidatePartitionName checks a partition's name: letters, digits, '_',
// '.' and '-', starting with a letter or digit, at most
// MaxPartitionNameLen bytes.
func ValidatePartitionName(name string) error {
	switch {
	case len(name) > MaxPartitionNameLen:
		return fmt.Errorf("partition name longer than %d bytes", MaxPartitionNameLen)
	case !partitionName.MatchString(name):
		return fmt.Errorf("partition name %q: want letters, digits, '_', '.' and '-', starting with a letter or digit", name)
	}
	return nil
}

// InPartition reports whether the node is in partition p: one it
// declares, or DefaultPartition when it declares none.
func (n *Node) InPartition(p string) bool {
	if len(n.Partitions) == 0 {
		return p == DefaultPartition
	}
	return slices.Contains(n.Partitions, p)
}

// PartitionsOf returns the partitions the nodes are in, sorted, each once.
func PartitionsOf(nodes []*Node) []string {
	var out []string
	for _, n := range nodes {
		if len(n.Partitions) == 0 {
			out = append(out, DefaultPartition)
		}
		out = append(out, n.Partitions...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Partition is what an operator set for a partition (skein partition
// set): its limits and the time limit of a job that gives none. A
// partition's nodes are those that declare it; its settings exist apart
// from them, and a partition without settings has no limits.
type Partition struct {
	Name string `json:"name"`
	// MaxTime is the longest time limit a job of the partition may have,
	// and the time limit of one that gives none and has no DefaultTime
	// (0: no limit).
	MaxTime Duration `json:"max_time,omitempty"`
	// DefaultTime is the time limit of a job that gives none (0: none,
	// or MaxTime).
	DefaultTime Duration `json:"default_time,omitempty"`
	// MaxNodes is the most nodes one job of the partition may ask for
	// (0: no limit).
	MaxNodes int `json:"max_nodes,omitempty"`
}

// PartitionSetRequest sets a partition's settings, or with Delete drops
// them (the partition then has no limits).
type PartitionSetRequest struct {
	Partition Partition `json:"partition"`
	Delete    bool      `json:"delete,omitempty"`
}

// Validate checks a partition's settings: a valid name, limits in range,
// a default time within the maximum.
func (p *Partition) Validate() error {
	if err := ValidatePartitionName(p.Name); err != nil {
		return fieldErr("name", "%v", err)
	}
	switch {
	case p.MaxNodes < 0 || p.MaxNodes > MaxNodes:
		return fieldErr("max_nodes", "%d is out of range 0..%d", p.MaxNodes, MaxNodes)
	case p.MaxTime > 0 && p.DefaultTime > p.MaxTime:
		return fieldErr("default_time", "%s is above the partition's max_time %s", p.DefaultTime, p.MaxTime)
	}
	return nil
}

// Fit gives a job the partition's time limit when it has none, and
// refuses one above the partition's limits, naming the field and the
// limit. It changes spec only when it returns nil.
func (p *Partition) Fit(spec *JobSpec) error {
	if p.MaxNodes > 0 && spec.Nodes > p.MaxNodes {
		return fieldErr("nodes", "%d nodes, more than partition %s's max_nodes %d", spec.Nodes, p.Name, p.MaxNodes)
	}
	if p.MaxTime > 0 && spec.TimeLimit > p.MaxTime {
		return fieldErr("time_limit", "%s is above partition %s's max_time %s", spec.TimeLimit, p.Name, p.MaxTime)
	}
	if spec.TimeLimit == 0 {
		spec.TimeLimit = p.DefaultTime
		if spec.TimeLimit == 0 {
			spec.TimeLimit = p.MaxTime
		}
	}
	return nil
}

// PartitionOf is the partition whose settings apply to a job: the one it
// names, else the default one.
func PartitionOf(spec *JobSpec) string {
	if spec.Partition != "" {
		return spec.Partition
	}
	return DefaultPartition
}
