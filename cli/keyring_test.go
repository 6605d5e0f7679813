package cli

import (
	"net/http"
	"testing"

	"github.com/skein-dev/skein/api"
)

func TestKeyring_StatusAndRotatePrintTheKeyring(t *testing.T) {
	cases := []struct {
		cmd, pattern string
		answer       api.KeyringStatus
		want         string
	}{
		{
			"status", "GET /v1/keyring",
			api.KeyringStatus{Generation: 2, Keys: 1, Nodes: map[string]uint64{"gpu-02": 2, "gpu-01": 2}},
			"Generation: 2\nKeys:       1\nRotating:   no\n\nNODE    GENERATION\ngpu-01  2\ngpu-02  2\n",
		},
		{
			"rotate", "POST /v1/keyring/rotate",
			api.KeyringStatus{Generation: 3, Keys: 2, Rotating: true, Nodes: map[string]uint64{"gpu-01": 3, "gpu-02": 2}},
			"Generation: 3\nKeys:       2\nRotating:   yes\n\nNODE    GENERATION\ngpu-01  3\ngpu-02  2 (behind)\n",
		},
		{
			"status", "GET /v1/keyring",
			api.KeyringStatus{Generation: 1, Keys: 1},
			"Generation: 1\nKeys:       1\nRotating:   no\n",
		},
	}
	for _, tc := range cases {
		t.Run(tc.cmd, func(t *testing.T) {
			f := newFakeAgent(t)
			f.reply(tc.pattern, http.StatusOK, tc.answer)
			r := runCLI(t, "--addr", f.URL, "keyring", tc.cmd)
			if r.code != exitOK || r.stdout != tc.want {
				t.Fatalf("got code %d, stdout %q, stderr %q; want %q", r.code, r.stdout, r.stderr, tc.want)
			}
			r = runCLI(t, "--addr", f.URL, "keyring", tc.cmd, "--json")
			var got api.KeyringStatus
			mustDecode(t, r.stdout, &got)
			if got.Generation != tc.answer.Generation || len(got.Nodes) != len(tc.answer.Nodes) {
				t.Errorf("--json = %+v, want %+v", got, tc.answer)
			}
		})
	}
}
