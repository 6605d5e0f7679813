package fsm

import (
	"fmt"
	"maps"
	"slices"

	"github.com/hashicorp/raft"

	"github.com/skein-dev/skein/structs"
)

// applyPartitionSet sets a partition's settings, or drops them, and
// returns the partition's settings as they now are (zero when dropped).
// Jobs already submitted keep the time limit they were given.
func (s *state) applyPartitionSet(l *raft.Log) any {
	var req structs.PartitionSetRequest
	decode(l, &req)
	p := req.Partition
	if err := p.Validate(); err != nil {
		return fmt.Errorf("partition: %w", err)
	}
	if req.Delete {
		if !hasKey(s.partitions, p.Name) {
			return fmt.Errorf("partition %s: %w: it has no settings", p.Name, ErrInvalidRequest)
		}
		delete(s.partitions, p.Name)
		return structs.Partition{Name: p.Name}
	}
	s.partitions[p.Name] = p
	return p
}

// Partitions returns the partitions' settings, by name.
func (f *FSM) Partitions() []structs.Partition {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]structs.Partition, 0, len(f.st.partitions))
	for _, name := range slices.Sorted(maps.Keys(f.st.partitions)) {
		out = append(out, f.st.partitions[name])
	}
	return out
}

// Partition returns a partition's settings, false when it has none.
func (f *FSM) Partition(name string) (structs.Partition, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	p, ok := f.st.partitions[name]
	return p, ok
}
