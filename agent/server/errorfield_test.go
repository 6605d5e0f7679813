package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/sched"
	"github.com/skein-dev/skein/structs"
)

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
