package server

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/structs"
	"github.com/skein-dev/skein/trust"
)

// The audit log: what users and nodes do at a node's doors is recorded
// (the event, who, what, when, from where, and the answer) by the node that
// took it, in a file of its data dir: every write a user makes through the
// user API (and the UI's actions, which go through it), with revocations
// and keyring rotations named as such; reads of secrets (?secrets=true);
// sign-ins to the UI; failed logins at the API, the UI and the ingress
// (each a 401: a refusal for too many failures, 429, is not recorded, so
// a flood of guesses cannot flood the log past the limiter's pace); nodes
// admitted or refused, and node certificates refused on the node-to-node
// API; and the keyring rotation steps the leader takes by itself
// (Record, from agent/secure). A write a node forwards is recorded where
// the user sent it, not again on the leader. Admins read every node's
// records with GET /v1/audit, which the node asked collects, selected by
// event and user.

// DefaultAuditMax is the size at which the audit file is rotated; the
// node keeps the current file and one older.
const DefaultAuditMax = 16 << 20

// AuditLog is a node's audit file: JSON lines, rotated at a size.
type AuditLog struct {
	mu   sync.Mutex
	path string
	max  int64
	f    *os.File
	size int64
}

// OpenAuditLog opens (creating, 0600) the audit file at path, rotated to
// path.1 when it passes max bytes.
func OpenAuditLog(path string, max int64) (*AuditLog, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open audit log: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("open audit log: %w", err)
	}
	return &AuditLog{path: path, max: max, f: f, size: st.Size()}, nil
}

// Record appends one record.
func (a *AuditLog) Record(rec api.AuditRecord) error {
	line, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	line = append(line, '\n')
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.size > 0 && a.size+int64(len(line)) > a.max {
		if err := a.rotate(); err != nil {
			return err
		}
	}
	n, err := a.f.Write(line)
	a.size += int64(n)
	return err
}

func (a *AuditLog) rotate() error {
	if err := os.Rename(a.path, a.path+".1"); err != nil {
		return fmt.Errorf("rotate audit log: %w", err)
	}
	f, err := os.OpenFile(a.path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("rotate audit log: %w", err)
	}
	a.f.Close()
	a.f, a.size = f, 0
	return nil
}

// Tail returns the newest n records that keep selects (nil: all), oldest
// first.
func (a *AuditLog) Tail(n int, keep func(api.AuditRecord) bool) ([]api.AuditRecord, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []api.AuditRecord
	for _, p := range []string{a.path + ".1", a.path} {
		data, err := os.ReadFile(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read audit log: %w", err)
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		for sc.Scan() {
			var rec api.AuditRecord
			if json.Unmarshal(sc.Bytes(), &rec) == nil && (keep == nil || keep(rec)) {
				out = append(out, rec)
			}
		}
	}
	return out[max(0, len(out)-n):], nil
}

// Close closes the file.
func (a *AuditLog) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.f.Close()
}

// The doors an audit record came through.
const (
	viaAPI      = "api"
	viaUI       = "ui"
	viaIngress  = "ingress"
	viaInternal = "internal"
)

// maxDetail bounds the text of a record's detail that comes from a
// request (a node's name, an error).
const maxDetail = 256

// record appends rec to this node's audit log, stamped now and with this
// node's name.
func (s *shared) record(rec api.AuditRecord) {
	if s.cfg.Audit == nil {
		return
	}
	rec.At, rec.Node = now(), s.cfg.NodeName
	if err := s.cfg.Audit.Record(rec); err != nil {
		s.log.Error("audit log", "error", err)
	}
}

// Record appends an event this node took part in by itself (a keyring
// rotation step the leader took) to its audit log.
func (s *Server) Record(event, detail string) {
	s.record(api.AuditRecord{Event: event, Detail: detail})
}

// requestRecord is the record of an event of r, whose caller's identity
// (if any) is in its context.
func requestRecord(r *http.Request, event, via string, status int) api.AuditRecord {
	id := identityOf(r)
	return api.AuditRecord{User: id.User, Role: id.Role, TokenID: id.TokenID, Remote: r.RemoteAddr,
		Method: r.Method, Path: r.URL.Path, Status: status, Event: event, Via: via}
}

