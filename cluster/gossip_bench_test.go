package cluster

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/skein-dev/skein/internal/testutil"
)

// BenchmarkGossipMetaSpread measures B5: how long a change of one
// member's gossip metadata (in skein: its free GPUs) takes to reach the
// leader and every member. Each size in SKEIN_BENCH_MEMBERS (a comma
// list, default 100) starts that many full members in this process on
// loopback, each a Cluster with its own raft node and memberlist, with
// the production defaults (no Timing or GossipTiming set). Member 0
// bootstraps raft and leads; with Servers 1 every other member is a
// worker outside raft, the shape of a large cluster. Once every member
// sees all the others alive and the joins' broadcasts have died down,
// the process's CPU is read over an idle window; then SKEIN_BENCH_CHANGES
// (default 40) changes are made one at a time, each on a different
// member other than the leader, as the agent's metaLoop does: new bytes
// behind Config.Meta, then UpdateMeta. A member has seen a change when
// its MemberEvents delivers the update with the new bytes, which is
// where the agent's leader hears it (memberLoop, leader.MemberEvent).
//
// Run it alone (heavy at hundreds of members). On two cores one process
// holds only about 150-190 members with these timings over loopback
// sockets; beyond that false suspicions take over and the joins never
// converge (docs/benchmarks-history.md, "Scale — B5: a free-GPU change
// across 1,000 nodes"). SKEIN_BENCH_GOSSIP_NET=memory carries the
// gossip in memory instead (memNet), leaving the kernel's packet work
// out, for the sizes the sockets cannot reach:
//
//	SKEIN_BENCH_MEMBERS=100,300,1000 CGO_ENABLED=0 go test -tags hashicorpmetrics \
//	    -run '^$' -bench GossipMetaSpread -benchtime 1x -timeout 60m ./cluster/
func BenchmarkGossipMetaSpread(b *testing.B) {
	sizes := benchSizes(b, "SKEIN_BENCH_MEMBERS", []int{100})
	changes := testutil.EnvInt(b, "SKEIN_BENCH_CHANGES", 40)
	inMemory := false
	switch v := os.Getenv("SKEIN_BENCH_GOSSIP_NET"); v {
	case "", "loopback":
	case "memory":
		inMemory = true
	default:
		b.Fatalf("SKEIN_BENCH_GOSSIP_NET=%q: want loopback or memory", v)
	}
	var timing GossipTiming
	if v := os.Getenv("SKEIN_BENCH_PROBE_INTERVAL"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < DefaultProbeInterval {
			b.Fatalf("SKEIN_BENCH_PROBE_INTERVAL=%q: want a duration of at least %s", v, DefaultProbeInterval)
		}
		timing = GossipTiming{ProbeInterval: d, ProbeTimeout: d / 2}
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("members=%d", n), func(b *testing.B) {
			for range b.N {
				var mem *memNet
				if inMemory {
					mem = &memNet{}
				}
				spreadRun(b, n, changes, mem, timing)
			}
		})
	}
}

// Phases of one run. The gap lets every member finish retransmitting the
// previous change (16 transmissions at 1,000 members, three a gossip
// round: about 600 ms) so that each change is measured on its own.
const (
	spreadJoinWait   = 5 * time.Minute  // every member sees every other alive
	spreadJoinBatch  = 50               // members joining before the cluster converges again
	spreadSettle     = 5 * time.Second  // the joins' broadcasts die down
	spreadIdleWindow = 10 * time.Second // CPU of the idle cluster
	spreadGap        = time.Second      // between one change's end and the next
	spreadChangeWait = 40 * time.Second // beyond a push-pull round at 1,000 members (30 s)
)

// spreadMember is one member of a run.
type spreadMember struct {
	id   string
	c    *Cluster
	meta atomic.Pointer[[]byte]
}

// spreadMeta is application metadata of the size and shape of the agent's
// (agent/peer.Meta as JSON: name, API address, free and total GPUs,
// version), with seq making every change's bytes unique.
func spreadMeta(i, free, seq int) []byte {
	return fmt.Appendf(nil, `{"n":"gpu-node-%04d","h":"10.0.%d.%d:7471","f":%d,"t":8,"v":"0.17.0","q":%d}`,
		i, i/250, i%250+1, free, seq)
}

// spreadProbe records, for the change in flight, when each member first
// saw it.
type spreadProbe struct {
	mu    sync.Mutex
	src   string
	want  []byte
	start time.Time
	seen  map[string]time.Duration
	need  int
	done  chan struct{}
}

// arm starts watching for src's metadata becoming want; every member but
// src must see it.
func (p *spreadProbe) arm(src string, want []byte, members int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.src, p.want, p.start = src, want, time.Now()
	p.seen = make(map[string]time.Duration, members)
	p.need = members - 1
	p.done = make(chan struct{})
}

