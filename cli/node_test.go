package cli

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/structs"
)

func TestNodeRevoke_ResolvesNameOrIDPrefix(t *testing.T) {
	nodes := []api.NodeInfo{
		{Node: structs.Node{ID: "5f3a9c01-aaaa", Name: "gpu-01"}},
		{Node: structs.Node{ID: "5f3b0000-bbbb", Name: "gpu-02"}},
		{Node: structs.Node{ID: "77000000-cccc", Name: "5f3b"}}, // a name that is also an ID prefix
	}
	cases := []struct {
		name, arg string
		code      int
		out       string // stdout, or a part of stderr on error
		path      string // the revoke request's path; "" for none
	}{
		{"name", "gpu-02", exitOK, "revoked gpu-02 (5f3b0000-bbbb)\n", "/v1/nodes/5f3b0000-bbbb/revoke"},
		{"full ID", "5f3a9c01-aaaa", exitOK, "revoked gpu-01 (5f3a9c01-aaaa)\n", "/v1/nodes/5f3a9c01-aaaa/revoke"},
		{"unique ID prefix", "5f3a", exitOK, "revoked gpu-01 (5f3a9c01-aaaa)\n", "/v1/nodes/5f3a9c01-aaaa/revoke"},
		{"name before prefix", "5f3b", exitOK, "revoked 5f3b (77000000-cccc)\n", "/v1/nodes/77000000-cccc/revoke"},
		{"ambiguous prefix", "5f", exitError, `node "5f" is ambiguous: it matches gpu-01 (5f3a9c01-aaaa), gpu-02 (5f3b0000-bbbb)`, ""},
		{"unknown is sent as it stands", "node-9", exitError, `node "node-9": not found`, "/v1/nodes/node-9/revoke"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeAgent(t)
			f.reply("GET /v1/nodes", http.StatusOK, nodes)
			f.reply("POST /v1/nodes/{id}/revoke", http.StatusOK, struct{}{})
			f.fail("POST /v1/nodes/node-9/revoke", http.StatusNotFound, `node "node-9": not found`)
			r := runCLI(t, "--addr", f.URL, "node", "revoke", "--reason", "stolen", tc.arg)
			if r.code != tc.code {
				t.Fatalf("exit code %d, want %d; stderr %q", r.code, tc.code, r.stderr)
			}
			if tc.code == exitOK && r.stdout != tc.out || tc.code != exitOK && !strings.Contains(r.stderr, tc.out) {
				t.Errorf("stdout %q, stderr %q; want %q", r.stdout, r.stderr, tc.out)
			}
			var revoke *recorded
			for _, req := range f.requests() {
				if req.Method == http.MethodPost {
					revoke = &req
				}
			}
			switch {
			case tc.path == "" && revoke != nil:
				t.Errorf("sent %s, want no revocation", revoke.Path)
			case tc.path != "" && (revoke == nil || revoke.Path != tc.path):
				t.Errorf("revocation = %+v, want %s", revoke, tc.path)
			case revoke != nil:
				var body api.NodeRevokeRequest
				if err := json.Unmarshal(revoke.Body, &body); err != nil || body.Reason != "stolen" {
					t.Errorf("body %s: %v; want the reason", revoke.Body, err)
				}
			}
		})
	}
}
