package server

import (
	"net/http"

	"github.com/skein-dev/skein/agent/server/endpoint"
	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/structs"
)

// The services' routes: each decodes its request and calls the matching
// endpoint.Services method (endpoint/services.go says what each does).

func (s *serviceRoutes) handleServiceCreate(w http.ResponseWriter, r *http.Request) {
	var req api.ServiceCreateRequest
	s.write(w, r, &req, bodyOptional, func(wr endpoint.Writer) (any, error) {
		return s.services.Create(wr, identityOf(r), req)
	})
}

// handleServices lists every service with how its replicas stand.
func (s *serviceRoutes) handleServices(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.services.List(identityOf(r)))
}

// handleService answers one service, its replicas and its endpoints, and
// for an autoscaled one the leader's latest observation of its load.
func (s *serviceRoutes) handleService(w http.ResponseWriter, r *http.Request) {
	svc, err := s.services.Find(r.PathValue("name"))
	if err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	d := s.services.Detail(identityOf(r), svc, r.URL.Query().Get("secrets") == "true")
	if svc.Autoscale != nil {
		d.Observed = s.observed(r.Context(), svc.Name)
	}
	writeJSON(w, http.StatusOK, d)
}

// handleServiceScale sets how many replicas a service wants. The body is
// required: an empty one would scale the service to 0.
func (s *serviceRoutes) handleServiceScale(w http.ResponseWriter, r *http.Request) {
	var req api.ServiceScaleRequest
	s.serviceWrite(w, r, "scale", &req, bodyRequired, func(wr endpoint.Writer, id endpoint.Identity, svc *structs.Service) (any, error) {
		return s.services.Scale(wr, id, svc, req)
	})
}

// handleServiceAutoscale sets how the leader scales a service, or turns
// autoscaling off (a body whose autoscale is null, or none).
func (s *serviceRoutes) handleServiceAutoscale(w http.ResponseWriter, r *http.Request) {
	var req api.ServiceAutoscaleRequest
	s.serviceWrite(w, r, "autoscale", &req, bodyOptional, func(wr endpoint.Writer, id endpoint.Identity, svc *structs.Service) (any, error) {
		return s.services.Autoscale(wr, id, svc, req)
	})
}

// handleServiceUpdate gives a service a new spec to roll out.
func (s *serviceRoutes) handleServiceUpdate(w http.ResponseWriter, r *http.Request) {
	var req api.ServiceUpdateRequest
	s.serviceWrite(w, r, "update", &req, bodyOptional, func(wr endpoint.Writer, id endpoint.Identity, svc *structs.Service) (any, error) {
		return s.services.Update(wr, id, svc, req)
	})
}

// handleServiceDelete stops every replica of a service; it goes once
// none runs.
func (s *serviceRoutes) handleServiceDelete(w http.ResponseWriter, r *http.Request) {
	s.serviceWrite(w, r, "delete", nil, bodyRequired, func(wr endpoint.Writer, id endpoint.Identity, svc *structs.Service) (any, error) {
		return s.services.Delete(wr, id, svc)
	})
}

// serviceWrite serves a write on the service the path names: the
// service must exist and the caller may act on it (verb says how) before
// its body is read into req as rule says, then do writes.
func (s *serviceRoutes) serviceWrite(w http.ResponseWriter, r *http.Request, verb string, req any, rule bodyRule,
	do func(endpoint.Writer, endpoint.Identity, *structs.Service) (any, error)) {
	id := identityOf(r)
	svc, err := s.services.Owned(id, r.PathValue("name"), verb)
	if err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	s.write(w, r, req, rule, func(wr endpoint.Writer) (any, error) { return do(wr, id, svc) })
}
