package ui

import (
	"net/http"
	"net/url"
	"strings"
)

// loginData is what the login page shows.
type loginData struct {
	Next  string
	Error string
	// Signed is whether the browser holds a token already.
	Signed bool
}

// The login page's form carries the CSRF token of its session before
// signing in (no token), whoever is signed in.
func (u *UI) handleLoginPage(w http.ResponseWriter, r *http.Request) {
	v := u.newView(w, r, "")
	v.Title, v.Nav = "Sign in", "login"
	signed := signedInToken(r) != ""
	v.SignedIn = signed
	u.render(w, http.StatusOK, "login", v, loginData{Next: safeNext(r.URL.Query().Get("next")), Signed: signed})
}

// handleLogin checks the token it is given as the API would, and keeps it
// in the token cookie; a wrong one is refused (and counted as the API
// counts failed authentications).
func (u *UI) handleLogin(w http.ResponseWriter, r *http.Request) {
	v := u.newView(w, r, "")
	v.Title, v.Nav = "Sign in", "login"
	next := safeNext(r.PostFormValue("next"))
	if !u.csrfOK(r, "") {
		u.render(w, http.StatusForbidden, "login", v, loginData{Next: next, Error: errCSRF.Error()})
		return
	}
	token := strings.TrimSpace(r.PostFormValue("token"))
	if token == "" {
		u.render(w, http.StatusBadRequest, "login", v, loginData{Next: next, Error: errNoToken.Error()})
		return
	}
	if _, _, err := u.srv.Authenticate(r, token); err != nil {
		u.render(w, http.StatusUnauthorized, "login", v, loginData{Next: next, Error: err.Error()})
		return
	}
	setCookie(w, r, TokenCookie, token, 0)
	u.newSession(w, r) // a session begins with the sign-in
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// handleLogout forgets the token, and the session with it.
func (u *UI) handleLogout(w http.ResponseWriter, r *http.Request) {
	token := signedInToken(r)
	if !u.csrfOK(r, token) {
		v := u.newView(w, r, token)
		u.fail(w, r, v, http.StatusForbidden, errCSRF)
		return
	}
	setCookie(w, r, TokenCookie, "", -1)
	u.newSession(w, r)
	http.Redirect(w, r, Prefix+"login", http.StatusSeeOther)
}

// safeNext is where to go after signing in: a page of the UI, never
// another site.
func safeNext(next string) string {
	if !strings.HasPrefix(next, Prefix) || strings.HasPrefix(next, Prefix+"login") || strings.ContainsAny(next, "\\\r\n") {
		return Prefix
	}
	return next
}

func urlEscape(s string) string { return url.QueryEscape(s) }
