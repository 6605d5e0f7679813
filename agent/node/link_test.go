package node

import (
	"os"
	"path/filepath"
	"testing"
)

func TestReadSpeed_UnknownSpeedsAreZero(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		content string
		want    int
	}{{"100000\n", 100000}, {"-1\n", 0}, {"fast\n", 0}} {
		path := filepath.Join(dir, "speed")
		if err := os.WriteFile(path, []byte(c.content), 0o600); err != nil {
			t.Fatal(err)
		}
		if got := readSpeed(path); got != c.want {
			t.Errorf("speed file %q read as %d, want %d", c.content, got, c.want)
		}
	}
	if got := readSpeed(filepath.Join(dir, "missing")); got != 0 {
		t.Errorf("missing speed file read as %d, want 0", got)
	}
	if got := linkMbps("192.0.2.1"); got != 0 {
		t.Errorf("an address no interface holds has link speed %d, want 0", got)
	}
}
