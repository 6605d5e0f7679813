package server

import (
	"net/http"
	"strings"

	"github.com/skein-dev/skein/agent/server/endpoint"
	"github.com/skein-dev/skein/api"
)

// handleNodeDrain starts or ends a node's drain (POST
// /v1/nodes/{id}/drain and /undrain; endpoint.Nodes.Drain).
func (s *clusterRoutes) handleNodeDrain(w http.ResponseWriter, r *http.Request) {
	var req api.NodeDrainRequest
	drain := strings.HasSuffix(r.URL.Path, "/drain")
	s.write(w, r, &req, bodyRequired, func(wr endpoint.Writer) (any, error) {
		return s.nodes.Drain(wr, r.PathValue("id"), drain, req)
	})
}

// handleNodeRemove forgets a node down or left (POST
// /v1/nodes/{id}/remove; endpoint.Nodes.Remove).
func (s *clusterRoutes) handleNodeRemove(w http.ResponseWriter, r *http.Request) {
	var req api.NodeRemoveRequest
	s.write(w, r, &req, bodyRequired, func(wr endpoint.Writer) (any, error) {
		return s.nodes.Remove(wr, r.PathValue("id"), req)
	})
}
