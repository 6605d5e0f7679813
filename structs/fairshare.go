package structs

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"time"
)

// Fair share: accounts in a tree, each with shares of its parent's part
// of the cluster, users as members of accounts, named QoS, the weights of
// the multifactor priority, and the decayed usage charged to accounts and
// users from their allocations. All of it is replicated state: admins
// change it through Raft, and the scheduler reads it (sched/fairshare.go).
const (
	// MaxAccounts bounds the accounts of a cluster.
	MaxAccounts = 1000
	// MaxAccountMembers bounds the members of all accounts together.
	MaxAccountMembers = 20000
	// MaxQoS bounds the named QoS of a cluster.
	MaxQoS = 100
	// MaxShares is the most shares one account may have.
	MaxShares = 1 << 20
	// MaxQoSPriority is the highest priority a QoS may have.
	MaxQoSPriority = 1000
	// MaxWeight is the largest weight of a priority factor.
	MaxWeight = 1 << 20
	// MaxAccountDepth bounds how deep the account tree may grow.
	MaxAccountDepth = 16
	// MaxUsageEntries bounds the usage records (one per account and user
	// that ran something) the state keeps; past it the smallest go.
	MaxUsageEntries = 50000
	// MaxQoSWall is the longest MaxWall a QoS may set.
	MaxQoSWall = Duration(365 * 24 * time.Hour)
	// DefaultUsageHalfLife is how long it takes recorded usage to count
	// for half as much, when the leader is given no other.
	DefaultUsageHalfLife = 7 * 24 * time.Hour
)

// Account is a node of the account tree. Its users' jobs and its
// sub-accounts' share what its Shares earn it among its siblings.
type Account struct {
	Name string `json:"name"`
	// Parent is the account above it; "" is the root.
	Parent string `json:"parent,omitempty"`
	// Shares is its part among its siblings: 70 and 30 split their
	// parent's part 70/30.
	Shares int `json:"shares"`
	// Users are its members, sorted. A user's first account is its
	// default (AccountTable.Defaults).
	Users []string `json:"users,omitempty"`
	// MaxGPUs and MaxJobs bound what the running jobs of the account
	// hold together: GPUs and jobs (Slurm's GrpTRES=gres/gpu and
	// GrpJobs). nil is no limit.
	MaxGPUs *int `json:"max_gpus,omitempty"`
	MaxJobs *int `json:"max_jobs,omitempty"`
}

// QoS is a named quality of service a job asks for with --qos: a
// priority, limits and which other QoS its jobs may preempt.
type QoS struct {
	Name string `json:"name"`
	// Priority, 0 to MaxQoSPriority, is the QoS factor of its jobs'
	// priority (Priority / MaxQoSPriority, times the QoS weight).
	Priority int `json:"priority,omitempty"`
	// MaxGPUsPerUser and MaxGPUsPerAccount bound the GPUs the running
	// jobs of one user, or one account, of this QoS hold;
	// MaxJobsPerUser the running jobs of one user of this QoS. nil is
	// no limit.
	MaxGPUsPerUser    *int `json:"max_gpus_per_user,omitempty"`
	MaxGPUsPerAccount *int `json:"max_gpus_per_account,omitempty"`
	MaxJobsPerUser    *int `json:"max_jobs_per_user,omitempty"`
	// MaxWall is the longest time limit a job of this QoS may have; a
	// job without one gets it. 0 is no bound.
	MaxWall Duration `json:"max_wall,omitempty"`
	// Preempt names the QoS whose running jobs the jobs of this one may
	// stop when they do not fit, sorted.
	Preempt []string `json:"preempt,omitempty"`
}

// PriorityWeights weigh the factors of a job's priority, each factor
// being between 0 and 1 (Slurm's PriorityWeight*). MaxAge is the wait
// at which the age factor reaches 1.
type PriorityWeights struct {
	Age       int      `json:"age"`
	FairShare int      `json:"fair_share"`
	JobSize   int      `json:"job_size"`
	QoS       int      `json:"qos"`
	MaxAge    Duration `json:"max_age"`
}

