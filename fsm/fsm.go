package fsm

import (
	"errors"
	"fmt"
	"sync"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/skein-dev/skein/structs"
)

// Errors returned by Apply, Restore and the queries. Apply returns them as
// values (never as a panic) for requests that committed state refuses.
var (
	ErrJobNotFound    = errors.New("no such job")
	ErrAmbiguousID    = errors.New("ambiguous id")
	ErrJobExists      = errors.New("job already exists")
	ErrJobFinished    = errors.New("job already finished")
	ErrAllocNotFound  = errors.New("no such allocation")
	ErrNodeNotFound   = errors.New("no such node")
	ErrWrongNode      = errors.New("allocation belongs to another node")
	ErrInvalidRequest = errors.New("invalid request")
	ErrNotPreemptible = errors.New("cannot be preempted")
	ErrJobRetained    = errors.New("job must be kept")
	ErrBadSnapshot    = errors.New("invalid snapshot")
	ErrLimit          = errors.New("limit")

	ErrTrustInitialized  = errors.New("trust state already initialized")
	ErrNoTrust           = errors.New("cluster has no trust state")
	ErrJoinTokenExists   = errors.New("join token already exists")
	ErrJoinTokenNotFound = errors.New("no such join token")
	ErrJoinTokenRevoked  = errors.New("join token revoked")
	ErrJoinTokenExpired  = errors.New("join token expired")
	ErrJoinTokenUsedUp   = errors.New("join token used up")
	ErrJoinTokenSecret   = errors.New("join token secret does not match")
	ErrNodeAdmitted      = errors.New("node already admitted")
	ErrNodeRevoked       = errors.New("node revoked")
	ErrNodeNotAdmitted   = errors.New("node not admitted")
	ErrKeyringGeneration = errors.New("wrong keyring generation")

	ErrACLBootstrapped  = errors.New("ACLs already bootstrapped")
	ErrNoACL            = errors.New("ACLs are not bootstrapped: run skein acl bootstrap first")
	ErrACLTokenExists   = errors.New("ACL token already exists")
	ErrACLTokenNotFound = errors.New("no such ACL token")

	ErrServiceNotFound = errors.New("no such service")
	ErrServiceExists   = errors.New("service already exists")
	ErrServiceDeleted  = errors.New("service is being deleted")
	ErrRolloutStale    = errors.New("rollout step no longer fits the state")
	ErrAutoscalePaused = errors.New("autoscaling is paused")
	ErrDrainStale      = errors.New("drain step no longer fits the state")
)

// FSM is skein's raft.FSM. Apply and Restore are called by Raft; the queries
// may be called from any goroutine and always return copies.
type FSM struct {
	logger hclog.Logger

	mu    sync.RWMutex
	st    *state
	watch chan struct{} // closed and replaced at every applied entry and Restore
	// eventWatch is closed and replaced when an entry adds an event, and
	// at every Restore.
	eventWatch chan struct{}
}

var _ raft.FSM = (*FSM)(nil)

// New returns an empty FSM. A nil logger discards everything; the logger is
// used as given, so name it before passing it in.
func New(logger hclog.Logger) *FSM {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	return &FSM{logger: logger, st: newState(), watch: make(chan struct{}), eventWatch: make(chan struct{})}
}

