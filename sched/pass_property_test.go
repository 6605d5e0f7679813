package sched

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/skein-dev/skein/structs"
	"pgregory.net/rapid"
)

// depStates are the jobs, besides the queue and the running jobs, that a
// generated queue may depend on; "missing" is not among them.
var depStates = map[string]structs.JobState{
	"dep-queued": structs.JobQueued, "dep-running": structs.JobRunning, "dep-ok": structs.JobSucceeded,
	"dep-failed": structs.JobFailed, "dep-cancelled": structs.JobCancelled, "dep-timedout": structs.JobTimedOut,
}

// genPass draws a view and inputs that exercise every rule of a pass: a
// small cluster, partly busy (genPassCluster), whose nodes have ranges of
// one to three ports or the default, live gangs holding some of the
// ports, running jobs of mixed priorities, some preemptible and some being
// preempted, queued jobs in restart backoff, with dependencies on jobs in
// every state or on none that exists, tasks of a capped array (some of
// them running), silent nodes and gossip masks.
func genPass(t *rapid.T) (fakeView, Inputs) {
	nodes, allocs, queued := genPassCluster(t)
	v := fakeView{fakeState: fakeState{nodes: nodes, allocs: allocs, limits: genTimes(t, allocs, queued)},
		queued: queued, states: maps.Clone(depStates)}
	ranges := []structs.PortRange{{}, {Min: 40000, Max: 40000}, {Min: 40000, Max: 40002}}
	for _, n := range nodes {
		n.MasterPorts = rapid.SampledFrom(ranges).Draw(t, "masterPorts")
	}

	arrayCap := rapid.IntRange(0, 2).Draw(t, "arrayCap")
	for i, j := range queued {
		if rapid.IntRange(0, 2).Draw(t, "isTask") == 0 {
			j.ID, j.ArrayID, j.ArrayIndex = structs.ArrayTaskID("arr", i), "arr", i
			j.Spec.Array = &structs.ArraySpec{Start: 0, End: 199, MaxRunning: arrayCap}
		}
		v.states[j.ID] = structs.JobQueued
		if rapid.IntRange(0, 3).Draw(t, "backoff") == 0 {
			j.NotBefore = t0.Add(time.Duration(rapid.IntRange(-3, 3).Draw(t, "backoffMinutes")) * time.Minute)
		}
	}
	used := map[string]map[int]bool{}
	for i, a := range allocs {
		if rapid.IntRange(0, 3).Draw(t, "runningTask") == 0 {
			a.JobID = structs.ArrayTaskID("arr", 100+i)
		}
		if n := nodeByID(nodes, a.NodeID); n != nil && rapid.Bool().Draw(t, "hasPort") {
			r := n.MasterPortRange()
			if p := r.Min + rapid.IntRange(0, 2).Draw(t, "port"); r.Contains(p) && !used[n.ID][p] {
				a.MasterPort = p
				if used[n.ID] == nil {
					used[n.ID] = map[int]bool{}
				}
				used[n.ID][p] = true
			}
		}
		r := runningJob(a.JobID, rapid.IntRange(0, 3).Draw(t, "runningPriority"),
			rapid.Bool().Draw(t, "preemptible"), rapid.IntRange(0, 60).Draw(t, "startedMinute"))
		r.Attempts = rapid.IntRange(1, 3).Draw(t, "attempts")
		r.Spec.Name = rapid.SampledFrom(passNames).Draw(t, "runningName")
		r.Spec.Exclusive = rapid.IntRange(0, 3).Draw(t, "runningExclusive") == 0
		a.Exclusive = r.Spec.Exclusive
		if len(queued) > 0 && rapid.IntRange(0, 11).Draw(t, "beingPreempted") == 0 {
			r.PreemptedBy = rapid.SampledFrom(queued).Draw(t, "preemptedFor").ID
			a.DesiredState = structs.DesiredStop
		}
		v.running = append(v.running, r)
		v.states[r.ID] = structs.JobRunning
	}

	for _, j := range queued {
		j.Spec.Name = rapid.SampledFrom(passNames).Draw(t, "name")
		j.Spec.Singleton = j.Spec.Name != "" && rapid.Bool().Draw(t, "singleton")
		j.Spec.Exclusive = rapid.IntRange(0, 3).Draw(t, "exclusive") == 0
		j.SubmittedAt = t0.Add(-time.Duration(rapid.IntRange(0, 3).Draw(t, "submittedMinutesAgo")) * time.Minute)
	}

	conds := structs.DependencyConditions
	deps := append([]string{"missing"}, slices.Sorted(maps.Keys(depStates))...)
	deps = append(deps, ids(queued)...)
	for _, j := range queued {
		for range max(0, rapid.IntRange(-3, 2).Draw(t, "deps")) {
			j.Spec.After = append(j.Spec.After, structs.Dependency{
				JobID: rapid.SampledFrom(deps).Draw(t, "dep"), Condition: rapid.SampledFrom(conds).Draw(t, "cond")})
		}
	}

	genOwners(t, &v)
	genFairShare(t, &v)

	in := Inputs{Now: t0, Silent: map[string]bool{}, GossipUnhealthy: map[string]uint64{}}
	quiet := rapid.IntRange(0, 3).Draw(t, "quiet") == 0 // silent nodes stop preemptions: not too often
	for _, n := range nodes {
		if quiet && rapid.Bool().Draw(t, "silent") {
			in.Silent[n.ID] = true
		}
		if rapid.IntRange(0, 2).Draw(t, "masked") == 0 {
			in.GossipUnhealthy[n.ID] = uint64(rapid.IntRange(1, 255).Draw(t, "mask"))
		}
	}
	return v, in
}

