package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

// profile is one size of chaos run.
type profile struct {
	nodes    int
	faults   int
	nemeses  []string
	interval [2]time.Duration // between two submits, least and most
}

var profiles = map[string]profile{
	"short": {
		nodes: 3, faults: 6,
		nemeses:  []string{"kill", "pause", "partition", "restart"},
		interval: [2]time.Duration{time.Second, 2 * time.Second},
	},
	"long": {
		nodes: 5, faults: 30,
		nemeses:  []string{"kill", "pause", "partition", "restart", "restart-all", "leader+worker"},
		interval: [2]time.Duration{600 * time.Millisecond, 1200 * time.Millisecond},
	},
}

// TestChaos starts a cluster in containers, injects a seeded, randomised
// schedule of faults while a client submits workload jobs through random
// nodes, then heals everything, lets the cluster settle and checks the
// invariants of docs/architecture.md, "Invariants". A failure keeps the evidence under
// results/<seed>/.
func TestChaos(t *testing.T) {
	mode := os.Getenv("SKEIN_CHAOS")
	p, ok := profiles[mode]
	if !ok {
		t.Skip("set SKEIN_CHAOS=short or SKEIN_CHAOS=long to run (make chaos-short, make chaos); SKEIN_CHAOS_SEED replays a run")
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("SKEIN_CHAOS_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("SKEIN_CHAOS_SEED=%q: %v", s, err)
		}
	}
	t.Logf("seed %d", seed)
	requireDocker(t)
	began := time.Now()

	image := buildImage(t)
	d := startDemo(t, image, p.nodes)
	r := &run{t: t, d: d, seed: seed, rng: rand.New(rand.NewPCG(seed, 1)), failovers: map[string][]time.Duration{},
		jobImage: image}
	// Registered after startDemo, so it runs before demo.sh down.
	t.Cleanup(r.keepResults)

	ctx, stop := context.WithCancel(context.Background())
	cl := &client{r: r, rng: rand.New(rand.NewPCG(seed, 2)), interval: p.interval}
	r.cl = cl
	var wg sync.WaitGroup
	wg.Go(func() { cl.loop(ctx) })
	for i := range p.faults {
		op := p.nemeses[r.rng.IntN(len(p.nemeses))]
		r.fault(i, op)
		r.settle(fmt.Sprintf("the cluster to settle after fault %d (%s)", i, op))
		pauseFor(r.hold(2*time.Second, 6*time.Second)) // a quiet spell, jobs only
	}
	stop()
	wg.Wait()
	r.probes.Wait()
	r.logf("faults over; %d requests made", len(cl.history))

	r.waitAllTerminal(cl)
	r.check(cl)
	r.reportTimings()
	t.Logf("seed %d: %d faults, %d requests, %s", seed, p.faults, len(cl.history), time.Since(began).Round(time.Second))
}

// run is one chaos run: the cluster, the seeded schedule and its log.
type run struct {
	t    *testing.T
	d    *demo
	seed uint64
	rng  *rand.Rand
	cl   *client
	// jobImage is the image a third of the workload jobs run in (the
	// nodes' own), on the host's engine, inside their node's container.
	jobImage string
	// http is the HTTP client of every API call (api), made once.
	http     *http.Client
	httpErr  error
	httpOnce sync.Once

	mu     sync.Mutex
	events []string // the nemesis' log, events.log of results
	final  map[string][]structs.Job
	// faults are the faults injected, for the recovery timings.
	faults []injected
	// failovers are the times from a fault on the leader to the first
	// write accepted again, by nemesis.
	failovers map[string][]time.Duration
	probes    sync.WaitGroup
}

// injected is one fault: which nodes it silenced and when.
type injected struct {
	op      string
	victims []string
	at      time.Time
}

func (r *run) logf(format string, args ...any) {
	r.t.Helper()
	line := time.Now().UTC().Format("15:04:05.000 ") + fmt.Sprintf(format, args...)
	r.mu.Lock()
	r.events = append(r.events, line)
	r.mu.Unlock()
	r.t.Log(line)
}

func (r *run) container(node string) string { return r.d.name + "-" + node }

func (r *run) ip(node string) string {
	return fmt.Sprintf("%s.%d", r.d.subnet, 11+strings.Index("abcde", node))
}

