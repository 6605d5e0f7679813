package structs

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
)

func intp(v int) *int { return &v }

func TestLimitTable_ZeroValueHoldsTheBuiltInDefaults(t *testing.T) {
	var tab LimitTable
	got := tab.For("alice")
	want := UserLimits{MaxQueued: DefaultMaxQueued, MaxGPUs: DefaultMaxGPUs, MaxArray: DefaultMaxArray}
	if got != want {
		t.Fatalf("For = %+v, want %+v", got, want)
	}
	if tab.ClusterMaxQueued() != DefaultClusterMaxQueued {
		t.Fatalf("ClusterMaxQueued = %d, want %d", tab.ClusterMaxQueued(), DefaultClusterMaxQueued)
	}
	if !tab.IsZero() {
		t.Fatal("zero table is not IsZero")
	}
}

func TestLimitTable_UserValuesOverrideDefaultsFieldByField(t *testing.T) {
	tab := &LimitTable{}
	steps := []LimitsSetRequest{
		{Default: true, Limits: Limits{MaxQueued: intp(500), MaxGPUs: intp(16)}},
		{User: "alice", Limits: Limits{MaxGPUs: intp(64)}},
		{User: "alice", Limits: Limits{MaxArray: intp(100)}},
		{Cluster: true, Limits: Limits{MaxQueued: intp(1000)}},
	}
	for i := range steps {
		next, err := tab.Apply(&steps[i])
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		tab = next
	}
	if got, want := tab.For("alice"), (UserLimits{MaxQueued: 500, MaxGPUs: 64, MaxArray: 100}); got != want {
		t.Errorf("alice: %+v, want %+v", got, want)
	}
	if got, want := tab.For("bob"), (UserLimits{MaxQueued: 500, MaxGPUs: 16, MaxArray: DefaultMaxArray}); got != want {
		t.Errorf("bob: %+v, want %+v", got, want)
	}
	if got, want := tab.For(""), tab.For("bob"); got != want {
		t.Errorf("the owner \"\" has %+v, want the defaults %+v", got, want)
	}
	if tab.ClusterMaxQueued() != 1000 {
		t.Errorf("cluster max queued %d, want 1000", tab.ClusterMaxQueued())
	}

	before := tab.Copy()
	unset, err := tab.Apply(&LimitsSetRequest{User: "alice", Unset: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := unset.For("alice"); got != unset.For("bob") {
		t.Errorf("alice after unset: %+v, want the defaults", got)
	}
	if unset.Users != nil {
		t.Errorf("users %v after the only user was unset, want none", unset.Users)
	}
	b1, _ := json.Marshal(before)
	b2, _ := json.Marshal(tab)
	if string(b1) != string(b2) {
		t.Errorf("Apply changed the table it was called on")
	}
	reset, err := tab.Apply(&LimitsSetRequest{Default: true, Unset: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := reset.For("bob"); got.MaxQueued != DefaultMaxQueued || got.MaxGPUs != DefaultMaxGPUs {
		t.Errorf("bob after the defaults were unset: %+v, want the built-in ones", got)
	}
}

func TestLimitTable_CopySharesNothing(t *testing.T) {
	tab := &LimitTable{Default: Limits{MaxGPUs: intp(8)}, Users: map[string]Limits{"alice": {MaxQueued: intp(5)}}}
	c := tab.Copy()
	*c.Default.MaxGPUs = 9
	*c.Users["alice"].MaxQueued = 6
	if *tab.Default.MaxGPUs != 8 || *tab.Users["alice"].MaxQueued != 5 {
		t.Fatal("changing the copy changed the original")
	}
}

func TestLimitsSetRequest_BadInputNamesTheField(t *testing.T) {
	cases := []struct {
		name  string
		req   LimitsSetRequest
		field string
	}{
		{"no scope", LimitsSetRequest{Limits: Limits{MaxGPUs: intp(1)}}, "user"},
		{"two scopes", LimitsSetRequest{User: "a", Default: true, Limits: Limits{MaxGPUs: intp(1)}}, "user"},
		{"bad user", LimitsSetRequest{User: "a b", Limits: Limits{MaxGPUs: intp(1)}}, "user"},
		{"long user", LimitsSetRequest{User: strings.Repeat("a", MaxUserNameLen+1), Limits: Limits{MaxGPUs: intp(1)}}, "user"},
		{"nothing", LimitsSetRequest{User: "a"}, "limits"},
		{"negative", LimitsSetRequest{User: "a", Limits: Limits{MaxQueued: intp(-2)}}, "max_queued"},
		{"too big", LimitsSetRequest{Default: true, Limits: Limits{MaxArray: intp(MaxLimitValue + 1)}}, "max_array"},
		{"cluster gpus", LimitsSetRequest{Cluster: true, Limits: Limits{MaxGPUs: intp(1)}}, "limits"},
		{"unset with values", LimitsSetRequest{User: "a", Unset: true, Limits: Limits{MaxGPUs: intp(1)}}, "unset"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := (&LimitTable{}).Apply(&tc.req)
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != tc.field {
				t.Fatalf("err = %v, want a FieldError on %s", err, tc.field)
			}
		})
	}
	if err := (&LimitsSetRequest{User: "a", Limits: Limits{MaxGPUs: intp(Unlimited)}}).Validate(); err != nil {
		t.Fatalf("unlimited refused: %v", err)
	}
}

func TestLimitTable_UsersAreBounded(t *testing.T) {
	tab := &LimitTable{Users: map[string]Limits{}}
	for i := range MaxLimitUsers {
		tab.Users["u"+strconv.Itoa(i)] = Limits{MaxGPUs: intp(1)}
	}
	if _, err := tab.Apply(&LimitsSetRequest{User: "newcomer", Limits: Limits{MaxGPUs: intp(1)}}); err == nil {
		t.Fatal("a user beyond MaxLimitUsers was accepted")
	}
	for u := range tab.Users {
		if _, err := tab.Apply(&LimitsSetRequest{User: u, Limits: Limits{MaxGPUs: intp(2)}}); err != nil {
			t.Fatalf("changing an existing user at the bound: %v", err)
		}
		break
	}
}

func TestExceeds(t *testing.T) {
	if Exceeds(5, Unlimited) || Exceeds(5, 5) || !Exceeds(6, 5) || !Exceeds(1, 0) {
		t.Fatal("Exceeds is wrong")
	}
}