// passOwners are the owners of generated jobs; "" owns jobs submitted
// before ACLs exist. passNames are their names.
var (
	passOwners = []string{"", "alice", "bob"}
	passNames  = []string{"", "nightly", "sweep"}
)

// genOwners gives every queued and running job an owner, and some owners
// a GPU limit, which the GPUs their running jobs hold may already pass (an
// admin lowered it).
func genOwners(t *rapid.T, v *fakeView) {
	for _, j := range v.queued {
		j.Owner = rapid.SampledFrom(passOwners).Draw(t, "owner")
	}
	v.gpuLimits, v.gpusInUse = map[string]int{}, map[string]int{}
	owners := map[string]string{} // running job ID -> owner
	for _, r := range v.running {
		r.Owner = rapid.SampledFrom(passOwners).Draw(t, "runningOwner")
		owners[r.ID] = r.Owner
	}
	for _, a := range v.allocs {
		v.gpusInUse[owners[a.JobID]] += len(a.GPUs)
	}
	for _, o := range passOwners {
		if rapid.Bool().Draw(t, "ownerLimited") {
			v.gpuLimits[o] = rapid.IntRange(0, 12).Draw(t, "ownerGPULimit")
		}
	}
}

// genFairShare turns fair share on half the time: two accounts (the second
// maybe below the first) with alice and bob, usage, two QoS (hi may preempt
// lo), GPU limits on an account and a QoS, and each job in an account and a
// QoS or none. A running job asks for the GPUs its allocation holds.
func genFairShare(t *rapid.T, v *fakeView) {
	if !rapid.Bool().Draw(t, "fairShare") {
		return
	}
	tab := &structs.AccountTable{
		Accounts: map[string]*structs.Account{
			"a0": {Name: "a0", Shares: rapid.IntRange(1, 3).Draw(t, "shares0"), Users: []string{"alice", "bob"}},
			"a1": {Name: "a1", Shares: rapid.IntRange(1, 3).Draw(t, "shares1"), Users: []string{"bob"}},
		},
		QoS: map[string]*structs.QoS{"hi": {Name: "hi", Priority: rapid.IntRange(0, 1000).Draw(t, "qosPriority")}, "lo": {Name: "lo"}},
	}
	if rapid.Bool().Draw(t, "nestedAccount") {
		tab.Accounts["a1"].Parent = "a0"
	}
	if rapid.Bool().Draw(t, "accountLimit") {
		tab.Accounts["a0"].MaxGPUs = intp(rapid.IntRange(0, 8).Draw(t, "accountGPUs"))
	}
	if rapid.Bool().Draw(t, "qosLimit") {
		tab.QoS["hi"].MaxGPUsPerUser = intp(rapid.IntRange(0, 6).Draw(t, "qosGPUs"))
	}
	if rapid.Bool().Draw(t, "qosPreempts") {
		tab.QoS["hi"].Preempt = []string{"lo"}
	}
	v.fairShare = structs.FairShare{Accounts: tab}
	for _, acct := range []string{"a0", "a1"} {
		for _, u := range tab.Accounts[acct].Users {
			if rapid.Bool().Draw(t, "used") {
				v.fairShare.Usage = append(v.fairShare.Usage, structs.UsageRecord{UsageKey: structs.UsageKey{Account: acct, User: u},
					Usage: structs.Usage{GPUSeconds: float64(rapid.IntRange(1, 1000).Draw(t, "gpuSeconds"))}})
			}
		}
	}
	accounts, qos := []string{"", "a0", "a1"}, []string{"", "hi", "lo"}
	for _, j := range v.queued {
		j.Spec.Account, j.Spec.QoS = rapid.SampledFrom(accounts).Draw(t, "account"), rapid.SampledFrom(qos).Draw(t, "qos")
	}
	held := map[string]int{}
	for _, a := range v.allocs {
		held[a.JobID] += len(a.GPUs)
	}
	for _, r := range v.running {
		r.Spec.GPUs = held[r.ID]
		r.Spec.Account, r.Spec.QoS = rapid.SampledFrom(accounts).Draw(t, "runningAccount"), rapid.SampledFrom(qos).Draw(t, "runningQoS")
	}
}

