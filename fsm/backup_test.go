package fsm

import (
	"bytes"
	"strings"
	"testing"
)

func TestFSM_InspectSaysWhatABackupHoldsAndReindexMovesOnlyItsIndex(t *testing.T) {
	h := richState(t)
	var buf bytes.Buffer
	index, err := h.f.WriteSnapshot(&buf)
	if err != nil || index != h.f.Index() {
		t.Fatalf("write: index %d, %v; want %d", index, err, h.f.Index())
	}
	sum, err := Inspect(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	jobs := 0
	for _, n := range sum.Jobs {
		jobs += n
	}
	if sum.Index != index || sum.Bytes != int64(buf.Len()) || len(sum.SHA256) != 64 || sum.Nodes != len(h.f.Nodes()) || jobs != len(h.f.Jobs()) {
		t.Fatalf("summary %+v", sum)
	}
	moved, err := Reindex(buf.Bytes(), 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	f := New(nil)
	if err := f.Restore(readCloser(moved)); err != nil {
		t.Fatal(err)
	}
	if f.Index() != 1<<30 || f.Hash() != h.f.Hash() {
		t.Fatalf("reindexed backup: index %d, same state %v", f.Index(), f.Hash() == h.f.Hash())
	}
	if _, err := Inspect(strings.NewReader(buf.String()[:buf.Len()-3])); err == nil {
		t.Fatal("a cut backup passed")
	}
	if _, err := Inspect(strings.NewReader(`{"version":1,"index":3}` + "\n" + `{"type":"job","job":{"id":"j","state":"running"}}` + "\n" +
		`{"type":"alloc","alloc":{"id":"a","job_id":"nope","state":"running"}}`)); err == nil || !strings.Contains(err.Error(), "unknown job") {
		t.Fatalf("a backup with an allocation of no job: %v", err)
	}
}
