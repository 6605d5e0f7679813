package fsm

import (
	"fmt"
	"testing"

	"github.com/skein-dev/skein/structs"
)

// viewState is a state of 1,000 nodes of 8 GPUs, the first running 8
// one-GPU jobs, with 8 finished ones kept.
func viewState(b *testing.B) *harness {
	h := newHarness(b)
	for n := range 1000 {
		id := fmt.Sprintf("n%04d", n)
		h.register(node(id, 8))
	}
	for g := range 8 {
		done := fmt.Sprintf("done%d", g)
		h.submit(done, spec(1, 1))
		h.place(done, alloc(done+"-0", "n0000", 0, gpuID("n0000", g)))
		h.mustUpdate("n0000", done+"-0", structs.AllocSucceeded, 0, "")
		run := fmt.Sprintf("run%d", g)
		h.submit(run, spec(1, 1))
		h.place(run, alloc(run+"-0", "n0000", 0, gpuID("n0000", g)))
	}
	return h
}

// BenchmarkNodeView is what a server pays to write that node's view, and
// BenchmarkNodeViewStamp what it pays to learn whether it moved: the view
// watch and a server's own view loop pay the stamp on every change of
// the state they wake for, and the view only when the stamp moved.
func BenchmarkNodeView(b *testing.B) {
	h := viewState(b)
	b.ResetTimer()
	for range b.N {
		if _, err := h.f.NodeView("n0000"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkNodeViewStamp(b *testing.B) {
	h := viewState(b)
	b.ResetTimer()
	for range b.N {
		h.f.NodeViewStamp("n0000")
	}
}

// BenchmarkState is what the leader pays for the read-only copy of the
// state a scheduling pass decides on, at 1,000 nodes of 8 GPUs.
func BenchmarkState(b *testing.B) {
	h := viewState(b)
	b.ResetTimer()
	for range b.N {
		h.f.State()
	}
}
