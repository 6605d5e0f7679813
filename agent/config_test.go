package agent

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/cluster"
)

func TestConfig_RejectsBadSettingsNamingTheFlag(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		cfg  Config
		want string
	}{
		{"raft timeout too short", Config{DataDir: "x", BindAddr: "127.0.0.1", RaftTimeout: 10 * time.Millisecond}, "--raft-timeout"},
		{"even voters", Config{DataDir: "x", BindAddr: "127.0.0.1", Voters: 2}, "--voters"},
		{"fewer servers than voters", Config{DataDir: "x", BindAddr: "127.0.0.1", Voters: 3, Servers: 2}, "--standbys -1: want 0 to 16 standbys beside the 3 voters"},
		{"too many standbys", Config{DataDir: "x", BindAddr: "127.0.0.1", Voters: 3, Servers: 20}, "--standbys 17: want 0 to 16 standbys beside the 3 voters"},
		{"down-after too short", Config{DataDir: "x", BindAddr: "127.0.0.1", StopAfter: 2 * time.Second, DownAfter: 2 * time.Second}, "--down-after"},
		{"dev with join", Config{Dev: true, Join: []string{"x"}}, "--dev"},
		{"bad bind", Config{BindAddr: "not-an-ip"}, "--bind"},
		{"no data dir outside dev mode", Config{BindAddr: "127.0.0.1"}, "--data-dir is required"},
		{"clean period too short", Config{DataDir: "x", BindAddr: "127.0.0.1", GPUCleanPeriod: time.Millisecond}, "--gpu-clean-period"},
		{"relative allowed mount", Config{DataDir: "x", BindAddr: "127.0.0.1", AllowMounts: []string{"data"}}, `--allow-mount "data": want an absolute directory`},
		{"unknown capability", Config{DataDir: "x", BindAddr: "127.0.0.1", AllowCaps: []string{"NET_RAW", "ROOT"}},
			`--allow-cap: "ROOT" is not a Linux capability: want a name like NET_BIND_SERVICE or CAP_NET_RAW`},
		{"negative shm", Config{DataDir: "x", BindAddr: "127.0.0.1", ShmSizeMiB: -1}, "--shm-size -1 MiB"},
		{"bad host container", Config{DataDir: "x", BindAddr: "127.0.0.1", ContainerHost: "a b"}, `--in-container "a b"`},
		{"log cap negative", Config{DataDir: "x", BindAddr: "127.0.0.1", LogMaxMiB: -1}, "--log-max -1M: out of range 1M..64T"},
		{"join token on loopback without --tls", Config{DataDir: "x", BindAddr: "127.0.0.1", JoinToken: "SKJ1.x"}, "--join-token-file (or SKEIN_JOIN_TOKEN): a join token admits a node to a secure cluster"},
		{"join token with --insecure-cluster", Config{DataDir: "x", BindAddr: "10.0.0.1", Token: "t", Security: SecurityInsecure, JoinToken: "SKJ1.x"}, "on loopback add --tls, and drop --insecure-cluster"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.cfg.withDefaults()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("withDefaults() = %v, want an error naming %s", err, tc.want)
			}
		})
	}
}

func TestConfig_AllowedCapabilitiesAreSpelledOneWayOnce(t *testing.T) {
	t.Parallel()
	cfg, err := Config{DataDir: "x", BindAddr: "127.0.0.1", AllowCaps: []string{"cap_net_raw", "NET_BIND_SERVICE", "NET_RAW"}}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"NET_RAW", "NET_BIND_SERVICE"}; !slices.Equal(cfg.AllowCaps, want) {
		t.Errorf("allowed capabilities %q, want %q", cfg.AllowCaps, want)
	}
}

func TestConfig_RaftTimeoutSetsTheRaftTimings(t *testing.T) {
	t.Parallel()
	cfg, err := Config{DataDir: "x", BindAddr: "127.0.0.1", RaftTimeout: time.Second}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	want := cluster.Timing{HeartbeatTimeout: time.Second, ElectionTimeout: time.Second,
		LeaderLeaseTimeout: time.Second * cluster.DefaultLeaderLeaseTimeout / cluster.DefaultHeartbeatTimeout}
	if cfg.Timing != want {
		t.Fatalf("timing %+v, want %+v", cfg.Timing, want)
	}
}
