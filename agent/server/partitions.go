package server

import (
	"net/http"

	"github.com/skein-dev/skein/agent/server/endpoint"
	"github.com/skein-dev/skein/structs"
)

// handlePartitions lists the partitions the nodes declare and those
// with settings, by name, each with its nodes.
func (s *adminRoutes) handlePartitions(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.policy.Partitions())
}

// handlePartitionSet sets or drops a partition's limits (skein partition
// set, unset); operators only.
func (s *adminRoutes) handlePartitionSet(w http.ResponseWriter, r *http.Request) {
	var req structs.PartitionSetRequest
	s.write(w, r, &req, bodyRequired, func(wr endpoint.Writer) (any, error) { return s.policy.SetPartition(wr, req) })
}
