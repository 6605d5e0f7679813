package agent

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/structs"
)

// TestCluster_LogsFromAnyNodeSayWhatTheCapDropped: each rank of a gang
// writes more than the smallest log cap; read through one node, both the
// local rank and the one proxied from the other node come with what the
// cap dropped, and hold only the newest output.
func TestCluster_LogsFromAnyNodeSayWhatTheCapDropped(t *testing.T) {
	tc := startClusterWith(t, 2, func(_ int, cfg *Config) { cfg.LogMaxMiB = MinLogMaxMiB })
	// 3,000,000 bytes: eleven full files of 256 KiB and 116,416 bytes more.
	job := tc.submit(tc.agents[0], structs.JobSpec{Nodes: 2, Command: []string{"sh", "-c", "yes | head -c 3000000"}})
	waitJob(t, tc.agents[0], job.ID, jobState(structs.JobSucceeded))
	for rank := range 2 {
		ls, err := tc.client(tc.agents[1]).OpenLogs(context.Background(), job.ID, api.LogOptions{Rank: rank, Stream: api.StreamStdout})
		if err != nil {
			t.Fatal(err)
		}
		out, err := io.ReadAll(ls)
		ls.Close()
		if err != nil {
			t.Fatal(err)
		}
		if ls.Dropped != 3000000-262144-116416 || ls.LogMax != 1<<20 {
			t.Errorf("rank %d: dropped %d bytes under a cap of %d, want 2621440 under 1048576", rank, ls.Dropped, ls.LogMax)
		}
		if len(out) != 262144+116416 || strings.Trim(string(out), "y\n") != "" {
			t.Errorf("rank %d: read %d bytes, want the newest 378560 of yes", rank, len(out))
		}
	}
	tc.checkInvariants()
}
