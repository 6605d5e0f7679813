package server

import (
	"net/http"
	"time"
)

// timed records how long each request mux answers takes, by the pattern
// of the route that matched it (which the mux sets on the request), so
// that the metrics have one series per route, not one per job ID. It
// wraps the mux itself: the request it sees is the one the mux routes.
func (s *Server) timed(api string, mux *http.ServeMux) http.Handler {
	if s.cfg.Metrics == nil {
		return mux
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		mux.ServeHTTP(sw, r)
		s.cfg.Metrics.ObserveRequest(api, r.Pattern, sw.status, time.Since(start))
	})
}
