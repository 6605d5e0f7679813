package fsm

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/hashicorp/raft"

	"github.com/skein-dev/skein/structs"
)

// ErrAccount is a refusal of the account tree or QoS: a job's account
// or QoS that does not exist or is not the user's.
var ErrAccount = fmt.Errorf("%w", ErrInvalidRequest)

// applyAccountSet changes the account tree or the priority weights and
// returns a copy of the whole table. A refused request changes nothing.
func (s *state) applyAccountSet(l *raft.Log) any {
	var req structs.AccountRequest
	decode(l, &req)
	next, err := s.accounts.Apply(&req)
	if err != nil {
		return fmt.Errorf("account: %w", err)
	}
	s.setAccounts(next)
	if req.Op == structs.AccountDelete {
		for k := range s.usage {
			if k.Account == req.Name {
				delete(s.usage, k)
			}
		}
	}
	return s.accountTable()
}

// applyQoSSet creates, changes or deletes a QoS and returns a copy of the
// whole table.
func (s *state) applyQoSSet(l *raft.Log) any {
	var req structs.QoSRequest
	decode(l, &req)
	next, err := s.accounts.ApplyQoS(&req)
	if err != nil {
		return fmt.Errorf("qos: %w", err)
	}
	s.setAccounts(next)
	return s.accountTable()
}

func (s *state) setAccounts(t *structs.AccountTable) {
	if t.IsZero() {
		t = nil
	}
	s.accounts = t
}

// accountTable returns a copy of the table, never nil.
func (s *state) accountTable() *structs.AccountTable {
	if s.accounts == nil {
		return &structs.AccountTable{}
	}
	return s.accounts.Copy()
}

// resolveJobAccount stamps into spec the account a job of owner is
// charged to, and its QoS's wall time when it has no time limit, or
// refuses an account or QoS the owner may not use, or a time limit past
// the QoS's.
func (s *state) resolveJobAccount(owner string, spec *structs.JobSpec) error {
	acct, err := s.accounts.ResolveAccount(owner, spec.Account, s.acl != nil)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrAccount, err)
	}
	spec.Account = acct
	q, err := s.accounts.ResolveQoS(spec.QoS)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrAccount, err)
	}
	if q != nil && q.MaxWall > 0 {
		switch {
		case spec.TimeLimit == 0:
			spec.TimeLimit = q.MaxWall
		case spec.TimeLimit > q.MaxWall:
			return fmt.Errorf("%w: %w", ErrAccount, &structs.FieldError{Field: "time_limit",
				Msg: fmt.Sprintf("%s is past QoS %s's wall time %s", time.Duration(spec.TimeLimit), q.Name, time.Duration(q.MaxWall))})
		}
	}
	return nil
}

// applyUsageCharge decays the recorded usage to req.At and charges every
// running allocation's use since the last charge (or its start). An
// entry not after the last charge changes nothing, so a charge replayed
// or stamped by a leader whose clock is behind counts nothing twice.
func (s *state) applyUsageCharge(l *raft.Log) any {
	var req structs.UsageChargeRequest
	decode(l, &req)
	if !req.At.After(s.usageAt) {
		return nil
	}
	if !s.usageAt.IsZero() {
		f := structs.DecayFactor(req.At.Sub(s.usageAt), time.Duration(req.HalfLife))
		for _, u := range s.usage {
			u.GPUSeconds = float64(u.GPUSeconds * f)
			u.CPUSeconds = float64(u.CPUSeconds * f)
			u.MemMiBSeconds = float64(u.MemMiBSeconds * f)
		}
	}
	// Each key's charge is summed in integers (milliseconds), whose sum
	// does not depend on the order of the map walk, then added once.
	acc := map[structs.UsageKey]*[3]int64{}
	for _, a := range s.live {
		s.chargeInto(acc, a, req.At)
	}
	s.addCharges(acc)
	s.usageAt = req.At
	s.pruneUsage()
	return nil
}

// chargeAllocEnd charges an allocation that just ended for its use since
// the last charge, up to its end.
// Charging begins with the first charge entry, which the leader writes
// once the cluster has accounts.
func (s *state) chargeAllocEnd(a *structs.Allocation) {
	if a.FinishedAt.IsZero() || s.usageAt.IsZero() {
		return
	}
	acc := map[structs.UsageKey]*[3]int64{}
	s.chargeInto(acc, a, a.FinishedAt)
	s.addCharges(acc)
}

// chargeInto adds to acc what a started allocation used from the later
// of its start and the last charge until to, in milliseconds of GPUs,
// CPUs and MiB.
func (s *state) chargeInto(acc map[structs.UsageKey]*[3]int64, a *structs.Allocation, to time.Time) {
	if a.StartedAt.IsZero() {
		return
	}
	from := a.StartedAt
	if s.usageAt.After(from) {
		from = s.usageAt
	}
	ms := to.Sub(from).Milliseconds()
	j, ok := s.jobs[a.JobID]
	if ms <= 0 || !ok {
		return
	}
	k := structs.UsageKey{Account: j.Spec.Account, User: j.Owner}
	c := acc[k]
	if c == nil {
		c = &[3]int64{}
		acc[k] = c
	}
	c[0] += ms * int64(len(a.GPUs))
	c[1] += ms * int64(a.CPUs)
	c[2] += ms * a.MemoryMiB
}

func (s *state) addCharges(acc map[structs.UsageKey]*[3]int64) {
	for k, c := range acc {
		u := s.usage[k]
		if u == nil {
			u = &structs.Usage{}
			s.usage[k] = u
		}
		u.GPUSeconds = float64(u.GPUSeconds + float64(c[0])/1000)
		u.CPUSeconds = float64(u.CPUSeconds + float64(c[1])/1000)
		u.MemMiBSeconds = float64(u.MemMiBSeconds + float64(c[2])/1000)
	}
}

