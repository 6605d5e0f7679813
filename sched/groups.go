package sched

import (
	"fmt"

	"github.com/skein-dev/skein/structs"
)

// groupBudget keeps, through one pass, the limits of accounts and QoS:
// the GPUs and running jobs of an account (its sub-accounts' included,
// as Slurm's GrpTRES and GrpJobs), and per QoS the GPUs of one user and
// of one account and the running jobs of one user. Like the owners'
// GPU limits they hold jobs back, with the reason, and never refuse a
// submit or stop anything. A nil budget limits nothing.
type groupBudget struct {
	t    *structs.AccountTable
	used map[groupKey]int
}

type groupKind uint8

const (
	acctGPUs groupKind = iota + 1
	acctJobs
	qosUserGPUs
	qosAcctGPUs
	qosUserJobs
)

type groupKey struct {
	kind      groupKind
	qos, name string
}

// newGroupBudget counts what the running jobs hold against the limits of
// t; nil when t sets none.
func newGroupBudget(t *structs.AccountTable, running []*structs.Job) *groupBudget {
	if !hasGroupLimits(t) {
		return nil
	}
	b := &groupBudget{t: t, used: map[groupKey]int{}}
	for _, j := range running {
		if j.State == structs.JobRunning {
			b.charge(j)
		}
	}
	return b
}

func hasGroupLimits(t *structs.AccountTable) bool {
	if t == nil {
		return false
	}
	for _, a := range t.Accounts {
		if a.MaxGPUs != nil || a.MaxJobs != nil {
			return true
		}
	}
	for _, q := range t.QoS {
		if q.MaxGPUsPerUser != nil || q.MaxGPUsPerAccount != nil || q.MaxJobsPerUser != nil {
			return true
		}
	}
	return false
}

// each calls f with every limit j counts against, the amount it adds,
// the limit, and the words for it in a reason.
func (b *groupBudget) each(j *structs.Job, f func(k groupKey, add, limit int, what string) bool) {
	gpus := jobGPUs(j)
	depth := 0
	for name := j.Spec.Account; name != "" && depth <= structs.MaxAccountDepth; depth++ {
		a := b.t.Accounts[name]
		if a == nil {
			break
		}
		if a.MaxGPUs != nil && gpus > 0 && !f(groupKey{acctGPUs, "", name}, gpus, *a.MaxGPUs, fmt.Sprintf("account %s's GPU limit (%d)", name, *a.MaxGPUs)) {
			return
		}
		if a.MaxJobs != nil && !f(groupKey{acctJobs, "", name}, 1, *a.MaxJobs, fmt.Sprintf("account %s's running-jobs limit (%d)", name, *a.MaxJobs)) {
			return
		}
		name = a.Parent
	}
	q := b.t.QoSNamed(j.Spec.QoS)
	if q == nil {
		return
	}
	if q.MaxGPUsPerUser != nil && gpus > 0 && !f(groupKey{qosUserGPUs, q.Name, j.Owner}, gpus, *q.MaxGPUsPerUser,
		fmt.Sprintf("QoS %s's GPU limit per user (%d)", q.Name, *q.MaxGPUsPerUser)) {
		return
	}
	if q.MaxGPUsPerAccount != nil && gpus > 0 && !f(groupKey{qosAcctGPUs, q.Name, j.Spec.Account}, gpus, *q.MaxGPUsPerAccount,
		fmt.Sprintf("QoS %s's GPU limit per account (%d)", q.Name, *q.MaxGPUsPerAccount)) {
		return
	}
	if q.MaxJobsPerUser != nil {
		f(groupKey{qosUserJobs, q.Name, j.Owner}, 1, *q.MaxJobsPerUser,
			fmt.Sprintf("QoS %s's running-jobs limit per user (%d)", q.Name, *q.MaxJobsPerUser))
	}
}

// refuse says why placing j now would pass a limit, or "" when it would
// not.
func (b *groupBudget) refuse(j *structs.Job) string {
	if b == nil {
		return ""
	}
	reason := ""
	b.each(j, func(k groupKey, add, limit int, what string) bool {
		switch {
		case limit == structs.Unlimited || b.used[k]+add <= limit:
			return true
		case add > limit:
			reason = fmt.Sprintf("waiting: %s is less than the %d the job needs", what, add)
		default:
			reason = fmt.Sprintf("waiting: %s is in use", what)
		}
		return false
	})
	return reason
}

// charge counts j against its limits.
func (b *groupBudget) charge(j *structs.Job) {
	if b == nil {
		return
	}
	b.each(j, func(k groupKey, add, _ int, _ string) bool {
		b.used[k] += add
		return true
	})
}

// placedGroups is a copy of b with the plan's placements charged.
func placedGroups(b *groupBudget, plan *structs.Plan, jobs map[string]*structs.Job) *groupBudget {
	if b == nil {
		return nil
	}
	c := &groupBudget{t: b.t, used: make(map[groupKey]int, len(b.used))}
	for k, v := range b.used {
		c.used[k] = v
	}
	for _, pl := range plan.Placements {
		if j := jobs[pl.JobID]; j != nil {
			c.charge(j)
		}
	}
	return c
}
