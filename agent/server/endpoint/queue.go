package endpoint

import (
	"fmt"
	"math"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/fsm"
	"github.com/skein-dev/skein/sched"
	"github.com/skein-dev/skein/structs"
)

// QueueState is what fair share's views read of the state (fsm.FSM).
type QueueState interface {
	State() *fsm.StateView
	FairShare() fsm.FairShare
}

// Queue answers fair share's views of the queue: the fair tree
// (sshare), the queue's order with each job's factors (sprio), and where
// one queued job stands. Each computes what a scheduling pass would,
// from this node's state at the time of the request.
type Queue struct {
	State QueueState
}

// Share is the fair tree: each account's and user's shares, usage and
// fair share, as a pass would rank them.
func (q Queue) Share() api.ShareInfo {
	fs := q.State.FairShare()
	info := api.ShareInfo{On: fs.Accounts.On(), ChargedAt: fs.At, Rows: []api.ShareRow{}}
	for _, row := range sched.FairTree(structs.FairShare{Accounts: fs.Accounts, Usage: fs.Usage}) {
		r := api.ShareRow{Account: row.Account, User: row.User, Depth: row.Depth, Shares: row.Shares, NormShares: row.NormShares,
			Usage: row.Usage, NormUsage: row.NormUsage, FairShare: row.FairShare, Rank: row.Rank}
		if !math.IsInf(row.LevelFS, 1) {
			lf := row.LevelFS
			r.LevelFS = &lf
		}
		info.Rows = append(info.Rows, r)
	}
	return info
}

// Priorities is the queue in the order a pass at at takes it, with each
// job's factors: the first limit jobs that keep (nil: all) says to.
// GET /v1/prio answers it, and the web UI shows it.
func (q Queue) Priorities(at time.Time, limit int, keep func(*api.JobPriority) bool) *api.PrioInfo {
	m, prios := priorities(q.State.State(), at)
	info := &api.PrioInfo{Total: len(prios), Jobs: []api.JobPriority{}}
	if m != nil {
		w := m.Weights
		info.Weights = &w
	}
	for i, p := range prios {
		if len(info.Jobs) == limit {
			break
		}
		if ap := apiPriority(p, i+1); keep == nil || keep(&ap) {
			info.Jobs = append(info.Jobs, ap)
		}
	}
	return info
}

// priorities orders the queue of view as a pass at now would.
func priorities(view *fsm.StateView, at time.Time) (*sched.Multifactor, []sched.JobPriority) {
	m := sched.NewMultifactor(view.FairShare(), view.Nodes)
	return m, sched.Priorities(m, view.Queued, at, 0)
}

func apiPriority(p sched.JobPriority, pos int) api.JobPriority {
	return api.JobPriority{JobID: p.JobID, Position: pos, Owner: p.Owner, Account: p.Account, QoS: p.QoS, Priority: p.Priority,
		Age: p.Age, FairShare: p.FairShare, JobSize: p.JobSize, QoSFactor: p.Factors.QoS, Own: p.Own}
}

// Place says where a queued job stands in the queue of a pass at at: its
// place, its factors, the job ahead of it and what puts that one first.
// nil when the job is not in the queue.
func (q Queue) Place(jobID string, at time.Time) *api.QueuePlace {
	m, prios := priorities(q.State.State(), at)
	for i, p := range prios {
		if p.JobID != jobID {
			continue
		}
		place := &api.QueuePlace{JobPriority: apiPriority(p, i+1), Total: len(prios)}
		if i > 0 {
			ahead := apiPriority(prios[i-1], i)
			place.Ahead = &ahead
			place.Behind = behind(m, prios[i-1], p)
		}
		return place
	}
	return nil
}

// behind says, in words, which factor puts ahead before me: the one
// whose weighted difference is largest, with both values.
func behind(m *sched.Multifactor, ahead, me sched.JobPriority) string {
	who := fmt.Sprintf("job %s (%s", structs.ShortID(ahead.JobID), ownerLabel(ahead.Owner))
	if ahead.Account != "" {
		who += " in " + ahead.Account
	}
	who += ")"
	if m == nil {
		if ahead.Priority > me.Priority {
			return fmt.Sprintf("behind %s: priority %d (its --priority %d plus a point per minute waited) against %d",
				who, ahead.Priority, ahead.Own, me.Priority)
		}
		return fmt.Sprintf("behind %s: equal priority %d, and it has waited longer", who, me.Priority)
	}
	if ahead.Owner == me.Owner && ahead.Own > me.Own {
		return fmt.Sprintf("behind %s: your own --priority %d against %d orders your jobs", who, ahead.Own, me.Own)
	}
	w := m.Weights
	best, text := 0.0, ""
	for _, f := range []struct {
		name   string
		weight int
		a, b   float64
	}{
		{"fair share", w.FairShare, ahead.FairShare, me.FairShare},
		{"QoS", w.QoS, ahead.Factors.QoS, me.Factors.QoS},
		{"age", w.Age, ahead.Age, me.Age},
		{"job size", w.JobSize, ahead.JobSize, me.JobSize},
	} {
		if d := float64(f.weight) * (f.a - f.b); d > best {
			best = d
			text = fmt.Sprintf("%s %.2f against %.2f (×%d: %.0f points)", f.name, f.a, f.b, f.weight, d)
		}
	}
	if text == "" {
		return fmt.Sprintf("behind %s: equal priority %d, and it has waited longer", who, me.Priority)
	}
	return fmt.Sprintf("behind %s: priority %d against %d, most of it %s", who, ahead.Priority, me.Priority, text)
}

func ownerLabel(owner string) string {
	if owner == "" {
		return `user ""`
	}
	return owner
}