// api returns a client for node's API at its container address, over
// TLS checked against the cluster CA demo.sh copied to the shared dir.
// Every client shares one HTTP client, so connections are reused.
func (r *run) api(node string) *api.Client {
	r.httpOnce.Do(func() {
		bundle, err := os.ReadFile(filepath.Join(r.d.shared, "ca.crt"))
		if err != nil {
			r.httpErr = err
			return
		}
		conf, err := api.ClusterTLS(bundle)
		if err != nil {
			r.httpErr = err
			return
		}
		r.http = &http.Client{Transport: &http.Transport{TLSClientConfig: conf, MaxIdleConnsPerHost: 8}}
	})
	if r.httpErr != nil {
		r.t.Fatal(r.httpErr)
	}
	c, err := api.NewClient("https://"+r.ip(node)+":7470", r.d.user)
	if err != nil {
		r.t.Fatal(err)
	}
	return c.WithHTTPClient(r.http)
}

// docker runs a docker command, failing the test if it fails.
func (r *run) docker(args ...string) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "docker", args...).CombinedOutput(); err != nil {
		r.t.Fatalf("docker %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// each runs f for every node at the same instant and waits for all.
func each(nodes []string, f func(n string)) {
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Go(func() { f(n) })
	}
	wg.Wait()
}

// leader returns the node that the cluster names leader, or "" when none
// answers.
func (r *run) leader() string {
	for _, n := range r.d.nodes {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		st, err := r.api(n).Status(ctx)
		cancel()
		if err == nil && st.Leader != "" {
			if l, ok := strings.CutPrefix(st.Leader, r.d.name+"-"); ok {
				return l
			}
		}
	}
	return ""
}

// injected records a fault that silenced victims just now. When the
// leader is among them, a probe times how long the others take to accept
// a write again.
func (r *run) injected(op, leader string, victims ...string) {
	at := time.Now()
	r.mu.Lock()
	r.faults = append(r.faults, injected{op: op, victims: victims, at: at})
	r.mu.Unlock()
	if leader == "" || !slices.Contains(victims, leader) {
		return
	}
	var others []string
	for _, n := range r.d.nodes {
		if !slices.Contains(victims, n) {
			others = append(others, n)
		}
	}
	if len(others) == 0 {
		// Every node restarts: time the cluster as a whole.
		others = r.d.nodes
	}
	r.probes.Go(func() { r.probeWrites(op, others, at) })
}

// probeWrites submits a no-op job through the given nodes in turn until
// one is acknowledged, and records how long after the fault that was.
func (r *run) probeWrites(op string, nodes []string, at time.Time) {
	spec := structs.JobSpec{Name: "probe", Command: []string{"true"}, Workdir: "/tmp", Nodes: 1}
	for try := 0; time.Since(at) < time.Minute; try++ {
		node := nodes[try%len(nodes)]
		// As long as a user would wait: longer than an agent holds a
		// write while no leader is known.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := r.api(node).SubmitJob(ctx, api.SubmitRequest{
			RequestID: fmt.Sprintf("probe-%d-%d-%d", r.seed, at.UnixNano(), try), Spec: spec})
		cancel()
		if err == nil {
			took := time.Since(at)
			r.mu.Lock()
			r.failovers[op] = append(r.failovers[op], took)
			r.mu.Unlock()
			r.logf("%s of the leader: writes accepted again through %s after %s", op, node, took.Round(time.Millisecond))
			return
		}
		pauseFor(20 * time.Millisecond)
	}
	r.logf("%s of the leader: no write accepted within a minute", op)
}

// hold draws a duration in [lo, hi) from the schedule.
func (r *run) hold(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(r.rng.Int64N(int64(hi-lo)))
}

// pauseFor blocks for d, the length of a fault.
func pauseFor(d time.Duration) {
	<-time.After(d)
}

