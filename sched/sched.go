package sched

import (
	"errors"
	"time"

	"github.com/skein-dev/skein/structs"
)

// Errors returned by this package.
var (
	// ErrNoNodes means no node is registered at all.
	ErrNoNodes = errors.New("no nodes registered")
	// ErrNeverFits means no registered node could run one rank of a job even
	// when idle. CheckFits returns it wrapped in a *FitError.
	ErrNeverFits = errors.New("no node could ever run the job")

	// errNotFree is returned by the ledger when asked for a resource it does
	// not have free; the caller rolls its transaction back.
	errNotFree = errors.New("resource not free")
)

// State is the read-only view sched needs; fsm.StateView implements it.
type State interface {
	AllNodes() []*structs.Node
	AllLiveAllocs() []*structs.Allocation
	// JobTimeLimit is the time limit of the job a live allocation belongs
	// to; 0 means none, and the allocation's end is unknown.
	JobTimeLimit(jobID string) time.Duration
}
