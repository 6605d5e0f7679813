package agent

import (
	"encoding/json"
	"testing"

	"github.com/skein-dev/skein/agent/peer"
	"github.com/skein-dev/skein/cluster"
)

// TestMaskCleared_OnlyAGPUReturnedToServiceMakesTheLeaderPlan: of the
// gossip metadata changes, only one that clears a bit of the member's
// last unhealthy mask is passed on; a free-GPU count moving with each
// job is not.
func TestMaskCleared_OnlyAGPUReturnedToServiceMakesTheLeaderPlan(t *testing.T) {
	t.Parallel()
	member := func(m peer.Meta) cluster.Member {
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return cluster.Member{ID: "n1", Meta: b}
	}
	masks := map[string]uint64{}
	steps := []struct {
		name string
		meta peer.Meta
		want bool
	}{
		{"free GPUs move", peer.Meta{GPUsFree: 7, GPUsTotal: 8}, false},
		{"GPU 2 masked", peer.Meta{GPUsFree: 7, Unhealthy: 1 << 2}, false},
		{"GPU 5 masked too", peer.Meta{GPUsFree: 6, Unhealthy: 1<<2 | 1<<5}, false},
		{"free GPUs move again", peer.Meta{GPUsFree: 5, Unhealthy: 1<<2 | 1<<5}, false},
		{"GPU 2 back", peer.Meta{GPUsFree: 6, Unhealthy: 1 << 5}, true},
		{"GPU 5 back", peer.Meta{GPUsFree: 7}, true},
		{"nothing masked still", peer.Meta{GPUsFree: 8}, false},
		{"a name that looks like a mask", peer.Meta{Name: `"u":1`, Unhealthy: 1 << 3}, false},
		{"its GPU 3 back", peer.Meta{Name: `"u":1`}, true},
	}
	for _, s := range steps {
		if got := maskCleared(masks, member(s.meta)); got != s.want {
			t.Errorf("%s: passed on %v, want %v", s.name, got, s.want)
		}
	}
	if len(masks) != 0 {
		t.Errorf("masks %v left for a member that masks nothing", masks)
	}
	if maskCleared(masks, cluster.Member{ID: "n2", Meta: []byte("{not json")}) {
		t.Error("unreadable metadata was passed on")
	}
}