// fault injects fault i of kind op and heals it.
func (r *run) fault(i int, op string) {
	r.t.Helper()
	nodes := r.d.nodes
	// Half the faults aim at the leader, whatever it is then.
	victim := nodes[r.rng.IntN(len(nodes))]
	leader := r.leader()
	if (op == "leader+worker" || r.rng.IntN(2) == 0) && leader != "" {
		victim = leader
	}
	switch op {
	case "kill":
		down := r.hold(2*time.Second, 8*time.Second)
		r.logf("fault %d: kill %s for %s", i, victim, down)
		r.docker("kill", r.container(victim))
		r.injected(op, leader, victim)
		pauseFor(down)
		r.docker("start", r.container(victim))
	case "pause":
		// A frozen process cannot stop its workload, so a pause stays
		// shorter than the 3.5 s after which its jobs would be placed
		// again; longer ones would be the workload's violations by design.
		down := r.hold(500*time.Millisecond, 2500*time.Millisecond)
		r.logf("fault %d: pause %s for %s", i, victim, down)
		r.docker("pause", r.container(victim))
		r.injected(op, leader, victim)
		pauseFor(down)
		r.docker("unpause", r.container(victim))
	case "partition":
		down := r.hold(2*time.Second, 10*time.Second)
		r.logf("fault %d: partition %s away for %s", i, victim, down)
		r.docker("network", "disconnect", r.d.name+"-demo", r.container(victim))
		r.injected(op, leader, victim)
		pauseFor(down)
		r.docker("network", "connect", "--ip", r.ip(victim), r.d.name+"-demo", r.container(victim))
	case "restart":
		r.logf("fault %d: restart %s, data kept", i, victim)
		// A graceful stop hands leadership over first; no failover is
		// timed.
		r.injected(op, "", victim)
		r.docker("restart", "-t", "2", r.container(victim))
	case "restart-all":
		r.logf("fault %d: restart every node at once, data kept", i)
		each(nodes, func(n string) { r.docker("restart", "-t", "2", r.container(n)) })
		// Timed from the moment every container runs again.
		r.injected(op, leader, nodes...)
	case "leader+worker":
		worker := nodes[r.rng.IntN(len(nodes))]
		for worker == victim {
			worker = nodes[r.rng.IntN(len(nodes))]
		}
		down := r.hold(2*time.Second, 8*time.Second)
		r.logf("fault %d: kill leader %s and worker %s at once for %s", i, victim, worker, down)
		pair := []string{victim, worker}
		each(pair, func(n string) { r.docker("kill", r.container(n)) })
		r.injected(op, leader, pair...)
		pauseFor(down)
		each(pair, func(n string) { r.docker("start", r.container(n)) })
	default:
		r.t.Fatalf("unknown nemesis %q", op)
	}
	r.logf("fault %d: healed", i)
}

// settle waits until every node answers, names one leader and sees every
// node ready.
func (r *run) settle(what string) {
	r.t.Helper()
	waitFor(r.t, what, 90*time.Second, func() error {
		leaders := map[string]bool{}
		for _, n := range r.d.nodes {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			st, err := r.api(n).Status(ctx)
			cancel()
			if err != nil {
				return fmt.Errorf("%s: %w", n, err)
			}
			if st.Leader == "" || st.NodesReady != len(r.d.nodes) {
				return fmt.Errorf("%s: leader %q, %d/%d nodes ready", n, st.Leader, st.NodesReady, len(r.d.nodes))
			}
			leaders[st.Leader] = true
		}
		if len(leaders) != 1 {
			return fmt.Errorf("nodes name %d leaders", len(leaders))
		}
		return nil
	})
}

// outcome is what the client knows of one request.
type outcome string

const (
	outcomeOK      outcome = "ok"      // acknowledged: the job exists
	outcomeFailed  outcome = "failed"  // refused: no job may exist
	outcomeUnknown outcome = "unknown" // no answer: at most one job may exist
)

// request is one line of the client's history.
type request struct {
	RequestID string    `json:"request_id"`
	Outcome   outcome   `json:"outcome"`
	Job       string    `json:"job,omitempty"`
	GPUs      int       `json:"gpus"`
	For       string    `json:"for"`
	Tries     []string  `json:"tries"` // node: result of every try
	Start     time.Time `json:"start"`
	End       time.Time `json:"end"`
}

// client submits workload jobs with unique request IDs through random
// nodes and retries each with the same ID until it is answered.
type client struct {
	r        *run
	rng      *rand.Rand
	interval [2]time.Duration

	mu      sync.Mutex
	history []request
}

func (c *client) loop(ctx context.Context) {
	for n := 0; ; n++ {
		wait := c.interval[0] + time.Duration(c.rng.Int64N(int64(c.interval[1]-c.interval[0])))
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		req := c.submit(fmt.Sprintf("chaos-%d-%d", c.r.seed, n))
		c.mu.Lock()
		c.history = append(c.history, req)
		c.mu.Unlock()
	}
}

