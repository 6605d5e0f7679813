package e2e

import (
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/skein-dev/skein/internal/testutil"
)

// BenchmarkFrozenFirstAddress measures B14: how long `skein status`, the
// real CLI binary, takes to answer with SKEIN_ADDR naming three real
// agents of which the first is live (the baseline), frozen (SIGSTOP: its
// kernel takes the connection, nothing answers) or dead (killed: the
// connection is refused). The first address is never the leader. b.N
// calls each; run it with -benchtime 20x.
func BenchmarkFrozenFirstAddress(b *testing.B) {
	nodes := startThree(b, "127.0.0.95", "127.0.0.96", "127.0.0.97")
	lead := leaderOf(b, nodes)
	var first *node
	var rest []string
	for _, n := range nodes {
		if n != lead && first == nil {
			first = n
		} else {
			rest = append(rest, n.proc.addr)
		}
	}
	addrs := first.proc.addr + "," + strings.Join(rest, ",")
	via := lead.proc
	measure := func(name string) {
		d := make([]time.Duration, 0, b.N)
		for range b.N {
			start := time.Now()
			if _, _, err := cli(b, via, addrs, "status"); err != nil {
				b.Fatal(err)
			}
			d = append(d, time.Since(start))
		}
		slices.Sort(d)
		ms := func(q float64) float64 { return float64(testutil.Percentile(d, q)) / float64(time.Millisecond) }
		b.ReportMetric(ms(0.50), name+"-p50-ms")
		b.ReportMetric(ms(0.99), name+"-p99-ms")
	}
	b.ResetTimer()
	measure("live")
	freeze(b, first)
	measure("frozen")
	if err := first.proc.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		b.Fatal(err)
	}
	_ = first.proc.cmd.Wait()
	measure("dead")
}