// usageFloor is the usage below which a record is forgotten: less than a
// millisecond of one GPU, CPU and MiB left after decay.
const usageFloor = 1e-3

// pruneUsage forgets the records that decayed to nothing or whose
// account is gone (its jobs may still run), and past MaxUsageEntries the
// smallest, so the usage table stays bounded.
func (s *state) pruneUsage() {
	for k, u := range s.usage {
		gone := k.Account != "" && (s.accounts == nil || s.accounts.Accounts[k.Account] == nil)
		if gone || (u.GPUSeconds < usageFloor && u.CPUSeconds < usageFloor && u.MemMiBSeconds < usageFloor) {
			delete(s.usage, k)
		}
	}
	if len(s.usage) <= structs.MaxUsageEntries {
		return
	}
	keys := slices.SortedFunc(maps.Keys(s.usage), func(a, b structs.UsageKey) int {
		ua, ub := s.usage[a], s.usage[b]
		return cmp.Or(cmp.Compare(ua.GPUSeconds, ub.GPUSeconds), cmp.Compare(ua.CPUSeconds, ub.CPUSeconds),
			cmp.Compare(a.Account, b.Account), cmp.Compare(a.User, b.User))
	})
	for _, k := range keys[:len(keys)-structs.MaxUsageEntries] {
		delete(s.usage, k)
	}
}

// usageRecords returns the usage records by account, then user.
func (s *state) usageRecords() []structs.UsageRecord {
	out := make([]structs.UsageRecord, 0, len(s.usage))
	for k, u := range s.usage {
		out = append(out, structs.UsageRecord{UsageKey: k, Usage: *u})
	}
	slices.SortFunc(out, func(a, b structs.UsageRecord) int {
		return cmp.Or(cmp.Compare(a.Account, b.Account), cmp.Compare(a.User, b.User))
	})
	return out
}

// FairShare is the fair-share state at one index: the account table (a
// copy, never nil), the usage records by account then user, and when
// usage was last charged.
type FairShare struct {
	Accounts *structs.AccountTable
	Usage    []structs.UsageRecord
	At       time.Time
}

// FairShare returns a copy of the fair-share state.
func (f *FSM) FairShare() FairShare {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return FairShare{Accounts: f.st.accountTable(), Usage: f.st.usageRecords(), At: f.st.usageAt}
}

// UsageClock reports whether usage is charged (the cluster has accounts
// or QoS) and when it was last charged (zero: never).
func (f *FSM) UsageClock() (on bool, last time.Time) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.accounts.On(), f.st.usageAt
}

// CheckSubmitAccount says whether a job of owner may use the account and
// QoS its spec asks for, as Apply will; it changes nothing.
func (f *FSM) CheckSubmitAccount(owner string, spec structs.JobSpec) error {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.resolveJobAccount(owner, &spec)
}

// restoreFairShare adds a fair-share record to a state being restored:
// one valid account table, one usage clock, then usage records in order,
// each once, none negative and no more than MaxUsageEntries.
func (s *state) restoreFairShare(rec *record) error {
	switch rec.Type {
	case recordAccounts:
		switch {
		case rec.Accounts == nil:
			return errors.New("accounts record without accounts")
		case s.accounts != nil:
			return errors.New("accounts twice")
		}
		if err := rec.Accounts.ValidateTable(); err != nil {
			return fmt.Errorf("accounts: %w", err)
		}
		s.setAccounts(rec.Accounts)
	case recordUsageClock:
		switch {
		case rec.UsageClock == nil:
			return errors.New("usage clock record without a time")
		case s.usageClockSeen:
			return errors.New("usage clock twice")
		}
		s.usageClockSeen = true
		s.usageAt = rec.UsageClock.At
	case recordUsage:
		u := rec.Usage
		switch {
		case u == nil:
			return errors.New("usage record without usage")
		case !s.usageClockSeen:
			return errors.New("usage record before the usage clock")
		case s.usage[u.UsageKey] != nil:
			return fmt.Errorf("usage of %s in account %q twice", ownerName(u.User), u.Account)
		case len(s.usage) >= structs.MaxUsageEntries:
			return fmt.Errorf("more than %d usage records", structs.MaxUsageEntries)
		case !(u.GPUSeconds >= 0 && u.CPUSeconds >= 0 && u.MemMiBSeconds >= 0):
			return fmt.Errorf("usage of %s in account %q is negative", ownerName(u.User), u.Account)
		}
		use := u.Usage
		s.usage[u.UsageKey] = &use
	}
	return nil
}

// AccountCount is what one account's jobs hold and wait for.
type AccountCount struct {
	GPUs    int // held by live allocations
	Running int // jobs with a live allocation
	Queued  int
}

// AccountCounts counts, per account (a job's Spec.Account, "" for none),
// the GPUs live allocations hold, the jobs that hold them and the queued
// jobs. Accounts with nothing are absent.
func (f *FSM) AccountCounts() map[string]AccountCount {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := map[string]AccountCount{}
	running := map[string]bool{}
	for _, a := range f.st.live {
		j, ok := f.st.jobs[a.JobID]
		if !ok {
			continue
		}
		c := out[j.Spec.Account]
		c.GPUs += len(a.GPUs)
		if !running[j.ID] {
			running[j.ID] = true
			c.Running++
		}
		out[j.Spec.Account] = c
	}
	for _, j := range f.st.queued {
		c := out[j.Spec.Account]
		c.Queued++
		out[j.Spec.Account] = c
	}
	return out
}
