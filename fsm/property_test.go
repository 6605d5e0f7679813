package fsm

import (
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/skein-dev/skein/structs"
)

// TestFSM_GPUExclusivity drives the FSM with random, often conflicting or
// stale commands and checks the safety invariants after every entry.
func TestFSM_GPUExclusivity(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		m := newModel(rt)
		steps := rapid.IntRange(10, 60).Draw(rt, "steps")
		// Weighted so that jobs get placed and run before they are cancelled.
		ops := []func(){m.register, m.submit, m.submit, m.plan, m.plan, m.plan, m.update, m.update, m.update, m.cancel, m.nodeDown, m.gpuHealth, m.gc, m.limits, m.fairShare}
		for range steps {
			ops[rapid.IntRange(0, len(ops)-1).Draw(rt, "op")]()
			m.check()
		}
	})
}

// model is what the property test knows about the cluster it drives: each
// node's fixed GPU inventory (health and status change), and the job and
// allocation IDs it has used.
type model struct {
	rt      *rapid.T
	h       *harness
	nodes   []structs.Node
	allGPUs []string
	jobs    []string // IDs of the jobs the state still holds
	arrays  []string // IDs of the job arrays submitted
	nextID  int
	// views holds each node's view hash and stamp at the last check.
	views map[string]viewMark
}

// viewMark is a node view's hash and its stamp (NodeViewStamp).
type viewMark struct {
	hash  string
	stamp uint64
	data  string
}

func newModel(rt *rapid.T) *model {
	m := &model{rt: rt, h: newHarness(rt)}
	for i := range rapid.IntRange(1, 3).Draw(rt, "nodes") {
		id := fmt.Sprintf("n%d", i)
		n := node(id, rapid.IntRange(0, 8).Draw(rt, "gpus"))
		n.CPUs = rapid.SampledFrom([]int{0, 8, 32}).Draw(rt, "cpus")
		m.nodes = append(m.nodes, n)
		for _, g := range n.GPUs {
			m.allGPUs = append(m.allGPUs, g.UUID)
		}
		m.h.register(n)
	}
	return m
}

// nodeDown marks a random node down or ready again, sometimes declaring the
// allocations of a down node lost (the leader's replacement decision).
func (m *model) nodeDown() {
	n := m.nodes[rapid.IntRange(0, len(m.nodes)-1).Draw(m.rt, "node")]
	st := rapid.SampledFrom([]structs.NodeStatus{structs.NodeDown, structs.NodeReady}).Draw(m.rt, "status")
	_ = m.h.applyErr(structs.NodeStatusType, structs.NodeStatusRequest{NodeID: n.ID, Status: st, At: m.h.at()})
	if rapid.Bool().Draw(m.rt, "lose") {
		_ = m.h.applyErr(structs.NodeAllocsLostType, structs.NodeAllocsLostRequest{NodeID: n.ID, Reason: "lost", At: m.h.at()})
	}
}

// gpuHealth reports a random GPU failed, back, or used by foreign
// processes, or cordons or uncordons it by hand.
func (m *model) gpuHealth() {
	n := m.nodes[rapid.IntRange(0, len(m.nodes)-1).Draw(m.rt, "node")]
	if len(n.GPUs) == 0 {
		return
	}
	uuid := n.GPUs[rapid.IntRange(0, len(n.GPUs)-1).Draw(m.rt, "gpu")].UUID
	h := structs.GPUHealth{UUID: uuid, Healthy: true}
	switch rapid.IntRange(0, 4).Draw(m.rt, "health op") {
	case 0:
		h.Healthy, h.Reason, h.LastFaultAt = false, "XID 79", m.h.at()
	case 1:
		h.ForeignProcesses = 1
	case 2, 3:
		cordon := rapid.Bool().Draw(m.rt, "cordon")
		_ = m.h.applyErr(structs.GPUCordonType, structs.GPUCordonRequest{NodeID: n.ID, UUID: uuid, Cordon: cordon, At: m.h.at()})
		return
	}
	_ = m.h.applyErr(structs.NodeGPUHealthType, structs.NodeGPUHealthRequest{NodeID: n.ID, GPUs: []structs.GPUHealth{h}, At: m.h.at()})
}

func (m *model) id(prefix string) string {
	m.nextID++
	return fmt.Sprintf("%s%d", prefix, m.nextID)
}

func (m *model) register() {
	n := m.nodes[rapid.IntRange(0, len(m.nodes)-1).Draw(m.rt, "node")]
	n.GPUs = append([]structs.GPU(nil), n.GPUs...)
	for i := range n.GPUs {
		n.GPUs[i].Healthy = rapid.IntRange(0, 4).Draw(m.rt, "healthy") > 0
	}
	n.Status = rapid.SampledFrom([]structs.NodeStatus{structs.NodeReady, structs.NodeReady, structs.NodeReady, structs.NodeDraining, structs.NodeDown}).Draw(m.rt, "status")
	m.h.register(n)
}

