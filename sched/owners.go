package sched

import (
	"fmt"

	"github.com/skein-dev/skein/structs"
)

// OwnerGPUs is what a pass knows of the owners' running-GPU limits
// (structs.Limits.MaxGPUs): the GPUs the live allocations of each owner's
// jobs hold, and the most they may hold.
type OwnerGPUs struct {
	// Limit is each owner's limit; an owner absent has none.
	Limit map[string]int
	// InUse is what each owner's jobs hold now; an owner absent holds
	// none.
	InUse map[string]int
}

// ownerGPUsOf asks the view about the owners of jobs, and keeps those
// that have a limit.
func ownerGPUsOf(v View, jobs []*structs.Job) OwnerGPUs {
	var o OwnerGPUs
	asked := map[string]bool{}
	for _, j := range jobs {
		if asked[j.Owner] {
			continue
		}
		asked[j.Owner] = true
		limit, inUse := v.GPULimit(j.Owner)
		if limit == structs.Unlimited {
			continue
		}
		if o.Limit == nil {
			o.Limit, o.InUse = map[string]int{}, map[string]int{}
		}
		o.Limit[j.Owner], o.InUse[j.Owner] = limit, inUse
	}
	return o
}

// ownerBudget counts, through one pass, the GPUs each owner with a limit
// holds, the placements of the pass included. A nil budget limits nobody.
type ownerBudget struct {
	limit, used map[string]int
}

func newOwnerBudget(o OwnerGPUs) *ownerBudget {
	if len(o.Limit) == 0 {
		return nil
	}
	b := &ownerBudget{limit: o.Limit, used: make(map[string]int, len(o.Limit))}
	for owner := range o.Limit {
		b.used[owner] = o.InUse[owner]
	}
	return b
}

// jobGPUs is how many GPUs a job holds when it runs: every rank's.
func jobGPUs(j *structs.Job) int {
	return j.Spec.GPUs * max(j.Spec.Nodes, 1)
}

// refuse says why placing j now would take its owner past the limit, or
// "" when it would not.
func (b *ownerBudget) refuse(j *structs.Job) string {
	if b == nil {
		return ""
	}
	limit, ok := b.limit[j.Owner]
	need := jobGPUs(j)
	switch {
	case !ok || need == 0 || b.used[j.Owner]+need <= limit:
		return ""
	case need > limit:
		return fmt.Sprintf("waiting: %s is less than the %d GPUs the job needs", gpuLimitOf(j.Owner, limit), need)
	}
	return fmt.Sprintf("waiting: %s is in use", gpuLimitOf(j.Owner, limit))
}

// charge counts j's GPUs to its owner.
func (b *ownerBudget) charge(j *structs.Job) {
	if b == nil {
		return
	}
	if _, ok := b.limit[j.Owner]; ok {
		b.used[j.Owner] += jobGPUs(j)
	}
}

// gpuLimitOf names an owner's GPU limit in a blocked reason.
func gpuLimitOf(owner string, limit int) string {
	if owner == "" {
		return fmt.Sprintf("the GPU limit (%d) of jobs without an owner", limit)
	}
	return fmt.Sprintf("%s's GPU limit (%d)", owner, limit)
}
