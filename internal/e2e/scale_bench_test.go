package e2e

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"slices"
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
// that speak the real node-to-node protocol to real agents, as a worker's
// agent does (a node outside Raft): each registers its inventory with the
// leader, renews its lease every interval (a worker's: simRenewEvery)
// through a server that does not lead (or the leader, when it is the only
// server), keeps a watch of its view open with one of the servers, and
// runs what the view places on it without processes (sim). They hold no
// Raft state and do not gossip.
type simWorkers struct {
	// servers are the servers' API addresses; leader is the index of the
	// one the sims take to lead, which follows the leader the views name
	// (by the servers' node IDs, ids).
	servers  []string
	ids      map[string]int
	leader   atomic.Int32
	interval time.Duration
	runFor   time.Duration
	// direct makes the sims renew their leases with the leader itself,
	// as every node did before servers passed workers' renewals on: the
	// benchmarks' way to compare the two.
	direct bool
	ledger *simLedger
	ctx    context.Context
	stop   context.CancelFunc
	wg     sync.WaitGroup
	n      int
	failed atomic.Int64 // heartbeats, watches and reports the servers did not answer
	// Counts of what a clean run has none of: sims the leader marked
	// down, sims that went --stop-after without a renewed lease,
	// allocations ended while their sim was running them, and reports the
	// leader refused on their merits.
	markedDown, lapses, lostRunning, refusedReports atomic.Int64
	// links holds each sim's network (*simLink by index), which a
	// benchmark may cut to make the sim fall silent.
	links sync.Map
}

// newSimWorkers makes sims for the servers at the API addresses servers,
// the first of which leads, whose node IDs are ids (index in servers by
// ID; nil for a single server), that beat every interval and run each
// allocation for runFor.
func newSimWorkers(servers []string, ids map[string]int, interval, runFor time.Duration) *simWorkers {
	ctx, stop := context.WithCancel(context.Background())
	return &simWorkers{servers: servers, ids: ids, interval: interval, runFor: runFor,
		ledger: newSimLedger(), ctx: ctx, stop: stop}
}

// clients are worker i's clients of each server, from an address of its
// own (127.1.0.0/16), as each real node has: the agent bounds
// connections per client address.
func (s *simWorkers) clients(i int) ([]*api.Client, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	local := &net.TCPAddr{IP: net.IPv4(127, 1, byte(i>>8), byte(i))}
	tr.DialContext = s.link(i).dialer((&net.Dialer{LocalAddr: local, Timeout: 5 * time.Second}).DialContext)
	hc := &http.Client{Timeout: 30 * time.Second, Transport: tr}
	cs := make([]*api.Client, len(s.servers))
	for k, addr := range s.servers {
		c, err := api.NewClient(addr, "")
		if err != nil {
			return nil, err
		}
		cs[k] = c.WithHTTPClient(hc)
	}
	return cs, nil
}

// follow makes the sims take the server whose node ID is id to lead.
func (s *simWorkers) follow(id string) {
	if k, ok := s.ids[id]; ok {
		s.leader.Store(int32(k))
	}
}

