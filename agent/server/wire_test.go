package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/skein-dev/skein/agent/secure"
	"github.com/skein-dev/skein/agent/server/endpoint"
	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/fsm"
	"github.com/skein-dev/skein/sched"
	"github.com/skein-dev/skein/structs"
)

// The endpoints answer errors by kind; statusOf is where each kind
// becomes a status.
func TestStatusOf_EachKindOfErrorHasItsStatus(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		want int
	}{
		{"a field", &structs.FieldError{Field: "gpus", Msg: "too many"}, http.StatusBadRequest},
		{"a bad request of any error", &endpoint.BadRequest{Err: fmt.Errorf("no node has 9 GPUs")}, http.StatusBadRequest},
		{"nothing to change", fmt.Errorf("%w: nothing to change", endpoint.ErrInvalid), http.StatusBadRequest},
		{"a permission", &structs.PermissionError{Role: structs.RoleReader, Need: structs.PermSubmit, What: "submit jobs"}, http.StatusForbidden},
		{"a limit", fmt.Errorf("user alice: %w", fsm.ErrLimit), http.StatusForbidden},
		{"no such job", fmt.Errorf("%w: j1", fsm.ErrJobNotFound), http.StatusNotFound},
		{"no such service", fmt.Errorf("%w: web", fsm.ErrServiceNotFound), http.StatusNotFound},
		{"an autoscaled service", fmt.Errorf("%w: web", endpoint.ErrAutoscaled), http.StatusConflict},
		// A scale of an autoscaled service that the state refuses because
		// a rollout began meanwhile is a conflict, as a manual scale of
		// one is.
		{"a rollout under way", fmt.Errorf("service web: %w: a rollout to version 2 is in progress", fsm.ErrAutoscalePaused), http.StatusConflict},
		{"a leader that cannot remove nodes", endpoint.ErrCannotRemove, http.StatusServiceUnavailable},
		{"a leader that cannot restore", errCannotRestore, http.StatusServiceUnavailable},
		{"the trust API's invalid request", fmt.Errorf("join token: %w", secure.ErrInvalid), http.StatusBadRequest},
		{"the trust API's refusal", fmt.Errorf("admit: %w", secure.ErrForbidden), http.StatusForbidden},
		{"anything else", fmt.Errorf("disk on fire"), http.StatusInternalServerError},
	} {
		if got := statusOf(c.err); got != c.want {
			t.Errorf("%s (%v): status %d, want %d", c.name, c.err, got, c.want)
		}
	}
}

// An error about a request's field names it in the body, by its JSON
// name, for clients to tell their own flag or form field.
func TestWriteError_NamesTheRequestsField(t *testing.T) {
	for _, tc := range []struct {
		name      string
		err       error
		wantField string
	}{
		{"a field that does not validate", fmt.Errorf("spec: %w", &structs.FieldError{Field: "gpus", Msg: "65 is out of range 0..64"}), "gpus"},
		{"a field no node could give", fmt.Errorf("invalid request: %w", &sched.FitError{Field: "mounts", Msg: "no node allows mount /etc in its allow_mounts"}), "mounts"},
		{"no field", errors.New("no leader"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			writeError(w, http.StatusBadRequest, tc.err)
			var body api.ErrorBody
			if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
				t.Fatal(err)
			}
			if body.Error != tc.err.Error() || body.Field != tc.wantField {
				t.Fatalf("body %+v; want error %q, field %q", body, tc.err, tc.wantField)
			}
		})
	}
}
