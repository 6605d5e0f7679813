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
// appear only to roles that may take them, are posted with a per-session
// CSRF token, and go through the user API's own handlers in process, so
// they are checked, forwarded to the leader and audited as any client's
// write. The log tail is read through the API too (its last 16 KiB, which
// the node that ran the job reads from the end of its files). A node's or
// a GPU's page of another node shows the utilisation that node read, asked
// of it through the server (Server.NodeTelemetry) within a second.
//
// Templates, the stylesheet and the refresh script are embedded: the UI
// loads nothing from elsewhere, and its Content-Security-Policy says so.
package ui
