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
		{"name", "gpu-02", exitOK, "revoked gpu-02 (5f3b0000-bbbb): out of Raft, the gossip keyring rotated without it (generation 6), refused in gossip\n", "/v1/nodes/5f3b0000-bbbb/revoke"},
		{"full ID", "5f3a9c01-aaaa", exitOK, "revoked gpu-01 (5f3a9c01-aaaa): out of Raft, the gossip keyring rotated without it (generation 6), refused in gossip\n", "/v1/nodes/5f3a9c01-aaaa/revoke"},
		{"unique ID prefix", "5f3a", exitOK, "revoked gpu-01 (5f3a9c01-aaaa): out of Raft, the gossip keyring rotated without it (generation 6), refused in gossip\n", "/v1/nodes/5f3a9c01-aaaa/revoke"},
		{"name before prefix", "5f3b", exitOK, "revoked 5f3b (77000000-cccc): out of Raft, the gossip keyring rotated without it (generation 6), refused in gossip\n", "/v1/nodes/77000000-cccc/revoke"},
		{"ambiguous prefix", "5f", exitError, `node "5f" is ambiguous: it matches gpu-01 (5f3a9c01-aaaa), gpu-02 (5f3b0000-bbbb)`, ""},
		{"unknown is sent as it stands", "node-9", exitError, `node "node-9": not found`, "/v1/nodes/node-9/revoke"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeAgent(t)
			f.reply("GET /v1/nodes", http.StatusOK, nodes)
			f.reply("POST /v1/nodes/{id}/revoke", http.StatusOK, api.NodeRevokeResult{OutOfRaft: true, KeyringGeneration: 6, Rotated: true, Refused: true, Done: true})
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

func TestNodeRevoke_SaysWhatIsStillUnderWay(t *testing.T) {
	f := newFakeAgent(t)
	f.reply("GET /v1/nodes", http.StatusOK, []api.NodeInfo{{Node: structs.Node{ID: "5f3a9c01-aaaa", Name: "gpu-01"}}})
	f.reply("POST /v1/nodes/{id}/revoke", http.StatusOK, api.NodeRevokeResult{OutOfRaft: true, KeyringGeneration: 4,
		Waiting: "the keyring rotation without it (at generation 4)"})
	r := runCLI(t, "--addr", f.URL, "node", "revoke", "gpu-01")
	if want := "revoked gpu-01 (5f3a9c01-aaaa); still under way: the keyring rotation without it (at generation 4) (see skein keyring status and skein members)\n"; r.code != exitOK || r.stdout != want {
		t.Errorf("exit %d, stdout %q; want %q", r.code, r.stdout, want)
	}
}