// submit makes one request, trying up to five times.
func (c *client) submit(id string) request {
	gpus := 1 + c.rng.IntN(8)
	dur := time.Duration(2+c.rng.IntN(9)) * time.Second
	req := request{RequestID: id, GPUs: gpus, For: dur.String(), Outcome: outcomeUnknown, Start: time.Now().UTC()}
	body := api.SubmitRequest{RequestID: id, Spec: structs.JobSpec{
		Name:     id,
		Command:  []string{"skein-workload", "--dir", "/shared", "--for", dur.String()},
		Workdir:  "/tmp",
		Nodes:    1,
		GPUs:     gpus,
		Restarts: 3,
	}}
	if c.rng.IntN(3) == 0 {
		// The same workload in a container: its locks are the same
		// files, through a mount of the shared directory.
		body.Spec.Image = c.r.jobImage
		body.Spec.Mounts = []structs.Mount{{Source: c.r.d.shared, Target: "/shared"}}
	}
	for range 5 {
		node := c.r.d.nodes[c.rng.IntN(len(c.r.d.nodes))]
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		job, err := c.r.api(node).SubmitJob(ctx, body)
		cancel()
		var ae *api.Error
		switch {
		case err == nil:
			req.Tries = append(req.Tries, node+": ok")
			req.Outcome, req.Job = outcomeOK, job.ID
		case errors.As(err, &ae) && ae.StatusCode >= 400 && ae.StatusCode < 500 && ae.StatusCode != http.StatusRequestTimeout:
			// Refused; after an unanswered try it stays unknown.
			req.Tries = append(req.Tries, node+": "+err.Error())
			if len(req.Tries) == 1 {
				req.Outcome = outcomeFailed
			}
		default:
			req.Tries = append(req.Tries, node+": "+err.Error())
			continue
		}
		break
	}
	req.End = time.Now().UTC()
	return req
}

// waitAllTerminal waits until every job the cluster knows has ended, then
// records every node's list of jobs.
func (r *run) waitAllTerminal(cl *client) {
	r.t.Helper()
	waitFor(r.t, "every job to reach a terminal state", 5*time.Minute, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		jobs, err := r.api(r.d.nodes[0]).Jobs(ctx, true)
		if err != nil {
			return err
		}
		open := 0
		for _, j := range jobs {
			if !j.State.Terminal() {
				open++
			}
		}
		if open > 0 {
			return fmt.Errorf("%d of %d jobs not ended", open, len(jobs))
		}
		return nil
	})
	r.logf("every job ended")
}

// check runs every checker on the healed, settled cluster.
func (r *run) check(cl *client) {
	r.t.Helper()
	t := r.t
	r.checkHashes()
	final := map[string][]structs.Job{}
	for _, n := range r.d.nodes {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		jobs, err := r.api(n).Jobs(ctx, true)
		cancel()
		if err != nil {
			t.Fatalf("jobs on %s: %v", n, err)
		}
		final[n] = jobs
	}
	r.mu.Lock()
	r.final = final
	r.mu.Unlock()

	// Acknowledged jobs exist exactly once on every node; no request, of
	// any outcome, created two jobs; a refused one created none.
	counts := map[string]int{}
	for _, req := range cl.history {
		counts[string(req.Outcome)]++
	}
	r.logf("requests: %d ok, %d failed, %d unknown", counts["ok"], counts["failed"], counts["unknown"])
	for _, n := range r.d.nodes {
		byID, byReq := map[string]int{}, map[string][]string{}
		for _, j := range final[n] {
			byID[j.ID]++
			byReq[j.RequestID] = append(byReq[j.RequestID], j.ID)
			if !j.State.Terminal() {
				t.Errorf("%s: job %s (%s) is %s after the run", n, j.ID, j.RequestID, j.State)
			}
		}
		for _, req := range cl.history {
			switch req.Outcome {
			case outcomeOK:
				if byID[req.Job] != 1 {
					t.Errorf("%s: acknowledged job %s (request %s) appears %d times", n, req.Job, req.RequestID, byID[req.Job])
				}
				if ids := byReq[req.RequestID]; len(ids) != 1 || ids[0] != req.Job {
					t.Errorf("%s: request %s was acknowledged as %s but made jobs %v", n, req.RequestID, req.Job, ids)
				}
			case outcomeFailed:
				if ids := byReq[req.RequestID]; len(ids) != 0 {
					t.Errorf("%s: refused request %s made jobs %v", n, req.RequestID, ids)
				}
			case outcomeUnknown:
				if ids := byReq[req.RequestID]; len(ids) > 1 {
					t.Errorf("%s: unknown-outcome request %s made jobs %v", n, req.RequestID, ids)
				}
			}
		}
	}

	allocs := r.checkAllocations(final[r.d.nodes[0]])
	r.checkWorkload(allocs)
	r.checkContainers(final[r.d.nodes[0]])
	r.checkLeaders()
}

