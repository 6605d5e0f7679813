package structs

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
)

// Fair limits: how much of the cluster one user may claim. A user
// is a job's Owner; jobs submitted before ACLs exist have the owner "" and
// are one user like any other, held to the defaults.
//
// Every limit is a count, 0 or more, or Unlimited. The built-in defaults
// stop a runaway script without getting in a team's way: Slurm's whole
// cluster keeps 10,000 jobs by default (MaxJobCount); skein lets each user
// queue that many, and the cluster five times as many, so three
// `--array 0-9999` submissions from one user queue 10,000 jobs, not 30,000,
// and a handful of users cannot fill the state with hundreds of thousands.
const (
	// Unlimited is the value of a limit that does not limit.
	Unlimited = -1
	// MaxLimitValue is the largest count a limit may be set to.
	MaxLimitValue = 1 << 30
	// MaxLimitUsers is how many users may have limits of their own.
	MaxLimitUsers = 10000
	// MaxUserNameLen is the longest user name limits may be set for.
	MaxUserNameLen = 64

	// DefaultMaxQueued is how many queued jobs one user may have.
	DefaultMaxQueued = 10000
	// DefaultMaxGPUs is how many GPUs one user's running jobs may hold.
	DefaultMaxGPUs = Unlimited
	// DefaultMaxArray is the most tasks one array of one user may have:
	// as many as any array may (MaxArrayTasks).
	DefaultMaxArray = MaxArrayTasks
	// DefaultClusterMaxQueued is how many queued jobs the whole cluster
	// may hold.
	DefaultClusterMaxQueued = 50000
)

// Limits are values set for one user, or as the defaults of every user. A
// nil field is not set there: a user's unset field takes the default's,
// an unset default the built-in one.
type Limits struct {
	// MaxQueued bounds the user's jobs in state queued. A submit that
	// would pass it is refused; jobs put back in the queue (a restart, a
	// lost node, a preemption) are never refused.
	MaxQueued *int `json:"max_queued,omitempty"`
	// MaxGPUs bounds the GPUs the live allocations of the user's jobs
	// hold. The scheduler keeps a job queued while placing it would pass
	// it.
	MaxGPUs *int `json:"max_gpus,omitempty"`
	// MaxArray bounds the tasks of one job array of the user.
	MaxArray *int `json:"max_array,omitempty"`
}

// ClusterLimits are the limits on everyone together.
type ClusterLimits struct {
	// MaxQueued bounds the jobs in state queued, of every user.
	MaxQueued *int `json:"max_queued,omitempty"`
}

// LimitTable is the replicated limits of a cluster. The zero value holds
// the built-in defaults.
type LimitTable struct {
	Cluster ClusterLimits     `json:"cluster"`
	Default Limits            `json:"default"`
	Users   map[string]Limits `json:"users,omitempty"`
}

// UserLimits are the limits that apply to one user, every field resolved.
type UserLimits struct {
	MaxQueued int `json:"max_queued"`
	MaxGPUs   int `json:"max_gpus"`
	MaxArray  int `json:"max_array"`
}

// For returns the limits that apply to user: the user's own values, else
// the defaults, else the built-in defaults. A nil table holds the built-in
// defaults.
func (t *LimitTable) For(user string) UserLimits {
	if t == nil {
		t = &LimitTable{}
	}
	own := t.Users[user]
	return UserLimits{
		MaxQueued: resolve(DefaultMaxQueued, t.Default.MaxQueued, own.MaxQueued),
		MaxGPUs:   resolve(DefaultMaxGPUs, t.Default.MaxGPUs, own.MaxGPUs),
		MaxArray:  resolve(DefaultMaxArray, t.Default.MaxArray, own.MaxArray),
	}
}

// ClusterMaxQueued is the cluster-wide bound on queued jobs.
func (t *LimitTable) ClusterMaxQueued() int {
	if t == nil {
		return DefaultClusterMaxQueued
	}
	return resolve(DefaultClusterMaxQueued, t.Cluster.MaxQueued)
}

// resolve returns the last set value, or def when none is.
func resolve(def int, values ...*int) int {
	v := def
	for _, p := range values {
		if p != nil {
			v = *p
		}
	}
	return v
}

// Exceeds reports whether count is over limit.
func Exceeds(count, limit int) bool {
	return limit != Unlimited && count > limit
}

// Copy returns a deep copy of the table.
func (t *LimitTable) Copy() *LimitTable {
	if t == nil {
		return nil
	}
	c := &LimitTable{Cluster: ClusterLimits{MaxQueued: cloneInt(t.Cluster.MaxQueued)}, Default: t.Default.Copy()}
	if t.Users != nil {
		c.Users = make(map[string]Limits, len(t.Users))
		for u, l := range t.Users {
			c.Users[u] = l.Copy()
		}
	}
	return c
}

// Copy returns a copy of l that shares no pointer with it.
func (l Limits) Copy() Limits {
	return Limits{MaxQueued: cloneInt(l.MaxQueued), MaxGPUs: cloneInt(l.MaxGPUs), MaxArray: cloneInt(l.MaxArray)}
}

// Empty reports whether no field of l is set.
func (l Limits) Empty() bool {
	return l.MaxQueued == nil && l.MaxGPUs == nil && l.MaxArray == nil
}

