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
		{"log cap of nothing", []string{"--log-max", "0"}, `Error: --log-max "0": must be at least 1M`},
		{"log cap that does not parse", []string{"--log-max", "lots"}, `Error: --log-max: invalid size "lots"`},
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
