package fsm

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/skein-dev/skein/structs"
)

func TestFSM_UnknownTypeWithIgnoreFlagIsSkipped(t *testing.T) {
	h := newHarness(t)
	h.submit("j", spec(1, 0))
	before := h.f.Hash()
	resp := h.apply(structs.IgnoreUnknownTypeFlag|77, map[string]string{"future": "thing"})
	if resp != nil {
		t.Fatalf("skipped entry returned %v", resp)
	}
	if h.f.Hash() != before || h.f.Index() != h.idx {
		t.Fatalf("skipped entry: hash changed or index %d != %d", h.f.Index(), h.idx)
	}
}

func TestFSM_KnownTypeWithIgnoreFlagIsApplied(t *testing.T) {
	h := newHarness(t)
	resp := h.apply(structs.IgnoreUnknownTypeFlag|structs.JobSubmitType, structs.JobSubmitRequest{JobID: "j", Spec: spec(1, 0)})
	if _, ok := resp.(*structs.Job); !ok {
		t.Fatalf("flagged submit returned %v", resp)
	}
}

func TestFSM_UnappliableEntriesPanic(t *testing.T) {
	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"unknown type without flag", []byte{77, '{', '}'}, "unknown type 77"},
		{"empty entry", nil, "empty log entry"},
		{"undecodable body", append([]byte{byte(structs.JobSubmitType)}, "{not json"...), "decode job-submit"},
		{"wrong body shape", append([]byte{byte(structs.AllocUpdateType)}, `{"updates":"x"}`...), "decode alloc-update"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.submit("j", spec(1, 0))
			before, idx := h.f.Hash(), h.f.Index()
			msg := applyRecover(h.f, &raft.Log{Index: idx + 1, Data: tc.data})
			if !strings.Contains(msg, tc.want) {
				t.Fatalf("panic %q, want one mentioning %q", msg, tc.want)
			}
			if h.f.Hash() != before || h.f.Index() != idx {
				t.Fatal("a panicking entry changed state")
			}
			// The lock was released: queries still answer.
			if _, ok := h.f.Job("j"); !ok {
				t.Fatal("job lost")
			}
		})
	}
}

// applyRecover applies an entry and returns the text of its panic, or "".
func applyRecover(f *FSM, l *raft.Log) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg, _ = r.(string)
		}
	}()
	f.Apply(l)
	return ""
}

func TestFSM_WatchFiresOnApplyAndRestore(t *testing.T) {
	h := newHarness(t)
	idx, ch := h.f.Watch()
	if idx != 0 {
		t.Fatalf("fresh FSM index %d", idx)
	}
	select {
	case <-ch:
		t.Fatal("watch fired before any change")
	default:
	}
	h.submit("j", spec(1, 0))
	waitClosed(t, ch)

	idx, ch = h.f.Watch()
	if idx != 1 {
		t.Fatalf("index after one entry %d", idx)
	}
	// A refused entry is still applied and moves the index.
	h.apply(structs.JobCancelType, structs.JobCancelRequest{JobID: "ghost"})
	waitClosed(t, ch)

	_, ch = h.f.Watch()
	if err := h.f.Restore(readCloser(snapshotBytes(t, New(nil)))); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, ch)

	// A refused restore changes nothing and wakes no one.
	_, ch = h.f.Watch()
	if err := h.f.Restore(readCloser([]byte("nope"))); err == nil {
		t.Fatal("garbage restored")
	}
	select {
	case <-ch:
		t.Fatal("watch fired on a refused restore")
	default:
	}
}

// waitClosed fails the test unless ch is closed within a second.
func waitClosed(t *testing.T, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(time.Second):
		t.Fatal("watch did not fire")
	}
}

func TestFSM_ReadsAndSnapshotsRunDuringApply(t *testing.T) {
	h := newHarness(t)
	h.register(node("n1", 8))
	done := make(chan struct{})
	readerDone := make(chan error)
	go func() {
		var err error
		for {
			select {
			case <-done:
				readerDone <- err
				return
			default:
			}
			v := h.f.State()
			for _, a := range v.LiveAllocs {
				if a.Live() && a.NodeID != "n1" {
					err = fmt.Errorf("alloc %s on %s", a.ID, a.NodeID)
				}
			}
			_ = h.f.Jobs()
			_ = h.f.Hash()
		}
	}()
	for i := range 50 {
		id := fmt.Sprintf("j%d", i)
		h.submit(id, spec(1, 1))
		h.place(id, alloc("a"+id, "n1", 0, gpuID("n1", i%8)))
		snap, err := h.f.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		h.mustUpdate("n1", "a"+id, structs.AllocSucceeded, 0, "")
		if err := snap.Persist(&memSink{}); err != nil {
			t.Fatal(err)
		}
	}
	close(done)
	if err := <-readerDone; err != nil {
		t.Fatal(err)
	}
}
