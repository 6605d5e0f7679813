package sched

import (
	"reflect"
	"testing"

	"github.com/skein-dev/skein/structs"
)

func intp(v int) *int { return &v }

// accountsView is one idle 8-GPU node and the account table t.
func accountsView(t *structs.AccountTable, queued ...*structs.Job) fakeView {
	v := fakeView{queued: queued, fairShare: structs.FairShare{Accounts: t}}
	v.nodes = append(v.nodes, gpuNode("n0", 8, "H100", 80))
	return v
}

func ownedJob(id, owner, account, qos string, gpus int) *structs.Job {
	j := job(id, gpus)
	j.Owner, j.Spec.Account, j.Spec.QoS = owner, account, qos
	return j
}

func TestDecide_AccountAndQoSLimitsHoldJobsBack(t *testing.T) {
	tab := &structs.AccountTable{
		Accounts: map[string]*structs.Account{
			"ml":  {Name: "ml", Shares: 1, MaxGPUs: intp(4), Users: []string{"alice"}},
			"nlp": {Name: "nlp", Parent: "ml", Shares: 1, Users: []string{"alice"}},
			"cv":  {Name: "cv", Shares: 1, MaxJobs: intp(1), Users: []string{"bob"}},
		},
		QoS: map[string]*structs.QoS{
			"small": {Name: "small", MaxGPUsPerUser: intp(1)},
			"team":  {Name: "team", MaxGPUsPerAccount: intp(2)},
			"one":   {Name: "one", MaxJobsPerUser: intp(1)},
		},
	}
	for _, tc := range []struct {
		name   string
		jobs   []*structs.Job
		placed []string
		held   map[string]string
	}{
		{"an account's GPUs, its sub-accounts' included",
			[]*structs.Job{ownedJob("a", "alice", "nlp", "", 3), ownedJob("b", "alice", "ml", "", 2), ownedJob("c", "alice", "ml", "", 1)},
			// alice in ml ranks before alice in nlp (a tie, then by name)
			[]string{"b", "c"}, map[string]string{"a": "waiting: account ml's GPU limit (4) is in use"}},
		{"a job bigger than the account's limit",
			[]*structs.Job{ownedJob("big", "alice", "ml", "", 8)},
			nil, map[string]string{"big": "waiting: account ml's GPU limit (4) is less than the 8 the job needs"}},
		{"an account's running jobs",
			[]*structs.Job{ownedJob("x", "bob", "cv", "", 0), ownedJob("y", "bob", "cv", "", 0)},
			[]string{"x"}, map[string]string{"y": "waiting: account cv's running-jobs limit (1) is in use"}},
		{"a QoS's GPUs per user",
			[]*structs.Job{ownedJob("s1", "bob", "cv", "small", 1), ownedJob("s2", "carol", "", "small", 1), ownedJob("s3", "carol", "", "small", 1)},
			[]string{"s1", "s2"}, map[string]string{"s3": "waiting: QoS small's GPU limit per user (1) is in use"}},
		{"a QoS's GPUs per account",
			[]*structs.Job{ownedJob("t1", "alice", "ml", "team", 2), ownedJob("t2", "alice", "nlp", "team", 1), ownedJob("t3", "bob", "cv", "team", 2)},
			[]string{"t3", "t1", "t2"}, nil}, // each account within 2: cv, ml, nlp
		{"a QoS's GPUs per account, one account",
			[]*structs.Job{ownedJob("u1", "carol", "", "team", 1), ownedJob("u2", "carol", "", "team", 2)},
			[]string{"u1"}, map[string]string{"u2": "waiting: QoS team's GPU limit per account (2) is in use"}},
		{"a QoS's running jobs per user",
			[]*structs.Job{ownedJob("o1", "bob", "cv", "one", 0), ownedJob("o2", "carol", "", "one", 0), ownedJob("o3", "carol", "", "one", 0)},
			[]string{"o1", "o2"}, map[string]string{"o3": "waiting: QoS one's running-jobs limit per user (1) is in use"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(accountsView(tab, tc.jobs...), Inputs{Now: t0})
			var placed []string
			for _, p := range d.Plan.Placements {
				placed = append(placed, p.JobID)
			}
			if !reflect.DeepEqual(placed, tc.placed) {
				t.Fatalf("placed %v, want %v (blocked %+v)", placed, tc.placed, d.Plan.Blocked)
			}
			for id, want := range tc.held {
				if got := blockedReason(d.Plan, id); got != want {
					t.Errorf("%s: reason %q, want %q", id, got, want)
				}
			}
		})
	}
}

func TestDecide_RunningJobsCountAgainstAccountLimits(t *testing.T) {
	tab := &structs.AccountTable{Accounts: map[string]*structs.Account{
		"ml": {Name: "ml", Shares: 1, MaxGPUs: intp(4), Users: []string{"alice"}}}}
	v := accountsView(tab, ownedJob("next", "alice", "ml", "", 1))
	r := ownedJob("run", "alice", "ml", "", 4)
	r.State = structs.JobRunning
	v.running = []*structs.Job{r}
	v.allocs = []*structs.Allocation{rank("run", 0, "n0", gpus("n0", 0, 4))}
	d := Decide(v, Inputs{Now: t0})
	if len(d.Plan.Placements) != 0 || blockedReason(d.Plan, "next") != "waiting: account ml's GPU limit (4) is in use" {
		t.Fatalf("plan %+v: want next held by ml's limit, which run holds", d.Plan)
	}
}

func TestDecide_AQoSPreemptsTheQoSItNames(t *testing.T) {
	tab := &structs.AccountTable{QoS: map[string]*structs.QoS{
		"high":      {Name: "high", Preempt: []string{"scavenger"}},
		"scavenger": {Name: "scavenger"},
		"normal":    {Name: "normal"},
	}}
	for _, tc := range []struct {
		victimQoS, forQoS string
		want              bool
	}{{"scavenger", "high", true}, {"normal", "high", false}, {"scavenger", "normal", false}} {
		v := busyCluster(1)
		v.running[0].Spec.Preemptible = false // only the QoS may let it be stopped
		v.running[0].Spec.QoS = tc.victimQoS
		v.fairShare = structs.FairShare{Accounts: tab}
		v.queued = []*structs.Job{urgent("urgent", 0, 0, func(s *structs.JobSpec) { s.QoS = tc.forQoS })}
		d := Decide(v, Inputs{Now: t0})
		if got := len(d.Plan.Preemptions) == 1; got != tc.want {
			t.Errorf("a %s job, a running %s job: preemptions %+v, want some: %v", tc.forQoS, tc.victimQoS, d.Plan.Preemptions, tc.want)
		}
		victim, urgent := v.running[0], v.queued[0]
		if structs.MayPreempt(tab, urgent, victim) != tc.want {
			t.Errorf("MayPreempt(%s over %s) disagrees with the pass", tc.forQoS, tc.victimQoS)
		}
	}
}
