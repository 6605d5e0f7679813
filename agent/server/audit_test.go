package server

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
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
	recs, err := a.Tail(5, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 5 || recs[0].User != "u35" || recs[4].User != "u39" {
		t.Fatalf("tail: %+v", recs)
	}
	all, _ := a.Tail(1000, nil)
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
	if recs, _ := b.Tail(2, nil); len(recs) != 2 || recs[0].User != "u39" || recs[1].User != "after" {
		t.Fatalf("tail after reopening: %+v", recs)
	}
}

func TestAuditSelection_ByEventFamilyAndUser_AndBadInputNamesTheField(t *testing.T) {
	recs := []api.AuditRecord{
		{User: "alice"}, // a write of before events were named
		{Event: api.AuditLogin, User: "alice"},
		{Event: api.AuditLoginFailed},
		{Event: api.AuditNodeAdmit},
		{Event: api.AuditNodeRevoke, User: "olga"},
		{Event: api.AuditKeyringRotate},
	}
	for _, tc := range []struct {
		query string
		want  []int
	}{
		{"", []int{0, 1, 2, 3, 4, 5}},
		{"event=write", []int{0}},
		{"event=login", []int{1, 2}},
		{"event=login.failed", []int{2}},
		{"event=node", []int{3, 4}},
		{"event=node.revoke,keyring", []int{4, 5}},
		{"user=alice", []int{0, 1}},
		{"event=login&user=alice", []int{1}},
	} {
		q, _ := url.ParseQuery(tc.query)
		sel, err := auditSelection(q)
		if err != nil {
			t.Fatalf("%q: %v", tc.query, err)
		}
		var got []int
		for i, r := range recs {
			if sel.keep(r) {
				got = append(got, i)
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%q selected %v, want %v", tc.query, got, tc.want)
		}
	}
	for query, want := range map[string]string{
		"event=nodes":                      `event: "nodes" is not an event: want one of write, login`,
		"event=login,":                     `event: "" is not an event`,
		"user=" + strings.Repeat("u", 257): "user: 257 bytes, over the 256",
	} {
		q, _ := url.ParseQuery(query)
		if _, err := auditSelection(q); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%.40q: %v, want an error saying %q", query, err, want)
		}
	}
}
