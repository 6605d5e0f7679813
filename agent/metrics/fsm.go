package metrics

import (
	"time"

	"github.com/hashicorp/raft"

	"github.com/skein-dev/skein/structs"
)

// WrapFSM returns f, as Raft is to drive it, timing each entry it applies
// and each snapshot it writes (and counting the snapshot's bytes).
func (m *Metrics) WrapFSM(f raft.FSM) raft.FSM { return &timedFSM{FSM: f, m: m} }

// timedFSM is a raft.FSM that measures the one it wraps.
type timedFSM struct {
	raft.FSM
	m *Metrics
}

func (f *timedFSM) Apply(l *raft.Log) any {
	start := time.Now()
	resp := f.FSM.Apply(l)
	if t, err := structs.EntryType(l.Data); err == nil {
		f.m.fsmApply.WithLabelValues(t.String()).Observe(time.Since(start).Seconds())
	}
	return resp
}

func (f *timedFSM) Snapshot() (raft.FSMSnapshot, error) {
	s, err := f.FSM.Snapshot()
	if err != nil {
		return nil, err
	}
	return &timedSnapshot{FSMSnapshot: s, m: f.m}, nil
}

// timedSnapshot measures the writing of one snapshot.
type timedSnapshot struct {
	raft.FSMSnapshot
	m *Metrics
}

func (s *timedSnapshot) Persist(sink raft.SnapshotSink) error {
	start := time.Now()
	counted := &countingSink{SnapshotSink: sink}
	err := s.FSMSnapshot.Persist(counted)
	if err == nil {
		s.m.snapDuration.Observe(time.Since(start).Seconds())
		s.m.snapBytes.Set(float64(counted.n))
	}
	return err
}

// countingSink counts the bytes written through it.
type countingSink struct {
	raft.SnapshotSink
	n int64
}

func (c *countingSink) Write(p []byte) (int, error) {
	n, err := c.SnapshotSink.Write(p)
	c.n += int64(n)
	return n, err
}
