package runner

import (
	"fmt"

	"github.com/skein-dev/skein/structs"
)

// oomReason is the outcome's reason for a job the kernel killed for want
// of memory, in the units of --mem: "out of memory: used 1.5G of its
// 1.5G limit". peak is the most memory the job used and limit its memory
// limit; 0 for either is not known, or no limit.
func oomReason(peak, limit int64) string {
	if limit > 0 && peak > limit {
		// The kernel's peak may pass the limit by a page or so it
		// charged before it reclaimed: the job had the limit.
		peak = limit
	}
	switch {
	case limit > 0 && peak > 0:
		return fmt.Sprintf("out of memory: used %s of its %s limit", formatBytes(peak), formatBytes(limit))
	case limit > 0:
		return fmt.Sprintf("out of memory: its limit is %s", formatBytes(limit))
	case peak > 0:
		return fmt.Sprintf("out of memory: used %s, and the node had no more", formatBytes(peak))
	}
	return "out of memory: the node had no more"
}

// formatBytes is n bytes as --mem gives sizes ("64M", "1.5G": see
// structs.FormatMiB), rounded up to a whole MiB.
func formatBytes(n int64) string {
	return structs.FormatMiB((n + 1<<20 - 1) >> 20)
}
