package agent

import (
	"errors"
	"strings"
	"testing"

	"github.com/skein-dev/skein/agent/server"
)

func TestConnLimits_SizedFromTheFDLimitLeaveTheAgentItsOwnDescriptors(t *testing.T) {
	t.Parallel()
	want20k := connBudgets{API: server.ConnLimits{Users: 4000, PerClient: 256, Nodes: 2000, PerNode: 250},
		Ingress: server.ConnLimits{Users: 8000, PerClient: 256, Nodes: 2000, PerNode: 250}}
	if got, err := connLimits(20000, 0, 0, 0); err != nil || got != want20k {
		t.Fatalf("limits for 20000 descriptors: %+v, %v; want %+v", got, err, want20k)
	}
	for _, nofile := range []int{1024, 4096, 20000, 1 << 20} {
		b, err := connLimits(nofile, 0, 0, 0)
		if err != nil {
			t.Fatalf("%d descriptors: %v", nofile, err)
		}
		own := nofile - b.API.Users - b.API.Nodes - b.Ingress.Users - b.Ingress.Nodes
		if own < minOwnFDs || own < nofile/5 {
			t.Errorf("%d descriptors: users and nodes may hold all but %d", nofile, own)
		}
		for _, l := range []server.ConnLimits{b.API, b.Ingress} {
			if l.PerClient < 1 || l.PerClient > l.Users || l.PerNode < 1 || l.PerNode > l.Nodes {
				t.Errorf("%d descriptors: shares out of range: %+v", nofile, l)
			}
		}
	}
}

func TestConnLimits_SetCapsAreKeptWithinTheFDLimit(t *testing.T) {
	t.Parallel()
	b, err := connLimits(20000, 100, 0, 0)
	if err != nil || b.API.Users != 100 || b.API.PerClient != 12 || b.Ingress.Users != 8000 {
		t.Fatalf("--max-conns 100: %+v, %v; want 100 API users, 12 per client, the ingress's default", b, err)
	}
	if b, err = connLimits(20000, 100, 0, 100); err != nil || b.API.PerClient != 100 || b.Ingress.PerClient != 100 {
		t.Fatalf("--max-conns-per-client 100: %+v, %v", b, err)
	}
	if b, err = connLimits(20000, 0, 11000, 0); err != nil || b.Ingress.Users != 11000 || b.API.Users != 1000 {
		t.Fatalf("--ingress-max-conns 11000: %+v, %v; want the API the 1000 left", b, err)
	}
	cases := []struct {
		name                              string
		nofile, conns, ingress, perClient int
		want                              string
	}{
		{"over what the limit leaves", 20000, 12001, 0, 0, "--max-conns 12001 and --ingress-max-conns 0: together over the 12000 the file-descriptor limit (20000) leaves"},
		{"both over what the limit leaves", 20000, 6000, 6001, 0, "--max-conns 6000 and --ingress-max-conns 6001: together over the 12000"},
		{"negative", 20000, -1, 0, 0, "--max-conns -1: must be positive"},
		{"negative for the ingress", 20000, 0, -1, 0, "--ingress-max-conns -1: must be positive"},
		{"per client over the total", 20000, 100, 0, 101, "--max-conns-per-client 101: more than --max-conns (100)"},
		{"per client over the ingress's", 20000, 0, 50, 101, "--max-conns-per-client 101: more than --ingress-max-conns (50)"},
		{"negative per client", 20000, 0, 0, -1, "--max-conns-per-client -1: must be positive"},
		{"a limit too low", 300, 0, 0, 0, "300 leaves no room for API and ingress connections"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := connLimits(tc.nofile, tc.conns, tc.ingress, tc.perClient)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("connLimits(%d, %d, %d, %d) = %v, want an error saying %q", tc.nofile, tc.conns, tc.ingress, tc.perClient, err, tc.want)
			}
		})
	}
	if _, err := connLimits(300, 0, 0, 0); !errors.Is(err, ErrFDLimit) {
		t.Fatalf("a limit too low: %v, want ErrFDLimit", err)
	}
}

func TestConfig_ConnectionCapsOverTheFDLimitAreRefused(t *testing.T) {
	t.Parallel()
	nofile, err := fdLimit()
	if err != nil {
		t.Fatal(err)
	}
	_, err = Config{DataDir: "x", BindAddr: "127.0.0.1", MaxConns: nofile}.withDefaults()
	if err == nil || !strings.Contains(err.Error(), "--max-conns") {
		t.Fatalf("MaxConns at the file-descriptor limit: %v, want an error naming --max-conns", err)
	}
}