// DefaultPriorityWeights are the weights until an admin sets others: fair
// share first, then QoS, then age (a week's wait is worth a tenth of the
// fair-share range), job size not counted.
var DefaultPriorityWeights = PriorityWeights{
	Age: 1000, FairShare: 10000, JobSize: 0, QoS: 2000, MaxAge: Duration(7 * 24 * time.Hour),
}

// Validate checks the weights.
func (w PriorityWeights) Validate() error {
	for _, f := range []struct {
		name string
		v    int
	}{{"age", w.Age}, {"fair_share", w.FairShare}, {"job_size", w.JobSize}, {"qos", w.QoS}} {
		if f.v < 0 || f.v > MaxWeight {
			return fieldErr(f.name, "%d is out of range 0..%d", f.v, MaxWeight)
		}
	}
	if w.MaxAge < Duration(time.Minute) || w.MaxAge > Duration(365*24*time.Hour) {
		return fieldErr("max_age", "%s is out of range 1m..8760h", time.Duration(w.MaxAge))
	}
	return nil
}

// AccountTable is the replicated fair-share configuration: accounts by
// name, QoS by name, each user's default account and the weights (nil:
// DefaultPriorityWeights). The zero value holds nothing: fair share is
// off until the first account exists.
type AccountTable struct {
	Accounts map[string]*Account `json:"accounts,omitempty"`
	QoS      map[string]*QoS     `json:"qos,omitempty"`
	Defaults map[string]string   `json:"defaults,omitempty"`
	Weights  *PriorityWeights    `json:"weights,omitempty"`
}

// On reports whether the multifactor priority orders the queue and usage
// is charged: once an account or a QoS exists.
func (t *AccountTable) On() bool { return t != nil && (len(t.Accounts) > 0 || len(t.QoS) > 0) }

// PriorityWeights returns the weights in force.
func (t *AccountTable) PriorityWeights() PriorityWeights {
	if t == nil || t.Weights == nil {
		return DefaultPriorityWeights
	}
	return *t.Weights
}

// Member reports whether user is a member of the account.
func (t *AccountTable) Member(account, user string) bool {
	a := t.account(account)
	if a == nil {
		return false
	}
	_, ok := slices.BinarySearch(a.Users, user)
	return ok
}

func (t *AccountTable) account(name string) *Account {
	if t == nil {
		return nil
	}
	return t.Accounts[name]
}

// Account returns a copy of the named account, or nil.
func (t *AccountTable) Account(name string) *Account { return t.account(name).Copy() }

// QoSNamed returns the named QoS (not a copy), or nil.
func (t *AccountTable) QoSNamed(name string) *QoS {
	if t == nil {
		return nil
	}
	return t.QoS[name]
}

// Copy returns a deep copy of the account.
func (a *Account) Copy() *Account {
	if a == nil {
		return nil
	}
	c := *a
	c.Users = slices.Clone(a.Users)
	c.MaxGPUs, c.MaxJobs = cloneInt(a.MaxGPUs), cloneInt(a.MaxJobs)
	return &c
}

// Copy returns a deep copy of the QoS.
func (q *QoS) Copy() *QoS {
	if q == nil {
		return nil
	}
	c := *q
	c.Preempt = slices.Clone(q.Preempt)
	c.MaxGPUsPerUser, c.MaxGPUsPerAccount, c.MaxJobsPerUser =
		cloneInt(q.MaxGPUsPerUser), cloneInt(q.MaxGPUsPerAccount), cloneInt(q.MaxJobsPerUser)
	return &c
}

// Copy returns a deep copy of the table.
func (t *AccountTable) Copy() *AccountTable {
	if t == nil {
		return nil
	}
	c := &AccountTable{Defaults: maps.Clone(t.Defaults)}
	if t.Accounts != nil {
		c.Accounts = make(map[string]*Account, len(t.Accounts))
		for k, a := range t.Accounts {
			c.Accounts[k] = a.Copy()
		}
	}
	if t.QoS != nil {
		c.QoS = make(map[string]*QoS, len(t.QoS))
		for k, q := range t.QoS {
			c.QoS[k] = q.Copy()
		}
	}
	if t.Weights != nil {
		w := *t.Weights
		c.Weights = &w
	}
	return c
}

// IsZero reports whether the table holds nothing.
func (t *AccountTable) IsZero() bool {
	return t == nil || (len(t.Accounts) == 0 && len(t.QoS) == 0 && t.Weights == nil)
}