// grow registers workers until there are n, and starts their heartbeats,
// each at its own phase of the interval, their watches, spread over the
// servers, and their reporters.
func (s *simWorkers) grow(b testing.TB, n int) {
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
				cs, err := s.clients(i)
				if err == nil {
					m := newSim(s, id, cs)
					if err = m.leader().Register(s.ctx, testutil.SimNode(id, i)); err == nil {
						s.wg.Add(3)
						go m.beat(rand.N(s.interval))
						go m.watch(i % len(cs))
						go m.report()
					}
				}
				if err != nil {
					errs <- fmt.Errorf("register %s: %w", id, err)
					return
				}
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
// the cluster idles: SKEIN_BENCH_SERVERS real agent processes
// (one, the default, or three voters) hold Raft, and simulated workers
// (simWorkers) register, renew their leases as often as a worker does
// (through a server that does not lead, when there is one) and
// watch their views, spread over the servers (SKEIN_BENCH_DIRECT_LEASE=1:
// they renew with the leader itself). At each count of
// SKEIN_BENCH_WORKERS, once every worker is ready and after 3 s to
// settle, it reads the leader process's CPU time over a 10 s window and
// its resident memory, and reports them with the slope per worker from
// the first count to the last. The workers share the machine's cores
// with the leader; only the leader process's own CPU time is counted.
func BenchmarkLeaderIdleCost(b *testing.B) {
	counts := benchWorkerCounts(b)
	servers := testutil.EnvInt(b, "SKEIN_BENCH_SERVERS", 1)
	if servers != 1 && servers != 3 {
		b.Fatalf("SKEIN_BENCH_SERVERS=%d: want 1 or 3", servers)
	}
	const window = 10 * time.Second
	for range b.N {
		c := startSimCluster(b, "127.0.0", 51, servers, 0, time.Second)
		sims, admin := c.sims, c.client(b, 0)
		sims.direct = os.Getenv("SKEIN_BENCH_DIRECT_LEASE") != ""
		pid := c.nodes[0].proc.cmd.Process.Pid
		var cores, rss []float64
		for _, count := range counts {
			sims.grow(b, count)
			testutil.WaitFor(b, 2*time.Minute, func() error {
				return allReady(admin, count+servers)
			})
			time.Sleep(3 * time.Second) // settle: registrations applied, passes done
			failedBefore := sims.failed.Load()
			c, mib := idle(b, pid, window)
			if err := allReady(admin, count+servers); err != nil {
				b.Errorf("%d workers: after the idle window: %v", count, err)
			}
			cores, rss = append(cores, c), append(rss, mib)
			b.ReportMetric(c, fmt.Sprintf("cores@%d", count))
			b.ReportMetric(mib, fmt.Sprintf("rss-MiB@%d", count))
			b.ReportMetric(float64(sims.failed.Load()-failedBefore), fmt.Sprintf("failed-calls@%d", count))
		}
		if k := len(counts) - 1; k > 0 {
			workers := float64(counts[k] - counts[0])
			b.ReportMetric(100*(cores[k]-cores[0])/workers, "core%/worker")
			b.ReportMetric(1024*(rss[k]-rss[0])/workers, "rss-KiB/worker")
		}
		sims.close()
		stopRealAgents(c.nodes)
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

// BenchmarkRealAgentsIdleLeader measures an idle cluster of real agent
// processes on loopback (docs/benchmarks-history.md, "Scale — the leader's
// idle cost per node: servers against workers"): SKEIN_BENCH_AGENTS
// agents (default 20), every one a server (--standbys -1), or with
// SKEIN_BENCH_STANDBYS=N three voters and N standbys, the rest workers.
// Once every node is ready and after 5 s to settle, it reads every
// process's CPU time over a 10 s window, and the leader's resident memory
// and open files. It reports the leader's cores, the mean of the other
// servers' and the mean of the workers' (none when every node is a
// server). All agents share the machine's cores.
func BenchmarkRealAgentsIdleLeader(b *testing.B) {
	agents := testutil.EnvInt(b, "SKEIN_BENCH_AGENTS", 20)
	flags := []string{"--standbys", cmp.Or(os.Getenv("SKEIN_BENCH_STANDBYS"), "-1")}
	for range b.N {
		nodes, admin := startRealAgents(b, "127.0.2", 1, agents, flags)
		time.Sleep(5 * time.Second) // settle: promotions, registrations
		lead := leaderOf(b, nodes)
		peers, err := admin.RaftPeers(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		server := map[string]bool{}
		for _, p := range peers {
			server[p.Name] = true
		}
		pids := make([]int, len(nodes))
		for i, n := range nodes {
			pids[i] = n.proc.cmd.Process.Pid
		}
		cores := idleCores(b, pids, 10*time.Second)
		var servers, workers []float64
		for i, n := range nodes {
			switch {
			case n == lead:
			case server["node-"+n.ip]:
				servers = append(servers, cores[i])
			default:
				workers = append(workers, cores[i])
			}
		}
		pid := lead.proc.cmd.Process.Pid
		mib, err := testutil.RSSMiB(pid)
		if err != nil {
			b.Fatal(err)
		}
		fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		if err != nil {
			b.Fatal(err)
		}
		if err := allReady(admin, agents); err != nil {
			b.Errorf("after the idle window: %v", err)
		}
		b.ReportMetric(cores[slices.Index(nodes, lead)], "leader-cores")
		b.ReportMetric(mean(servers), "server-cores")
		b.ReportMetric(mean(workers), "worker-cores")
		b.ReportMetric(mib, "leader-rss-MiB")
		b.ReportMetric(float64(len(fds)), "leader-fds")
		b.ReportMetric(float64(len(peers)), "raft-servers")
		stopRealAgents(nodes)
	}
}

// idleCores lets the processes pids idle for window and returns the
// cores each used meanwhile.
func idleCores(b *testing.B, pids []int, window time.Duration) []float64 {
	b.Helper()
	read := func() []float64 {
		s := make([]float64, len(pids))
		for i, pid := range pids {
			var err error
			if s[i], err = testutil.CPUSeconds(pid); err != nil {
				b.Fatal(err)
			}
		}
		return s
	}
	before, start := read(), time.Now()
	time.Sleep(window) // the thing measured is idling
	after, took := read(), time.Since(start).Seconds()
	for i := range after {
		after[i] = (after[i] - before[i]) / took
	}
	return after
}

// mean is the mean of xs, 0 for none.
func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	var sum float64
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs))
}

// idle lets the process pid idle for window and returns the cores it used
// meanwhile and its resident memory after.
func idle(b *testing.B, pid int, window time.Duration) (cores, rssMiB float64) {
	b.Helper()
	cores = idleCores(b, []int{pid}, window)[0]
	mib, err := testutil.RSSMiB(pid)
	if err != nil {
		b.Fatal(err)
	}
	return cores, mib
}
