package endpoint

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/fsm"
	"github.com/skein-dev/skein/structs"
)

// twoNodes is a state of nodes gpu-01 (two GPUs) and cpu-01 (none).
func twoNodes() *fakeState {
	st := newFakeState()
	st.nodes = []*structs.Node{
		{ID: "n1-abc", Name: "gpu-01", GPUs: []structs.GPU{{Index: 0, UUID: "GPU-0"}, {Index: 1, UUID: "GPU-1"}}},
		{ID: "n2-def", Name: "cpu-01"},
	}
	return st
}

func TestNodes_Resolve_ByNameIDOrUniquePrefix(t *testing.T) {
	s := Nodes{State: twoNodes()}
	for ref, want := range map[string]string{"gpu-01": "n1-abc", "n2-def": "n2-def", "n1": "n1-abc"} {
		if n, err := s.Resolve(ref); err != nil || n.ID != want {
			t.Errorf("resolve %q: %v, %v; want %s", ref, n, err, want)
		}
	}
	if _, err := s.Resolve("n"); err == nil || !strings.Contains(err.Error(), "matches 2 nodes") {
		t.Errorf("an ambiguous prefix: %v, want it refused", err)
	}
	if _, err := s.Resolve("nope"); !errors.Is(err, fsm.ErrNodeNotFound) {
		t.Errorf("no node: %v, want fsm.ErrNodeNotFound", err)
	}
}

func TestNodes_Drain_TheLeaderTurnsTheDeadlineIntoATime(t *testing.T) {
	w := &fakeWriter{leads: true, answer: func(_ structs.MessageType, e any) (any, error) {
		return &structs.Node{ID: e.(structs.NodeDrainRequest).NodeID}, nil
	}}
	req := api.NodeDrainRequest{Reason: "maintenance", Deadline: structs.Duration(time.Hour)}
	n, err := Nodes{State: twoNodes()}.Drain(w, "gpu-01", true, req)
	if err != nil || n.ID != "n1-abc" {
		t.Fatalf("drain: %v, %v", n, err)
	}
	cmd := w.only(t, structs.NodeDrainType).(structs.NodeDrainRequest)
	if !cmd.Drain || cmd.Reason != "maintenance" || cmd.Deadline.Sub(cmd.At) != time.Hour {
		t.Errorf("entry %+v, want a drain of an hour from its time", cmd)
	}
}

func TestNodes_Drain_RefusalsNameTheFieldAndWriteNothing(t *testing.T) {
	for _, c := range []struct {
		name  string
		drain bool
		req   api.NodeDrainRequest
		want  string
	}{
		{"an undrain with a deadline", false, api.NodeDrainRequest{Deadline: structs.Duration(time.Minute)}, "deadline"},
		{"a negative deadline", true, api.NodeDrainRequest{Deadline: -1}, "deadline"},
		{"a long reason", true, api.NodeDrainRequest{Reason: strings.Repeat("x", structs.MaxServiceReasonLen+1)}, "reason"},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := &fakeWriter{leads: true}
			_, err := Nodes{State: twoNodes()}.Drain(w, "gpu-01", c.drain, c.req)
			var fe *structs.FieldError
			if !errors.As(err, &fe) || fe.Field != c.want {
				t.Errorf("%v, want a field error on %s", err, c.want)
			}
			w.nothing(t)
		})
	}
}

func TestNodes_Remove_TheLeaderForgetsTheNodeWithTheReason(t *testing.T) {
	var forgot []string
	s := Nodes{State: twoNodes(), Forget: func(id, reason string) error {
		forgot = append(forgot, id+": "+reason)
		return nil
	}}
	if _, err := s.Remove(&fakeWriter{}, "cpu-01", api.NodeRemoveRequest{}); !errors.Is(err, ErrForwarded) || len(forgot) != 0 {
		t.Fatalf("remove on a node that does not lead: %v, forgot %v; want it passed on", err, forgot)
	}
	n, err := s.Remove(&fakeWriter{leads: true}, "cpu-01", api.NodeRemoveRequest{})
	if err != nil || n.ID != "n2-def" || len(forgot) != 1 || forgot[0] != "n2-def: removed by skein node remove" {
		t.Fatalf("remove: %v, %v, forgot %v", n, err, forgot)
	}
	s.Forget = nil
	if _, err := s.Remove(&fakeWriter{leads: true}, "cpu-01", api.NodeRemoveRequest{}); !errors.Is(err, ErrCannotRemove) {
		t.Errorf("remove on a leader that cannot: %v, want ErrCannotRemove", err)
	}
}

