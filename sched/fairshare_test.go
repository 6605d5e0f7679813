package sched

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/skein-dev/skein/structs"
)

// randomTree draws an account tree of up to 6 accounts, each with up to 3
// members, and usage for some of the members.
func randomTree(t *rapid.T) structs.FairShare {
	tab := &structs.AccountTable{Accounts: map[string]*structs.Account{}}
	n := rapid.IntRange(1, 6).Draw(t, "accounts")
	for i := range n {
		name := fmt.Sprintf("a%d", i)
		parent := ""
		if i > 0 && rapid.Bool().Draw(t, "nested") {
			parent = fmt.Sprintf("a%d", rapid.IntRange(0, i-1).Draw(t, "parent"))
		}
		a := &structs.Account{Name: name, Parent: parent, Shares: rapid.IntRange(1, 100).Draw(t, "shares")}
		for u := range rapid.IntRange(0, 3).Draw(t, "users") {
			a.Users = append(a.Users, fmt.Sprintf("u%d", u))
		}
		tab.Accounts[name] = a
	}
	fs := structs.FairShare{Accounts: tab}
	for _, name := range slices.Sorted(mapsKeys(tab.Accounts)) {
		for _, u := range tab.Accounts[name].Users {
			if rapid.Bool().Draw(t, "used") {
				fs.Usage = append(fs.Usage, structs.UsageRecord{UsageKey: structs.UsageKey{Account: name, User: u},
					Usage: structs.Usage{GPUSeconds: rapid.Float64Range(1, 1e6).Draw(t, "gpu-seconds")}})
			}
		}
	}
	return fs
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func TestFairTree_PropertyFactorsAreRanksBetween0And1(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		fs := randomTree(t)
		rows := FairTree(fs)
		users := 0
		for _, a := range fs.Accounts.Accounts {
			users += len(a.Users)
		}
		prev := 2.0
		seen := 0
		for _, r := range rows {
			if r.User == "" {
				continue
			}
			seen++
			if r.FairShare <= 0 || r.FairShare > 1 || r.FairShare > prev {
				t.Fatalf("user %s/%s: factor %v after %v; want (0, 1], never rising down the walk", r.Account, r.User, r.FairShare, prev)
			}
			prev = r.FairShare
		}
		if seen != users {
			t.Fatalf("%d user rows, want %d", seen, users)
		}
		if users > 0 && rows[firstUser(rows)].FairShare != 1 {
			t.Fatalf("the first user met has %v, want 1", rows[firstUser(rows)].FairShare)
		}
	})
}

func firstUser(rows []ShareRow) int {
	for i, r := range rows {
		if r.User != "" {
			return i
		}
	}
	return -1
}

