package fsm

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"io"
	"maps"
	"slices"

	"github.com/skein-dev/skein/structs"
)

// A node view is the part of the state one node's agent acts on: its own
// node record; every allocation placed on it, live or finished (its
// directories and logs stay while the state holds them), with their jobs;
// for each live one, the allocations of the same attempt on other nodes
// and those nodes (the launch environment names every rank's host); the
// services, with their replicas still going, those replicas' live
// allocations and their nodes (the ingress routes by them,
// liveReplicas); and in a secure cluster the trust it checks peers with
// (viewTrust). A node learns what to run from its view, not from the
// whole state, so a worker outside Raft can be sent it by a server
// (fsm/DESIGN.md, "Node views").
//
// A view is written as a snapshot of that part, in the snapshot format,
// and loaded into an FSM of its own (LoadView), which the node's loops
// then read and watch as they would the whole state.

// NodeView is one node's view at one index: the bytes a server sends and
// their hash, which says whether the view changed.
type NodeView struct {
	Index uint64
	Hash  string
	Data  []byte
}

// NodeView returns the view of the node nodeID at the applied index. A
// node the state does not know gets a view with only the services and
// the trust.
func (f *FSM) NodeView(nodeID string) (NodeView, error) {
	f.mu.RLock()
	snap := f.st.nodeView(nodeID)
	f.mu.RUnlock()
	var buf bytes.Buffer
	if err := snap.write(&buf); err != nil {
		return NodeView{}, fmt.Errorf("write node view: %w", err)
	}
	// The header holds the index; the hash covers the records alone, so
	// a view that did not change keeps its hash as the index moves on.
	records := buf.Bytes()[bytes.IndexByte(buf.Bytes(), '\n')+1:]
	sum := sha256.Sum256(records)
	return NodeView{Index: snap.index, Hash: hex.EncodeToString(sum[:]), Data: buf.Bytes()}, nil
}

// NodeViewStamp is a cheap summary of the node's view: it moves whenever
// the view's records do (each record's ModifyIndex moves with any change
// of it, and a record added or removed changes the set; the trust part
// carries the index of its last change), so a server
// compares stamps on every change of the state and writes a view, which
// costs far more, only when its stamp moved. Equal stamps may still hide
// a change of hash (a collision); a changed stamp may hold the same view.
func (f *FSM) NodeViewStamp(nodeID string) uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	// Map order is random and the stamp must not be: it is the sum of
	// each record's hash, which is order-free. It walks the view as
	// viewRecords does, without sets: a record met twice (a job of two
	// allocations) is counted twice, every time alike.
	var sum uint64
	h := fnv.New64a()
	var buf [8]byte
	record := func(kind byte, id string, modify uint64) {
		h.Reset()
		h.Write([]byte{kind})
		h.Write([]byte(id))
		binary.LittleEndian.PutUint64(buf[:], modify)
		h.Write(buf[:])
		sum += mix(h.Sum64())
	}
	st := f.st
	if n, ok := st.nodes[nodeID]; ok {
		record('n', nodeID, n.ModifyIndex)
	}
	for id, a := range st.nodeAllocs[nodeID] {
		record('a', id, a.ModifyIndex)
		record('j', a.JobID, st.jobs[a.JobID].ModifyIndex)
		if !a.Live() {
			continue
		}
		for _, o := range st.jobAllocs[a.JobID] {
			if o.Attempt == a.Attempt {
				record('p', o.ID, o.ModifyIndex)
				if n, ok := st.nodes[o.NodeID]; ok {
					record('n', o.NodeID, n.ModifyIndex)
				}
			}
		}
	}
	for name, svc := range st.services {
		record('s', name, svc.ModifyIndex)
	}
	st.liveReplicas(func(j *structs.Job, a *structs.Allocation) {
		if a == nil {
			record('j', j.ID, j.ModifyIndex)
			return
		}
		record('p', a.ID, a.ModifyIndex)
		if n, ok := st.nodes[a.NodeID]; ok {
			record('n', a.NodeID, n.ModifyIndex)
		}
	})
	if st.trust != nil {
		record('t', "", st.viewTrustIndex) // viewTrust's part
	}
	return sum
}

