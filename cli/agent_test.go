package cli

import (
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
