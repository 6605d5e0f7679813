// Package fsmtest gives tests a real FSM to read, filled by applying
// entries to it as Raft would, without Raft: the state an endpoint or a
// handler reads, made of the same entries a cluster commits.
package fsmtest

import (
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/skein-dev/skein/fsm"
	"github.com/skein-dev/skein/structs"
)

// States is an FSM and the index of the last entry applied to it.
type States struct {
	t   testing.TB
	F   *fsm.FSM
	idx uint64
}

// New returns an empty state.
func New(t testing.TB) *States { return &States{t: t, F: fsm.New(nil)} }

// Must applies one entry and returns what the FSM answered, failing the
// test on an error.
func (st *States) Must(mt structs.MessageType, msg any) any {
	st.t.Helper()
	data, err := structs.Encode(mt, msg)
	if err != nil {
		st.t.Fatal(err)
	}
	st.idx++
	resp := st.F.Apply(&raft.Log{Index: st.idx, Type: raft.LogCommand, Data: data})
	if err, ok := resp.(error); ok {
		st.t.Fatalf("%s: %v", mt, err)
	}
	return resp
}

// Node registers node n.
func (st *States) Node(n structs.Node) {
	st.t.Helper()
	st.Must(structs.NodeRegisterType, structs.NodeRegisterRequest{Node: n, At: time.Now()})
}

// Report applies one allocation report of node n.
func (st *States) Report(n string, u structs.AllocUpdate) {
	st.t.Helper()
	u.At = time.Now()
	st.Must(structs.AllocUpdateType, structs.AllocUpdateRequest{NodeID: n, Updates: []structs.AllocUpdate{u}})
}
