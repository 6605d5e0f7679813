package endpoint

import (
	"errors"
	"reflect"
	"testing"

	"github.com/skein-dev/skein/structs"
)

func TestPolicy_Partitions_NodesWithoutOneAreInTheDefault(t *testing.T) {
	st := newFakeState()
	st.nodes = []*structs.Node{{Name: "b"}, {Name: "a", Partitions: []string{"gpu"}}, {Name: "c", Partitions: []string{"gpu", structs.DefaultPartition}}}
	st.partitions["gpu"] = structs.Partition{Name: "gpu", MaxNodes: 2}
	got := Policy{State: st}.Partitions()
	if len(got) != 2 || got[0].Name != "gpu" || got[1].Name != structs.DefaultPartition {
		t.Fatalf("partitions %+v, want gpu and the default, by name", got)
	}
	if got[0].MaxNodes != 2 || got[0].Default || !reflect.DeepEqual(got[0].Nodes, []string{"a", "c"}) {
		t.Errorf("gpu partition %+v, want its limit and nodes a and c", got[0])
	}
	if !got[1].Default || !reflect.DeepEqual(got[1].Nodes, []string{"b", "c"}) {
		t.Errorf("default partition %+v, want nodes b and c", got[1])
	}
}

func TestPolicy_SetPartition_WritesTheRequestOnceValid(t *testing.T) {
	w := &fakeWriter{leads: true, answer: func(_ structs.MessageType, e any) (any, error) {
		return e.(structs.PartitionSetRequest).Partition, nil
	}}
	p := Policy{State: newFakeState()}
	if _, err := p.SetPartition(w, structs.PartitionSetRequest{Partition: structs.Partition{Name: "gpu", MaxNodes: -1}}); !errors.As(err, new(*structs.FieldError)) {
		t.Fatalf("a negative max_nodes: %v, want a field error", err)
	}
	w.nothing(t)
	got, err := p.SetPartition(w, structs.PartitionSetRequest{Partition: structs.Partition{Name: "gpu", MaxNodes: 2}})
	if err != nil || got.Name != "gpu" {
		t.Fatalf("set: %v, %+v", err, got)
	}
	if e := w.only(t, structs.PartitionSetType).(structs.PartitionSetRequest); e.Partition.MaxNodes != 2 {
		t.Errorf("entry %+v, want max_nodes 2", e)
	}
}

func TestPolicy_Limits_ARequestOfNoScopeOrABadUserIsRefused(t *testing.T) {
	p := Policy{State: newFakeState()}
	w := &fakeWriter{leads: true}
	var fe *structs.FieldError
	if _, err := p.SetLimits(w, structs.LimitsSetRequest{}); !errors.As(err, &fe) || fe.Field != "user" {
		t.Errorf("limits of no scope: %v, want a field error on user", err)
	}
	w.nothing(t)
	var bad *BadRequest
	if _, err := p.UserLimits("no such/user"); !errors.As(err, &bad) {
		t.Errorf("limits of a bad user name: %v, want a BadRequest", err)
	}
}

func TestPolicy_SetLimits_TheLeaderWritesAndAnswersTheWholePicture(t *testing.T) {
	p := Policy{State: newFakeState()}
	w := &fakeWriter{leads: true, answer: func(structs.MessageType, any) (any, error) { return &structs.LimitTable{}, nil }}
	n := 3
	info, err := p.SetLimits(w, structs.LimitsSetRequest{User: "alice", Limits: structs.Limits{MaxQueued: &n}})
	if err != nil || info.Users == nil {
		t.Fatalf("set limits: %v, %+v", err, info)
	}
	if e := w.only(t, structs.LimitsSetType).(structs.LimitsSetRequest); e.User != "alice" || *e.Limits.MaxQueued != 3 {
		t.Errorf("entry %+v, want alice's max_queued 3", e)
	}
	if _, err := p.SetLimits(&fakeWriter{}, structs.LimitsSetRequest{User: "alice", Limits: structs.Limits{MaxQueued: &n}}); !errors.Is(err, ErrForwarded) {
		t.Errorf("on a node that does not lead: %v, want it passed on", err)
	}
}

func TestPolicy_SetAccounts_WritesTheRequestCheckedAndAnswersTheTable(t *testing.T) {
	p := Policy{State: newFakeState()}
	w := &fakeWriter{leads: true, answer: func(structs.MessageType, any) (any, error) { return &structs.AccountTable{}, nil }}
	var fe *structs.FieldError
	if _, err := p.SetAccounts(w, &structs.AccountRequest{Op: "rename", Name: "ml"}); !errors.As(err, &fe) || fe.Field != "op" {
		t.Errorf("an unknown op: %v, want a field error on op", err)
	}
	w.nothing(t)
	tab, err := p.SetAccounts(w, &structs.AccountRequest{Op: structs.AccountCreate, Name: "ml"})
	if err != nil || tab.Weights == nil {
		t.Fatalf("create: %v, %+v; want the table with the weights in force", err, tab)
	}
	if e := w.only(t, structs.AccountSetType).(*structs.AccountRequest); e.Name != "ml" {
		t.Errorf("entry %+v, want account ml", e)
	}
}
