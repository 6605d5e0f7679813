package api

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

func TestPTYFrame_RoundTripsAndRefusesOversizedPayloads(t *testing.T) {
	var b bytes.Buffer
	if err := WritePTYFrame(&b, PTYInput, []byte("ls\n")); err != nil {
		t.Fatal(err)
	}
	typ, p, err := ReadPTYFrame(&b)
	if err != nil || typ != PTYInput || string(p) != "ls\n" {
		t.Fatalf("read back %q %q %v", typ, p, err)
	}
	if err := WritePTYFrame(&b, PTYInput, make([]byte, MaxPTYFrame+1)); !errors.Is(err, ErrPTYFrame) || b.Len() != 0 {
		t.Fatalf("writing an oversized frame: %v, %d bytes written", err, b.Len())
	}
	// A peer that announces 4 GiB is refused before anything is read.
	hdr := []byte{PTYOutput, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(hdr[1:], 1<<32-1)
	if _, _, err := ReadPTYFrame(bytes.NewReader(hdr)); !errors.Is(err, ErrPTYFrame) {
		t.Fatalf("reading a 4 GiB frame: %v, want ErrPTYFrame", err)
	}
}
