package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/skein-dev/skein/agent/peer"
	"github.com/skein-dev/skein/agent/secure"
	"github.com/skein-dev/skein/agent/server/endpoint"
	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/cluster"
	"github.com/skein-dev/skein/fsm"
	"github.com/skein-dev/skein/sched"
	"github.com/skein-dev/skein/structs"
)

// decodeBody reads a JSON body strictly: at most api.MaxBodyBytes, no
// unknown fields, nothing after the value.
func decodeBody(w http.ResponseWriter, r *http.Request, out any) error {
	b, err := readBody(w, r)
	if err != nil {
		return err
	}
	return decodeStrict(b, out)
}

// readBody reads at most api.MaxBodyBytes of a request body.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, api.MaxBodyBytes))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return nil, fmt.Errorf("%w: request body larger than %d bytes", errTooLarge, api.MaxBodyBytes)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: read body: %v", errBadRequest, err)
	}
	return b, nil
}

// decodeStrict decodes one JSON value with no unknown fields and nothing after it.
func decodeStrict(b []byte, out any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(out); err != nil {
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("%w: empty request body", errBadRequest)
		}
		return fmt.Errorf("%w: %s", errBadRequest, strings.TrimPrefix(err.Error(), "json: "))
	}
	if dec.More() {
		return fmt.Errorf("%w: unexpected data after the JSON body", errBadRequest)
	}
	return nil
}

// HTTP-level errors.
var (
	errBadRequest = errors.New("bad request")
	errTooLarge   = errors.New("request too large")
)

// statusOf maps an error to the HTTP status that tells the client what kind
// of failure it was.
func statusOf(err error) int {
	var fe *structs.FieldError
	var remote *api.Error
	var bad *endpoint.BadRequest
	var conflict *endpoint.Conflict
	switch {
	// The trust API's refusals (agent/secure) first: what they wrap is
	// not what they mean.
	case errors.Is(err, secure.ErrForbidden):
		return http.StatusForbidden
	case errors.Is(err, secure.ErrInvalid):
		return http.StatusBadRequest
	case errors.Is(err, secure.ErrRotating):
		return http.StatusConflict
	case errors.Is(err, secure.ErrNoTrust), errors.Is(err, secure.ErrNoCAKey):
		return http.StatusServiceUnavailable
	case errors.As(err, &remote):
		return remote.StatusCode
	case errors.As(err, &bad), errors.Is(err, endpoint.ErrInvalid), errors.Is(err, endpoint.ErrPlaintext):
		return http.StatusBadRequest
	case errors.As(err, &conflict):
		return http.StatusConflict
	case errors.As(err, &fe), errors.Is(err, errBadRequest), errors.Is(err, fsm.ErrAmbiguousID),
		errors.Is(err, fsm.ErrInvalidRequest), errors.Is(err, sched.ErrNeverFits):
		return http.StatusBadRequest
	case errors.Is(err, fsm.ErrServiceNotFound):
		return http.StatusNotFound
	case errors.Is(err, fsm.ErrServiceExists), errors.Is(err, fsm.ErrServiceDeleted), errors.Is(err, endpoint.ErrAutoscaled),
		errors.Is(err, fsm.ErrAutoscalePaused), errors.Is(err, fsm.ErrDrainStale), errors.Is(err, structs.ErrUpgradeFirst):
		return http.StatusConflict
	case errors.Is(err, errTooLarge):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, structs.ErrPermission):
		return http.StatusForbidden
	case errors.Is(err, fsm.ErrACLBootstrapped), errors.Is(err, fsm.ErrNoACL), errors.Is(err, fsm.ErrACLTokenExists):
		return http.StatusConflict
	case errors.Is(err, fsm.ErrLimit):
		// As a Kubernetes ResourceQuota does: the message names the limit.
		return http.StatusForbidden
	case errors.Is(err, fsm.ErrJobNotFound), errors.Is(err, fsm.ErrAllocNotFound), errors.Is(err, fsm.ErrNodeNotFound),
		errors.Is(err, fsm.ErrNodeNotAdmitted), errors.Is(err, fsm.ErrJoinTokenNotFound), errors.Is(err, fsm.ErrACLTokenNotFound):
		return http.StatusNotFound
	case errors.Is(err, fsm.ErrJobFinished), errors.Is(err, fsm.ErrJobExists), errors.Is(err, fsm.ErrWrongNode):
		return http.StatusConflict
	case errors.Is(err, endpoint.ErrCannotRemove), errors.Is(err, errCannotRestore), errors.Is(err, cluster.ErrNotLeader), errors.Is(err, peer.ErrNoLeader), errors.Is(err, cluster.ErrLeadershipLost):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, code int, err error) {
	writeJSON(w, code, api.ErrorBody{Error: err.Error(), Field: errorField(err)})
}

// errorField names the request's field err is about: a field that does
// not validate, or that no node could ever give. "" where none.
func errorField(err error) string {
	var fe *structs.FieldError
	if errors.As(err, &fe) {
		return fe.Field
	}
	var fit *sched.FitError
	if errors.As(err, &fit) {
		return fit.Field
	}
	return ""
}
