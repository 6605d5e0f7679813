package sched

import (
	"cmp"

	"github.com/skein-dev/skein/structs"
)

// scorer rates a feasible node for one rank of a job. Every scorer returns a
// score in [0, 1]; higher is better. A spread or topology scorer can be added
// next to binpack and combined by weight, as long as it keeps that range.
type scorer func(f fit) float64

// binpack prefers the node with the fewest free matching GPUs left after the
// rank is placed, keeping whole nodes free for large and gang jobs. The score
// is 1/(1+gpusLeft): 1 when the rank uses the node's last free matching GPU,
// 0.5 with one left, towards 0 as more stay free. A CPU-only job therefore
// goes to a node with no free GPUs when one fits.
func binpack(f fit) float64 {
	return 1 / (1 + float64(f.gpusLeft))
}

// spread prefers the node with the most free matching GPUs left after the
// rank is placed, spreading load (and failure risk) across nodes. The score
// is gpusLeft/(1+gpusLeft): 0 when the rank takes the node's last free
// matching GPU, towards 1 as more stay free.
func spread(f fit) float64 {
	return float64(f.gpusLeft) / (1 + float64(f.gpusLeft))
}

// scorerFor is the scorer a job asks for.
func scorerFor(j *structs.Job) scorer {
	if j.Spec.Spread {
		return spread
	}
	return binpack
}

// better orders fits best first: for a service's replica, the node with
// the fewest of its replicas (so a node's loss takes out at most its
// share), then higher score, then a node that holds the job's image (it
// starts without a pull), then fewer CPUs left (binpack again), then the
// lower node ID, so the pick is deterministic. The image only breaks ties
// of the score: a pull costs minutes once, a node broken up for want of a
// better fit costs every large job after it.
func better(a, b fit) int {
	return cmp.Or(
		cmp.Compare(a.siblings, b.siblings),
		cmp.Compare(b.score, a.score),
		compareBool(b.cached, a.cached),
		cmp.Compare(a.cpusLeft, b.cpusLeft),
		cmp.Compare(a.node, b.node),
	)
}

// compareBool orders false before true.
func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}
