package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/structs"
)

// BenchmarkSubmitBurst measures how a cluster takes bursts of
// submissions (overload is not failure: agent/DESIGN.md, "Bounded API"): jobs submitted
// through the leader's API by clients users at once, against real agents
// with production Raft timings. (Not through the other nodes: on one
// machine their forwards come from the loopback address every node
// shares, and the leader holds at most 500 connections from one node's
// address.) The jobs are CPU-only and fit on 100 simulated
// nodes (registered through Raft, their heartbeats fed to the leader as
// B1 does), so every job is placed. The clock runs from the first
// submission to the last job placed. It reports, from the agents' own
// metrics, the scheduling passes the burst took and the jobs each placed,
// the submissions the leader refused as busy (429; the clients wait as
// it asks and send them again), and the leader changes on any node
// (elections: there should be none). One client submitting one job after
// another makes an entry every few milliseconds, each of which used to
// cost a pass; 400 clients stay under the leader's bound on writes in
// flight (server.DefaultMaxWrites); 2,000 go over it. -benchtime 1x.
func BenchmarkSubmitBurst(b *testing.B) {
	for _, nodes := range []int{1, 3} {
		for _, c := range []struct{ jobs, clients int }{{1000, 1}, {5000, 400}, {5000, 2000}} {
			b.Run(fmt.Sprintf("nodes=%d/jobs=%d/clients=%d", nodes, c.jobs, c.clients), func(b *testing.B) {
				for range b.N {
					benchSubmitBurst(b, nodes, c.jobs, c.clients)
				}
			})
		}
	}
}

// burstClientsPerAddr is how many of the burst's clients share a source
// address: fewer than an agent takes from one client address
// (--max-conns-per-client, 256 at most by default).
const burstClientsPerAddr = 200

func benchSubmitBurst(b *testing.B, nodes, burst, clients int) {
	b.StopTimer()
	tc := benchCluster(b, nodes, SecurityAuto)
	leader := func() int {
		for i, a := range tc.agents {
			if a.raft.IsLeader() {
				return i
			}
		}
		return -1
	}
	head := tc.agents[leader()]
	defer registerSimNodes(b, head, tc.live, 100)()
	// Each group of clients calls from a loopback address of its own
	// (127.0.0.2 on; the agents are on 127.0.0.1), as users on other
	// machines would, and keeps its connections, as a client that submits
	// many jobs does, so that the burst measures the cluster, not TCP
	// handshakes.
	cls := make([][]*api.Client, (clients+burstClientsPerAddr-1)/burstClientsPerAddr)
	for g := range cls {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = burstClientsPerAddr
		tr.DialContext = (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(2+g))}}).DialContext
		defer tr.CloseIdleConnections()
		for _, a := range tc.agents {
			cls[g] = append(cls[g], clientFor(b, a, clusterToken).WithHTTPClient(&http.Client{Transport: tr}))
		}
	}
	spec := structs.JobSpec{Command: []string{"true"}, CPUs: 1, Constraints: map[string]string{"bench": "1"}}

	passes0, refused0, changes0 := burstCounts(b, tc.agents)
	b.StartTimer()
	start := time.Now()
	deadline := start.Add(5 * time.Minute)
	var unavailable atomic.Int64
	parallelBy(b, clients, burst, func(w, i int) error {
		// A leader that steps down fails the writes it holds (503):
		// the client sends the same submission, its request ID
		// unchanged, to whoever leads next, as a careful user would.
		for {
			li := leader()
			if li < 0 {
				li = 0 // it forwards once a leader is elected
			}
			_, err := cls[w/burstClientsPerAddr][li].SubmitJob(context.Background(),
				api.SubmitRequest{RequestID: fmt.Sprintf("burst-%05d", i), Spec: spec})
			var apiErr *api.Error
			if err != nil && errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusServiceUnavailable && time.Now().Before(deadline) {
				unavailable.Add(1)
				time.Sleep(100 * time.Millisecond)
				continue
			}
			if err != nil {
				return fmt.Errorf("submit %d: %w", i, err)
			}
			return nil
		}
	})
	// Every replica ends with the same state: watch one of them.
	f := tc.agents[0].fsm
	for {
		_, changed := f.Watch()
		if f.JobCounts()[structs.JobQueued] == 0 {
			break
		}
		select {
		case <-changed:
		case <-time.After(time.Until(deadline)):
			b.Fatalf("%d jobs still queued 5 minutes after the burst began", f.JobCounts()[structs.JobQueued])
		}
	}
	took := time.Since(start)
	b.StopTimer()
	counts := f.JobCounts()
	if counts[structs.JobRunning] != burst || len(f.Jobs()) != burst {
		b.Fatalf("%d jobs placed, %d in all; want each of the %d submitted once", counts[structs.JobRunning], len(f.Jobs()), burst)
	}
	passes, refused, changes := burstCounts(b, tc.agents)
	passes -= passes0
	b.ReportMetric(passes, "passes")
	b.ReportMetric(float64(burst)/passes, "jobs/pass")
	b.ReportMetric(refused-refused0, "busy-429s")
	b.ReportMetric(float64(unavailable.Load()), "leader-lost-503s")
	b.ReportMetric(changes-changes0, "leader-changes")
	b.ReportMetric(float64(took.Milliseconds()), "burst-ms")
	b.ReportMetric(float64(burst)/took.Seconds(), "submissions/s")
}

// burstCounts reads, from the agents' own metrics, the scheduling passes
// and the submissions answered 429 of whichever led, and the leader
// changes every agent has seen.
func burstCounts(b *testing.B, agents []*Agent) (passes, refused, leaderChanges float64) {
	b.Helper()
	count := func(a *Agent, name string, labels map[string]string) float64 {
		fams, err := a.metrics.Registry().Gather()
		if err != nil {
			b.Fatal(err)
		}
		total := 0.0
		for _, fam := range fams {
			if fam.GetName() != name {
				continue
			}
			for _, s := range fam.GetMetric() {
				if hasLabels(s, labels) {
					total += float64(s.GetHistogram().GetSampleCount()) + s.GetCounter().GetValue()
				}
			}
		}
		return total
	}
	for _, a := range agents {
		passes += count(a, "skein_sched_pass_duration_seconds", nil)
		refused += count(a, "skein_http_request_duration_seconds", map[string]string{"route": "POST /v1/jobs", "code": "429"})
		leaderChanges += count(a, "skein_raft_leader_changes_total", nil)
	}
	return passes, refused, leaderChanges
}
