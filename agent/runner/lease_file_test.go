package runner

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// BenchmarkRenewLease is what each renewal of the node's lease costs the
// agent (four a second by default): the lease file rewritten in place.
func BenchmarkRenewLease(b *testing.B) {
	r := &Runner{leasePath: filepath.Join(b.TempDir(), "lease.json")}
	defer func() { _ = r.leaseFile.Close() }()
	until := time.Now().Add(time.Minute)
	b.ResetTimer()
	for range b.N {
		if err := r.RenewLease(until); err != nil {
			b.Fatal(err)
		}
	}
}

// TestRenewLease_RewritesTheFileInPlaceAndASupervisorReadsItsCheck: the
// lease file keeps its size and its inode from one renewal to the next
// (a forever lease is shorter than a dated one, and a file an older agent
// wrote is longer), and a supervisor reads back each lease; a lease whose
// check does not match (read half rewritten) is an error, not a time,
// and a lease an older agent wrote without a check is read as it is.
func TestRenewLease_RewritesTheFileInPlaceAndASupervisorReadsItsCheck(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lease.json")
	if err := os.WriteFile(path, []byte(`{"expires_at":"2001-01-01T00:00:00Z"}`+strings.Repeat(" ", 200)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if l, found, err := readLease(path); err != nil || !found || l.ExpiresAt.Year() != 2001 {
		t.Fatalf("an older agent's lease read as %v, %v, %v", l, found, err)
	}
	r := &Runner{leasePath: path}
	defer func() { _ = r.leaseFile.Close() }()
	before, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, until := range []time.Time{time.Now().Add(time.Minute), {}, time.Unix(1, 123456789), time.Now().Add(time.Hour)} {
		if err := r.RenewLease(until); err != nil {
			t.Fatal(err)
		}
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() != leaseFileSize || !os.SameFile(st, before) {
			t.Errorf("lease until %v: file of %d bytes, the same file %v; want %d bytes, the same file", until, st.Size(), os.SameFile(st, before), leaseFileSize)
		}
		l, found, err := readLease(path)
		if err != nil || !found || !l.ExpiresAt.Equal(until) {
			t.Errorf("lease until %v read as %v (found %v, %v)", until, l.ExpiresAt, found, err)
		}
	}
	// A half-rewritten lease: the time of one renewal, the check of another.
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	at := strings.Index(string(data), `"expires_at":"`) + len(`"expires_at":"`) + 3 // the year's last digit
	if at < 3+len(`"expires_at":"`) {
		t.Fatalf("no expires_at in %q", data)
	}
	data[at] = '0' + (data[at]-'0'+1)%10
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, found, err := readLease(path); !found || !errors.Is(err, errTornLease) {
		t.Errorf("a lease that does not match its check: found %v, %v; want %v", found, err, errTornLease)
	}
}
