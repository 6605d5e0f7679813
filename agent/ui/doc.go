// Package ui is the web UI every agent serves at /ui/: server-rendered
// pages of the cluster (an overview with a grid of every GPU, the queue
// with each job's wait reason, jobs, a job's spec, allocations, attempts
// and log tail, nodes, GPUs and services), read from this node's copy of
// the replicated state, as the API's reads are.
//
// The UI holds no authority of its own. The server authenticates every
// page with the token of the UI's session cookie (browsers cannot send a
// bearer header; the login page sets the cookie) and hands the UI the
// caller's role. The few actions (cancel a job, cordon or uncordon a GPU)
// appear only to roles that may take them, are posted with a CSRF token
// of the session and the token, and go through the user API's own handlers in process, so
// they are checked, forwarded to the leader and audited as any client's
// write. The log tail is read through the API too (its last 16 KiB, which
// the node that ran the job reads from the end of its files). A node's or
// a GPU's page of another node shows the utilisation that node read, asked
// of it through the server (Host.NodeTelemetry) within a second.
//
// The cluster's services share the UI's host: the ingress serves them on
// every node, at another port, and browsers keep cookies per host, not
// per port, so a page of a service is "same-site" to the UI. Its cookies
// and forms are made so that such a page can neither read nor use the
// session:
//   - The ingress passes no cookie of skein's namespace (api.CookiePrefix)
//     to a replica, and no replica's Set-Cookie of it to a browser;
//     HttpOnly keeps them from any page's script.
//   - Over TLS the cookies are __Host-skein_token and
//     __Host-skein_session: a browser takes such a name only from a
//     secure origin, with Secure, Path=/ and no Domain, so no plain-HTTP
//     page of the host and no sibling domain (a service reached as
//     NAME.<domain>) can set one, and a script cannot overwrite an
//     HttpOnly cookie. Over plain HTTP (loopback, a lab) the names are
//     bare (skein_token, skein_session, Path=/ui/); each scheme reads its
//     own names only.
//   - What a page of the host can still do (plant a session cookie with
//     a script where there is none, or one of a longer path over plain
//     HTTP) gains nothing: the CSRF token is a MAC of the session and the
//     token signed in, so the planter knows no CSRF token that works with
//     another's token; and every POST (sign-in and sign-out included)
//     must come from the UI's own origin: Sec-Fetch-Site "same-origin",
//     or, from a browser that sends no Fetch metadata, an Origin equal to
//     the UI's scheme, host and port.
//
// Templates, the stylesheet and the refresh script are embedded: the UI
// loads nothing from elsewhere, and its Content-Security-Policy says so.
package ui
