package testutil

import (
	"os"
	"testing"
)

func TestRSSMiB_ReadsThisProcess(t *testing.T) {
	mib, err := RSSMiB(os.Getpid())
	if err != nil || mib <= 0 {
		t.Fatalf("RSSMiB(self) = %v, %v; want a positive size", mib, err)
	}
	if _, err := RSSMiB(-1); err == nil {
		t.Fatal("RSSMiB of no process gave no error")
	}
}
