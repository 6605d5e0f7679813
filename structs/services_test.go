package structs

import "testing"

func TestReplicaService_ParsesOnlyReplicaJobIDs(t *testing.T) {
	cases := []struct {
		id, svc string
		ok      bool
	}{
		{ReplicaJobID("3f2a9c1b", 12), "3f2a9c1b", true},
		{"3f2a9c1b-r0", "3f2a9c1b", true},
		{"3f2a9c1b", "", false},
		{"3f2a9c1b-7", "", false}, // an array task
		{"3f2a9c1b-r", "", false},
		{"3f2a9c1b-rx", "", false},
		{"-r1", "", false},
	}
	for _, tc := range cases {
		if svc, ok := ReplicaService(tc.id); svc != tc.svc || ok != tc.ok {
			t.Errorf("ReplicaService(%q) = %q, %v; want %q, %v", tc.id, svc, ok, tc.svc, tc.ok)
		}
	}
}