// owners are the users the model submits as; "" is the owner of jobs
// submitted before ACLs exist.
var owners = []string{"", "alice", "bob"}

// submit submits a job, or sometimes a small array, as a random owner. A
// submit over a limit must be refused whole and change nothing; any other
// refusal is a bug.
func (m *model) submit() {
	id := m.id("j")
	s := spec(rapid.IntRange(1, 2).Draw(m.rt, "ranks"), rapid.IntRange(0, 2).Draw(m.rt, "gpus"))
	s.Restarts = rapid.IntRange(0, 1).Draw(m.rt, "restarts")
	s.CPUs = rapid.IntRange(0, 4).Draw(m.rt, "cpus")
	tasks := 1
	if rapid.IntRange(0, 4).Draw(m.rt, "array") == 0 {
		tasks = rapid.IntRange(1, 3).Draw(m.rt, "tasks")
		s.Array = &structs.ArraySpec{Start: 0, End: tasks - 1}
	}
	owner := rapid.SampledFrom(owners).Draw(m.rt, "owner")
	s.Account = rapid.SampledFrom([]string{"", "", "a0", "a1"}).Draw(m.rt, "account")
	req := structs.JobSubmitRequest{JobID: id, RequestID: "r" + id, Owner: owner, Spec: s, SubmittedAt: m.h.at()}
	before, queued := m.h.f.Hash(), m.h.f.LimitUsage(owner).Queued
	lim := m.h.f.Limits()
	switch resp := m.h.apply(structs.JobSubmitType, req).(type) {
	case *structs.Job:
		if after := m.h.f.LimitUsage(owner).Queued; after != queued+tasks {
			m.rt.Fatalf("owner %q had %d queued, has %d after adding %d", owner, queued, after, tasks)
		}
		if structs.Exceeds(queued+tasks, lim.For(owner).MaxQueued) || (s.Array != nil && structs.Exceeds(tasks, lim.For(owner).MaxArray)) {
			m.rt.Fatalf("submit %s of %d tasks accepted over owner %q's limits %+v (had %d queued)", id, tasks, owner, lim.For(owner), queued)
		}
	case error:
		if !errors.Is(resp, ErrLimit) && !(errors.Is(resp, ErrAccount) && m.h.f.FairShare().Accounts.Account(s.Account) == nil) {
			m.rt.Fatalf("valid submit %s refused: %v", id, resp)
		}
		if m.h.f.Hash() != before || m.h.f.LimitUsage(owner).Queued != queued {
			m.rt.Fatalf("submit %s refused over a limit but changed the state", id)
		}
		return
	}
	if s.Array == nil {
		m.jobs = append(m.jobs, id)
		return
	}
	m.arrays = append(m.arrays, id)
	for i := range tasks {
		m.jobs = append(m.jobs, structs.ArrayTaskID(id, i))
	}
}

// limits sets, or unsets, small limits for a random owner, the defaults or
// the cluster, so submits often meet them.
func (m *model) limits() {
	small := func(label string) *int {
		if rapid.Bool().Draw(m.rt, label+" set") {
			return nil
		}
		v := rapid.IntRange(0, 6).Draw(m.rt, label)
		return &v
	}
	req := structs.LimitsSetRequest{Limits: structs.Limits{MaxQueued: small("max queued")}}
	switch rapid.IntRange(0, 2).Draw(m.rt, "scope") {
	case 0:
		req.User = rapid.SampledFrom(owners[1:]).Draw(m.rt, "user")
		req.Limits.MaxArray, req.Limits.MaxGPUs = small("max array"), small("max gpus")
	case 1:
		req.Default = true
		req.Limits.MaxArray = small("max array")
	default:
		req.Cluster = true
	}
	if req.Limits.Empty() {
		req.Unset = true
	}
	if err := m.h.applyErr(structs.LimitsSetType, req); err != nil {
		m.rt.Fatalf("limits %+v refused: %v", req, err)
	}
}