// Apply applies one committed log entry. It returns nil, a copy of the
// affected object, a *structs.PlanResult, or an error value for a request
// that committed state refuses (nothing is changed then). An entry that
// cannot be decoded, or whose type is unknown and not marked with
// structs.IgnoreUnknownTypeFlag, panics: replicas must not diverge quietly.
func (f *FSM) Apply(l *raft.Log) any {
	t, err := structs.EntryType(l.Data)
	if err != nil {
		panic(fmt.Sprintf("fsm: log entry %d: %v", l.Index, err))
	}
	skippable := t&structs.IgnoreUnknownTypeFlag != 0
	t &^= structs.IgnoreUnknownTypeFlag

	f.mu.Lock()
	defer f.mu.Unlock()
	lastEvent := f.st.events.lastCursor()
	var resp any
	switch t {
	case structs.NodeRegisterType:
		resp = f.st.applyNodeRegister(l)
	case structs.JobSubmitType:
		resp = f.st.applyJobSubmit(l)
	case structs.JobCancelType:
		resp = f.st.applyJobCancel(l)
	case structs.JobUpdateType:
		resp = f.st.applyJobUpdate(l)
	case structs.JobNumbersStartType:
		resp = f.st.applyJobNumbersStart(l)
	case structs.JobRequeueType:
		resp = f.st.applyJobRequeue(l)
	case structs.PartitionSetType:
		resp = f.st.applyPartitionSet(l)
	case structs.PlanApplyType:
		resp = f.st.applyPlan(l)
	case structs.AllocUpdateType:
		resp = f.st.applyAllocUpdate(l)
	case structs.NodeStatusType:
		resp = f.st.applyNodeStatus(l)
	case structs.NodeAllocsLostType:
		resp = f.st.applyNodeAllocsLost(l)
	case structs.NodeGPUHealthType:
		resp = f.st.applyNodeGPUHealth(l)
	case structs.GPUCordonType:
		resp = f.st.applyGPUCordon(l)
	case structs.JobPreemptType:
		resp = f.st.applyJobPreempt(l)
	case structs.JobGCType:
		resp = f.st.applyJobGC(l)
	case structs.TrustInitType:
		resp = f.st.applyTrustInit(l)
	case structs.JoinTokenType:
		resp = f.st.applyJoinToken(l)
	case structs.NodeAdmitType:
		resp = f.st.applyNodeAdmit(l)
	case structs.NodeRevokeType:
		resp = f.st.applyNodeRevoke(l)
	case structs.KeyringType:
		resp = f.st.applyKeyring(l)
	case structs.ACLBootstrapType:
		resp = f.st.applyACLBootstrap(l)
	case structs.ACLTokenType:
		resp = f.st.applyACLToken(l)
	case structs.ACLUserType:
		resp = f.st.applyACLUser(l)
	case structs.LimitsSetType:
		resp = f.st.applyLimitsSet(l)
	case structs.ServiceRegisterType:
		resp = f.st.applyServiceRegister(l)
	case structs.ServiceScaleType:
		resp = f.st.applyServiceScale(l)
	case structs.ServiceDeleteType:
		resp = f.st.applyServiceDelete(l)
	case structs.ServiceAutoscaleType:
		resp = f.st.applyServiceAutoscale(l)
	case structs.ServiceUpdateType:
		resp = f.st.applyServiceUpdate(l)
	case structs.ServiceRolloutType:
		resp = f.st.applyServiceRollout(l)
	case structs.LeaderElectedType:
		resp = f.st.applyLeaderElected(l)
	case structs.AccountSetType:
		resp = f.st.applyAccountSet(l)
	case structs.QoSSetType:
		resp = f.st.applyQoSSet(l)
	case structs.UsageChargeType:
		resp = f.st.applyUsageCharge(l)
	case structs.NodeDrainType:
		resp = f.st.applyNodeDrain(l)
	case structs.NodeDrainStepType:
		resp = f.st.applyNodeDrainStep(l)
	case structs.NodeRemoveType:
		resp = f.st.applyNodeRemove(l)
	default:
		if !skippable {
			panic(fmt.Sprintf("fsm: log entry %d has unknown type %d", l.Index, uint8(t)))
		}
		f.logger.Warn("skipping log entry of unknown type", "index", l.Index, "type", uint8(t))
	}
	f.st.index = l.Index
	f.fire()
	if f.st.events.lastCursor() != lastEvent {
		f.fireEvents()
	}
	if err, ok := resp.(error); ok {
		f.logger.Debug("log entry refused", "index", l.Index, "type", t.String(), "error", err)
	} else {
		f.logger.Debug("log entry applied", "index", l.Index, "type", t.String())
	}
	return resp
}

// decode reads the body of a log entry or panics: an entry that was committed
// but cannot be read is a programming error, and skipping it would let this
// replica drift from the others.
func decode(l *raft.Log, out any) {
	if err := structs.Decode(l.Data, out); err != nil {
		panic(fmt.Sprintf("fsm: log entry %d: %v", l.Index, err))
	}
}

// fire wakes everyone waiting in Watch. The caller holds the write lock.
func (f *FSM) fire() {
	close(f.watch)
	f.watch = make(chan struct{})
}

// fireEvents wakes everyone waiting for events. The caller holds the
// write lock.
func (f *FSM) fireEvents() {
	close(f.eventWatch)
	f.eventWatch = make(chan struct{})
}

// Index returns the Raft index of the last applied entry (or of the restored
// snapshot).
func (f *FSM) Index() uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.index
}

// Watch returns the current index and a channel that is closed when the next
// entry is applied or a snapshot is restored.
func (f *FSM) Watch() (uint64, <-chan struct{}) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.index, f.watch
}
