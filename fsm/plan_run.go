package fsm

import (
	"cmp"
	"fmt"
	"time"

	"github.com/skein-dev/skein/structs"
)

// reasonPlanCancel is the reason of a plan's cancel that gives none.
const reasonPlanCancel = "cancelled by the scheduler"

// runPlan checks the parts of a plan in the order Apply takes them:
// cancels (never of a replica its service wants), then preemptions, then
// placements. Unless dry, each part that passes is applied before the
// next is checked, so a part sees the parts before it. Refused parts are
// returned, each with its job and reason.
func (s *state) runPlan(p *structs.Plan, at time.Time, index uint64, dry bool) *structs.PlanResult {
	res := &structs.PlanResult{}
	for _, c := range p.Cancels {
		j, reason := s.queuedJob(c.JobID)
		if reason == "" && s.wantsReplica(j) {
			reason = fmt.Sprintf("job is a replica of service %s, which still wants it", j.Service)
		}
		if reason != "" {
			res.RejectedCancels = append(res.RejectedCancels, structs.JobBlocked{JobID: c.JobID, Reason: reason})
			continue
		}
		if !dry {
			// As a user's cancel of a queued job ends it, with the plan's reason.
			s.finishJob(j, structs.JobCancelled, cmp.Or(c.Reason, reasonPlanCancel), at, index)
		}
	}
	for _, pr := range p.Preemptions {
		forJob, err := s.checkPreemption(pr.For, pr.Victims, pr.Attempts)
		if err != nil {
			for _, id := range pr.Victims {
				res.RejectedVictims = append(res.RejectedVictims, structs.JobBlocked{JobID: id, Reason: err.Error()})
			}
			continue
		}
		reason := preemptReason(forJob, "")
		for i, id := range pr.Victims {
			if err := s.preempt(id, attemptOf(pr.Attempts, i), forJob, reason, at, index, dry); err != nil {
				res.RejectedVictims = append(res.RejectedVictims, structs.JobBlocked{JobID: id, Reason: err.Error()})
			}
		}
	}
	for i := range p.Placements {
		pl := &p.Placements[i]
		if reason := s.checkPlacement(pl); reason != "" {
			res.Rejected = append(res.Rejected, structs.JobBlocked{JobID: pl.JobID, Reason: reason})
			continue
		}
		if !dry {
			s.place(pl, at, index)
		}
	}
	return res
}

// queuedJob returns a job that waits in the queue, or says why the job is
// not there: the scheduler only places and cancels such jobs.
func (s *state) queuedJob(id string) (*structs.Job, string) {
	j, ok := s.jobs[id]
	switch {
	case !ok:
		return nil, "job not found"
	case j.State != structs.JobQueued:
		return nil, fmt.Sprintf("job is %s, not queued", j.State)
	case j.StopRequested:
		return nil, "job is being cancelled"
	}
	return j, ""
}

// CheckPlan says which parts of a plan Apply would refuse on the current
// committed state, and why, without changing anything: the leader calls
// it just before committing, drops what is refused and plans again. It
// runs Apply's own checks (runPlan), each part against committed state
// alone, where Apply also sees the parts of the same entry before it.
// That is enough for a plan from one scheduler pass, which never hands a
// GPU out twice nor names one job in two parts; for any plan, every part
// CheckPlan refuses Apply refuses too, since earlier parts only take
// resources and end or mark jobs, never free or requeue them.
func (f *FSM) CheckPlan(p structs.Plan) *structs.PlanResult {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.runPlan(&p, time.Time{}, 0, true)
}
