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
)

// The audit log: every write a user makes through the user API is recorded
// (who, what, when, from where, and the answer) by the node that took it
// from the user, in a file of its data dir. A write a node forwards is
// recorded where the user sent it, not again on the leader. Admins read
// every node's records with GET /v1/audit, which the node asked collects.

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

// Tail returns the newest n records, oldest first.
func (a *AuditLog) Tail(n int) ([]api.AuditRecord, error) {
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
			if json.Unmarshal(sc.Bytes(), &rec) == nil {
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

// audited records the writes next serves.
func (s *Server) audited(next http.Handler) http.Handler {
	if s.cfg.Audit == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet || r.Method == http.MethodHead || s.forwardedByNode(r) {
			next.ServeHTTP(w, r)
			return
		}
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(sw, r)
		id := identityOf(r)
		rec := api.AuditRecord{
			At: now(), Node: s.cfg.NodeName, User: id.User, Role: id.Role, TokenID: id.TokenID,
			Remote: r.RemoteAddr, Method: r.Method, Path: r.URL.Path, Status: sw.status,
		}
		if err := s.cfg.Audit.Record(rec); err != nil {
			s.log.Error("audit log", "error", err)
		}
	})
}

// forwardedByNode reports whether a write was forwarded by a node of the
// cluster, proven by its node certificate (a secure cluster): the node
// the user sent it to recorded it. In a plaintext cluster the header
// alone proves nothing, and the write is recorded again here.
func (s *Server) forwardedByNode(r *http.Request) bool {
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
	recs, err := s.localAudit(limit)
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
			more, err := s.remoteAudit(r, n.ID, limit)
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

func (s *Server) localAudit(limit int) ([]api.AuditRecord, error) {
	if s.cfg.Audit == nil {
		return []api.AuditRecord{}, nil
	}
	recs, err := s.cfg.Audit.Tail(limit)
	if recs == nil {
		recs = []api.AuditRecord{}
	}
	return recs, err
}

// remoteAudit asks one node for its own records, with the caller's token.
func (s *Server) remoteAudit(r *http.Request, nodeID string, limit int) ([]api.AuditRecord, error) {
	addr := s.cfg.Peers.HTTPAddrOf(nodeID)
	if addr == "" {
		return nil, errors.New("address unknown")
	}
	q := url.Values{"local": {"true"}, "limit": {strconv.Itoa(limit)}}
	req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, addr+"/v1/audit?"+q.Encode(), nil)
	if err != nil {
		return nil, err
	}
	copyHeaders(req.Header, r.Header, api.TokenHeader, "Authorization")
	req.Header.Set(api.ForwardedHeader, s.cfg.NodeName)
	var recs []api.AuditRecord
	if err := s.callNode(req, 64<<20, &recs); err != nil {
		return nil, err
	}
	return recs, nil
}