// checkHashes polls every node until their hash indexes agree, then
// compares the state hashes.
func (r *run) checkHashes() {
	r.t.Helper()
	var hashes map[string]string
	var index uint64
	waitFor(r.t, "every node to report one hash index", time.Minute, func() error {
		hashes = map[string]string{}
		indexes := map[uint64]bool{}
		for _, n := range r.d.nodes {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			st, err := r.api(n).StatusWithHash(ctx)
			cancel()
			if err != nil {
				return fmt.Errorf("%s: %w", n, err)
			}
			hashes[n] = st.StateHash
			indexes[st.HashIndex] = true
			index = st.HashIndex
		}
		if len(indexes) != 1 {
			return fmt.Errorf("hash indexes %v", indexes)
		}
		return nil
	})
	for _, n := range r.d.nodes[1:] {
		if hashes[n] != hashes[r.d.nodes[0]] {
			r.t.Errorf("at index %d %s has state hash %s, %s has %s", index, n, hashes[n], r.d.nodes[0], hashes[r.d.nodes[0]])
		}
	}
	r.logf("state hashes agree at index %d", index)
}

// checkAllocations checks the committed allocations of every job: no GPU
// held by two live allocations at one Raft index, no lost allocation
// replaced twice, no job placed more often than its restarts allow. It
// returns every allocation by ID.
func (r *run) checkAllocations(jobs []structs.Job) map[string]structs.Allocation {
	r.t.Helper()
	type span struct {
		alloc, job string
		from, to   uint64 // Raft indexes; to is exclusive
	}
	byGPU := map[string][]span{}
	all := map[string]structs.Allocation{}
	reasons := map[string]int{} // why allocations ended other than succeeded
	lost, replaced := 0, 0
	for _, j := range jobs {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		jd, err := r.api(r.d.nodes[0]).Job(ctx, j.ID)
		cancel()
		if err != nil {
			r.t.Fatalf("job %s: %v", j.ID, err)
		}
		placed := map[[2]int]string{}
		for _, a := range jd.Allocations {
			key := [2]int{a.Attempt, a.Rank}
			if other, ok := placed[key]; ok {
				r.t.Errorf("job %s has two allocations for attempt %d rank %d: %s and %s", j.ID, a.Attempt, a.Rank, other, a.ID)
			}
			placed[key] = a.ID
			all[a.ID] = a
			if a.State.Terminal() && a.State != structs.AllocSucceeded {
				reasons[fmt.Sprintf("%s (exit %d): %s", a.State, a.ExitCode, a.Reason)]++
			}
			to := uint64(1<<63 - 1)
			if a.State.Terminal() {
				to = a.ModifyIndex
			}
			for _, g := range a.GPUs {
				byGPU[g] = append(byGPU[g], span{a.ID, j.ID, a.CreateIndex, to})
			}
			if a.State == structs.AllocLost {
				lost++
				if slices.ContainsFunc(jd.Allocations, func(b structs.Allocation) bool {
					return b.Attempt == a.Attempt+1 && b.Rank == a.Rank
				}) {
					replaced++
				}
			}
		}
		if j.Attempts > 1+j.Spec.Restarts {
			r.t.Errorf("job %s was placed %d times with %d restarts allowed", j.ID, j.Attempts, j.Spec.Restarts)
		}
	}
	for g, spans := range byGPU {
		slices.SortFunc(spans, func(a, b span) int { return int(a.from) - int(b.from) })
		for i := 1; i < len(spans); i++ {
			if prev := spans[i-1]; spans[i].from < prev.to {
				r.t.Errorf("GPU %s held by alloc %s (job %s, indexes %d-%d) and alloc %s (job %s, from %d) at once",
					g, prev.alloc, prev.job, prev.from, prev.to, spans[i].alloc, spans[i].job, spans[i].from)
			}
		}
	}
	r.logf("%d jobs, %d allocations, %d lost, %d replaced", len(jobs), len(all), lost, replaced)
	for why, n := range reasons {
		r.logf("  %d allocations %s", n, why)
	}
	return all
}

