package agent

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/skein-dev/skein/structs"
)

// scraper GETs an agent's /metrics every period until stopped, as a
// Prometheus server would, and counts what it read.
type scraper struct {
	stop    chan struct{}
	done    sync.WaitGroup
	scrapes int
	bytes   int64
	err     error
}

func startScraper(url, token string, period time.Duration) *scraper {
	s := &scraper{stop: make(chan struct{})}
	s.done.Add(1)
	go func() {
		defer s.done.Done()
		tick := time.NewTicker(period)
		defer tick.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-tick.C:
			}
			n, err := scrapeOnce(url, token)
			if err != nil {
				s.err = err
				return
			}
			s.scrapes++
			s.bytes += n
		}
	}()
	return s
}

// end stops the scraper and fails b if a scrape failed.
func (s *scraper) end(b *testing.B) {
	close(s.stop)
	s.done.Wait()
	if s.err != nil {
		b.Fatal(s.err)
	}
}

// scrapeOnce GETs a /metrics with token ("" for none) and returns the
// size of its body.
func scrapeOnce(url, token string) (int64, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return n, err
}

// BenchmarkSubmitToRunningScraped is B8 (BenchmarkSubmitToRunning,
// plaintext one-node agent) without a scraper ("none") and with one
// scraping the leader's /metrics every second ("1s"), in one process;
// run with -benchtime 300x and compare the two.
func BenchmarkSubmitToRunningScraped(b *testing.B) {
	for _, period := range []time.Duration{0, time.Second} {
		name := "none"
		if period > 0 {
			name = period.String()
		}
		b.Run("scrape="+name, func(b *testing.B) {
			a, c := benchAgent(b)
			if period > 0 {
				s := startScraper(a.HTTPAddr()+"/metrics", "", period)
				defer func() {
					s.end(b)
					b.ReportMetric(float64(s.scrapes), "scrapes")
				}()
			}
			benchSubmitToRunning(b, a, c)
		})
	}
}

// BenchmarkCommittedPlacementsScraped is B1 (BenchmarkCommittedPlacements)
// at 5,000 nodes without a scraper ("none") and with one scraping the
// leader's /metrics every second ("1s"), from the cluster's start to the
// end. -benchtime 1x.
func BenchmarkCommittedPlacementsScraped(b *testing.B) {
	for _, jobs := range []int{20000, 100000} {
		for _, period := range []time.Duration{0, time.Second} {
			name := "none"
			if period > 0 {
				name = period.String()
			}
			b.Run(fmt.Sprintf("jobs=%d/scrape=%s", jobs, name), func(b *testing.B) {
				for range b.N {
					benchCommittedPlacements(b, 5000, jobs, period)
				}
			})
		}
	}
}

// BenchmarkMetricsScrape measures 50 GETs of /metrics, one at a time, on
// a one-node agent whose state holds 5,000 simulated 8-GPU nodes
// (registered through Raft, as BenchmarkCommittedPlacements does, and
// heard from so that none is marked down) and a queue of 5,000 jobs
// waiting for a gate: the time and the size of the answer, the series in
// it, and the state's census alone. The leader's scheduling runs
// meanwhile (the queue is waiting, so its passes find nothing to do).
// The state takes a minute or two to build: run it with -benchtime 1x;
// ns/op is the scrapes' time.
func BenchmarkMetricsScrape(b *testing.B) {
	for range b.N {
		benchMetricsScrape(b)
	}
}

func benchMetricsScrape(b *testing.B) {
	b.StopTimer()
	const nodes, jobs = 5000, 5000
	a, _ := benchAgent(b)
	t0 := time.Now()
	defer registerSimNodes(b, a, func() []*Agent { return []*Agent{a} }, nodes)()
	gate := structs.NewID()
	if _, err := a.apply(structs.JobSubmitType, structs.JobSubmitRequest{JobID: gate, SubmittedAt: time.Now().UTC(),
		Spec: structs.JobSpec{Command: []string{"true"}, Nodes: 1, Constraints: map[string]string{"nowhere": "1"}}}); err != nil {
		b.Fatal(err)
	}
	specs := benchQueue(jobs, gate)
	parallel(b, len(specs), func(i int) error {
		_, err := a.apply(structs.JobSubmitType, structs.JobSubmitRequest{JobID: structs.NewID(), Spec: specs[i], SubmittedAt: time.Now().UTC()})
		return err
	})
	b.Logf("%d nodes registered and %d jobs submitted in %s", nodes, jobs, time.Since(t0).Round(time.Millisecond))
	waitQuiet(b, a, jobs)
	if got := a.fsm.Census().GPUs[structs.GPUHealthy]; got < nodes*8 {
		b.Fatalf("%d healthy GPUs in the state, want at least %d", got, nodes*8)
	}

	const scrapes = 50
	url := a.HTTPAddr() + "/metrics"
	took := make([]time.Duration, 0, scrapes)
	var size int64
	b.StartTimer()
	for range scrapes {
		start := time.Now()
		n, err := scrapeOnce(url, "")
		if err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(start))
		size = n
	}
	b.StopTimer()
	report(b, "scrape", took)
	b.ReportMetric(float64(size)/1024, "KiB/scrape")
	fams, err := a.metrics.Registry().Gather()
	if err != nil {
		b.Fatal(err)
	}
	series := 0
	for _, f := range fams {
		series += len(f.GetMetric())
	}
	b.ReportMetric(float64(series), "series")
	// The census alone, the part of a scrape that grows with the state.
	census := make([]time.Duration, 0, 20)
	for range 20 {
		start := time.Now()
		a.fsm.Census()
		census = append(census, time.Since(start))
	}
	slices.Sort(census)
	b.ReportMetric(float64(census[len(census)/2].Microseconds())/1000, "census-p50-ms")
}
