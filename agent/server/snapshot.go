package server

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/fsm"
	"github.com/skein-dev/skein/structs"
)

// errCannotRestore: this node leads but was given no way to restore.
var errCannotRestore = errors.New("this node cannot restore a snapshot")

// restoreTimeout bounds how long a restore waits for Raft to take the
// backup and for the followers to have it.
const restoreTimeout = 2 * time.Minute

// handleSnapshotSave answers GET /v1/snapshot with a backup of the whole
// state, from the leader (other nodes pass the request on), so that it
// holds every write acknowledged before it. It is a read: it writes
// nothing, and answers the backup as it is, not as JSON.
func (s *adminRoutes) handleSnapshotSave(w http.ResponseWriter, r *http.Request) {
	if !s.cfg.Raft.IsLeader() && s.forward(w, r, nil) {
		return
	}
	var buf bytes.Buffer
	index, err := s.cfg.FSM.WriteSnapshot(&buf)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	s.holdWrite(w)
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	w.Header().Set(api.SnapshotIndexHeader, strconv.FormatUint(index, 10))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(buf.Bytes())
}

// handleSnapshotRestore replaces the state of the whole cluster with the
// backup in the body (POST /v1/snapshot/restore). The backup is read and
// checked whole first; the leader (other nodes pass it on) then has Raft
// install it on every server. It answers what the backup held.
func (s *adminRoutes) handleSnapshotRestore(w http.ResponseWriter, r *http.Request) {
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(restoreTimeout))
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, api.MaxSnapshotBytes))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Errorf("%w: snapshot larger than %d bytes", errTooLarge, api.MaxSnapshotBytes))
		return
	case err != nil:
		writeError(w, http.StatusBadRequest, fmt.Errorf("%w: read body: %v", errBadRequest, err))
		return
	}
	sum, err := fsm.Inspect(bytes.NewReader(body))
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	if t, ok := s.fsm.Trust(); ok && sum.Founder != t.Founder {
		writeError(w, http.StatusConflict, fmt.Errorf("%w: the backup is not of this cluster: its CA was made by node %s, this cluster's by node %s (or the backup has no trust state)",
			errBadRequest, structs.ShortID(sum.Founder), structs.ShortID(t.Founder)))
		return
	}
	resp, err := s.writer(w, r, body).Lead(nil, func() (any, error) {
		if s.cfg.Restore == nil {
			return nil, errCannotRestore
		}
		index, err := s.cfg.Restore(func(index uint64) ([]byte, error) { return fsm.Reindex(body, index) }, restoreTimeout)
		if err != nil {
			return nil, err
		}
		s.log.Warn("the cluster's state was replaced by a snapshot", "index", index, "backup_index", sum.Index, "jobs", len(sum.Jobs))
		sum.Index = index
		return sum, nil
	})
	if err == nil {
		s.holdWrite(w)
	}
	answer(w, http.StatusOK, resp, err)
}
