package cli

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/structs"
)

func TestNodeDrain_SendsTheDeadlineAndSaysWhatTheNodeDoes(t *testing.T) {
	nodes := []api.NodeInfo{{Node: structs.Node{ID: "5f3a9c01-aaaa", Name: "gpu-01"}}}
	at := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name string
		args []string
		node structs.Node
		code int
		out  string // stdout, or a part of stderr on error
		path string // the request's path; "" for none
		body api.NodeDrainRequest
	}{
		{"deadline", []string{"drain", "--deadline", "2h", "--reason", "driver", "gpu-01"},
			structs.Node{Drain: &structs.NodeDrain{Deadline: at, StartedAt: at}}, exitOK, "node gpu-01 is draining; jobs that cannot move are stopped at",
			"/v1/nodes/5f3a9c01-aaaa/drain", api.NodeDrainRequest{Deadline: structs.Duration(2 * time.Hour), Reason: "driver"}},
		{"no deadline", []string{"drain", "gpu-01"},
			structs.Node{Drain: &structs.NodeDrain{StartedAt: at}}, exitOK, "node gpu-01 is draining; jobs that cannot move run out\n",
			"/v1/nodes/5f3a9c01-aaaa/drain", api.NodeDrainRequest{}},
		{"force", []string{"drain", "--force", "5f3a"},
			structs.Node{Drain: &structs.NodeDrain{Force: true, StartedAt: at}}, exitOK, "node gpu-01 is draining: everything on it is being stopped\n",
			"/v1/nodes/5f3a9c01-aaaa/drain", api.NodeDrainRequest{Force: true}},
		{"undrain", []string{"undrain", "gpu-01"}, structs.Node{}, exitOK, "node gpu-01 takes work again\n",
			"/v1/nodes/5f3a9c01-aaaa/undrain", api.NodeDrainRequest{}},
		{"bad deadline", []string{"drain", "--deadline", "soon", "gpu-01"}, structs.Node{}, exitUsage, `--deadline "soon"`, "", api.NodeDrainRequest{}},
		{"deadline too long", []string{"drain", "--deadline", "9000h", "gpu-01"}, structs.Node{}, exitUsage, "out of range", "", api.NodeDrainRequest{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeAgent(t)
			f.reply("GET /v1/nodes", http.StatusOK, nodes)
			f.reply("POST /v1/nodes/{id}/drain", http.StatusOK, tc.node)
			f.reply("POST /v1/nodes/{id}/undrain", http.StatusOK, tc.node)
			r := runCLI(t, append([]string{"--addr", f.URL, "node"}, tc.args...)...)
			if r.code != tc.code {
				t.Fatalf("exit code %d, want %d; stderr %q", r.code, tc.code, r.stderr)
			}
			if tc.code == exitOK && !strings.HasPrefix(r.stdout, tc.out) || tc.code != exitOK && !strings.Contains(r.stderr, tc.out) {
				t.Errorf("stdout %q, stderr %q; want %q", r.stdout, r.stderr, tc.out)
			}
			var sent *recorded
			for _, req := range f.requests() {
				if req.Method == http.MethodPost {
					sent = &req
				}
			}
			switch {
			case tc.path == "" && sent != nil:
				t.Errorf("sent %s, want nothing sent", sent.Path)
			case tc.path != "" && (sent == nil || sent.Path != tc.path):
				t.Errorf("request = %+v, want %s", sent, tc.path)
			case sent != nil:
				var body api.NodeDrainRequest
				if err := json.Unmarshal(sent.Body, &body); err != nil || body != tc.body {
					t.Errorf("body %s: %v; want %+v", sent.Body, err, tc.body)
				}
			}
		})
	}
}

func TestNodeRemove_SendsTheNodeAndSaysWhatItWas(t *testing.T) {
	f := newFakeAgent(t)
	f.reply("GET /v1/nodes", http.StatusOK, []api.NodeInfo{{Node: structs.Node{ID: "5f3a9c01-aaaa", Name: "gpu-01", Status: structs.NodeDown}}})
	f.reply("POST /v1/nodes/{id}/remove", http.StatusOK, structs.Node{ID: "5f3a9c01-aaaa", Name: "gpu-01", Status: structs.NodeDown})
	r := runCLI(t, "--addr", f.URL, "node", "remove", "--reason", "burnt", "gpu-01")
	if r.code != exitOK || r.stdout != "removed node gpu-01 (5f3a9c01-aaaa), which was down\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	reqs := f.requests()
	last := reqs[len(reqs)-1]
	var body api.NodeRemoveRequest
	if last.Path != "/v1/nodes/5f3a9c01-aaaa/remove" || json.Unmarshal(last.Body, &body) != nil || body.Reason != "burnt" {
		t.Fatalf("sent %s %s", last.Path, last.Body)
	}
}

func TestVersion_ShowsEachNodesVersion(t *testing.T) {
	f := newFakeAgent(t)
	f.reply("GET /v1/nodes", http.StatusOK, []api.NodeInfo{
		{Node: structs.Node{ID: "a", Name: "gpu-01", Status: structs.NodeReady, Version: "0.2.0"},
			Protocol: structs.Protocol{Release: "0.2.0", API: 1, Log: 30, Snapshot: 7}},
		{Node: structs.Node{ID: "b", Name: "gpu-02", Status: structs.NodeReady, Version: "0.1.0"}, Protocol: structs.Protocol{Release: "0.1.0"}},
	})
	r := runCLI(t, "--addr", f.URL, "version")
	if r.code != exitOK {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	for _, want := range []string{"gpu-01  ready   0.2.0 (api 1, log 30, snapshot 7)", "gpu-02  ready   0.1.0 (api 1, log 27: before versions were announced)"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
}
