package node

import (
	"testing"

	"github.com/skein-dev/skein/internal/fsmtest"
	"github.com/skein-dev/skein/structs"
)

// A sweep asks the view whether the state still holds an allocation: a
// view at the index the sweep began with, or past it, that lacks the
// allocation says it was dropped; one loaded since from an older state
// says nothing of it, and the directory stays.
func TestHeldSince_AnOlderViewDoesNotSayDropped(t *testing.T) {
	st := fsmtest.New(t)
	st.Node(structs.Node{ID: "n1", Name: "n1", Status: structs.NodeReady})
	at := st.F.Index()
	for _, tc := range []struct {
		name    string
		applied uint64
		held    bool
	}{
		{"the view at the sweep's index", at, false},
		{"a view older than the sweep's index", at + 5, true},
	} {
		if got := heldSince(st.F, tc.applied)("an-allocation-it-lacks"); got != tc.held {
			t.Errorf("%s: held = %v, want %v", tc.name, got, tc.held)
		}
	}
}
