package agent

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/structs"
)

// BenchmarkSubmitBurst measures how a cluster takes a burst of
// submissions ("Overload is not failure", issue 17): 5,000 jobs submitted
// through the API by clients users at once, spread over every node (those
// that do not lead forward to the leader), against real agents with
// production Raft timings. The jobs are CPU-only and fit on 100 simulated
// nodes (registered through Raft, their heartbeats fed to the leader as
// B1 does), so every job is placed. The clock runs from the first
// submission to the last job placed. It reports, from the agents' own
// metrics, the scheduling passes the burst took and the jobs each placed,
// the submissions the leader refused as busy (429; the clients wait as
// it asks and send them again), and the leader changes on any node
// (elections: there should be none). 400 clients stay under the leader's
// bound on writes in flight (server.DefaultMaxWrites); 2,000 go over it.
// -benchtime 1x.
func BenchmarkSubmitBurst(b *testing.B) {
	const burst = 5000
	for _, nodes := range []int{1, 3} {
		for _, clients := range []int{400, 2000} {
			b.Run(fmt.Sprintf("nodes=%d/jobs=%d/clients=%d", nodes, burst, clients), func(b *testing.B) {
				for range b.N {
					benchSubmitBurst(b, nodes, burst, clients)
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
	var head *Agent
	for _, a := range tc.agents {
		if a.raft.IsLeader() {
			head = a
		}
	}
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
		hc := &http.Client{Transport: tr}
		for _, a := range tc.agents {
			cls[g] = append(cls[g], clientFor(b, a, clusterToken).WithHTTPClient(hc))
		}
	}
	spec := structs.JobSpec{Command: []string{"true"}, CPUs: 1, Constraints: map[string]string{"bench": "1"}}

	passes0, refused0, changes0 := burstCounts(b, head, tc.agents)
	b.StartTimer()
	start := time.Now()
	work := make(chan int)
	errs := make(chan error, clients)
	var wg sync.WaitGroup
	for w := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			group := cls[w/burstClientsPerAddr]
			c := group[w%len(group)]
			for i := range work {
				_, err := c.SubmitJob(context.Background(), api.SubmitRequest{RequestID: fmt.Sprintf("burst-%05d", i), Spec: spec})
				if err != nil {
					select {
					case errs <- fmt.Errorf("submit %d: %w", i, err):
					default:
					}
				}
			}
		}()
	}
	for i := range burst {
		work <- i
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
	deadline := time.After(5 * time.Minute)
	for {
		_, changed := head.fsm.Watch()
		if head.fsm.JobCounts()[structs.JobQueued] == 0 {
			break
		}
		select {
		case <-changed:
		case <-deadline:
			b.Fatalf("%d jobs still queued 5 minutes after the burst", head.fsm.JobCounts()[structs.JobQueued])
		}
	}
	took := time.Since(start)
	b.StopTimer()
	if n := head.fsm.JobCounts()[structs.JobRunning]; n != burst {
		b.Fatalf("%d jobs placed; want %d", n, burst)
	}
	passes, refused, changes := burstCounts(b, head, tc.agents)
	passes -= passes0
	b.ReportMetric(passes, "passes")
	b.ReportMetric(float64(burst)/passes, "jobs/pass")
	b.ReportMetric(refused-refused0, "busy-429s")
	b.ReportMetric(changes-changes0, "leader-changes")
	b.ReportMetric(float64(took.Milliseconds()), "burst-ms")
	b.ReportMetric(float64(burst)/took.Seconds(), "submissions/s")
}

// burstCounts reads, from the agents' own metrics, the leader's
// scheduling passes, the submissions it answered 429, and the leader
// changes every agent has seen.
func burstCounts(b *testing.B, head *Agent, agents []*Agent) (passes, refused, leaderChanges float64) {
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
	passes = count(head, "skein_sched_pass_duration_seconds", nil)
	refused = count(head, "skein_http_request_duration_seconds", map[string]string{"route": "POST /v1/jobs", "code": "429"})
	for _, a := range agents {
		leaderChanges += count(a, "skein_raft_leader_changes_total", nil)
	}
	return passes, refused, leaderChanges
}
