package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

// benchWorkloadSpec is a service spec of skein-workload replicas, built for
// the benchmark, checked healthy by GET /health every 200ms.
func benchWorkloadSpec(b *testing.B) structs.ServiceSpec {
	b.Helper()
	bin := testutil.Workload(b)
	return structs.ServiceSpec{
		Job: structs.JobSpec{Command: []string{bin, "--dir", testutil.SharedDir(b), "--serve-port-env", "PORT"}},
		Health: &structs.HealthCheck{Kind: structs.HealthHTTP, Path: "/health",
			Interval: structs.Duration(200 * time.Millisecond), Timeout: structs.Duration(200 * time.Millisecond)},
	}
}

// waitHealthyReplicas waits until n replicas of the service run healthy
// in a's state, accepted by ok, and returns them.
func waitHealthyReplicas(b *testing.B, a *Agent, service string, n int, ok func(*structs.Allocation) bool) []*structs.Allocation {
	b.Helper()
	healthy := true
	var got []*structs.Allocation
	testutil.WaitFor(b, 60*time.Second, func() error {
		got = got[:0]
		for _, al := range runningReplicas(a, service, &healthy) {
			if ok == nil || ok(al) {
				got = append(got, al)
			}
		}
		if len(got) != n {
			return fmt.Errorf("%d healthy replicas, want %d", len(got), n)
		}
		return nil
	})
	return got
}

// getOK sends GET url and reads the answer, an error unless it is a 200
// from a replica.
func getOK(hc *http.Client, url string) error {
	resp, err := hc.Get(url)
	if err != nil {
		return err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(string(body), "alloc=") {
		return fmt.Errorf("%d %s", resp.StatusCode, strings.TrimSpace(string(body)))
	}
	return nil
}

// BenchmarkIngress measures a service's requests through the ingress
// against the direct path, in one run:
//
//   - latency/conc=N: a one-node agent and one replica of skein-workload;
//     N clients each send GET /work?ms=0 b.N times, alternately to the
//     replica's port and through the ingress (/NAME/work?ms=0), each path
//     on kept-alive connections; the figures are each path's p50 and p99
//     and the ingress's as a ratio of the direct path's.
//   - nodeloss: a 3-node cluster with production timings and three
//     replicas, one per node; a client sends 50 requests a second through
//     the ingress of a node that does not lead while another follower dies
//     (cut off from the cluster and its replica killed, as a dead machine
//     would be). The figures are the requests that failed, the time from
//     the death to the last failure (0 without one), and the time until
//     the service is whole again: three healthy replicas on live nodes, as
//     the client's node sees it. -benchtime 5x gives 5 trials.
func BenchmarkIngress(b *testing.B) {
	for _, conc := range []int{1, 8} {
		b.Run(fmt.Sprintf("latency/conc=%d", conc), func(b *testing.B) { benchIngressLatency(b, conc) })
	}
	b.Run("nodeloss", benchIngressNodeLoss)
}

func benchIngressLatency(b *testing.B, conc int) {
	cfg := testConfig(b, b.TempDir())
	cfg.IngressPort = -1
	a, c := startBenchAgent(b, cfg)
	if _, err := c.CreateService(context.Background(), api.ServiceCreateRequest{Name: "bench", Replicas: 1, Spec: benchWorkloadSpec(b)}); err != nil {
		b.Fatal(err)
	}
	replica := waitHealthyReplicas(b, a, "bench", 1, nil)[0]
	urls := map[string]string{
		"direct":  fmt.Sprintf("http://127.0.0.1:%d/work?ms=0", replica.MasterPort),
		"ingress": a.IngressAddr() + "/bench/work?ms=0",
	}
	clients := map[string]*http.Client{}
	for path := range urls {
		clients[path] = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: conc}}
		if err := getOK(clients[path], urls[path]); err != nil {
			b.Fatalf("%s: %v", path, err)
		}
	}
	var mu sync.Mutex
	took := map[string][]time.Duration{}
	var wg sync.WaitGroup
	errs := make(chan error, conc)
	b.ResetTimer()
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine := map[string][]time.Duration{}
			for i := range b.N {
				order := []string{"direct", "ingress"}
				if i%2 == 1 { // neither path always goes first
					slices.Reverse(order)
				}
				for _, path := range order {
					t0 := time.Now()
					if err := getOK(clients[path], urls[path]); err != nil {
						errs <- fmt.Errorf("%s: %w", path, err)
						return
					}
					mine[path] = append(mine[path], time.Since(t0))
				}
			}
			mu.Lock()
			for path, d := range mine {
				took[path] = append(took[path], d...)
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	b.StopTimer()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
	quantile := map[string]map[float64]time.Duration{}
	for path, d := range took {
		slices.Sort(d)
		quantile[path] = map[float64]time.Duration{0.5: testutil.Percentile(d, 0.5), 0.99: testutil.Percentile(d, 0.99)}
	}
	for _, q := range []struct {
		q    float64
		name string
	}{{0.5, "p50"}, {0.99, "p99"}} {
		direct, ingress := quantile["direct"][q.q], quantile["ingress"][q.q]
		b.ReportMetric(float64(direct)/float64(time.Microsecond), "direct-"+q.name+"-us")
		b.ReportMetric(float64(ingress)/float64(time.Microsecond), "ingress-"+q.name+"-us")
		b.ReportMetric(float64(ingress)/float64(direct), "ingress/direct-"+q.name)
	}
}

