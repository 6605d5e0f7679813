package server

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/skein-dev/skein/api"
)

func TestAuditLog_RotatesAtItsSizeAndTailsAcrossTheTwoFiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	a, err := OpenAuditLog(path, 1024)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for i := range 40 {
		if err := a.Record(api.AuditRecord{At: at.Add(time.Duration(i) * time.Second), User: fmt.Sprint("u", i), Method: "POST", Path: "/v1/jobs", Status: 201}); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{path, path + ".1"} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() > 1024 || st.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %d bytes, mode %v; want at most 1024, 0600", p, st.Size(), st.Mode().Perm())
		}
	}
	recs, err := a.Tail(5)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 5 || recs[0].User != "u35" || recs[4].User != "u39" {
		t.Fatalf("tail: %+v", recs)
	}
	all, _ := a.Tail(1000)
	if len(all) >= 40 || all[len(all)-1].User != "u39" {
		t.Fatalf("%d records kept, the newest %q: want fewer than 40 (older ones rotated away), u39 last", len(all), all[len(all)-1].User)
	}
	// A reopened log appends.
	a.Close()
	b, err := OpenAuditLog(path, 1024)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Record(api.AuditRecord{User: "after"}); err != nil {
		t.Fatal(err)
	}
	if recs, _ := b.Tail(2); len(recs) != 2 || recs[0].User != "u39" || recs[1].User != "after" {
		t.Fatalf("tail after reopening: %+v", recs)
	}
}
