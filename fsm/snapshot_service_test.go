package fsm

import (
	"reflect"
	"strings"
	"testing"

	"github.com/skein-dev/skein/structs"
)

func TestFSM_SnapshotRoundTripsServices(t *testing.T) {
	h := servingHalf(t)
	if err := h.reportHealth("n1", "r0a", true, "GET /health: 200"); err != nil {
		t.Fatal(err)
	}
	h.scale("llama", 2, "scaled 4→2 by alice")
	h.registerService(service("gone", 1, 1))
	h.place("svc-gone-r0", alloc("g0", "n1", 0, gpuID("n1", 1)))
	h.deleteService("gone", "")

	lines := strings.SplitN(string(snapshotBytes(t, h.f)), "\n", 2)
	if !strings.HasPrefix(lines[0], `{"version":6,`) {
		t.Fatalf("snapshot header %s, want version 6 (services and events)", lines[0])
	}
	g := restoreFresh(t, h.f)
	if g.Hash() != h.f.Hash() || !reflect.DeepEqual(g.Services(), h.f.Services()) {
		t.Fatal("restored services differ")
	}
	for _, name := range []string{"llama", "gone"} {
		if !reflect.DeepEqual(g.ServiceReplicas(name), h.f.ServiceReplicas(name)) {
			t.Fatalf("restored replicas of %s differ", name)
		}
	}
	if err := checkIndexes(g.st); err != nil {
		t.Fatal(err)
	}
	other := &harness{t: t, f: g, idx: h.idx}
	for _, x := range []*harness{h, other} {
		x.mustUpdate("n1", "g0", structs.AllocKilled, 143, "")
		x.mustUpdate("n1", "r0a", structs.AllocSucceeded, 0, "")
		x.scale("llama", 3, "")
	}
	if g.Hash() != h.f.Hash() {
		t.Fatal("original and restored FSM diverged after the same entries")
	}
	if _, ok := g.Service("gone"); ok {
		t.Fatal("restored deleted service stayed after its last replica ended")
	}
	if j, _ := g.Job("svc-llama-r0"); j.State != structs.JobQueued {
		t.Fatalf("restored replica did not restart: %s", j.State)
	}

	// With no service left the snapshot holds no service record.
	for _, x := range []*harness{h, other} {
		x.deleteService("llama", "")
		for _, a := range x.f.State().LiveAllocs {
			x.mustUpdate(a.NodeID, a.ID, structs.AllocKilled, 143, "")
		}
	}
	if data := string(snapshotBytes(t, g)); strings.Contains(data, `{"type":"service"`) {
		t.Fatal("a state without services still writes a service record")
	}
}

func TestFSM_RestoreRefusesBadServiceRecords(t *testing.T) {
	svc := `{"type":"service","service":{"id":"s1","name":"llama","spec":{"job":{"command":["x"],"nodes":1}},"replicas":1,"next_replica":1,"created_at":"2025-03-01T12:00:00Z","create_index":1,"modify_index":1}}` + "\n"
	v5 := `{"version":5,"index":9}` + "\n"
	cases := []struct{ name, data, want string }{
		{"service in version 4", `{"version":4,"index":9}` + "\n" + svc, "service record in a version 4 snapshot"},
		{"service without body", v5 + `{"type":"service"}`, "service record without service id"},
		{"service twice", v5 + svc + svc, "service llama twice"},
		{"two services, one id", v5 + svc + strings.Replace(svc, `"llama"`, `"other"`, 1), "services llama and other have one id"},
		{"bad name", v5 + strings.Replace(svc, `"llama"`, `"Llama"`, 1), `name: "Llama"`},
	}
	h := richState(t)
	before := h.f.Hash()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wantErrIs(t, h.f.Restore(readCloser([]byte(tc.data))), ErrBadSnapshot, tc.want)
			if h.f.Hash() != before {
				t.Fatal("a refused restore changed state")
			}
		})
	}
	if err := h.f.Restore(readCloser([]byte(v5 + svc))); err != nil {
		t.Fatalf("restore a good service record: %v", err)
	}
	if s, ok := h.f.Service("llama"); !ok || s.ID != "s1" {
		t.Fatalf("restored service %+v", s)
	}
}