// checkGroupLimits fails t if a plan places GPU jobs of an account (its
// sub-accounts' included) or of one user of a QoS past a GPU limit,
// counting what the running jobs hold.
func checkGroupLimits(t *rapid.T, v fakeView, plan structs.Plan) {
	tab := v.fairShare.Accounts
	if tab == nil {
		return
	}
	under := func(acct, top string) bool {
		for a := acct; a != ""; a = tab.Accounts[a].Parent {
			if a == top {
				return true
			}
		}
		return false
	}
	byID := map[string]*structs.Job{}
	for _, j := range v.queued {
		byID[j.ID] = j
	}
	for name, a := range tab.Accounts {
		if a.MaxGPUs == nil {
			continue
		}
		used, placed := 0, 0
		for _, r := range v.running {
			if under(r.Spec.Account, name) {
				used += jobGPUs(r)
			}
		}
		for _, p := range plan.Placements {
			if j := byID[p.JobID]; under(j.Spec.Account, name) {
				placed += jobGPUs(j)
			}
		}
		if placed > 0 && used+placed > *a.MaxGPUs {
			t.Fatalf("account %s holds %d GPUs and got %d more, past its limit of %d", name, used, placed, *a.MaxGPUs)
		}
	}
	if lim := tab.QoS["hi"].MaxGPUsPerUser; lim != nil {
		used, placed := map[string]int{}, map[string]int{}
		for _, r := range v.running {
			if r.Spec.QoS == "hi" {
				used[r.Owner] += jobGPUs(r)
			}
		}
		for _, p := range plan.Placements {
			if j := byID[p.JobID]; j.Spec.QoS == "hi" {
				placed[j.Owner] += jobGPUs(j)
			}
		}
		for owner, n := range placed {
			if n > 0 && used[owner]+n > *lim {
				t.Fatalf("user %q of QoS hi holds %d GPUs and got %d more, past its limit of %d", owner, used[owner], n, *lim)
			}
		}
	}
}