func TestNodes_CordonGPU_FindsTheGPUByIndexAndWritesItsUUID(t *testing.T) {
	w := &fakeWriter{leads: true, answer: func(_ structs.MessageType, e any) (any, error) {
		return &structs.GPU{Index: 1, UUID: e.(structs.GPUCordonRequest).UUID}, nil
	}}
	s := Nodes{State: twoNodes()}
	info, err := s.CordonGPU(w, api.GPURequest{Node: "gpu-01", Index: 1, Reason: "flaky"}, true)
	if err != nil || info.NodeID != "n1-abc" || info.GPU.UUID != "GPU-1" {
		t.Fatalf("cordon: %+v, %v", info, err)
	}
	if e := w.only(t, structs.GPUCordonType).(structs.GPUCordonRequest); !e.Cordon || e.UUID != "GPU-1" || e.Reason != "flaky" {
		t.Errorf("entry %+v, want GPU-1 cordoned", e)
	}
	w = &fakeWriter{leads: true}
	for _, c := range []struct {
		req  api.GPURequest
		want string
	}{
		{api.GPURequest{Node: "gpu-01", Index: 7}, "has GPUs 0..1"},
		{api.GPURequest{Node: "cpu-01", Index: 0}, "has no GPUs"},
		{api.GPURequest{Index: 0}, "node: empty"},
	} {
		if _, err := s.CordonGPU(w, c.req, true); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("cordon %+v: %v, want %q", c.req, err, c.want)
		}
	}
	w.nothing(t)
}

func TestNodes_FaultTarget_FillsInDefaultsAndFindsTheGPU(t *testing.T) {
	s := Nodes{State: twoNodes()}
	req := api.GPUFaultRequest{Node: "gpu-01", Index: 1}
	n, g, err := s.FaultTarget(&req)
	if err != nil || n.ID != "n1-abc" || g.UUID != "GPU-1" {
		t.Fatalf("%v, %v, %v; want GPU 1 of gpu-01", n, g, err)
	}
	if req.Kind != "fatal" || req.Reason != "injected fatal fault" {
		t.Errorf("defaults %q, %q; want a fatal fault and a reason saying it was injected", req.Kind, req.Reason)
	}
	procs := api.GPUFaultRequest{Node: "gpu-01", Kind: "processes", PIDs: []uint32{42}}
	if _, _, err := s.FaultTarget(&procs); err != nil || procs.Reason != "" {
		t.Errorf("processes: %v, reason %q; want no reason made up", err, procs.Reason)
	}
}

func TestNodes_FaultTarget_RefusalsNameTheField(t *testing.T) {
	for _, c := range []struct {
		name string
		req  api.GPUFaultRequest
		want string
	}{
		{"an unknown kind", api.GPUFaultRequest{Node: "gpu-01", Kind: "meltdown"}, "kind"},
		{"a long reason", api.GPUFaultRequest{Node: "gpu-01", Reason: strings.Repeat("x", structs.MaxHealthReasonLen+1)}, "reason"},
		{"PIDs with a fatal fault", api.GPUFaultRequest{Node: "gpu-01", PIDs: []uint32{1}}, "pids"},
		{"too many PIDs", api.GPUFaultRequest{Node: "gpu-01", Kind: "processes", PIDs: make([]uint32, 1025)}, "pids"},
		{"a GPU the node has not", api.GPUFaultRequest{Node: "gpu-01", Index: 5}, "index"},
		{"a node without GPUs", api.GPUFaultRequest{Node: "cpu-01"}, "index"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := Nodes{State: twoNodes()}.FaultTarget(&c.req)
			var fe *structs.FieldError
			if !errors.As(err, &fe) || fe.Field != c.want {
				t.Errorf("%v, want a field error on %s", err, c.want)
			}
		})
	}
}
