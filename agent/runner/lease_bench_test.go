package runner

import (
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkRenewLease is what each renewal of the node's lease costs the
// agent (four a second by default): the lease file replaced, unsynced.
func BenchmarkRenewLease(b *testing.B) {
	r := &Runner{leasePath: filepath.Join(b.TempDir(), "lease.json")}
	until := time.Now().Add(time.Minute)
	b.ResetTimer()
	for range b.N {
		if err := r.RenewLease(until); err != nil {
			b.Fatal(err)
		}
	}
}