// saw records that member observer received ev.
func (p *spreadProbe) saw(observer string, ev MemberEvent) {
	if ev.Type != EventUpdate {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.want == nil || ev.Member.ID != p.src || !bytes.Equal(ev.Member.Meta, p.want) {
		return
	}
	if _, ok := p.seen[observer]; ok || observer == p.src {
		return
	}
	p.seen[observer] = time.Since(p.start)
	if len(p.seen) == p.need {
		close(p.done)
	}
}

// result copies what was seen and disarms the probe.
func (p *spreadProbe) result() map[string]time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.seen
	p.want, p.seen = nil, nil
	return out
}

// spreadRun is one run at n members, their gossip over mem or, when mem
// is nil, over loopback sockets, with the gossip timing given (zero: the
// defaults).
func spreadRun(b *testing.B, n, changes int, mem *memNet, timing GossipTiming) {
	if n < 2 {
		b.Fatalf("need at least 2 members, got %d", n)
	}
	// A member holds about five descriptors (raft listener, bbolt file,
	// gossip TCP and UDP, pooled connections); Go raises the soft limit to
	// the hard one at start, so only the hard limit can be too low.
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil && lim.Cur < uint64(8*n) {
		b.Fatalf("open-file limit %d is too low for %d members (want %d): raise ulimit -n", lim.Cur, n, 8*n)
	}

	probe := &spreadProbe{}
	stop := make(chan struct{})
	var drains sync.WaitGroup
	members := make([]*spreadMember, n)
	for i := range members {
		m := &spreadMember{id: fmt.Sprintf("m%04d", i)}
		meta := spreadMeta(i, 8, 0)
		m.meta.Store(&meta)
		members[i] = m
	}
	start := time.Now()
	if err := forEach(members, 4, func(i int, m *spreadMember) error {
		cfg := Config{
			NodeID:     m.id,
			DataDir:    b.TempDir(),
			RaftBind:   "127.0.0.1:0",
			GossipBind: "127.0.0.1:0",
			FSM:        newKV(),
			Bootstrap:  i == 0,
			Voters:     1,
			Servers:    1,
			Meta:       func() []byte { return *m.meta.Load() },

			GossipTiming: timing,
		}
		if mem != nil {
			cfg.gossipTransport = mem.transport()
		}
		c, err := New(cfg)
		if err != nil {
			return err
		}
		m.c = c
		drains.Add(2)
		go func() {
			defer drains.Done()
			for {
				select {
				case <-stop:
					return
				case <-c.LeaderEvents():
				}
			}
		}()
		go func() {
			defer drains.Done()
			for {
				select {
				case <-stop:
					return
				case ev := <-c.MemberEvents():
					probe.saw(m.id, ev)
				}
			}
		}()
		return nil
	}); err != nil {
		b.Fatalf("start members: %v", err)
	}
	defer func() {
		if err := forEach(members, 32, func(_ int, m *spreadMember) error {
			if m.c == nil {
				return nil
			}
			return m.c.Shutdown()
		}); err != nil {
			b.Errorf("shut down: %v", err)
		}
		close(stop)
		drains.Wait()
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := members[0].c.WaitForLeader(ctx); err != nil {
		b.Fatalf("member 0 never led: %v", err)
	}
	// Members join in batches, each member through one already in picked
	// at random (so no seed serves every join's full-state exchange), and
	// a batch waits until everyone in sees everyone in: joins faster than
	// that saturate two cores, probes time out, and the false suspicions
	// that follow feed on themselves.
	rng := rand.New(rand.NewPCG(uint64(n), 17))
	deadline := time.Now().Add(spreadJoinWait)
	for lo := 1; lo < n; lo += spreadJoinBatch {
		hi := min(lo+spreadJoinBatch, n)
		for i := lo; i < hi; i++ {
			var err error
			for range 3 {
				via := members[rng.IntN(lo)]
				if _, err = members[i].c.Join([]string{via.c.GossipAddr()}); err == nil {
					break
				}
			}
			if err != nil {
				b.Fatalf("%s join: %v", members[i].id, err)
			}
		}
		for behind(members[:hi], false) > 0 {
			if time.Now().After(deadline) {
				b.Fatalf("%d of %d members do not see all %d alive after %s",
					behind(members[:hi], true), hi, hi, spreadJoinWait)
			}
			time.Sleep(500 * time.Millisecond)
		}
		progress("%d members joined and converged (%s)", hi, time.Since(start).Round(time.Second))
	}
	b.Logf("%d members started and converged in %s", n, time.Since(start).Round(time.Millisecond))
	time.Sleep(spreadSettle)

	idleCPU, idleWall := cpuTime(), time.Now()
	time.Sleep(spreadIdleWindow)
	idleCores := (cpuTime() - idleCPU).Seconds() / time.Since(idleWall).Seconds()

	var leaderLat, allLat, eachLat, updateLat []time.Duration
	missed := 0
	changeCPU, changeWall := cpuTime(), time.Now()
	b.ResetTimer()
	for k := range changes {
		// Sources walk the members other than the leader, spread evenly.
		si := 1 + k*(n-1)/changes
		src := members[si]
		time.Sleep(spreadGap + time.Duration(rng.Int64N(int64(DefaultGossipInterval))))
		meta := spreadMeta(si, k%9, k+1)
		probe.arm(src.id, meta, n)
		done := probe.done
		src.meta.Store(&meta)
		began := time.Now()
		if err := src.c.UpdateMeta(); err != nil {
			b.Fatalf("change %d on %s: %v", k, src.id, err)
		}
		updateLat = append(updateLat, time.Since(began))
		select {
		case <-done:
		case <-time.After(spreadChangeWait):
		}
		seen := probe.result()
		if len(seen) < n-1 {
			missed += n - 1 - len(seen)
			b.Logf("change %d on %s: %d of %d members did not see it within %s", k, src.id, n-1-len(seen), n-1, spreadChangeWait)
			continue
		}
		leaderLat = append(leaderLat, seen[members[0].id])
		var worst time.Duration
		for _, d := range seen {
			eachLat = append(eachLat, d)
			worst = max(worst, d)
		}
		allLat = append(allLat, worst)
		progress("change %d on %s: leader %s, all %s", k, src.id, seen[members[0].id], worst)
	}
	b.StopTimer()
	changeCores := (cpuTime() - changeCPU).Seconds() / time.Since(changeWall).Seconds()

	if len(allLat) == 0 {
		b.Fatalf("no change reached every member")
	}
	lp, ap, ep, up := quantiles(leaderLat), quantiles(allLat), quantiles(eachLat), quantiles(updateLat)
	b.ReportMetric(ms(lp[0]), "leader-p50-ms")
	b.ReportMetric(ms(lp[1]), "leader-p99-ms")
	b.ReportMetric(ms(lp[2]), "leader-max-ms")
	b.ReportMetric(ms(ap[0]), "all-p50-ms")
	b.ReportMetric(ms(ap[1]), "all-p99-ms")
	b.ReportMetric(ms(ap[2]), "all-max-ms")
	b.ReportMetric(idleCores, "idle-cores")
	b.ReportMetric(changeCores, "change-cores")
	b.ReportMetric(float64(missed), "missed")
	b.Logf("%d members, %d changes (%d reached all): leader p50/p99/max %s/%s/%s; all members %s/%s/%s; "+
		"each member %s/%s/%s over %d sightings; UpdateMeta returned after %s/%s/%s; "+
		"CPU %.2f cores idle, %.2f cores during the changes; %d member-sightings missed",
		n, changes, len(allLat), lp[0], lp[1], lp[2], ap[0], ap[1], ap[2], ep[0], ep[1], ep[2], len(eachLat),
		up[0], up[1], up[2], idleCores, changeCores, missed)
}

// behind counts the members whose gossip does not list every one of
// members alive, stopping at the first unless all is set. It reads the
// members' tables, not their MemberEvents: those drop the oldest events
// when a reader is behind, which a member that joins a few hundred
// others at once can be.
func behind(members []*spreadMember, all bool) int {
	n := 0
	for _, m := range members {
		alive := 0
		for _, o := range m.c.Members() {
			if o.Status == StatusAlive {
				alive++
			}
		}
		if alive != len(members) {
			if n++; !all {
				break
			}
		}
	}
	return n
}

// progress tells whoever watches a long run how far it got; b.Logf
// prints only at the end.
func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, time.Now().UTC().Format("15:04:05 ")+format+"\n", args...)
}

