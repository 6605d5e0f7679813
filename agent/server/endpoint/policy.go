package endpoint

import (
	"cmp"
	"fmt"
	"maps"
	"slices"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/fsm"
	"github.com/skein-dev/skein/structs"
)

// PolicyState is what the cluster's policy endpoints read of the state
// (fsm.FSM).
type PolicyState interface {
	FairShare() fsm.FairShare
	Limits() *structs.LimitTable
	LimitUsage(user string) fsm.LimitUsage
	LimitUsages() (users map[string]fsm.LimitUsage, queued int)
	Nodes() []*structs.Node
	Partitions() []structs.Partition
}

// Policy sets and reads what the cluster's administrators decide: fair
// share's accounts and QoS, the users' limits and the partitions' limits.
// Each write answers the whole table it changed, from the local state.
type Policy struct {
	State PolicyState
}

// Accounts is the account table: accounts, QoS, each user's default
// account and the priority weights in force.
func (p Policy) Accounts() *structs.AccountTable {
	tab := p.State.FairShare().Accounts
	if tab.Weights == nil {
		w := tab.PriorityWeights()
		tab.Weights = &w
	}
	return tab
}

// SetAccounts changes the account tree, a membership or the weights.
func (p Policy) SetAccounts(w Writer, req *structs.AccountRequest) (*structs.AccountTable, error) {
	return p.tableWrite(w, structs.AccountSetType, req, req.Validate)
}

// SetQoS creates, changes or deletes a QoS.
func (p Policy) SetQoS(w Writer, req *structs.QoSRequest) (*structs.AccountTable, error) {
	return p.tableWrite(w, structs.QoSSetType, req, req.Validate)
}

// tableWrite checks req (a pointer, which validate may complete) with
// validate, commits it on the leader as message mt, and answers the
// account table.
func (p Policy) tableWrite(w Writer, mt structs.MessageType, req any, validate func() error) (*structs.AccountTable, error) {
	if err := validate(); err != nil {
		return nil, err
	}
	resp, err := w.Write(mt, nil, func() (any, error) { return req, nil })
	if err != nil {
		return nil, err
	}
	if _, ok := resp.(*structs.AccountTable); !ok {
		return nil, fmt.Errorf("%s: unexpected answer %T from the state machine", mt, resp)
	}
	return p.Accounts(), nil
}

// Limits is the whole limits picture: the cluster's, the defaults, and
// every user that has limits of its own or holds something.
func (p Policy) Limits() api.LimitsInfo {
	tab := p.State.Limits()
	usage, queued := p.State.LimitUsages()
	info := api.LimitsInfo{
		Cluster: api.ClusterLimitsInfo{MaxQueued: tab.ClusterMaxQueued(), Queued: queued},
		// The owner "" never has limits of its own (ValidateUserName):
		// it has the defaults.
		Default:    tab.For(""),
		DefaultSet: tab.Default,
		Users:      []api.UserLimitsInfo{},
	}
	users := maps.Clone(usage)
	for u := range tab.Users {
		users[u] = usage[u]
	}
	for _, u := range slices.Sorted(maps.Keys(users)) {
		info.Users = append(info.Users, userLimitsInfo(tab, u, users[u]))
	}
	return info
}

// UserLimits is one user's limits and usage.
func (p Policy) UserLimits(user string) (api.UserLimitsInfo, error) {
	if err := structs.ValidateUserName(user); err != nil {
		return api.UserLimitsInfo{}, badRequest(err)
	}
	return userLimitsInfo(p.State.Limits(), user, p.State.LimitUsage(user)), nil
}

func userLimitsInfo(tab *structs.LimitTable, user string, use fsm.LimitUsage) api.UserLimitsInfo {
	return api.UserLimitsInfo{User: user, Limits: tab.For(user), Set: tab.Users[user], Queued: use.Queued, GPUs: use.GPUs}
}

// SetLimits changes a user's limits, the defaults or the cluster's, and
// answers the whole limits picture.
func (p Policy) SetLimits(w Writer, req structs.LimitsSetRequest) (api.LimitsInfo, error) {
	if err := req.Validate(); err != nil {
		return api.LimitsInfo{}, err
	}
	resp, err := w.Write(structs.LimitsSetType, nil, func() (any, error) { return req, nil })
	if err != nil {
		return api.LimitsInfo{}, err
	}
	if _, ok := resp.(*structs.LimitTable); !ok {
		return api.LimitsInfo{}, fmt.Errorf("limits: unexpected answer %T from the state machine", resp)
	}
	return p.Limits(), nil
}

// Partitions lists the partitions the nodes declare and those with
// settings, by name, each with its nodes.
func (p Policy) Partitions() []api.PartitionInfo {
	byName := map[string]*api.PartitionInfo{}
	get := func(name string) *api.PartitionInfo {
		info := byName[name]
		if info == nil {
			info = &api.PartitionInfo{Partition: structs.Partition{Name: name}, Default: name == structs.DefaultPartition, Nodes: []string{}}
			byName[name] = info
		}
		return info
	}
	for _, n := range p.State.Nodes() {
		parts := n.Partitions
		if len(parts) == 0 {
			parts = []string{structs.DefaultPartition}
		}
		for _, name := range parts {
			info := get(name)
			info.Nodes = append(info.Nodes, n.Name)
		}
	}
	for _, set := range p.State.Partitions() {
		get(set.Name).Partition = set
	}
	out := make([]api.PartitionInfo, 0, len(byName))
	for _, info := range byName {
		slices.Sort(info.Nodes)
		out = append(out, *info)
	}
	slices.SortFunc(out, func(a, b api.PartitionInfo) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// SetPartition sets or drops a partition's limits (skein partition set,
// unset), and answers the partition.
func (p Policy) SetPartition(w Writer, req structs.PartitionSetRequest) (structs.Partition, error) {
	if err := req.Partition.Validate(); err != nil {
		return structs.Partition{}, err
	}
	resp, err := w.Write(structs.PartitionSetType, nil, func() (any, error) { return req, nil })
	if err != nil {
		return structs.Partition{}, err
	}
	got, ok := resp.(structs.Partition)
	if !ok {
		return structs.Partition{}, fmt.Errorf("partition: unexpected answer %T from the state machine", resp)
	}
	return got, nil
}
