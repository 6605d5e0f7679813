package sched

import (
	"cmp"
	"maps"
	"math"
	"slices"

	"github.com/skein-dev/skein/structs"
)

// ShareRow is one line of the fair tree: an account, or a user within an
// account (User set), with its shares and usage as its level sees them.
type ShareRow struct {
	Account string `json:"account"`
	User    string `json:"user,omitempty"`
	// Depth is 0 for the accounts under the root.
	Depth int `json:"depth"`
	// Shares are its shares (a user has 1); NormShares its part of its
	// siblings' shares, 0 to 1.
	Shares     int     `json:"shares"`
	NormShares float64 `json:"norm_shares"`
	// Usage is its decayed use, its sub-accounts' and past members'
	// included; NormUsage its part of its siblings' GPU-seconds, 0 to 1.
	Usage     structs.Usage `json:"usage"`
	NormUsage float64       `json:"norm_usage"`
	// LevelFS is NormShares / NormUsage: above 1 it got less than its
	// share, below 1 more. Without usage it is infinite (and left out of
	// JSON, which has no infinity).
	LevelFS float64 `json:"-"`
	// FairShare, on a user row, is the fair-share factor of its jobs in
	// this account, 0 to 1; Rank its place among all users (1 first).
	FairShare float64 `json:"fair_share,omitempty"`
	Rank      int     `json:"rank,omitempty"`
}

// FairTree ranks every user of every account by Slurm's fair-tree
// algorithm and returns the tree in the order it was walked: at each
// level, the siblings (sub-accounts, and an account's users, one share
// each) go by level fair share, NormShares / NormUsage, highest first;
// the walk goes depth first, and users get ranks in the order it meets
// them. A user's factor is (N - rank + 1) / N for N users, so the first
// has 1 and the last 1/N; users of one account with equal level fair
// share share a rank. Ties between siblings go to more shares, then the
// name. Why fair tree rather than Slurm's classic 2^(-usage/shares): an
// account that used less than its share is ahead of one that used more,
// whatever their users did, at every level, and a deep tree does not
// dilute a factor toward 0 (sched/DESIGN.md, "Fair share").
func FairTree(fs structs.FairShare) []ShareRow {
	t := fs.Accounts
	if !t.On() {
		return nil
	}
	byUser := make(map[structs.UsageKey]structs.Usage, len(fs.Usage))
	own := map[string]structs.Usage{} // every record of an account, past members too
	for _, r := range fs.Usage {
		byUser[r.UsageKey] = r.Usage
		own[r.Account] = addUsage(own[r.Account], r.Usage)
	}
	children := map[string][]string{}
	for _, name := range slices.Sorted(maps.Keys(t.Accounts)) {
		p := t.Accounts[name].Parent
		children[p] = append(children[p], name)
	}
	subtree := map[string]structs.Usage{}
	var total func(name string) structs.Usage
	total = func(name string) structs.Usage {
		u := own[name]
		for _, c := range children[name] {
			u = addUsage(u, total(c))
		}
		subtree[name] = u
		return u
	}
	for _, c := range children[""] {
		total(c)
	}

	var rows []ShareRow
	var walk func(parent string, depth int)
	walk = func(parent string, depth int) {
		var level []ShareRow
		for _, c := range children[parent] {
			level = append(level, ShareRow{Account: c, Depth: depth, Shares: t.Accounts[c].Shares, Usage: subtree[c]})
		}
		if parent != "" {
			for _, u := range t.Accounts[parent].Users {
				level = append(level, ShareRow{Account: parent, User: u, Depth: depth, Shares: 1,
					Usage: byUser[structs.UsageKey{Account: parent, User: u}]})
			}
		}
		var shares, used float64
		for _, r := range level {
			shares += float64(r.Shares)
			used += r.Usage.GPUSeconds
		}
		for i := range level {
			r := &level[i]
			r.NormShares = float64(r.Shares) / shares
			if used > 0 {
				r.NormUsage = r.Usage.GPUSeconds / used
			}
			r.LevelFS = math.Inf(1)
			if r.NormUsage > 0 {
				r.LevelFS = r.NormShares / r.NormUsage
			}
		}
		slices.SortStableFunc(level, func(a, b ShareRow) int {
			return cmp.Or(cmp.Compare(b.LevelFS, a.LevelFS), cmp.Compare(b.Shares, a.Shares),
				cmp.Compare(a.Account, b.Account), cmp.Compare(a.User, b.User))
		})
		for _, r := range level {
			rows = append(rows, r)
			if r.User == "" {
				walk(r.Account, depth+1)
			}
		}
	}
	walk("", 0)

	users := 0
	for _, r := range rows {
		if r.User != "" {
			users++
		}
	}
	seen := 0
	var prev *ShareRow
	for i := range rows {
		r := &rows[i]
		if r.User == "" {
			continue
		}
		seen++
		r.Rank = seen
		if prev != nil && prev.Account == r.Account && prev.LevelFS == r.LevelFS {
			r.Rank = prev.Rank // a tie within one account
		}
		r.FairShare = float64(users-r.Rank+1) / float64(users)
		prev = r
	}
	return rows
}

func addUsage(a, b structs.Usage) structs.Usage {
	return structs.Usage{GPUSeconds: a.GPUSeconds + b.GPUSeconds, CPUSeconds: a.CPUSeconds + b.CPUSeconds,
		MemMiBSeconds: a.MemMiBSeconds + b.MemMiBSeconds}
}

// FairShareFactors are the fair-share factors of the tree's users by
// account and user.
func FairShareFactors(rows []ShareRow) map[structs.UsageKey]float64 {
	out := make(map[structs.UsageKey]float64)
	for _, r := range rows {
		if r.User != "" {
			out[structs.UsageKey{Account: r.Account, User: r.User}] = r.FairShare
		}
	}
	return out
}
