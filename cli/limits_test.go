package cli

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/structs"
)

func TestLimits_RoundTripThroughARealAgent(t *testing.T) {
	t.Parallel()
	startRealAgent(t)
	run := func(args ...string) string {
		t.Helper()
		r := runCLI(t, args...)
		if r.code != exitOK {
			t.Fatalf("skein %s: exit %d: %s", strings.Join(args, " "), r.code, r.stderr)
		}
		return r.stdout
	}
	out := run("limits", "set", "alice", "--max-gpus", "64", "--max-queued", "500", "--max-array", "1000")
	for _, want := range []string{"User alice", "500 (set for this user)", "64 (set for this user)", "1000 (set for this user)"} {
		if !strings.Contains(out, want) {
			t.Errorf("set output lacks %q:\n%s", want, out)
		}
	}
	run("limits", "set", "--default", "--max-queued", "3", "--max-gpus", "unlimited")
	run("limits", "set", "--cluster", "--max-queued", "20000")

	var u api.UserLimitsInfo
	mustDecode(t, run("limits", "show", "alice", "--json"), &u)
	if want := (structs.UserLimits{MaxQueued: 500, MaxGPUs: 64, MaxArray: 1000}); u.Limits != want {
		t.Fatalf("alice's limits %+v, want %+v", u.Limits, want)
	}
	out = run("limits", "show")
	for _, want := range []string{
		"Cluster: at most 20000 queued jobs (0 queued now)",
		"Default per user: at most 3 queued jobs, unlimited GPUs in use, 10000 tasks per array",
		"alice", "500*", "64*",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("show lacks %q:\n%s", want, out)
		}
	}

	// The default of 3 queued jobs stops a submit of 4, with the limit named.
	r := runCLI(t, "submit", "--array", "0-3", "--", "true")
	if r.code != exitError || !strings.Contains(r.stderr, `may have 3 queued jobs (has 0, this array adds 4)`) {
		t.Fatalf("submit over the limit: exit %d, stderr %q", r.code, r.stderr)
	}

	run("limits", "unset", "alice")
	u = api.UserLimitsInfo{}
	mustDecode(t, run("limits", "show", "alice", "--json"), &u)
	if u.Limits.MaxQueued != 3 || u.Set.MaxQueued != nil {
		t.Fatalf("alice after unset %+v, want the defaults", u)
	}
	var info api.LimitsInfo
	mustDecode(t, run("limits", "unset", "--cluster", "--json"), &info)
	if info.Cluster.MaxQueued != structs.DefaultClusterMaxQueued {
		t.Fatalf("cluster limit after unset %d, want the built-in %d", info.Cluster.MaxQueued, structs.DefaultClusterMaxQueued)
	}
}

func TestLimits_BadUseIsAUsageErrorAndSendsNothing(t *testing.T) {
	cases := []struct {
		name   string
		args   []string
		stderr string
	}{
		{"no scope", []string{"limits", "set", "--max-gpus", "4"}, "give exactly one of a USER, --default or --cluster"},
		{"two scopes", []string{"limits", "set", "alice", "--default", "--max-gpus", "4"}, "give exactly one"},
		{"nothing to set", []string{"limits", "set", "alice"}, "nothing to set"},
		{"bad value", []string{"limits", "set", "alice", "--max-gpus", "lots"}, `--max-gpus "lots": want a count`},
		{"negative", []string{"limits", "set", "alice", "--max-queued", "-3"}, `--max-queued "-3"`},
		{"cluster gpus", []string{"limits", "set", "--cluster", "--max-gpus", "4"}, "--cluster takes only --max-queued"},
		{"two users", []string{"limits", "show", "alice", "bob"}, `unexpected argument "bob"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeAgent(t)
			r := runCLI(t, append([]string{"--addr", f.URL}, tc.args...)...)
			if r.code != exitUsage || !strings.Contains(r.stderr, tc.stderr) {
				t.Fatalf("got code %d, stderr %q; want %d and %q", r.code, r.stderr, exitUsage, tc.stderr)
			}
			if n := len(f.requests()); n != 0 {
				t.Fatalf("%d requests sent for a usage error", n)
			}
		})
	}
}

func TestLimits_SetSendsOnlyTheValuesGiven(t *testing.T) {
	f := newFakeAgent(t)
	f.reply("POST /v1/limits", http.StatusOK, api.LimitsInfo{})
	r := runCLI(t, "--addr", f.URL, "limits", "set", "--default", "--max-gpus", "8")
	if r.code != exitOK {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	var got map[string]any
	if err := json.Unmarshal(f.requests()[0].Body, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"default": true, "limits": map[string]any{"max_gpus": float64(8)}}
	if b1, b2 := mustJSON(t, got), mustJSON(t, want); b1 != b2 {
		t.Fatalf("request %s, want %s", b1, b2)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
