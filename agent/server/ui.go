package server

import (
	"errors"
	"net/http"

	"github.com/skein-dev/skein/agent/ui"
	"github.com/skein-dev/skein/api"
)

// mountUI serves the web UI (agent/ui) at ui.Prefix. Its pages are
// authenticated by the user authenticator, as the user API is, with the
// token of the UI's session cookie: a browser cannot send a bearer
// header. The cookie is read on these routes only; the user API never
// takes it, so no other site's page can use it against the API.
func (s *Server) mountUI(top *http.ServeMux, user http.Handler) {
	h := ui.New(*s.cfg.UI, ui.Host{
		API:          user,
		Authenticate: s.uiAuthenticate,
		Leader: func() string {
			_, id := s.cfg.Raft.Leader()
			return id
		},
		NodeTelemetry: s.internal.nodeTelemetry,
	})
	top.Handle(ui.Prefix, s.asTheUserSentIt(h))
	top.Handle("GET /ui", http.RedirectHandler(ui.Prefix, http.StatusMovedPermanently))
}

// asTheUserSentIt gives a UI request a worker passed on (ProxiedHeader,
// from a node) the host the user sent it to, which the worker names in
// X-Forwarded-Host: the UI compares a form's Origin with it.
func (s *Server) asTheUserSentIt(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(ProxiedHeader) != "" && s.sentByNode(r) {
			if hosts := r.Header.Values("X-Forwarded-Host"); len(hosts) > 0 {
				r = r.Clone(r.Context())
				r.Host = hosts[len(hosts)-1]
			}
		}
		next.ServeHTTP(w, r)
	})
}

// uiAuthenticate checks a UI request with token (the session cookie's;
// "": the request's own headers), as the user API checks a request's
// token, failed attempts counted and limited alike. The request it
// returns carries the token in its header, so that the API calls the UI
// makes with it (a forwarded cancel, a proxied log) carry it on.
func (s *Server) uiAuthenticate(r *http.Request, token string) (*http.Request, ui.Viewer, error) {
	if token != "" {
		r = r.Clone(r.Context())
		r.Header.Del("Authorization")
		r.Header.Set(api.TokenHeader, token)
	}
	var req *http.Request
	var err error
	if requestToken(r) == "" {
		// No credential, nothing to count: a page before signing in.
		req, err = s.cfg.UserAuth.Authenticate(r)
	} else {
		req, err = s.authFails.authenticate(s.cfg.UserAuth, r)
	}
	var retry *RetryError
	signIn := r.Method == http.MethodPost && r.URL.Path == ui.Prefix+"login"
	switch {
	case err != nil && !errors.As(err, &retry) && requestToken(r) != "":
		s.failedAt(viaUI)(r, err)
	case err == nil && signIn:
		rec := requestRecord(req, api.AuditLogin, viaUI, http.StatusSeeOther)
		rec.Remote = s.remoteOf(r)
		s.record(rec)
	}
	if err != nil {
		return nil, ui.Viewer{}, err
	}
	id := identityOf(req)
	return req, ui.Viewer{ACL: id.ACL, User: id.User, Role: id.Role}, nil
}
