package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

// simWorkers are lightweight simulated nodes in the benchmark's process
// that speak the real node-to-node protocol to one agent, as a worker's
// agent does (a node outside Raft): each registers its inventory, renews
// its lease every heartbeat interval and keeps a watch of its view open
// over the internal API. They hold no Raft state and run no jobs.
type simWorkers struct {
	addr     string
	interval time.Duration
	ctx      context.Context
	stop     context.CancelFunc
	wg       sync.WaitGroup
	n        int
	failed   atomic.Int64 // heartbeats and watches the leader did not answer
}

func newSimWorkers(addr string, interval time.Duration) *simWorkers {
	ctx, stop := context.WithCancel(context.Background())
	return &simWorkers{addr: addr, interval: interval, ctx: ctx, stop: stop}
}

// client is worker i's connection to the agent, from an address of its
// own (127.1.0.0/16), as each real node has: the agent bounds
// connections per client address.
func (s *simWorkers) client(i int) (*api.Client, error) {
	c, err := api.NewClient(s.addr, "")
	if err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	local := &net.TCPAddr{IP: net.IPv4(127, 1, byte(i>>8), byte(i))}
	tr.DialContext = (&net.Dialer{LocalAddr: local, Timeout: 5 * time.Second}).DialContext
	return c.WithHTTPClient(&http.Client{Timeout: 30 * time.Second, Transport: tr}), nil
}

// grow registers workers until there are n, and starts their heartbeats,
// each at its own phase of the interval.
func (s *simWorkers) grow(b *testing.B, n int) {
	b.Helper()
	var next atomic.Int64
	next.Store(int64(s.n))
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				id := fmt.Sprintf("sim-%05d", i)
				c, err := s.client(i)
				if err == nil {
					err = c.Register(s.ctx, testutil.SimNode(id, i))
				}
				if err != nil {
					errs <- fmt.Errorf("register %s: %w", id, err)
					return
				}
				s.wg.Add(2)
				go s.beat(c, id)
				go s.watch(c, id)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	s.n = n
}