func TestFairTree_PropertyMonotoneInUsage(t *testing.T) {
	// Using more never raises a user's factor, and every user ahead of
	// it stays ahead.
	rapid.Check(t, func(t *rapid.T) {
		fs := randomTree(t)
		before := FairShareFactors(FairTree(fs))
		if len(before) == 0 {
			return
		}
		keys := make([]structs.UsageKey, 0, len(before))
		for k := range before {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, func(a, b structs.UsageKey) int {
			if a.Account != b.Account {
				return compareStrings(a.Account, b.Account)
			}
			return compareStrings(a.User, b.User)
		})
		k := keys[rapid.IntRange(0, len(keys)-1).Draw(t, "who")]
		more := rapid.Float64Range(1, 1e6).Draw(t, "more")
		grown := fs
		grown.Usage = slices.Clone(fs.Usage)
		found := false
		for i := range grown.Usage {
			if grown.Usage[i].UsageKey == k {
				grown.Usage[i].GPUSeconds += more
				found = true
			}
		}
		if !found {
			grown.Usage = append(grown.Usage, structs.UsageRecord{UsageKey: k, Usage: structs.Usage{GPUSeconds: more}})
		}
		after := FairShareFactors(FairTree(grown))
		if after[k] > before[k] {
			t.Fatalf("%v used %v more GPU-seconds and its factor rose from %v to %v", k, more, before[k], after[k])
		}
		for o := range before {
			if o != k && before[o] > before[k] && after[o] <= after[k] {
				t.Fatalf("%v was ahead of %v (%v > %v) and is not once %v used more (%v, %v)", o, k, before[o], before[k], k, after[o], after[k])
			}
		}
	})
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func TestFairTree_UnderServedAccountRanksFirst(t *testing.T) {
	tab := &structs.AccountTable{Accounts: map[string]*structs.Account{
		"ml":  {Name: "ml", Shares: 70, Users: []string{"alice"}},
		"cv":  {Name: "cv", Shares: 30, Users: []string{"bob", "carol"}},
		"nlp": {Name: "nlp", Parent: "ml", Shares: 1, Users: []string{"dave"}},
	}}
	use := func(acct, user string, s float64) structs.UsageRecord {
		return structs.UsageRecord{UsageKey: structs.UsageKey{Account: acct, User: user}, Usage: structs.Usage{GPUSeconds: s}}
	}
	// ml (and nlp below it) used 80% against 70 shares; cv 20% against 30.
	rows := FairTree(structs.FairShare{Accounts: tab, Usage: []structs.UsageRecord{
		use("ml", "alice", 600), use("nlp", "dave", 200), use("cv", "bob", 200)}})
	var order []string
	for _, r := range rows {
		order = append(order, r.Account+"/"+r.User)
	}
	want := []string{"cv/", "cv/carol", "cv/bob", "ml/", "nlp/", "nlp/dave", "ml/alice"}
	if !slices.Equal(order, want) {
		t.Fatalf("walk %v, want %v", order, want)
	}
	f := FairShareFactors(rows)
	if f[structs.UsageKey{Account: "cv", User: "carol"}] != 1 || f[structs.UsageKey{Account: "ml", User: "alice"}] != 0.25 {
		t.Fatalf("factors %v", f)
	}
	if lf := rows[0].LevelFS; math.Abs(lf-1.5) > 1e-9 {
		t.Fatalf("cv's level fair share %v, want 0.3/0.2 = 1.5", lf)
	}
}

func TestFairTree_PropertySharesRespectedInTheLongRun(t *testing.T) {
	// Accounts that always want more than the cluster holds: each hour
	// the cluster's GPUs go, one at a time, to the user ranked first,
	// and usage decays with a day's half-life. After weeks, each
	// account's GPU time over the last days is within a few percent of
	// its shares.
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(2, 4).Draw(t, "accounts")
		tab := &structs.AccountTable{Accounts: map[string]*structs.Account{}}
		var total float64
		for i := range n {
			name := fmt.Sprintf("a%d", i)
			sh := rapid.IntRange(1, 10).Draw(t, "shares") * 10
			tab.Accounts[name] = &structs.Account{Name: name, Shares: sh, Users: []string{"u"}}
			total += float64(sh)
		}
		usage := map[structs.UsageKey]float64{}
		got := map[string]float64{}
		const gpus, hours = 100, 24 * 28
		for h := range hours {
			for k := range usage {
				usage[k] *= structs.DecayFactor(time.Hour, 24*time.Hour)
			}
			for range gpus / 10 { // ten GPUs per placement
				fs := structs.FairShare{Accounts: tab}
				for k, u := range usage {
					fs.Usage = append(fs.Usage, structs.UsageRecord{UsageKey: k, Usage: structs.Usage{GPUSeconds: u}})
				}
				slices.SortFunc(fs.Usage, func(a, b structs.UsageRecord) int { return compareStrings(a.Account, b.Account) })
				top := FairTree(fs)[1] // the first account, then its user
				usage[structs.UsageKey{Account: top.Account, User: top.User}] += 10 * 3600
				if h >= hours-7*24 {
					got[top.Account] += 10
				}
			}
		}
		var all float64
		for _, v := range got {
			all += v
		}
		for name, a := range tab.Accounts {
			want := float64(a.Shares) / total
			if share := got[name] / all; math.Abs(share-want) > 0.03 {
				t.Fatalf("account %s: %.3f of the GPU time, want %.3f (shares %d of %v)", name, share, want, a.Shares, total)
			}
		}
	})
}

