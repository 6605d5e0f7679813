package agent

import (
	"errors"
	"strings"
	"testing"

	"github.com/skein-dev/skein/agent/server"
)

func TestConnLimits_SizedFromTheFDLimitLeaveTheAgentItsOwnDescriptors(t *testing.T) {
	want20k := server.ConnLimits{Users: 12000, PerClient: 256, Nodes: 4000, PerNode: 500}
	if got, err := connLimits(20000, 0, 0); err != nil || got != want20k {
		t.Fatalf("limits for 20000 descriptors: %+v, %v; want %+v", got, err, want20k)
	}
	for _, nofile := range []int{1024, 4096, 20000, 1 << 20} {
		l, err := connLimits(nofile, 0, 0)
		if err != nil {
			t.Fatalf("%d descriptors: %v", nofile, err)
		}
		own := nofile - l.Users - l.Nodes
		if own < minOwnFDs || own < nofile/5 {
			t.Errorf("%d descriptors: users and nodes may hold all but %d", nofile, own)
		}
		if l.PerClient < 1 || l.PerClient > l.Users || l.PerNode < 1 || l.PerNode > l.Nodes {
			t.Errorf("%d descriptors: shares out of range: %+v", nofile, l)
		}
	}
}

func TestConnLimits_SetCapsAreKeptWithinTheFDLimit(t *testing.T) {
	l, err := connLimits(20000, 100, 0)
	if err != nil || l.Users != 100 || l.PerClient != 12 {
		t.Fatalf("--max-conns 100: %+v, %v; want 100 users, 12 per client", l, err)
	}
	if l, err = connLimits(20000, 100, 100); err != nil || l.PerClient != 100 {
		t.Fatalf("--max-conns-per-client 100: %+v, %v", l, err)
	}
	cases := []struct {
		name                     string
		nofile, conns, perClient int
		want                     string
	}{
		{"over what the limit leaves", 20000, 12001, 0, "--max-conns 12001: over the 12000 the file-descriptor limit (20000) leaves"},
		{"negative", 20000, -1, 0, "--max-conns -1: must be positive"},
		{"per client over the total", 20000, 100, 101, "--max-conns-per-client 101: more than --max-conns (100)"},
		{"negative per client", 20000, 0, -1, "--max-conns-per-client -1: must be positive"},
		{"a limit too low", 300, 0, 0, "300 leaves no room for API connections"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := connLimits(tc.nofile, tc.conns, tc.perClient)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("connLimits(%d, %d, %d) = %v, want an error saying %q", tc.nofile, tc.conns, tc.perClient, err, tc.want)
			}
		})
	}
	if _, err := connLimits(300, 0, 0); !errors.Is(err, ErrFDLimit) {
		t.Fatalf("a limit too low: %v, want ErrFDLimit", err)
	}
}

func TestConfig_ConnectionCapsOverTheFDLimitAreRefused(t *testing.T) {
	nofile, err := fdLimit()
	if err != nil {
		t.Fatal(err)
	}
	_, err = Config{DataDir: "x", BindAddr: "127.0.0.1", MaxConns: nofile}.withDefaults()
	if err == nil || !strings.Contains(err.Error(), "--max-conns") {
		t.Fatalf("MaxConns at the file-descriptor limit: %v, want an error naming --max-conns", err)
	}
}