func (s *simWorkers) beat(c *api.Client, id string) {
	defer s.wg.Done()
	select {
	case <-s.ctx.Done():
		return
	case <-time.After(rand.N(s.interval)):
	}
	tick := time.NewTicker(s.interval)
	defer tick.Stop()
	for {
		// Bounded as a node bounds it: half the lease (--stop-after).
		ctx, cancel := context.WithTimeout(s.ctx, 1250*time.Millisecond)
		if _, err := c.Heartbeat(ctx, id); err != nil && s.ctx.Err() == nil {
			s.failed.Add(1)
		}
		cancel()
		select {
		case <-s.ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// watch keeps worker id's view watch open, as a worker's agent does.
func (s *simWorkers) watch(c *api.Client, id string) {
	defer s.wg.Done()
	var hash, leader string
	for s.ctx.Err() == nil {
		v, err := c.NodeView(s.ctx, id, hash, leader, 20*time.Second)
		if err != nil {
			if s.ctx.Err() == nil {
				s.failed.Add(1)
			}
			select {
			case <-s.ctx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		hash, leader = v.Hash, v.Leader
	}
}

func (s *simWorkers) close() {
	s.stop()
	s.wg.Wait()
}

// benchWorkerCounts is SKEIN_BENCH_WORKERS (comma-separated, ascending),
// or 0, 100, 300 and 1,000.
func benchWorkerCounts(b *testing.B) []int {
	spec := os.Getenv("SKEIN_BENCH_WORKERS")
	if spec == "" {
		return []int{0, 100, 300, 1000}
	}
	var counts []int
	for _, f := range strings.Split(spec, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 || (len(counts) > 0 && n <= counts[len(counts)-1]) {
			b.Fatalf("SKEIN_BENCH_WORKERS=%q: want ascending counts such as 0,100,300,1000", spec)
		}
		counts = append(counts, n)
	}
	return counts
}

// BenchmarkLeaderIdleCost measures the leader's own cost per node while
// the cluster idles (issue 17): one real agent process leads a one-node
// Raft cluster, and simulated workers (simWorkers) register, renew their
// leases with it at the agent's heartbeat interval and watch their views. At each count
// of SKEIN_BENCH_WORKERS, once every worker is ready and after 3 s to
// settle, it reads the leader process's CPU time over a 10 s window and
// its resident memory, and reports them with the slope per worker from
// the first count to the last. The workers share the machine's cores
// with the leader; only the leader process's own CPU time is counted.
func BenchmarkLeaderIdleCost(b *testing.B) {
	counts := benchWorkerCounts(b)
	const window = 10 * time.Second
	for range b.N {
		n := newNodes(b, "127.0.0.51")[0]
		n.start(b)
		admin, err := api.NewClient(n.proc.addr, adminToken(b))
		if err != nil {
			b.Fatal(err)
		}
		sims := newSimWorkers(n.proc.addr, 250*time.Millisecond)
		pid := n.proc.cmd.Process.Pid
		var cores, rss []float64
		for _, count := range counts {
			sims.grow(b, count)
			testutil.WaitFor(b, 2*time.Minute, func() error {
				return allReady(admin, count+1)
			})
			time.Sleep(3 * time.Second) // settle: registrations applied, passes done
			failedBefore := sims.failed.Load()
			cpu0, err := testutil.CPUSeconds(pid)
			if err != nil {
				b.Fatal(err)
			}
			start := time.Now()
			time.Sleep(window) // the thing measured is idling
			cpu1, err := testutil.CPUSeconds(pid)
			if err != nil {
				b.Fatal(err)
			}
			mib, err := testutil.RSSMiB(pid)
			if err != nil {
				b.Fatal(err)
			}
			if err := allReady(admin, count+1); err != nil {
				b.Errorf("%d workers: after the idle window: %v", count, err)
			}
			c := (cpu1 - cpu0) / time.Since(start).Seconds()
			cores, rss = append(cores, c), append(rss, mib)
			b.ReportMetric(c, fmt.Sprintf("cores@%d", count))
			b.ReportMetric(mib, fmt.Sprintf("rss-MiB@%d", count))
			b.ReportMetric(float64(sims.failed.Load()-failedBefore), fmt.Sprintf("failed-calls@%d", count))
		}
		sims.close()
		if k := len(counts) - 1; k > 0 {
			workers := float64(counts[k] - counts[0])
			b.ReportMetric(100*(cores[k]-cores[0])/workers, "core%/worker")
			b.ReportMetric(1024*(rss[k]-rss[0])/workers, "rss-KiB/worker")
		}
		_ = n.proc.cmd.Process.Signal(os.Interrupt)
		_ = n.proc.cmd.Wait()
	}
}

// allReady checks that the agent's state holds want nodes, all ready.
func allReady(c *api.Client, want int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	nodes, err := c.Nodes(ctx)
	if err != nil {
		return err
	}
	ready := 0
	for _, n := range nodes {
		if n.Status == structs.NodeReady {
			ready++
		}
	}
	if len(nodes) != want || ready != want {
		return fmt.Errorf("%d of %d nodes ready, want %d", ready, len(nodes), want)
	}
	return nil
}

// BenchmarkRealAgentsIdleLeader measures the leader of an idle cluster of
// real agent processes on loopback (issue 17's first table):
// SKEIN_BENCH_AGENTS agents (default 20), every one a server, or with
// SKEIN_BENCH_STANDBYS=N three voters and N standbys, the rest workers.
// Once every node is ready and after 5 s to settle, it reads the leader
// process's CPU time over a 10 s window, its resident memory and its
// open files. All agents share the machine's cores.
func BenchmarkRealAgentsIdleLeader(b *testing.B) {
	agents := envInt(b, "SKEIN_BENCH_AGENTS", 20)
	var flags []string
	if s := os.Getenv("SKEIN_BENCH_STANDBYS"); s != "" {
		flags = []string{"--standbys", s}
	}
	for range b.N {
		ips := make([]string, agents)
		for i := range ips {
			ips[i] = fmt.Sprintf("127.0.2.%d", i+1)
		}
		nodes := newNodes(b, ips...)
		nodes[0].startWith(b, flags)
		for _, n := range nodes[1:] {
			n.startWith(b, flags, nodes[0].gossip())
		}
		admin, err := api.NewClient(nodes[0].proc.addr, adminToken(b))
		if err != nil {
			b.Fatal(err)
		}
		testutil.WaitFor(b, 2*time.Minute, func() error { return allReady(admin, agents) })
		time.Sleep(5 * time.Second) // settle: promotions, registrations
		lead := leaderOf(b, nodes)
		pid := lead.proc.cmd.Process.Pid
		cpu0, err := testutil.CPUSeconds(pid)
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		time.Sleep(10 * time.Second) // the thing measured is idling
		cpu1, err := testutil.CPUSeconds(pid)
		if err != nil {
			b.Fatal(err)
		}
		mib, err := testutil.RSSMiB(pid)
		if err != nil {
			b.Fatal(err)
		}
		fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		if err != nil {
			b.Fatal(err)
		}
		peers, err := admin.RaftPeers(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		if err := allReady(admin, agents); err != nil {
			b.Errorf("after the idle window: %v", err)
		}
		b.ReportMetric((cpu1-cpu0)/time.Since(start).Seconds(), "leader-cores")
		b.ReportMetric(mib, "leader-rss-MiB")
		b.ReportMetric(float64(len(fds)), "leader-fds")
		b.ReportMetric(float64(len(peers)), "raft-servers")
		for _, n := range nodes {
			_ = n.proc.cmd.Process.Signal(os.Interrupt)
		}
		for _, n := range nodes {
			_ = n.proc.cmd.Wait()
		}
	}
}

// envInt is the environment variable name as a positive number, or def.
func envInt(b *testing.B, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		b.Fatalf("%s=%q: want a positive number", name, s)
	}
	return n
}