func TestMultifactor_OwnPriorityOrdersOnlyTheOwnersJobs(t *testing.T) {
	// Whatever --priority each job has, every owner holds the same
	// places in the queue as with none: --priority only swaps an owner's
	// own jobs among them.
	rapid.Check(t, func(t *rapid.T) {
		tab := &structs.AccountTable{Accounts: map[string]*structs.Account{
			"a": {Name: "a", Shares: 1, Users: []string{"u0", "u1", "u2"}}}}
		var usage []structs.UsageRecord
		for i := range 3 {
			usage = append(usage, structs.UsageRecord{UsageKey: structs.UsageKey{Account: "a", User: fmt.Sprintf("u%d", i)},
				Usage: structs.Usage{GPUSeconds: float64(1 + i*rapid.IntRange(0, 5).Draw(t, "use"))}})
		}
		m := NewMultifactor(structs.FairShare{Accounts: tab, Usage: usage}, nil)
		var plain, prioritized []*structs.Job
		for i := range rapid.IntRange(1, 30).Draw(t, "jobs") {
			j := job(fmt.Sprintf("j%02d", i), 1)
			j.Owner = fmt.Sprintf("u%d", rapid.IntRange(0, 2).Draw(t, "owner"))
			j.Spec.Account = "a"
			j.SubmittedAt = t0.Add(-time.Duration(rapid.IntRange(0, 600).Draw(t, "age")) * time.Minute)
			plain = append(plain, j)
			p := j.Copy()
			p.Spec.Priority = rapid.IntRange(-5, 5).Draw(t, "priority")
			prioritized = append(prioritized, p)
		}
		a, b := queueOrder(plain, t0, 0, m), queueOrder(prioritized, t0, 0, m)
		for i := range a {
			if a[i].Owner != b[i].Owner {
				t.Fatalf("place %d: %s's without --priority, %s's with", i, a[i].Owner, b[i].Owner)
			}
		}
		for i := 1; i < len(b); i++ {
			for k := range i {
				if b[k].Owner == b[i].Owner && b[k].Spec.Priority < b[i].Spec.Priority {
					t.Fatalf("%s's job of priority %d ahead of its job of priority %d", b[i].Owner, b[k].Spec.Priority, b[i].Spec.Priority)
				}
			}
		}
	})
}

func TestMultifactor_FactorsWeighUp(t *testing.T) {
	tab := &structs.AccountTable{
		Accounts: map[string]*structs.Account{"a": {Name: "a", Shares: 1, Users: []string{"u"}}},
		QoS:      map[string]*structs.QoS{"high": {Name: "high", Priority: 500}},
		Weights:  &structs.PriorityWeights{Age: 100, FairShare: 1000, JobSize: 80, QoS: 10, MaxAge: structs.Duration(10 * time.Hour)},
	}
	m := NewMultifactor(structs.FairShare{Accounts: tab}, []*structs.Node{gpuNode("n1", 8, "H100", 80)})
	j := job("j", 2)
	j.Owner, j.Spec.Account, j.Spec.QoS = "u", "a", "high"
	j.SubmittedAt = t0.Add(-5 * time.Hour)
	f := m.Factors(j, t0)
	want := Factors{Age: 0.5, FairShare: 1, JobSize: 0.25, QoS: 0.5, Priority: 50 + 1000 + 20 + 5}
	if f != want {
		t.Fatalf("factors %+v, want %+v", f, want)
	}
	j.Spec.Account = ""
	if f := m.Factors(j, t0); f.FairShare != 0 {
		t.Fatalf("a job outside every account has fair share %v, want 0", f.FairShare)
	}
}