// genPassCluster draws a few mostly ready nodes with GPUs of one model, a
// few of them unhealthy, about half of the GPUs held by running one-rank
// jobs, and up to ten queued jobs of one to four GPUs, some of them gangs
// of two.
func genPassCluster(t *rapid.T) ([]*structs.Node, []*structs.Allocation, []*structs.Job) {
	var nodes []*structs.Node
	var allocs []*structs.Allocation
	for i := range rapid.IntRange(1, 5).Draw(t, "nodes") {
		id := fmt.Sprintf("n%d", i)
		n := gpuNode(id, rapid.IntRange(1, 8).Draw(t, "gpus"), "H100", 80, withCPUs(rapid.SampledFrom([]int{0, 64}).Draw(t, "cpus")))
		if rapid.IntRange(0, 5).Draw(t, "down") == 0 {
			n.Status = structs.NodeDown
		}
		var held []string
		for k := range n.GPUs {
			if rapid.IntRange(0, 7).Draw(t, "unhealthy") == 0 {
				n.GPUs[k].Healthy = false
			}
			if rapid.Bool().Draw(t, "busy") {
				held = append(held, n.GPUs[k].UUID)
			}
			if len(held) > 0 && (k == len(n.GPUs)-1 || rapid.Bool().Draw(t, "split")) {
				allocs = append(allocs, running(fmt.Sprintf("old%d", len(allocs)), id, 0, 0, held...))
				held = nil
			}
		}
		nodes = append(nodes, n)
	}
	jobs := make([]*structs.Job, rapid.IntRange(0, 10).Draw(t, "jobs"))
	for i := range jobs {
		jobs[i] = job(fmt.Sprintf("j%d", i), rapid.IntRange(1, 4).Draw(t, "jobGPUs"),
			gang(max(1, rapid.IntRange(-1, 2).Draw(t, "jobNodes"))))
	}
	return nodes, allocs, jobs
}

func nodeByID(nodes []*structs.Node, id string) *structs.Node {
	for _, n := range nodes {
		if n.ID == id {
			return n
		}
	}
	return nil
}

// copyView returns a deep copy of a fakeView.
func copyView(v fakeView) fakeView {
	return fakeView{
		fakeState: fakeState{nodes: copyAll(v.nodes, (*structs.Node).Copy), allocs: copyAll(v.allocs, (*structs.Allocation).Copy),
			limits: maps.Clone(v.limits)},
		queued:    copyAll(v.queued, (*structs.Job).Copy),
		running:   copyAll(v.running, (*structs.Job).Copy),
		states:    maps.Clone(v.states),
		gpuLimits: maps.Clone(v.gpuLimits),
		gpusInUse: maps.Clone(v.gpusInUse),
		fairShare: structs.FairShare{Accounts: v.fairShare.Accounts.Copy(), Usage: slices.Clone(v.fairShare.Usage)},
	}
}

// The same view and inputs give the same decision, and the view is never
// changed, overlays included.
func TestDecide_PropertyPureAndDeterministic(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		v, in := genPass(t)
		before := copyView(v)
		first := Decide(v, in)
		if !reflect.DeepEqual(v, before) {
			t.Fatal("the pass changed its view")
		}
		if again := Decide(v, in); !reflect.DeepEqual(first, again) {
			t.Fatalf("two passes over one view decided differently:\n%+v\n%+v", first, again)
		}
	})
}

func TestDecide_PropertyEveryRuleHolds(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		v, in := genPass(t)
		d := Decide(v, in)
		checkDecision(t, v, in, d)
	})
}

// checkDecision fails t unless the decision keeps every rule of a pass.
func checkDecision(t *rapid.T, v fakeView, in Inputs, d Decision) {
	queued := map[string]*structs.Job{}
	for _, j := range v.queued {
		queued[j.ID] = j
	}
	seen := map[string]string{}
	mention := func(id, as string) {
		if queued[id] == nil || seen[id] != "" {
			t.Fatalf("job %s %s: unknown, or already %s", id, as, seen[id])
		}
		seen[id] = as
	}
	for _, p := range d.Plan.Placements {
		mention(p.JobID, "placed")
		checkMayRun(t, v, in, queued[p.JobID])
	}
	for _, b := range d.Plan.Blocked {
		mention(b.JobID, "blocked")
	}
	for _, c := range d.Plan.Cancels {
		mention(c.JobID, "cancelled")
		if _, never := dependencyVerdict(queued[c.JobID], v.JobState); never != c.Reason || never == "" {
			t.Fatalf("job %s cancelled for %q; its dependencies say %q", c.JobID, c.Reason, never)
		}
	}
	checkArrayCap(t, v, d.Plan)
	checkSingletons(t, v, d.Plan)
	checkExclusive(t, v.allocs, d.Plan)
	checkOverlaysKeptOff(t, v, in, d.Plan)
	checkMasterPorts(t, v, d.Plan)
	checkPreemptions(t, v, in, d.Plan)
	checkOwnerGPULimits(t, v, d.Plan)
	checkGroupLimits(t, v, d.Plan)
}

