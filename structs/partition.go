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
