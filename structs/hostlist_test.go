package structs

import (
	"slices"
	"strings"
	"testing"
)

func TestHostList_CompressesSortedAsSlurm(t *testing.T) {
	for _, tc := range []struct {
		names []string
		want  string
	}{
		{nil, ""},
		{[]string{"vm"}, "vm"},
		{[]string{"c", "a"}, "a,c"},
		{[]string{"gpu3", "gpu1", "gpu2", "gpu5"}, "gpu[1-3,5]"},
		{[]string{"n01", "n02", "n03", "login"}, "login,n[01-03]"},
		{[]string{"node2", "node1"}, "node[1-2]"},
		{[]string{"a1", "b1"}, "a1,b1"},
		{[]string{"gpu1", "gpu1", "vm", "vm"}, "gpu1,vm"},
	} {
		if got := HostList(tc.names); got != tc.want {
			t.Errorf("HostList(%q) = %q, want %q", tc.names, got, tc.want)
		}
	}
}

func TestExpandHostList_ReadsWhatSlurmWrites(t *testing.T) {
	for _, tc := range []struct {
		list string
		want []string
	}{
		{"", nil},
		{"vm", []string{"vm"}},
		{"gpu[01-03,07],login", []string{"gpu01", "gpu02", "gpu03", "gpu07", "login"}},
		{"n[1-2]-ib,x", []string{"n1-ib", "n2-ib", "x"}},
		{"a,c", []string{"a", "c"}},
		{"node[8-10]", []string{"node8", "node9", "node10"}},
	} {
		got, err := ExpandHostList(tc.list)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("ExpandHostList(%q) = %q, %v; want %q", tc.list, got, err, tc.want)
		}
	}
	for _, bad := range []string{"gpu[1-", "gpu]1", "gpu[3-1]", "gpu[a-b]", "a,,b", "n[0-99999999]", "g[1-2][3-4]"} {
		if _, err := ExpandHostList(bad); err == nil || !strings.Contains(err.Error(), "host list") {
			t.Errorf("ExpandHostList(%q) = %v, want an error naming the host list", bad, err)
		}
	}
	// What HostList writes, ExpandHostList reads back.
	names := []string{"gpu01", "gpu02", "gpu04", "login", "n7"}
	if got, _ := ExpandHostList(HostList(names)); !slices.Equal(got, names) {
		t.Errorf("round trip of %q gave %q", names, got)
	}
}
