package structs

import (
	"errors"
	"reflect"
	"testing"
	"time"
)

func TestCodec_RoundTripKeepsTypeAndBody(t *testing.T) {
	in := JobSubmitRequest{
		RequestID:   "r1",
		JobID:       "j1",
		Spec:        JobSpec{Command: []string{"echo", "hi"}, GPUs: 1, Nodes: 1, TimeLimit: Duration(time.Hour)},
		SubmittedAt: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC),
	}
	buf, err := Encode(JobSubmitType, in)
	if err != nil {
		t.Fatal(err)
	}
	typ, err := EntryType(buf)
	if err != nil || typ != JobSubmitType {
		t.Fatalf("EntryType = %v, %v; want %v", typ, err, JobSubmitType)
	}
	var out JobSubmitRequest
	if err := Decode(buf, &out); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, out) {
		t.Fatalf("round trip changed the message:\n in %+v\nout %+v", in, out)
	}
}

func TestCodec_EmptyEntry(t *testing.T) {
	if _, err := EntryType(nil); !errors.Is(err, ErrEmptyEntry) {
		t.Fatalf("EntryType(nil) = %v, want ErrEmptyEntry", err)
	}
	if err := Decode(nil, &JobCancelRequest{}); !errors.Is(err, ErrEmptyEntry) {
		t.Fatalf("Decode(nil) = %v, want ErrEmptyEntry", err)
	}
}

func TestMessageType_NumbersNeverChange(t *testing.T) {
	// These numbers are written into Raft logs; changing one corrupts history.
	want := map[MessageType]uint8{NodeRegisterType: 1, JobSubmitType: 2, JobCancelType: 3, PlanApplyType: 4, AllocUpdateType: 5,
		NodeStatusType: 6, NodeAllocsLostType: 7, LimitsSetType: 20,
		ServiceRegisterType: 21, ServiceScaleType: 22, ServiceDeleteType: 23, JobUpdateType: 36, PartitionSetType: 37}
	for typ, n := range want {
		if uint8(typ) != n {
			t.Errorf("%s = %d, want %d", typ, typ, n)
		}
	}
	if IgnoreUnknownTypeFlag != 0x80 {
		t.Errorf("IgnoreUnknownTypeFlag = %#x, want 0x80", uint8(IgnoreUnknownTypeFlag))
	}
}

// FuzzDecode feeds arbitrary bytes to the decoder: it must return an error or
// a message, never panic.
func FuzzDecode(f *testing.F) {
	seed, _ := Encode(JobSubmitType, JobSubmitRequest{JobID: "x", Spec: JobSpec{Command: []string{"a"}}})
	f.Add(seed)
	f.Add([]byte{byte(PlanApplyType), '{', '}'})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, buf []byte) {
		var sub JobSubmitRequest
		_ = Decode(buf, &sub)
		var plan PlanApplyRequest
		_ = Decode(buf, &plan)
		var upd AllocUpdateRequest
		if Decode(buf, &upd) == nil {
			if _, err := Encode(AllocUpdateType, upd); err != nil {
				t.Fatalf("re-encode decoded message: %v", err)
			}
		}
	})
}
