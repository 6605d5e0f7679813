package server

import (
	"net/http"

	"github.com/skein-dev/skein/agent/server/endpoint"
	"github.com/skein-dev/skein/api"
)

// The ACL API (api/acl.go): bootstrap, who the caller is, tokens and
// users; endpoint.ACL does each.

func (s *adminRoutes) handleACLBootstrap(w http.ResponseWriter, r *http.Request) {
	var req api.ACLBootstrapRequest
	s.write(w, r, &req, bodyOptional, func(wr endpoint.Writer) (any, error) { return s.acl.Bootstrap(wr, req) })
}

func (s *adminRoutes) handleWhoAmI(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, endpoint.WhoAmI(identityOf(r)))
}

func (s *adminRoutes) handleACLTokenCreate(w http.ResponseWriter, r *http.Request) {
	var req api.ACLTokenCreateRequest
	s.write(w, r, &req, bodyOptional, func(wr endpoint.Writer) (any, error) { return s.acl.CreateToken(wr, identityOf(r), req) })
}

func (s *adminRoutes) handleACLTokens(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.acl.Tokens())
}

func (s *adminRoutes) handleACLTokenRevoke(w http.ResponseWriter, r *http.Request) {
	s.write(w, r, nil, bodyOptional, func(wr endpoint.Writer) (any, error) { return s.acl.RevokeToken(wr, r.PathValue("id")) })
}

func (s *adminRoutes) handleACLUsers(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.acl.Users())
}

func (s *adminRoutes) handleACLUserSet(w http.ResponseWriter, r *http.Request) {
	var req api.ACLUserSetRequest
	s.write(w, r, &req, bodyOptional, func(wr endpoint.Writer) (any, error) { return s.acl.SetUser(wr, identityOf(r), req) })
}
