package runner

import "testing"

func TestOOMReason_SaysHowMuchInTheUnitsOfMem(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		peak, limit int64
		want        string
	}{
		{64 * mib, 64 * mib, "out of memory: used 64M of its 64M limit"},
		{64*mib + 4096, 64 * mib, "out of memory: used 64M of its 64M limit"},
		{1536 * mib, 1536 * mib, "out of memory: used 1.5G of its 1.5G limit"},
		{2048*mib - 10, 2048 * mib, "out of memory: used 2G of its 2G limit"},
		{mib + 1, 80 << 30, "out of memory: used 2M of its 80G limit"},
		{0, 512 * mib, "out of memory: its limit is 512M"},
		{3 << 30, 0, "out of memory: used 3G, and the node had no more"},
		{0, 0, "out of memory: the node had no more"},
	} {
		if got := oomReason(tc.peak, tc.limit); got != tc.want {
			t.Errorf("oomReason(%d, %d) = %q, want %q", tc.peak, tc.limit, got, tc.want)
		}
	}
}