func benchIngressNodeLoss(b *testing.B) {
	spec := benchWorkloadSpec(b)
	spec.Public = true // the cluster has a token; the client sends none
	var failed []float64
	var lastFailure, whole []time.Duration
	ports := 0 // ranges handed out, never the same twice: ended trials' replicas may linger
	for range b.N {
		b.StopTimer()
		tc := benchCluster(b, 3, SecurityAuto, func(cfg *Config) {
			// Every node's replicas listen on this machine's addresses:
			// each node hands out ports of its own.
			cfg.IngressPort = -1
			lo := 26300 + 20*ports
			cfg.MasterPorts = structs.PortRange{Min: lo, Max: lo + 19}
			ports++
		})
		lead := -1
		for i, a := range tc.agents {
			if a.raft.IsLeader() {
				lead = i
			}
		}
		client, victim := tc.agents[(lead+1)%3], (lead+2)%3
		if _, err := tc.client(client).CreateService(context.Background(), api.ServiceCreateRequest{Name: "bench", Replicas: 3, Spec: spec}); err != nil {
			b.Fatal(err)
		}
		dead := tc.agents[victim].nodeID
		before := waitHealthyReplicas(b, client, "bench", 3, nil)
		load := newRateClient(client.IngressAddr()+"/bench/work?ms=20", 50)
		b.StartTimer()
		t0 := time.Now()
		deadDir := tc.agents[victim].allocDir()
		tc.isolate(victim)
		tc.kill(victim)
		for _, al := range before {
			if al.NodeID == dead {
				killJobGroup(b, deadDir, al.ID)
			}
		}
		waitHealthyReplicas(b, client, "bench", 3, func(al *structs.Allocation) bool { return al.NodeID != dead })
		whole = append(whole, time.Since(t0))
		b.StopTimer()
		n, last := load.stop()
		failed = append(failed, float64(n))
		if n > 0 {
			lastFailure = append(lastFailure, last.Sub(t0))
		} else {
			lastFailure = append(lastFailure, 0)
		}
		tc.net.Heal()
		for _, a := range tc.live() {
			a.Shutdown()
			testutil.StopSupervisors(b, a.dataDir)
		}
	}
	var sum float64
	for _, f := range failed {
		sum += f
	}
	b.ReportMetric(sum/float64(len(failed)), "failed/loss")
	b.ReportMetric(slices.Max(failed), "failed-max")
	report(b, "last-failure", lastFailure)
	report(b, "whole", whole)
}

// killJobGroup SIGKILLs the process group of an allocation's job, as
// recorded in its job.pid under allocDir.
func killJobGroup(b testing.TB, allocDir, allocID string) {
	b.Helper()
	var job struct {
		PGID int `json:"pgid"`
	}
	raw, err := os.ReadFile(filepath.Join(allocDir, allocID, "job.pid"))
	if err == nil {
		err = json.Unmarshal(raw, &job)
	}
	if err != nil || job.PGID <= 0 {
		b.Fatalf("find allocation %s's job: %v (%s)", structs.ShortID(allocID), err, raw)
	}
	if err := syscall.Kill(-job.PGID, syscall.SIGKILL); err != nil {
		b.Fatal(err)
	}
}

// rateClient sends GET url perSecond times a second, each request on its
// own, and counts those that fail.
type rateClient struct {
	cancel context.CancelFunc
	done   chan struct{}
	wg     sync.WaitGroup
	failed atomic.Int64
	last   atomic.Int64 // unix nanoseconds of the last failure
}

func newRateClient(url string, perSecond int) *rateClient {
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	ctx, cancel := context.WithCancel(context.Background())
	c := &rateClient{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		tick := time.NewTicker(time.Second / time.Duration(perSecond))
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				c.wg.Add(1)
				go func() {
					defer c.wg.Done()
					if getOK(hc, url) != nil {
						c.failed.Add(1)
						c.last.Store(time.Now().UnixNano())
					}
				}()
			}
		}
	}()
	return c
}

// stop stops sending, waits for every answer and returns how many
// failed and when the last did.
func (c *rateClient) stop() (int, time.Time) {
	c.cancel()
	<-c.done
	c.wg.Wait()
	return int(c.failed.Load()), time.Unix(0, c.last.Load())
}