// mix is MurmurHash3's 64-bit finalizer. FNV's last steps barely mix the
// last bytes (the ModifyIndex), so two records' FNV hashes can move by
// amounts that cancel in a sum; mixed first, they do not.
func mix(h uint64) uint64 {
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

// viewRecords are the IDs of the nodes, jobs and allocations in one node's
// view (the services are all in it).
func (s *state) viewRecords(nodeID string) (nodes, jobs, allocs map[string]bool) {
	nodes, jobs, allocs = map[string]bool{}, map[string]bool{}, map[string]bool{}
	if _, ok := s.nodes[nodeID]; ok {
		nodes[nodeID] = true
	}
	for id, a := range s.nodeAllocs[nodeID] {
		allocs[id] = true
		jobs[a.JobID] = true
		if !a.Live() {
			continue
		}
		for _, o := range s.jobAllocs[a.JobID] {
			if o.Attempt == a.Attempt {
				allocs[o.ID] = true
				if _, ok := s.nodes[o.NodeID]; ok {
					nodes[o.NodeID] = true
				}
			}
		}
	}
	s.liveReplicas(func(j *structs.Job, a *structs.Allocation) {
		if a == nil {
			jobs[j.ID] = true
			return
		}
		allocs[a.ID] = true
		if _, ok := s.nodes[a.NodeID]; ok {
			nodes[a.NodeID] = true
		}
	})
	return nodes, jobs, allocs
}

// liveReplicas calls fn with each service's replica jobs still going
// (a nil) and each of their live allocations: what every node's ingress
// routes by (agent/ingress). They grow with the services' replicas, not
// with the cluster's jobs or nodes.
func (s *state) liveReplicas(fn func(j *structs.Job, a *structs.Allocation)) {
	for name, svc := range s.services {
		for id, j := range s.serviceJobs[name] {
			if _, ok := replicaNumber(svc.ID, id); !ok || j.State.Terminal() {
				continue
			}
			fn(j, nil)
			for _, a := range s.jobAllocs[id] {
				if a.Live() {
					fn(j, a)
				}
			}
		}
	}
}

// nodeView copies one node's view out of the state.
func (s *state) nodeView(nodeID string) *snapshot {
	snap := &snapshot{index: s.index}
	nodes, jobs, allocs := s.viewRecords(nodeID)
	for _, id := range slices.Sorted(maps.Keys(nodes)) {
		snap.nodes = append(snap.nodes, s.nodes[id].Copy())
	}
	for _, id := range slices.Sorted(maps.Keys(jobs)) {
		snap.jobs = append(snap.jobs, s.jobs[id].Copy())
	}
	for _, id := range slices.Sorted(maps.Keys(allocs)) {
		snap.allocs = append(snap.allocs, s.allocs[id].Copy())
	}
	for _, name := range slices.Sorted(maps.Keys(s.services)) {
		snap.services = append(snap.services, s.services[name].Copy())
	}
	s.viewTrust(snap)
	return snap
}

// viewTrust adds to a view what every node of a secure cluster checks
// its peers and gossip with, whatever its role: the trust record (the CA
// certificates, the gossip keyring) without the hash of the users' token,
// which only servers check, and the revoked admissions, by node ID. The
// rest (join tokens, admissions not revoked) stays with the servers: a
// certificate signed by the cluster's CA is an admission a node can
// verify by itself, and admitting is the leader's.
func (s *state) viewTrust(snap *snapshot) {
	if s.trust == nil {
		return
	}
	snap.trust = copyTrust(s.trust)
	snap.trust.UserTokenHash = ""
	var revoked []string
	for id, a := range s.admissions {
		if a.Revoked {
			revoked = append(revoked, id)
		}
	}
	slices.Sort(revoked)
	for _, id := range revoked {
		snap.admissions = append(snap.admissions, s.admissions[id])
	}
}

// LoadView replaces the state with a node view read from r (NodeView's
// Data) and wakes the watchers, as Restore does, without logging: a
// node loads one on every change of its view. The FSM must be one of its
// own, never Raft's.
func (f *FSM) LoadView(r io.Reader) error {
	st, err := readSnapshot(r)
	if err != nil {
		return fmt.Errorf("load node view: %w", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.st = st
	f.fire()
	return nil
}