// remoteOf is the client r came from: its address, or, for a request a
// worker passed on, the user's address the worker names, and the worker's.
func (s *shared) remoteOf(r *http.Request) string {
	if r.Header.Get(ProxiedHeader) != "" && s.sentByNode(r) {
		return s.authFails.clientOf(r).String() + " via " + r.RemoteAddr
	}
	return r.RemoteAddr
}

// failedAt records the failed authentications at a door: a user's failed
// login, or, on the node-to-node API, a node (or not) refused. The token's
// ID is recorded when it has an ACL token's shape (its secret never is).
func (s *Server) failedAt(via string) func(*http.Request, error) {
	return func(r *http.Request, err error) {
		event := api.AuditLoginFailed
		if via == viaInternal {
			event = api.AuditNodeRefused
		}
		rec := requestRecord(r, event, via, http.StatusUnauthorized)
		rec.Remote, rec.Detail = s.remoteOf(r), clipDetail(err.Error())
		if tok, perr := trust.ParseACLToken(requestToken(r)); perr == nil {
			rec.TokenID = tok.ID
		}
		s.record(rec)
	}
}

// audited records the writes next serves, and its reads of secrets.
func (s *Server) audited(next http.Handler) http.Handler {
	if s.cfg.Audit == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		read := r.Method == http.MethodGet || r.Method == http.MethodHead
		secrets := read && r.URL.Query().Get("secrets") == "true"
		if read && !secrets || s.forwardedByNode(r) {
			next.ServeHTTP(w, r)
			return
		}
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(sw, r)
		event := api.AuditSecretsRead
		if !read {
			event = writeEvent(r)
		}
		rec := requestRecord(r, event, viaAPI, sw.status)
		rec.Remote = s.remoteOf(r)
		s.record(rec)
	})
}

// writeEvent names the event of a write: a revocation or a keyring
// rotation, or any other write.
func writeEvent(r *http.Request) string {
	p := r.URL.Path
	switch {
	case r.Method == http.MethodPost && strings.HasPrefix(p, "/v1/nodes/") && strings.HasSuffix(p, "/revoke"):
		return api.AuditNodeRevoke
	case r.Method == http.MethodDelete && (strings.HasPrefix(p, "/v1/acl/tokens/") || strings.HasPrefix(p, "/v1/join-tokens/")):
		return api.AuditTokenRevoke
	case r.Method == http.MethodPost && p == "/v1/keyring/rotate":
		return api.AuditKeyringRotate
	}
	return api.AuditWrite
}

func clipDetail(s string) string {
	if len(s) > maxDetail {
		return s[:maxDetail] + "..."
	}
	return s
}

// captureWriter remembers the status a handler answered, and the start
// of an error's body.
type captureWriter struct {
	http.ResponseWriter
	status int
	body   []byte
}

func (w *captureWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

func (w *captureWriter) Write(p []byte) (int, error) {
	if w.status >= http.StatusBadRequest && len(w.body) < 1024 {
		w.body = append(w.body, p[:min(len(p), 1024-len(w.body))]...)
	}
	return w.ResponseWriter.Write(p)
}

// errorText is the error an answer's body gave.
func (w *captureWriter) errorText() string {
	var e api.ErrorBody
	if json.Unmarshal(w.body, &e) == nil && e.Error != "" {
		return e.Error
	}
	return http.StatusText(w.status)
}

// forwardedByNode reports whether a write was forwarded by a node of the
// cluster, proven by its node certificate (a secure cluster): the node
// the user sent it to recorded it. In a plaintext cluster the header
// alone proves nothing, and the write is recorded again here.
func (s *shared) forwardedByNode(r *http.Request) bool {
	return r.Header.Get(api.ForwardedHeader) != "" && s.cfg.Trust != nil && s.sentByNode(r)
}

// statusWriter remembers the status a handler answered.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// handleAudit answers the newest audit records of this node (local=true)
// or of every node, oldest first; nodes that did not answer are named in
// the AuditMissingHeader.
func (s *Server) handleAudit(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit := api.DefaultAuditLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > api.MaxAuditLimit {
			writeError(w, http.StatusBadRequest, &structs.FieldError{Field: "limit", Msg: fmt.Sprintf("%q is out of range 1..%d", v, api.MaxAuditLimit)})
			return
		}
		limit = n
	}
	sel, err := auditSelection(q)
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	recs, err := s.localAudit(limit, sel.keep)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	if q.Get("local") != "true" {
		var missing []string
		for _, n := range s.fsm.Nodes() {
			if n.ID == s.cfg.NodeID {
				continue
			}
			more, err := s.remoteAudit(r, n.ID, limit, sel)
			if err != nil {
				s.log.Debug("audit records of a node missing", "node", n.Name, "error", err)
				missing = append(missing, n.Name)
				continue
			}
			recs = append(recs, more...)
		}
		slices.SortStableFunc(recs, func(a, b api.AuditRecord) int {
			return cmp.Or(a.At.Compare(b.At), cmp.Compare(a.Node, b.Node))
		})
		recs = recs[max(0, len(recs)-limit):]
		if len(missing) > 0 {
			w.Header().Set(api.AuditMissingHeader, strings.Join(missing, ","))
		}
	}
	writeJSON(w, http.StatusOK, recs)
}

