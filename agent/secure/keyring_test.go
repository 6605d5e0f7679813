package secure

import (
	"slices"
	"testing"

	"github.com/skein-dev/skein/structs"
)

func TestNextRing_RotatesInThreeStepsThenStops(t *testing.T) {
	ring := structs.Keyring{Primary: "old", Generation: 1}
	if _, ok := nextRing(ring, nil); ok {
		t.Fatal("a ring that is not rotating moved without a new key")
	}
	newKey := []byte("0123456789abcdef0123456789abcdef")
	steps := []structs.Keyring{}
	next, ok := nextRing(ring, newKey)
	for ok {
		steps = append(steps, next)
		next, ok = nextRing(next, nil)
	}
	want := []structs.Keyring{
		{Primary: "old", Next: encodeKey(newKey), Generation: 2},
		{Primary: encodeKey(newKey), Others: []string{"old"}, Generation: 3},
		{Primary: encodeKey(newKey), Generation: 4},
	}
	if len(steps) != len(want) {
		t.Fatalf("%d steps, want %d: %+v", len(steps), len(want), steps)
	}
	for i := range want {
		if steps[i].Primary != want[i].Primary || steps[i].Next != want[i].Next ||
			!slices.Equal(steps[i].Others, want[i].Others) || steps[i].Generation != want[i].Generation {
			t.Errorf("step %d: %+v, want %+v", i+1, steps[i], want[i])
		}
		// Every step keeps the key of the step before, so no node that
		// has installed either can be cut off.
		if i > 0 && !slices.Contains(steps[i].Keys(), steps[i-1].Primary) {
			t.Errorf("step %d drops the primary key of step %d", i+1, i)
		}
	}
	if steps[2].Rotating() {
		t.Error("the last step still rotating")
	}
}

func TestAdmitURLsAndGossipJoins(t *testing.T) {
	joins := []string{"10.0.0.1", "10.0.0.2:7472", "[fd00::1]:7472", "https://10.0.0.3:8470"}
	wantURLs := []string{"https://10.0.0.1:7470", "https://10.0.0.2:7470", "https://[fd00::1]:7470", "https://10.0.0.3:8470"}
	if got := AdmitURLs(joins); !slices.Equal(got, wantURLs) {
		t.Errorf("AdmitURLs = %v, want %v", got, wantURLs)
	}
	if got := GossipJoins(joins); !slices.Equal(got, joins[:3]) {
		t.Errorf("GossipJoins = %v, want %v", got, joins[:3])
	}
}