// Merge returns l with every field that set sets replaced.
func (l Limits) Merge(set Limits) Limits {
	out := l.Copy()
	for _, f := range []struct{ dst, src **int }{
		{&out.MaxQueued, &set.MaxQueued}, {&out.MaxGPUs, &set.MaxGPUs}, {&out.MaxArray, &set.MaxArray},
	} {
		if *f.src != nil {
			*f.dst = cloneInt(*f.src)
		}
	}
	return out
}

// Validate checks every field that is set.
func (l Limits) Validate() error {
	for _, f := range []struct {
		name string
		v    *int
	}{{"max_queued", l.MaxQueued}, {"max_gpus", l.MaxGPUs}, {"max_array", l.MaxArray}} {
		if err := validateLimit(f.name, f.v); err != nil {
			return err
		}
	}
	return nil
}

func validateLimit(field string, v *int) error {
	if v != nil && *v != Unlimited && (*v < 0 || *v > MaxLimitValue) {
		return fieldErr(field, "%d is out of range 0..%d (or %d for no limit)", *v, MaxLimitValue, Unlimited)
	}
	return nil
}

func cloneInt(p *int) *int {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// LimitText renders a limit for people: the count, or "unlimited".
func LimitText(v int) string {
	if v == Unlimited {
		return "unlimited"
	}
	return strconv.Itoa(v)
}

var userName = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.@-]*$`)

// ValidateUserName checks the name of a user that limits are set for.
func ValidateUserName(name string) error {
	switch {
	case name == "":
		return fieldErr("user", "empty: give a user name")
	case len(name) > MaxUserNameLen:
		return fieldErr("user", "%d bytes; at most %d", len(name), MaxUserNameLen)
	case !userName.MatchString(name):
		return fieldErr("user", "%q: use letters, digits and _ . @ - (not first)", name)
	}
	return nil
}

// LimitsSetRequest changes the limits of one user (User), the defaults
// (Default) or the cluster's (Cluster): exactly one of the three. The
// fields of Limits that are set replace the current values and the others
// stay; for the cluster only Limits.MaxQueued applies. With Unset, the
// user's own values are dropped (the defaults apply again), or the
// defaults or cluster limits go back to the built-in ones; Limits must
// then be empty.
type LimitsSetRequest struct {
	User    string `json:"user,omitempty"`
	Default bool   `json:"default,omitempty"`
	Cluster bool   `json:"cluster,omitempty"`
	Limits  Limits `json:"limits"`
	Unset   bool   `json:"unset,omitempty"`
}

// Validate checks a request on its own, without the table it changes.
func (r *LimitsSetRequest) Validate() error {
	scopes := 0
	for _, b := range []bool{r.User != "", r.Default, r.Cluster} {
		if b {
			scopes++
		}
	}
	switch {
	case scopes != 1:
		return fieldErr("user", "give exactly one of a user, default or cluster")
	case r.User != "":
		if err := ValidateUserName(r.User); err != nil {
			return err
		}
	case r.Cluster && (r.Limits.MaxGPUs != nil || r.Limits.MaxArray != nil):
		return fieldErr("limits", "the cluster has only max_queued")
	}
	if r.Unset {
		if !r.Limits.Empty() {
			return fieldErr("unset", "goes without values")
		}
		return nil
	}
	if r.Limits.Empty() {
		return fieldErr("limits", "nothing to set: give max_queued, max_gpus or max_array")
	}
	return r.Limits.Validate()
}

// Apply returns the table with the request applied; t is not changed. It
// refuses a user beyond MaxLimitUsers.
func (t *LimitTable) Apply(r *LimitsSetRequest) (*LimitTable, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	out := t.Copy()
	if out == nil {
		out = &LimitTable{}
	}
	switch {
	case r.Cluster && r.Unset:
		out.Cluster = ClusterLimits{}
	case r.Cluster:
		out.Cluster.MaxQueued = cloneInt(r.Limits.MaxQueued)
	case r.Default && r.Unset:
		out.Default = Limits{}
	case r.Default:
		out.Default = out.Default.Merge(r.Limits)
	case r.Unset:
		delete(out.Users, r.User)
	default:
		if _, ok := out.Users[r.User]; !ok && len(out.Users) >= MaxLimitUsers {
			return nil, fieldErr("user", "%d users have limits of their own, the most there may be (%d)", len(out.Users), MaxLimitUsers)
		}
		if out.Users == nil {
			out.Users = map[string]Limits{}
		}
		out.Users[r.User] = out.Users[r.User].Merge(r.Limits)
	}
	if len(out.Users) == 0 {
		out.Users = nil
	}
	return out, nil
}

// ValidateTable checks a whole table, as a snapshot carries it.
func (t *LimitTable) ValidateTable() error {
	if err := validateLimit("cluster.max_queued", t.Cluster.MaxQueued); err != nil {
		return err
	}
	if err := t.Default.Validate(); err != nil {
		return fmt.Errorf("default: %w", err)
	}
	if len(t.Users) > MaxLimitUsers {
		return fieldErr("users", "%d; at most %d", len(t.Users), MaxLimitUsers)
	}
	for _, u := range slices.Sorted(maps.Keys(t.Users)) {
		if err := ValidateUserName(u); err != nil {
			return err
		}
		if err := t.Users[u].Validate(); err != nil {
			return fmt.Errorf("user %s: %w", u, err)
		}
	}
	return nil
}

// IsZero reports whether the table holds nothing but the built-in defaults.
func (t *LimitTable) IsZero() bool {
	return t == nil || (t.Cluster.MaxQueued == nil && t.Default.Empty() && len(t.Users) == 0)
}
