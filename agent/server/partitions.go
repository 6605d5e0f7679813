package server

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/structs"
)

// handlePartitions lists the partitions the nodes declare and those
// with settings, by name, each with its nodes.
func (s *Server) handlePartitions(w http.ResponseWriter, _ *http.Request) {
	byName := map[string]*api.PartitionInfo{}
	get := func(name string) *api.PartitionInfo {
		p := byName[name]
		if p == nil {
			p = &api.PartitionInfo{Partition: structs.Partition{Name: name}, Default: name == structs.DefaultPartition, Nodes: []string{}}
			byName[name] = p
		}
		return p
	}
	for _, n := range s.fsm.Nodes() {
		parts := n.Partitions
		if len(parts) == 0 {
			parts = []string{structs.DefaultPartition}
		}
		for _, name := range parts {
			p := get(name)
			p.Nodes = append(p.Nodes, n.Name)
		}
	}
	for _, set := range s.fsm.Partitions() {
		get(set.Name).Partition = set
	}
	out := make([]api.PartitionInfo, 0, len(byName))
	for _, p := range byName {
		slices.Sort(p.Nodes)
		out = append(out, *p)
	}
	slices.SortFunc(out, func(a, b api.PartitionInfo) int { return cmp.Compare(a.Name, b.Name) })
	writeJSON(w, http.StatusOK, out)
}

// handlePartitionSet sets or drops a partition's limits (skein partition
// set, unset); operators only.
func (s *Server) handlePartitionSet(w http.ResponseWriter, r *http.Request) {
	var req structs.PartitionSetRequest
	body, err := readBody(w, r)
	if err == nil {
		err = decodeStrict(body, &req)
	}
	if err == nil {
		err = req.Partition.Validate()
	}
	if err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	if !s.cfg.Raft.IsLeader() && s.forward(w, r, body) {
		return
	}
	resp, err := s.cfg.Apply(structs.PartitionSetType, req)
	if err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	p, ok := resp.(structs.Partition)
	if !ok {
		writeError(w, http.StatusInternalServerError, fmt.Errorf("partition: unexpected answer %T from the state machine", resp))
		return
	}
	writeJSON(w, http.StatusOK, p)
}
