package cli

import (
	"os"
	"slices"
	"strings"
	"testing"
)

func TestAgent_BadFlagValuesAreUsageErrors(t *testing.T) {
	cases := []struct {
		name   string
		args   []string
		stderr string
	}{
		{"memory that does not parse", []string{"--memory", "lots"}, `Error: --memory: invalid size "lots": use a number with an optional unit`},
		{"memory over the limit", []string{"--memory", "100T"}, `Error: --memory: invalid size "100T": larger than the limit of 67108864 MiB`},
		{"master ports without a range", []string{"--master-ports", "29500"}, `Error: --master-ports: invalid port range "29500": want MIN-MAX, like 29500-29999`},
		{"negative connection cap", []string{"--max-conns", "-1"}, `Error: --max-conns -1: must be positive (0 or unset: sized from the file-descriptor limit)`},
		{"negative per-client cap", []string{"--max-conns-per-client", "-5"}, `Error: --max-conns-per-client -5: must be positive`},
		{"standbys below -1", []string{"--standbys", "-2"}, `Error: --standbys -2: want -1 (every node a server) or 0 to 16`},
		{"too many standbys", []string{"--standbys", "17"}, `Error: --standbys 17: want -1 (every node a server) or 0 to 16`},
		{"no writes at once", []string{"--max-writes", "0"}, `Error: --max-writes 0: want 1 to 65536`},
		{"too many writes at once", []string{"--max-writes", "70000"}, `Error: --max-writes 70000: want 1 to 65536`},
		{"log cap of nothing", []string{"--log-max", "0"}, `Error: --log-max "0": must be at least 1M`},
		{"log cap that does not parse", []string{"--log-max", "lots"}, `Error: --log-max: invalid size "lots"`},
		{"ingress port that is no number", []string{"--ingress-port", "off"}, `Error: --ingress-port "off": want a port from 1 to 65535, or none`},
		{"a capability that is none", []string{"--allow-cap", "NET_BIND_SERVICE,ROOT"},
			`Error: --allow-cap: "ROOT" is not a Linux capability: want a name like NET_BIND_SERVICE or CAP_NET_RAW`},
		{"ingress port out of range", []string{"--ingress-port", "70000"}, `Error: --ingress-port "70000": want a port from 1 to 65535, or none`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := runCLI(t, append([]string{"agent", "--dev"}, tc.args...)...)
			if r.code != exitUsage || !strings.Contains(r.stderr, tc.stderr) {
				t.Fatalf("got code %d, stderr %q; want %d and %q", r.code, r.stderr, exitUsage, tc.stderr)
			}
		})
	}
}

func TestAgent_AllowCapTakesNamesRepeatedOrCommaSeparated(t *testing.T) {
	cfg, r := agentConfigOf(t, "agent", "--allow-cap", "cap_net_raw,NET_BIND_SERVICE", "--allow-cap", "Chown")
	if want := []string{"NET_RAW", "NET_BIND_SERVICE", "CHOWN"}; r.code != exitOK || !slices.Equal(cfg.AllowCaps, want) {
		t.Errorf("got code %d, stderr %q, allowed capabilities %q; want %q", r.code, r.stderr, cfg.AllowCaps, want)
	}
}

func TestAgent_JobUserAndEnvAllowListAreCheckedAtStart(t *testing.T) {
	cases := []struct {
		name     string
		args     []string
		stderr   string
		rootOnly bool // only a root agent resolves the job user
	}{
		{name: "a root job user", args: []string{"--job-user", "root"}, stderr: `--job-user "root": unusable job user: root is uid 0`, rootOnly: true},
		{name: "uid 0", args: []string{"--job-user", "0:0"}, stderr: `--job-user "0:0": unusable job user`, rootOnly: true},
		{name: "a job user with no account", args: []string{"--job-user", "no-such-account"},
			stderr: `--job-user "no-such-account": unusable job user: no local account "no-such-account"`, rootOnly: true},
		{name: "the whole environment", args: []string{"--job-env-allow", "LANG,*"}, stderr: `--job-env-allow: invalid job environment allow-list entry "*"`},
		{name: "a name that is no variable", args: []string{"--job-env-allow", "A=B"}, stderr: `--job-env-allow: invalid job environment allow-list entry "A=B"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.rootOnly && os.Geteuid() != 0 {
				t.Skip("an agent that is not root runs jobs as itself and does not look the job user up")
			}
			r := runCLI(t, append([]string{"agent", "--dev"}, tc.args...)...)
			if r.code == 0 || !strings.Contains(r.stderr, tc.stderr) {
				t.Fatalf("got code %d, stderr %q; want a failure saying %q", r.code, r.stderr, tc.stderr)
			}
		})
	}
}

func TestEnvAllowList(t *testing.T) {
	for in, want := range map[string][]string{
		"":              {},
		"LANG,LC_*, TZ": {"LANG", "LC_*", "TZ"},
		",HTTP_PROXY,,": {"HTTP_PROXY"},
		"NVIDIA_*":      {"NVIDIA_*"},
	} {
		if got := envAllowList(in); !slices.Equal(got, want) || got == nil {
			t.Errorf("envAllowList(%q) = %#v, want %#v", in, got, want)
		}
	}
}