// fairShare creates an account, makes an owner a member, or charges usage
// at the next entry's time (sometimes a stale time), so that jobs in
// accounts, usage records and the usage clock go through snapshots.
func (m *model) fairShare() {
	before := m.h.f.FairShare()
	switch rapid.IntRange(0, 3).Draw(m.rt, "fair share op") {
	case 0:
		name := rapid.SampledFrom([]string{"a0", "a1"}).Draw(m.rt, "account")
		shares := rapid.IntRange(1, 5).Draw(m.rt, "shares")
		m.h.apply(structs.AccountSetType, structs.AccountRequest{Op: structs.AccountCreate, Name: name, Shares: &shares})
	case 1:
		name := rapid.SampledFrom([]string{"a0", "a1"}).Draw(m.rt, "account")
		m.h.apply(structs.AccountSetType, structs.AccountRequest{Op: structs.AccountAddUser, Name: name,
			User: rapid.SampledFrom(owners[1:]).Draw(m.rt, "member")})
	default:
		at := m.h.at().Add(time.Duration(rapid.IntRange(-3, 3).Draw(m.rt, "clock skew")) * time.Second)
		if err := m.h.applyErr(structs.UsageChargeType, structs.UsageChargeRequest{At: at, HalfLife: structs.Duration(time.Hour)}); err != nil {
			m.rt.Fatalf("usage charge refused: %v", err)
		}
	}
	after := m.h.f.FairShare()
	if after.At.Before(before.At) {
		m.rt.Fatalf("the usage clock went back from %s to %s", before.At, after.At)
	}
	for _, r := range after.Usage {
		if !(r.GPUSeconds >= 0 && r.CPUSeconds >= 0 && r.MemMiBSeconds >= 0) {
			m.rt.Fatalf("negative usage %+v", r)
		}
	}
}

// plan builds placements the way a stale or buggy leader might: mostly
// queued jobs but not only, distinct nodes while there are enough, GPUs
// from the chosen node (half the time only those that committed state says
// are healthy and free, which later placements of the same plan may still
// take), and sometimes from anywhere.
func (m *model) plan() {
	if len(m.jobs) == 0 {
		return
	}
	var queued []string
	for _, j := range m.h.f.State().Queued {
		queued = append(queued, j.ID)
	}
	var p structs.Plan
	for range rapid.IntRange(0, 3).Draw(m.rt, "placements") {
		pick := m.jobs
		if len(queued) > 0 && rapid.IntRange(0, 3).Draw(m.rt, "any job") > 0 {
			pick = queued
		}
		jobID := rapid.SampledFrom(pick).Draw(m.rt, "job")
		j := m.h.job(jobID)
		pl := structs.JobPlacement{JobID: jobID}
		nodes := rapid.Permutation(m.nodes).Draw(m.rt, "nodes")
		careful := rapid.Bool().Draw(m.rt, "careful")
		// Few ports, so gangs with rank 0 on one node often ask for the same.
		port := rapid.SampledFrom([]int{0, 29500, 29501}).Draw(m.rt, "master port")
		for rank := range j.Spec.Nodes {
			n := nodes[rank%len(nodes)]
			var pool []string
			for _, g := range m.nodeGPUs(n.ID, careful) {
				pool = append(pool, g.UUID)
			}
			if rapid.IntRange(0, 5).Draw(m.rt, "anywhere") == 0 {
				pool = m.allGPUs
			}
			var chosen []string
			if len(pool) > 0 {
				perm := rapid.Permutation(pool).Draw(m.rt, "gpus")
				chosen = perm[:min(len(perm), j.Spec.GPUs)]
			}
			a := alloc(m.id("a"), n.ID, rank, chosen...)
			a.MasterPort = port
			pl.Allocations = append(pl.Allocations, a)
		}
		p.Placements = append(p.Placements, pl)
	}
	if rapid.Bool().Draw(m.rt, "blocked") {
		p.Blocked = []structs.JobBlocked{{JobID: rapid.SampledFrom(m.jobs).Draw(m.rt, "blocked job"), Reason: "no room"}}
	}
	m.planStops(&p, queued)
	m.commitPlan(p)
}

// nodeGPUs returns a node's GPUs as committed state has them; careful
// keeps only the placeable ones no live allocation holds.
func (m *model) nodeGPUs(nodeID string, careful bool) []structs.GPU {
	n, _ := m.h.f.Node(nodeID)
	if !careful {
		return n.GPUs
	}
	held := map[string]bool{}
	for _, a := range m.h.f.State().LiveAllocs {
		for _, g := range a.GPUs {
			held[g] = true
		}
	}
	var free []structs.GPU
	for _, g := range n.GPUs {
		if ok, _ := g.Placeable(); ok && !held[g.UUID] {
			free = append(free, g)
		}
	}
	return free
}