// checkWorkload reads the workload's events: a violation is a GPU or a
// job that two processes held at once; every process must belong to a
// committed allocation of its job, and no allocation may start twice (a
// node that comes back never resumes an allocation).
func (r *run) checkWorkload(allocs map[string]structs.Allocation) {
	r.t.Helper()
	starts := map[string]int{}
	for _, e := range r.d.events() {
		switch e.Event {
		case "violation":
			r.t.Errorf("workload violation on %s (alloc %s, job %s): %s", e.Host, e.Alloc, e.Job, e.What)
		case "start":
			starts[e.Alloc]++
			a, ok := allocs[e.Alloc]
			switch {
			case !ok:
				r.t.Errorf("workload of job %s on %s ran for alloc %q, which the cluster never committed", e.Job, e.Host, e.Alloc)
			case a.JobID != e.Job:
				r.t.Errorf("workload on %s ran alloc %s for job %s, but it belongs to job %s", e.Host, e.Alloc, e.Job, a.JobID)
			case starts[e.Alloc] == 2:
				r.t.Errorf("alloc %s of job %s started twice (on %s the second time)", e.Alloc, e.Job, e.Host)
			}
		}
	}
	states := map[structs.AllocState]int{}
	for _, a := range allocs {
		states[a.State]++
	}
	r.logf("workload started for %d allocations; allocation states %v", len(starts), states)
}

// checkContainers counts the image jobs and checks that, once every job
// has ended, none of their containers still runs: each was stopped with
// its allocation, or died with its node's container.
func (r *run) checkContainers(jobs []structs.Job) {
	r.t.Helper()
	images := 0
	for _, j := range jobs {
		if j.Spec.Image != "" {
			images++
		}
	}
	if images == 0 {
		r.t.Errorf("none of %d jobs ran in a container; a third should have", len(jobs))
	}
	waitFor(r.t, "no container of an ended job to run", time.Minute, func() error {
		// Label filters of one docker ps must all match: ask per node.
		for _, n := range r.d.nodes {
			out, err := exec.Command("docker", "ps", "--format", "{{.Names}}",
				"--filter", "label=skein.alloc-dir=/data/"+r.container(n)+"/allocs").CombinedOutput()
			if err != nil {
				return fmt.Errorf("docker ps: %v: %s", err, out)
			}
			if names := strings.Fields(string(out)); len(names) > 0 {
				return fmt.Errorf("containers of node %s still running: %v", n, names)
			}
		}
		return nil
	})
	r.logf("%d of %d jobs ran in containers; none of their containers runs", images, len(jobs))
}

var electionWon = regexp.MustCompile(`election won:? .*term=(\d+)`)

// checkLeaders reads every node's log for the elections it won: two nodes
// winning one term is two leaders in that term.
func (r *run) checkLeaders() {
	r.t.Helper()
	won := map[string][]string{}
	for _, n := range r.d.nodes {
		out, err := exec.Command("docker", "logs", r.container(n)).CombinedOutput()
		if err != nil {
			r.t.Fatalf("docker logs %s: %v", n, err)
		}
		for _, m := range electionWon.FindAllStringSubmatch(string(out), -1) {
			won[m[1]] = append(won[m[1]], n)
		}
	}
	for term, nodes := range won {
		if len(nodes) > 1 {
			r.t.Errorf("term %s has %d leaders: %v", term, len(nodes), nodes)
		}
	}
	r.logf("%d elections won, in %d terms", func() int {
		n := 0
		for _, v := range won {
			n += len(v)
		}
		return n
	}(), len(won))
}