// checkOwnerGPULimits fails t if a plan places GPU jobs of an owner beyond
// its GPU limit, counting what its jobs hold already, or preempts for a job
// whose owner may not hold more.
func checkOwnerGPULimits(t *rapid.T, v fakeView, plan structs.Plan) {
	byID := map[string]*structs.Job{}
	for _, j := range v.queued {
		byID[j.ID] = j
	}
	placed := map[string]int{}
	for _, p := range plan.Placements {
		j := byID[p.JobID]
		got := 0
		for _, a := range p.Allocations {
			got += len(a.GPUs)
		}
		if got != jobGPUs(j) {
			t.Fatalf("job %s placed with %d GPUs, wants %d", j.ID, got, jobGPUs(j))
		}
		placed[j.Owner] += got
	}
	for owner, n := range placed {
		if limit, ok := v.gpuLimits[owner]; ok && n > 0 && v.gpusInUse[owner]+n > limit {
			t.Fatalf("owner %q holds %d GPUs and got %d more, past its limit of %d", owner, v.gpusInUse[owner], n, limit)
		}
	}
	for _, p := range plan.Preemptions {
		j := byID[p.For]
		if limit, ok := v.gpuLimits[j.Owner]; ok && v.gpusInUse[j.Owner]+placed[j.Owner]+jobGPUs(j) > limit {
			t.Fatalf("preemption for job %s of owner %q, which may not hold its %d GPUs (limit %d, holds %d, placed %d)",
				j.ID, j.Owner, jobGPUs(j), limit, v.gpusInUse[j.Owner], placed[j.Owner])
		}
	}
}

// checkMayRun fails t unless j is past its backoff and every dependency
// ended as it requires.
func checkMayRun(t *rapid.T, v fakeView, in Inputs, j *structs.Job) {
	if j.NotBefore.After(in.Now) {
		t.Fatalf("job %s placed in its restart backoff (until %v)", j.ID, j.NotBefore)
	}
	for _, dep := range j.Spec.After {
		st, ok := v.JobState(dep.JobID)
		if !ok || !st.Terminal() || (dep.Condition == structs.AfterOK && st != structs.JobSucceeded) ||
			(dep.Condition == structs.AfterNotOK && st == structs.JobSucceeded) {
			t.Fatalf("job %s placed though dependency %s (%s) is %q", j.ID, dep.JobID, dep.Condition, st)
		}
	}
}

// checkSingletons fails t if a singleton job is placed while another job
// of its owner and name runs, or is queued and was submitted before it.
func checkSingletons(t *rapid.T, v fakeView, plan structs.Plan) {
	for _, p := range plan.Placements {
		var j *structs.Job
		for _, q := range v.queued {
			if q.ID == p.JobID {
				j = q
			}
		}
		if !j.Spec.Singleton {
			continue
		}
		same := func(o *structs.Job) bool { return o.ID != j.ID && o.Owner == j.Owner && o.Spec.Name == j.Spec.Name }
		for _, r := range v.running {
			if same(r) {
				t.Fatalf("singleton %s placed while %s of the same name and owner runs", j.ID, r.ID)
			}
		}
		for _, q := range v.queued {
			if same(q) && submissionOrder(q, j) < 0 {
				t.Fatalf("singleton %s placed while %s of the same name and owner, submitted before, is queued", j.ID, q.ID)
			}
		}
	}
}

// checkArrayCap fails t if an array with a task placed runs more tasks than
// its cap, counting tasks with live allocations and tasks placed.
func checkArrayCap(t *rapid.T, v fakeView, plan structs.Plan) {
	tasks := map[string]bool{}
	for _, a := range v.allocs {
		if structs.ArrayOf(a.JobID) == "arr" {
			tasks[a.JobID] = true
		}
	}
	placed := 0
	limit := 0
	for _, p := range plan.Placements {
		for _, j := range v.queued {
			if j.ID == p.JobID && j.ArrayID == "arr" {
				placed++
				tasks[j.ID] = true
				limit = j.Spec.Array.MaxRunning
			}
		}
	}
	if placed > 0 && limit > 0 && len(tasks) > limit {
		t.Fatalf("array runs %d tasks (%d placed now), its cap is %d", len(tasks), placed, limit)
	}
}

