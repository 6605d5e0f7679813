package server

import (
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/skein-dev/skein/fsm"
	"github.com/skein-dev/skein/structs"
)

// states applies entries to an FSM, which a Server reads, as Raft would.
type states struct {
	t   *testing.T
	f   *fsm.FSM
	idx uint64
}

func newStates(t *testing.T) *states { return &states{t: t, f: fsm.New(nil)} }

// must applies one entry and returns what the FSM answered, failing the
// test on an error.
func (st *states) must(mt structs.MessageType, msg any) any {
	st.t.Helper()
	data, err := structs.Encode(mt, msg)
	if err != nil {
		st.t.Fatal(err)
	}
	st.idx++
	resp := st.f.Apply(&raft.Log{Index: st.idx, Type: raft.LogCommand, Data: data})
	if err, ok := resp.(error); ok {
		st.t.Fatalf("%s: %v", mt, err)
	}
	return resp
}

func (st *states) node(n structs.Node) {
	st.t.Helper()
	st.must(structs.NodeRegisterType, structs.NodeRegisterRequest{Node: n, At: time.Now()})
}

// report applies one allocation report of node n.
func (st *states) report(n string, u structs.AllocUpdate) {
	st.t.Helper()
	u.At = time.Now()
	st.must(structs.AllocUpdateType, structs.AllocUpdateRequest{NodeID: n, Updates: []structs.AllocUpdate{u}})
}