// auditEvents are the events and families a query may select.
var auditEvents = []string{api.AuditWrite, api.AuditLogin, api.AuditLoginFailed, "node", api.AuditNodeAdmit,
	api.AuditNodeRefused, api.AuditNodeRevoke, "token", api.AuditTokenRevoke, "keyring", api.AuditKeyringRotate,
	"secrets", api.AuditSecretsRead}

// maxAuditUser bounds the user a query selects.
const maxAuditUser = 256

// auditSel is what a query selects: the events (any when none) and the
// user ("" any).
type auditSel struct {
	events []string
	user   string
}

// auditSelection reads the event and user of a query, or says which is
// wrong.
func auditSelection(q url.Values) (auditSel, error) {
	var sel auditSel
	if v := q.Get("event"); v != "" {
		for e := range strings.SplitSeq(v, ",") {
			e = strings.TrimSpace(e)
			if !slices.Contains(auditEvents, e) {
				return sel, &structs.FieldError{Field: "event", Msg: fmt.Sprintf("%q is not an event: want one of %s",
					clipDetail(e), strings.Join(auditEvents, ", "))}
			}
			sel.events = append(sel.events, e)
		}
	}
	if sel.user = q.Get("user"); len(sel.user) > maxAuditUser {
		return sel, &structs.FieldError{Field: "user", Msg: fmt.Sprintf("%d bytes, over the %d a user name may have", len(sel.user), maxAuditUser)}
	}
	return sel, nil
}

// keep reports whether the selection takes rec.
func (sel auditSel) keep(rec api.AuditRecord) bool {
	if sel.user != "" && rec.User != sel.user {
		return false
	}
	return len(sel.events) == 0 || slices.ContainsFunc(sel.events, func(e string) bool { return api.AuditEventMatches(rec.Event, e) })
}

func (s *Server) localAudit(limit int, keep func(api.AuditRecord) bool) ([]api.AuditRecord, error) {
	if s.cfg.Audit == nil {
		return []api.AuditRecord{}, nil
	}
	recs, err := s.cfg.Audit.Tail(limit, keep)
	if recs == nil {
		recs = []api.AuditRecord{}
	}
	return recs, err
}

// remoteAudit asks one node for its own records of the selection, with the
// caller's token.
func (s *Server) remoteAudit(r *http.Request, nodeID string, limit int, sel auditSel) ([]api.AuditRecord, error) {
	addr := s.cfg.Peers.HTTPAddrOf(nodeID)
	if addr == "" {
		return nil, errors.New("address unknown")
	}
	q := url.Values{"local": {"true"}, "limit": {strconv.Itoa(limit)}}
	if len(sel.events) > 0 {
		q.Set("event", strings.Join(sel.events, ","))
	}
	if sel.user != "" {
		q.Set("user", sel.user)
	}
	req, err := s.onwardRequest(r.Context(), r, http.MethodGet, addr+"/v1/audit?"+q.Encode(), nil)
	if err != nil {
		return nil, err
	}
	var recs []api.AuditRecord
	if err := s.callNode(req, 64<<20, &recs); err != nil {
		return nil, err
	}
	return recs, nil
}