var accountName = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]*$`)

// MaxAccountNameLen bounds the name of an account or QoS.
const MaxAccountNameLen = 64

// ValidateAccountName checks the name of an account or a QoS (field names
// it in the error).
func ValidateAccountName(field, name string) error {
	switch {
	case name == "":
		return fieldErr(field, "empty: give a name")
	case len(name) > MaxAccountNameLen:
		return fieldErr(field, "%d bytes; at most %d", len(name), MaxAccountNameLen)
	case !accountName.MatchString(name):
		return fieldErr(field, "%q: use lower-case letters, digits and _ . - (not first)", name)
	}
	return nil
}

// Account operations of an AccountRequest.
const (
	AccountCreate     = "create"
	AccountUpdate     = "update"
	AccountDelete     = "delete"
	AccountAddUser    = "add-user"
	AccountRemoveUser = "remove-user"
	// AccountSetWeights sets the priority weights (Weights).
	AccountSetWeights = "set-weights"
)

// AccountRequest changes the account tree (message AccountSetType):
// create an account (Name, Parent, Shares, limits), update its shares or
// limits (the fields set replace; Parent moves it), delete one that has
// no sub-accounts, add or remove a member (Name, User), or set the
// priority weights (Weights).
type AccountRequest struct {
	Op      string           `json:"op"`
	Name    string           `json:"name,omitempty"`
	Parent  *string          `json:"parent,omitempty"`
	Shares  *int             `json:"shares,omitempty"`
	MaxGPUs *int             `json:"max_gpus,omitempty"`
	MaxJobs *int             `json:"max_jobs,omitempty"`
	User    string           `json:"user,omitempty"`
	Weights *PriorityWeights `json:"weights,omitempty"`
}

// Validate checks a request on its own, without the table it changes.
func (r *AccountRequest) Validate() error {
	if r.Op == AccountSetWeights {
		if r.Weights == nil {
			return fieldErr("weights", "missing")
		}
		return r.Weights.Validate()
	}
	if err := ValidateAccountName("account", r.Name); err != nil {
		return err
	}
	switch r.Op {
	case AccountCreate, AccountUpdate:
		if r.Parent != nil && *r.Parent != "" {
			if err := ValidateAccountName("parent", *r.Parent); err != nil {
				return err
			}
		}
		if r.Shares != nil && (*r.Shares < 1 || *r.Shares > MaxShares) {
			return fieldErr("shares", "%d is out of range 1..%d", *r.Shares, MaxShares)
		}
		if err := validateLimit("max_gpus", r.MaxGPUs); err != nil {
			return err
		}
		return validateLimit("max_jobs", r.MaxJobs)
	case AccountDelete:
		return nil
	case AccountAddUser, AccountRemoveUser:
		return ValidateUserName(r.User)
	}
	return fieldErr("op", "%q: want create, update, delete, add-user, remove-user or set-weights", r.Op)
}

// Apply returns the table with the request applied; t is not changed.
func (t *AccountTable) Apply(r *AccountRequest) (*AccountTable, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	out := t.Copy()
	if out == nil {
		out = &AccountTable{}
	}
	if out.Accounts == nil {
		out.Accounts = map[string]*Account{}
	}
	a := out.Accounts[r.Name]
	switch r.Op {
	case AccountSetWeights:
		w := *r.Weights
		out.Weights = &w
	case AccountCreate:
		if a != nil {
			return nil, fieldErr("account", "%s exists", r.Name)
		}
		if len(out.Accounts) >= MaxAccounts {
			return nil, fieldErr("account", "the cluster has %d accounts, the most there may be", MaxAccounts)
		}
		a = &Account{Name: r.Name, Shares: 1, MaxGPUs: cloneInt(r.MaxGPUs), MaxJobs: cloneInt(r.MaxJobs)}
		if r.Shares != nil {
			a.Shares = *r.Shares
		}
		if r.Parent != nil {
			a.Parent = *r.Parent
		}
		if err := out.checkParent(a.Name, a.Parent); err != nil {
			return nil, err
		}
		out.Accounts[a.Name] = a
	case AccountUpdate:
		if a == nil {
			return nil, fieldErr("account", "%s: no such account", r.Name)
		}
		if r.Shares != nil {
			a.Shares = *r.Shares
		}
		if r.Parent != nil {
			if err := out.checkParent(a.Name, *r.Parent); err != nil {
				return nil, err
			}
			a.Parent = *r.Parent
		}
		a.MaxGPUs = updateLimit(a.MaxGPUs, r.MaxGPUs)
		a.MaxJobs = updateLimit(a.MaxJobs, r.MaxJobs)
	case AccountDelete:
		if a == nil {
			return nil, fieldErr("account", "%s: no such account", r.Name)
		}
		for _, c := range out.Accounts {
			if c.Parent == r.Name {
				return nil, fieldErr("account", "%s has sub-account %s: delete or move it first", r.Name, c.Name)
			}
		}
		delete(out.Accounts, r.Name)
		for u, d := range out.Defaults {
			if d == r.Name {
				out.Defaults[u] = out.firstAccountOf(u)
			}
		}
	case AccountAddUser:
		if a == nil {
			return nil, fieldErr("account", "%s: no such account", r.Name)
		}
		if _, ok := slices.BinarySearch(a.Users, r.User); ok {
			return out.tidy(), nil
		}
		if out.members() >= MaxAccountMembers {
			return nil, fieldErr("user", "the accounts have %d members, the most there may be", MaxAccountMembers)
		}
		i, _ := slices.BinarySearch(a.Users, r.User)
		a.Users = slices.Insert(a.Users, i, r.User)
		if out.Defaults[r.User] == "" {
			if out.Defaults == nil {
				out.Defaults = map[string]string{}
			}
			out.Defaults[r.User] = r.Name
		}
	case AccountRemoveUser:
		if a == nil {
			return nil, fieldErr("account", "%s: no such account", r.Name)
		}
		i, ok := slices.BinarySearch(a.Users, r.User)
		if !ok {
			return nil, fieldErr("user", "%s is not a member of %s", r.User, r.Name)
		}
		a.Users = slices.Delete(a.Users, i, i+1)
		if out.Defaults[r.User] == r.Name {
			out.Defaults[r.User] = out.firstAccountOf(r.User)
		}
	}
	return out.tidy(), nil
}

// updateLimit is a limit after an update: unchanged when set is nil,
// dropped when it is Unlimited.
func updateLimit(cur, set *int) *int {
	switch {
	case set == nil:
		return cur
	case *set == Unlimited:
		return nil
	}
	return cloneInt(set)
}

// checkParent refuses a parent that does not exist, is the account
// itself or one below it, or would make the tree too deep.
func (t *AccountTable) checkParent(name, parent string) error {
	depth := 1
	for p := parent; p != ""; p = t.Accounts[p].Parent {
		a := t.Accounts[p]
		switch {
		case a == nil:
			return fieldErr("parent", "%s: no such account", p)
		case p == name:
			return fieldErr("parent", "%s is %s or below it", parent, name)
		}
		depth++
		if depth > MaxAccountDepth {
			return fieldErr("parent", "the tree would be deeper than %d accounts", MaxAccountDepth)
		}
	}
	return nil
}

// firstAccountOf is the account, by name, a user is a member of; "" for
// none. It is the default left to a user whose default went.
func (t *AccountTable) firstAccountOf(user string) string {
	for _, name := range slices.Sorted(maps.Keys(t.Accounts)) {
		if t.Member(name, user) {
			return name
		}
	}
	return ""
}

func (t *AccountTable) members() int {
	n := 0
	for _, a := range t.Accounts {
		n += len(a.Users)
	}
	return n
}

// tidy drops empty maps and defaults of users in no account.
func (t *AccountTable) tidy() *AccountTable {
	for u, d := range t.Defaults {
		if d == "" {
			delete(t.Defaults, u)
		}
	}
	if len(t.Defaults) == 0 {
		t.Defaults = nil
	}
	if len(t.Accounts) == 0 {
		t.Accounts = nil
	}
	if len(t.QoS) == 0 {
		t.QoS = nil
	}
	return t
}

// ResolveAccount returns the account a job of user is charged to: the
// one asked for, which user must be a member of unless the cluster has no
// ACLs (secure says it has them), else the user's default account, else
// "" (no account: its fair-share factor is 0).
func (t *AccountTable) ResolveAccount(user, asked string, secure bool) (string, error) {
	if asked == "" {
		if t == nil {
			return "", nil
		}
		return t.Defaults[user], nil
	}
	if t.account(asked) == nil {
		return "", fieldErr("account", "%s: no such account", asked)
	}
	if secure && !t.Member(asked, user) {
		return "", fieldErr("account", "%s is not a member of account %s", ownerText(user), asked)
	}
	return asked, nil
}

// ResolveQoS checks the QoS a job asks for and returns it (nil for none).
func (t *AccountTable) ResolveQoS(asked string) (*QoS, error) {
	if asked == "" {
		return nil, nil
	}
	q := t.QoSNamed(asked)
	if q == nil {
		return nil, fieldErr("qos", "%s: no such QoS", asked)
	}
	return q, nil
}

func ownerText(user string) string {
	if user == "" {
		return `user ""`
	}
	return user
}

// QoS operations of a QoSRequest.
const (
	QoSSet    = "set"
	QoSDelete = "delete"
)

// QoSRequest creates or changes a QoS (Op set: the whole QoS, as given)
// or deletes one (message QoSSetType).
type QoSRequest struct {
	Op  string `json:"op"`
	QoS QoS    `json:"qos"`
}

// Validate checks the request on its own.
func (r *QoSRequest) Validate() error {
	if err := ValidateAccountName("qos", r.QoS.Name); err != nil {
		return err
	}
	switch r.Op {
	case QoSDelete:
		return nil
	case QoSSet:
	default:
		return fieldErr("op", "%q: want set or delete", r.Op)
	}
	q := &r.QoS
	if q.Priority < 0 || q.Priority > MaxQoSPriority {
		return fieldErr("priority", "%d is out of range 0..%d", q.Priority, MaxQoSPriority)
	}
	for _, f := range []struct {
		name string
		v    *int
	}{{"max_gpus_per_user", q.MaxGPUsPerUser}, {"max_gpus_per_account", q.MaxGPUsPerAccount}, {"max_jobs_per_user", q.MaxJobsPerUser}} {
		if err := validateLimit(f.name, f.v); err != nil {
			return err
		}
	}
	if q.MaxWall < 0 || q.MaxWall > MaxQoSWall {
		return fieldErr("max_wall", "%s is out of range 0..%s", time.Duration(q.MaxWall), time.Duration(MaxQoSWall))
	}
	for _, p := range q.Preempt {
		if err := ValidateAccountName("preempt", p); err != nil {
			return err
		}
	}
	return nil
}

// ApplyQoS returns the table with the QoS request applied; t is not
// changed. A QoS may preempt only QoS that exist, and not itself.
func (t *AccountTable) ApplyQoS(r *QoSRequest) (*AccountTable, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	out := t.Copy()
	if out == nil {
		out = &AccountTable{}
	}
	if out.QoS == nil {
		out.QoS = map[string]*QoS{}
	}
	name := r.QoS.Name
	if r.Op == QoSDelete {
		if out.QoS[name] == nil {
			return nil, fieldErr("qos", "%s: no such QoS", name)
		}
		for _, o := range out.QoS {
			if slices.Contains(o.Preempt, name) {
				return nil, fieldErr("qos", "%s preempts %s: change it first", o.Name, name)
			}
		}
		delete(out.QoS, name)
		return out.tidy(), nil
	}
	if out.QoS[name] == nil && len(out.QoS) >= MaxQoS {
		return nil, fieldErr("qos", "the cluster has %d QoS, the most there may be", MaxQoS)
	}
	q := r.QoS.Copy()
	slices.Sort(q.Preempt)
	q.Preempt = slices.Compact(q.Preempt)
	for _, p := range q.Preempt {
		if p == name {
			return nil, fieldErr("preempt", "a QoS cannot preempt itself")
		}
		if out.QoS[p] == nil {
			return nil, fieldErr("preempt", "%s: no such QoS", p)
		}
	}
	out.QoS[name] = q
	return out.tidy(), nil
}

// ValidateTable checks a whole table, as a snapshot carries it.
func (t *AccountTable) ValidateTable() error {
	if len(t.Accounts) > MaxAccounts {
		return fieldErr("accounts", "%d; at most %d", len(t.Accounts), MaxAccounts)
	}
	if len(t.QoS) > MaxQoS {
		return fieldErr("qos", "%d; at most %d", len(t.QoS), MaxQoS)
	}
	for _, name := range slices.Sorted(maps.Keys(t.Accounts)) {
		a := t.Accounts[name]
		if a == nil || a.Name != name {
			return fieldErr("accounts", "entry %s does not name itself", name)
		}
		if err := t.checkParent(name, a.Parent); err != nil {
			return fmt.Errorf("account %s: %w", name, err)
		}
		if a.Shares < 1 || a.Shares > MaxShares {
			return fmt.Errorf("account %s: %w", name, fieldErr("shares", "%d is out of range 1..%d", a.Shares, MaxShares))
		}
		if !slices.IsSorted(a.Users) {
			return fmt.Errorf("account %s: %w", name, fieldErr("users", "not sorted"))
		}
	}
	if t.members() > MaxAccountMembers {
		return fieldErr("users", "%d members; at most %d", t.members(), MaxAccountMembers)
	}
	for u, d := range t.Defaults {
		if !t.Member(d, u) {
			return fieldErr("defaults", "%s's default %s is not one of its accounts", u, d)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(t.QoS)) {
		q := t.QoS[name]
		if q == nil || q.Name != name {
			return fieldErr("qos", "entry %s does not name itself", name)
		}
		r := QoSRequest{Op: QoSSet, QoS: *q}
		if err := r.Validate(); err != nil {
			return fmt.Errorf("qos %s: %w", name, err)
		}
	}
	if t.Weights != nil {
		return t.Weights.Validate()
	}
	return nil
}

// Usage is resources used over time, decayed: what counted Now is worth
// half after one half-life. GPU-seconds decide fair share; CPU and memory
// are recorded for reports.
type Usage struct {
	GPUSeconds    float64 `json:"gpu_seconds,omitempty"`
	CPUSeconds    float64 `json:"cpu_seconds,omitempty"`
	MemMiBSeconds float64 `json:"mem_mib_seconds,omitempty"`
}

// IsZero reports whether nothing is recorded.
func (u Usage) IsZero() bool { return u == Usage{} }

// UsageKey names a usage record: a user's use within one account. The
// account's own total is the sum of its users'; a sub-account's counts
// in its parents when the tree is walked (sched).
type UsageKey struct {
	Account string `json:"account"`
	User    string `json:"user"`
}

// UsageRecord is one UsageKey's decayed usage, as a snapshot carries it.
type UsageRecord struct {
	UsageKey
	Usage
}

// FairShare is what the scheduler reads of fair share: the account table
// (nil or without accounts: fair share off) and the decayed usage
// records.
type FairShare struct {
	Accounts *AccountTable
	Usage    []UsageRecord
}

// UsageChargeRequest charges every running allocation's use since the
// last charge, and decays all recorded usage to At with HalfLife
// (message UsageChargeType). The leader stamps both.
type UsageChargeRequest struct {
	At       time.Time `json:"at"`
	HalfLife Duration  `json:"half_life"`
}

// QoSPreempts reports whether a job of QoS qos may stop running jobs of
// QoS victim (QoS.Preempt), whatever their priorities and whether or not
// they were submitted as preemptible.
func (t *AccountTable) QoSPreempts(qos, victim string) bool {
	q := t.QoSNamed(qos)
	return q != nil && victim != "" && slices.Contains(q.Preempt, victim)
}

// Preempted reports whether some QoS preempts the QoS named victim.
func (t *AccountTable) Preempted(victim string) bool {
	if t == nil || victim == "" {
		return false
	}
	for _, q := range t.QoS {
		if slices.Contains(q.Preempt, victim) {
			return true
		}
	}
	return false
}

// MayPreempt reports whether a queued job may stop a running one: the
// running one was submitted as preemptible and has a lower priority, or
// the queued job's QoS preempts the running one's. The scheduler picks
// victims by it and the state re-checks it.
func MayPreempt(t *AccountTable, forJob, victim *Job) bool {
	return (victim.Spec.Preemptible && victim.Spec.Priority < forJob.Spec.Priority) ||
		t.QoSPreempts(forJob.Spec.QoS, victim.Spec.QoS)
}