// forEach runs f over members with at most par at once and returns the
// first error.
func forEach(members []*spreadMember, par int, f func(int, *spreadMember) error) error {
	var (
		wg    sync.WaitGroup
		errMu sync.Mutex
		first error
	)
	sem := make(chan struct{}, par)
	for i, m := range members {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := f(i, m); err != nil {
				errMu.Lock()
				if first == nil {
					first = fmt.Errorf("%s: %w", m.id, err)
				}
				errMu.Unlock()
			}
		}()
	}
	wg.Wait()
	return first
}

// cpuTime is the user and system CPU this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// quantiles returns the p50, p99 (nearest rank) and maximum of ds.
func quantiles(ds []time.Duration) [3]time.Duration {
	if len(ds) == 0 {
		return [3]time.Duration{}
	}
	s := slices.Sorted(slices.Values(ds))
	return [3]time.Duration{testutil.Percentile(s, 0.50), testutil.Percentile(s, 0.99), s[len(s)-1]}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// benchSizes reads a comma-separated list of positive integers from the
// environment.
func benchSizes(b *testing.B, name string, def []int) []int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || v < 2 {
			b.Fatalf("%s=%q: want a comma-separated list of member counts of at least 2", name, s)
		}
		out = append(out, v)
	}
	return out
}