// checkOverlaysKeptOff fails t if a placement uses a silent ready node or
// a GPU its node announced unhealthy.
func checkOverlaysKeptOff(t *rapid.T, v fakeView, in Inputs, plan structs.Plan) {
	for _, p := range plan.Placements {
		for _, a := range p.Allocations {
			n := nodeByID(v.nodes, a.NodeID)
			if in.Silent[n.ID] {
				t.Fatalf("job %s placed on silent node %s", p.JobID, n.ID)
			}
			for _, u := range a.GPUs {
				if g := findGPU(n, u); masked(g, in.GossipUnhealthy[n.ID]) {
					t.Fatalf("job %s got GPU %d of node %s, which its node announced unhealthy", p.JobID, g.Index, n.ID)
				}
			}
		}
	}
}

// checkMasterPorts fails t unless every rank of a placement of a job
// that needs a port (a gang, a replica) has one port in its rank-0 node's
// range, no two gangs, live or placed, share a port on one rank-0 node,
// and any other placement has none.
func checkMasterPorts(t *rapid.T, v fakeView, plan structs.Plan) {
	needs := map[string]bool{}
	for _, j := range v.queued {
		needs[j.ID] = j.NeedsMasterPort()
	}
	owner := map[string]string{} // "node/port" -> job
	for _, a := range v.allocs {
		if a.Rank == 0 && a.MasterPort != 0 {
			owner[fmt.Sprintf("%s/%d", a.NodeID, a.MasterPort)] = a.JobID
		}
	}
	for _, p := range plan.Placements {
		rank0 := p.Allocations[0]
		port := rank0.MasterPort
		if !needs[p.JobID] {
			if port != 0 {
				t.Fatalf("job %s of one node was given port %d", p.JobID, port)
			}
			continue
		}
		if r := nodeByID(v.nodes, rank0.NodeID).MasterPortRange(); !r.Contains(port) {
			t.Fatalf("job %s: port %d outside %s of its rank-0 node", p.JobID, port, r)
		}
		for _, a := range p.Allocations {
			if a.MasterPort != port {
				t.Fatalf("job %s: rank %d has port %d, rank 0 %d", p.JobID, a.Rank, a.MasterPort, port)
			}
		}
		key := fmt.Sprintf("%s/%d", rank0.NodeID, port)
		if other, ok := owner[key]; ok {
			t.Fatalf("jobs %s and %s share MASTER_PORT %s", other, p.JobID, key)
		}
		owner[key] = p.JobID
	}
}

// checkPreemptions fails t unless the preemptions keep to their limits,
// stop only lower-priority preemptible jobs, each once, with the attempt
// they run, and none while a ready node is silent.
func checkPreemptions(t *rapid.T, v fakeView, in Inputs, plan structs.Plan) {
	if len(plan.Preemptions) > maxPreemptsPerPass {
		t.Fatalf("%d preemptions in one pass", len(plan.Preemptions))
	}
	for _, n := range v.nodes {
		if in.Silent[n.ID] && n.Status == structs.NodeReady && len(plan.Preemptions) > 0 {
			t.Fatalf("preemptions %+v while node %s is silent", plan.Preemptions, n.ID)
		}
	}
	stopped := map[string]bool{}
	for _, p := range plan.Preemptions {
		var job *structs.Job
		for _, j := range v.queued {
			if j.ID == p.For {
				job = j
			}
		}
		if job == nil || blockedReason(plan, p.For) != waitingForVictims(len(p.Victims)) || len(p.Attempts) != len(p.Victims) {
			t.Fatalf("preemption %+v: unknown job, or its reason %q does not match", p, blockedReason(plan, p.For))
		}
		for i, id := range p.Victims {
			var victim *structs.Job
			for _, r := range v.running {
				if r.ID == id {
					victim = r
				}
			}
			if victim == nil || stopped[id] || !structs.MayPreempt(v.fairShare.Accounts, job, victim) || victim.PreemptedBy != "" ||
				p.Attempts[i] != victim.Attempts {
				t.Fatalf("preemption %+v: victim %s is not a fair one (%+v), or stopped twice", p, id, victim)
			}
			stopped[id] = true
		}
	}
}
