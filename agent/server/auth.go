package server

import (
	"crypto/subtle"
	"errors"
	"net/http"
	"strings"

	"github.com/skein-dev/skein/api"
)

// Authenticator decides whether a request may reach a router: nil lets it
// through, an error is answered 401 with its text. Each API has its own, so
// users and nodes can be told apart.
type Authenticator interface {
	Authenticate(r *http.Request) error
}

// ErrUnauthenticated is the answer to a request without the right token.
var ErrUnauthenticated = errors.New("missing or wrong API token: set --token or SKEIN_TOKEN")

// TokenAuth accepts requests that carry its token, in the X-Skein-Token
// header or as a bearer token; an empty TokenAuth accepts every request.
type TokenAuth string

// Authenticate implements Authenticator.
func (t TokenAuth) Authenticate(r *http.Request) error {
	if t == "" {
		return nil
	}
	got := r.Header.Get(api.TokenHeader)
	if got == "" {
		got = strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	}
	if subtle.ConstantTimeCompare([]byte(got), []byte(t)) != 1 {
		return ErrUnauthenticated
	}
	return nil
}

// guard serves next only to requests auth lets through.
func guard(auth Authenticator, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := auth.Authenticate(r); err != nil {
			writeError(w, http.StatusUnauthorized, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}
