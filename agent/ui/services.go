package ui

import (
	"encoding/json"
	"net/http"

	"github.com/skein-dev/skein/api"
)

// handleServices lists the services as the API's list does (its words
// for each service's state included), read through it in process.
func (u *UI) handleServices(w http.ResponseWriter, r *http.Request, v *view) {
	v.Title, v.Nav, v.Refresh = "Services", "services", refreshSeconds
	status, body, err := u.callAPI(r.Context(), r, http.MethodGet, "/v1/services", nil, 0)
	if err == nil && status != http.StatusOK {
		err = &actionError{status: status, err: apiError(status, body)}
	}
	var list []api.ServiceInfo
	if err == nil {
		err = json.Unmarshal(body, &list)
	}
	if err != nil {
		u.fail(w, r, v, statusOf(err), err)
		return
	}
	u.render(w, http.StatusOK, "services", v, list)
}