// keepResults, when the test failed, keeps under results/<seed>/ every
// node's docker logs, data directory and list of jobs, the workload's
// events.log, the nemesis log and the client's history.
func (r *run) keepResults() {
	if !r.t.Failed() {
		return
	}
	dir := filepath.Join("results", strconv.FormatUint(r.seed, 10))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		r.t.Logf("keep results: %v", err)
		return
	}
	write := func(name string, b []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			r.t.Logf("keep results: %v", err)
		}
	}
	r.mu.Lock()
	write("nemesis.log", []byte(strings.Join(r.events, "\n")+"\n"))
	final := r.final
	r.mu.Unlock()
	var history []byte
	r.cl.mu.Lock()
	for _, req := range r.cl.history {
		b, _ := json.Marshal(req)
		history = append(append(history, b...), '\n')
	}
	r.cl.mu.Unlock()
	write("history.jsonl", history)
	if b, err := os.ReadFile(filepath.Join(r.d.shared, "events.log")); err == nil {
		write("events.log", b)
	}
	for _, n := range r.d.nodes {
		out, _ := exec.Command("docker", "logs", r.container(n)).CombinedOutput()
		write("docker-logs-"+n+".txt", out)
		if out, err := exec.Command("docker", "cp", r.container(n)+":/data/"+r.container(n), filepath.Join(dir, "data-"+n)).CombinedOutput(); err != nil {
			r.t.Logf("keep data of %s: %v: %s", n, err, out)
		}
		jobs, ok := final[n]
		if !ok {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			jobs, _ = r.api(n).Jobs(ctx, true)
			cancel()
		}
		b, _ := json.MarshalIndent(jobs, "", "  ")
		write("jobs-"+n+".json", b)
	}
	r.t.Logf("results kept in chaos/%s", dir)
}

// reportTimings logs, per nemesis, how long the cluster took to accept
// writes again after a fault on the leader, and how long a lost
// allocation took to be declared lost (detection), placed and running
// again elsewhere (detection plus any wait for free GPUs), counted from
// the fault. Containers share the host's clock, so the allocations'
// committed times compare with the test's. The figures go to
// docs/benchmarks-history.md, "Chaos runs (containers)"; the run does
// not assert them.
func (r *run) reportTimings() {
	r.t.Helper()
	r.mu.Lock()
	faults := slices.Clone(r.faults)
	failovers := r.failovers
	final := r.final[r.d.nodes[0]]
	r.mu.Unlock()
	for _, op := range slices.Sorted(maps.Keys(failovers)) {
		r.logf("timing: leader %s -> writes accepted: %s", op, summarize(failovers[op]))
	}
	declared, placed, running := map[string][]time.Duration{}, map[string][]time.Duration{}, map[string][]time.Duration{}
	for _, j := range final {
		if j.Attempts < 2 {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		jd, err := r.api(r.d.nodes[0]).Job(ctx, j.ID)
		cancel()
		if err != nil {
			r.t.Fatalf("job %s: %v", j.ID, err)
		}
		for _, lost := range jd.Allocations {
			if lost.State != structs.AllocLost {
				continue
			}
			node := strings.TrimPrefix(jd.Nodes[lost.NodeID], r.d.name+"-")
			f, ok := causeOf(faults, node, lost)
			if !ok {
				continue
			}
			declared[f.op] = append(declared[f.op], lost.FinishedAt.Sub(f.at))
			for _, next := range jd.Allocations {
				if next.Attempt != lost.Attempt+1 || next.Rank != lost.Rank {
					continue
				}
				placed[f.op] = append(placed[f.op], next.CreatedAt.Sub(f.at))
				if !next.StartedAt.IsZero() {
					running[f.op] = append(running[f.op], next.StartedAt.Sub(f.at))
				}
			}
		}
	}
	for _, op := range slices.Sorted(maps.Keys(declared)) {
		r.logf("timing: %s -> allocation declared lost: %s; placed again: %s; running again: %s",
			op, summarize(declared[op]), summarize(placed[op]), summarize(running[op]))
	}
}

// causeOf finds the fault that lost an allocation: the last one before the
// loss was committed that silenced the allocation's node after it was
// placed.
func causeOf(faults []injected, node string, lost structs.Allocation) (injected, bool) {
	for i := len(faults) - 1; i >= 0; i-- {
		f := faults[i]
		if f.at.After(lost.FinishedAt) || f.at.Before(lost.CreatedAt) {
			continue
		}
		if slices.Contains(f.victims, node) {
			return f, true
		}
	}
	return injected{}, false
}

// summarize gives the count, median, 99th percentile and maximum.
func summarize(d []time.Duration) string {
	if len(d) == 0 {
		return "n=0"
	}
	d = slices.Clone(d)
	slices.Sort(d)
	return fmt.Sprintf("n=%d p50=%s p99=%s max=%s", len(d),
		testutil.Percentile(d, 0.50).Round(time.Millisecond), testutil.Percentile(d, 0.99).Round(time.Millisecond),
		d[len(d)-1].Round(time.Millisecond))
}