func (m *model) update() {
	var allocs []*structs.Allocation
	for _, id := range m.jobs {
		allocs = append(allocs, m.h.f.Allocs(id)...)
	}
	if len(allocs) == 0 {
		return
	}
	a := rapid.SampledFrom(allocs).Draw(m.rt, "alloc")
	nodeID := a.NodeID
	if rapid.IntRange(0, 5).Draw(m.rt, "wrong node") == 0 {
		nodeID = m.nodes[rapid.IntRange(0, len(m.nodes)-1).Draw(m.rt, "reporter")].ID
	}
	st := rapid.SampledFrom([]structs.AllocState{
		structs.AllocRunning, structs.AllocSucceeded, structs.AllocFailed, structs.AllocKilled, structs.AllocLost, structs.AllocTimedOut,
	}).Draw(m.rt, "state")
	_ = m.h.update(nodeID, a.ID, st, rapid.IntRange(0, 3).Draw(m.rt, "exit"), "")
}

func (m *model) cancel() {
	if len(m.jobs) == 0 {
		return
	}
	id := rapid.SampledFrom(m.jobs).Draw(m.rt, "job")
	m.h.apply(structs.JobCancelType, structs.JobCancelRequest{JobID: id, At: m.h.at()})
}

// check asserts the invariants that must hold after every entry.
func (m *model) check() {
	f := m.h.f
	holder := map[string]string{}
	ports := map[nodePort]string{}
	for _, a := range f.State().LiveAllocs {
		if a.Rank == 0 && a.MasterPort != 0 {
			p := nodePort{a.NodeID, a.MasterPort}
			if other, ok := ports[p]; ok {
				m.rt.Fatalf("master port %d on node %s used by live rank 0s %s and %s", a.MasterPort, a.NodeID, other, a.ID)
			}
			ports[p] = a.ID
		}
		n, ok := f.Node(a.NodeID)
		if !ok {
			m.rt.Fatalf("live alloc %s on unknown node %s", a.ID, a.NodeID)
		}
		for _, g := range a.GPUs {
			if other, ok := holder[g]; ok {
				m.rt.Fatalf("GPU %s held by live allocs %s and %s", g, other, a.ID)
			}
			holder[g] = a.ID
			if !nodeHasGPU(n, g) {
				m.rt.Fatalf("live alloc %s holds GPU %s, not on its node %s", a.ID, g, n.ID)
			}
			if gpu := findGPU(n, g); !gpu.Healthy && (a.DesiredState != structs.DesiredStop || a.GPUFault == "") {
				m.rt.Fatalf("live alloc %s holds failed GPU %s but is not being stopped for it", a.ID, g)
			}
		}
	}
	for _, j := range f.Jobs() {
		if j.State == structs.JobRunning {
			continue
		}
		for _, a := range f.Allocs(j.ID) {
			if a.Live() {
				m.rt.Fatalf("job %s is %s but alloc %s is %s", j.ID, j.State, a.ID, a.State)
			}
		}
	}
	m.checkServices()
	m.checkViewStamps()
	if err := checkIndexes(f.st); err != nil {
		m.rt.Fatalf("indexes: %v", err)
	}
	g := restoreFresh(m.rt, f)
	if g.Hash() != f.Hash() || g.Index() != f.Index() {
		m.rt.Fatalf("hash after snapshot and restore differs")
	}
	evs := allEvents(f, EventQuery{})
	if !reflect.DeepEqual(allEvents(g, EventQuery{}), evs) {
		m.rt.Fatalf("events after snapshot and restore differ")
	}
	for i, e := range evs {
		if e.Index > f.Index() || i > 0 && e.Cursor().Compare(evs[i-1].Cursor()) <= 0 {
			m.rt.Fatalf("event %s out of order (after %s, applied index %d)", e.Cursor(), evs[max(i-1, 0)].Cursor(), f.Index())
		}
	}
}

// checkViewStamps checks that no node's view changed while its stamp
// stayed: a server that compares stamps would then never send it.
func (m *model) checkViewStamps() {
	if m.views == nil {
		m.views = map[string]viewMark{}
	}
	for _, n := range m.nodes {
		v, err := m.h.f.NodeView(n.ID)
		if err != nil {
			m.rt.Fatal(err)
		}
		mark := viewMark{hash: v.Hash, stamp: m.h.f.NodeViewStamp(n.ID), data: string(v.Data)}
		if last, ok := m.views[n.ID]; ok && last.hash != mark.hash && last.stamp == mark.stamp {
			m.rt.Fatalf("node %s's view changed at index %d but its stamp did not:\n%s\nthen\n%s", n.ID, v.Index, last.data, mark.data)
		}
		m.views[n.ID] = mark
	}
}

func nodeHasGPU(n *structs.Node, uuid string) bool {
	for _, g := range n.GPUs {
		if g.UUID == uuid {
			return true
		}
	}
	return false
}
