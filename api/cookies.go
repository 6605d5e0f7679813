package api

import "strings"

// CookiePrefix begins the name of every cookie skein sets (the web UI's,
// agent/ui), after a __Host- or __Secure- prefix. The whole namespace is
// skein's: the ingress passes no cookie of it to a service, and no
// service's Set-Cookie of it to a browser, whatever the case of its
// letters.
const CookiePrefix = "skein_"

// IsSkeinCookie reports whether a cookie name is in skein's namespace:
// CookiePrefix, after an optional __Host- or __Secure- prefix, in any
// case, spaces around it ignored.
func IsSkeinCookie(name string) bool {
	n := strings.ToLower(strings.TrimSpace(name))
	for _, p := range []string{"__host-", "__secure-"} {
		n = strings.TrimPrefix(n, p)
	}
	return strings.HasPrefix(n, CookiePrefix)
}

// WithoutSkeinCookies returns a Cookie header's value without the cookies
// in skein's namespace, the others as they were sent; "" when none is
// left.
func WithoutSkeinCookies(header string) string {
	var kept []string
	for part := range strings.SplitSeq(header, ";") {
		part = strings.TrimSpace(part)
		name, _, _ := strings.Cut(part, "=")
		if part != "" && !IsSkeinCookie(name) {
			kept = append(kept, part)
		}
	}
	return strings.Join(kept, "; ")
}

// SetsSkeinCookie reports whether a Set-Cookie header's value sets a
// cookie in skein's namespace. A value without "=" in its first part is,
// to a browser, a cookie of no name whose value is that part: it counts
// by that part.
func SetsSkeinCookie(setCookie string) bool {
	pair, _, _ := strings.Cut(setCookie, ";")
	name, _, _ := strings.Cut(pair, "=")
	return IsSkeinCookie(name)
}
