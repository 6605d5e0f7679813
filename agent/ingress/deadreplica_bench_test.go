package ingress

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/skein-dev/skein/structs"
)

// blackhole is a loopback address whose SYNs go unanswered, as a dead
// machine's: a listener with a backlog of 0 whose one queued connection
// is never accepted, so the kernel drops every further SYN.
func blackhole(b testing.TB) string {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		b.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		b.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		b.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return addr
}

// BenchmarkDeadReplica: a service of two replicas, one on a "dead"
// machine (its dials time out), the other answering in 20 ms; C clients
// send requests through the proxy for 12 s per iteration. It reports the
// requests that failed (want 0: a timed-out dial goes on to the live
// replica), those that stalled (over 200 ms), and the time they lost in
// all, for the production dial timeout and cooldown with its probe.
func BenchmarkDeadReplica(b *testing.B) {
	for _, clients := range []int{1, 8, 16} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			var failed, stalled, requests int64
			var lost time.Duration
			for range b.N {
				st := newFakeState()
				st.addService(structs.Service{Name: "llama", Replicas: 2})
				st.addReplica(b, "llama", blackhole(b), nil)
				live := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
					time.Sleep(20 * time.Millisecond)
				}))
				st.addReplica(b, "llama", addrOf(b, live), nil)
				srv := httptest.NewServer(New(Config{State: st}))
				var f, s, n atomic.Int64
				var mu sync.Mutex
				var wg sync.WaitGroup
				const run = 12 * time.Second
				began := time.Now()
				for range clients {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for time.Since(began) < run {
							t0 := time.Now()
							resp, err := client.Get(srv.URL + "/llama/x")
							d := time.Since(t0)
							n.Add(1)
							if err != nil || resp.StatusCode != http.StatusOK {
								f.Add(1)
							}
							if err == nil {
								resp.Body.Close()
							}
							if d > 200*time.Millisecond {
								s.Add(1)
								mu.Lock()
								lost += d
								mu.Unlock()
							}
						}
					}()
				}
				wg.Wait()
				srv.Close()
				live.Close()
				failed, stalled, requests = failed+f.Load(), stalled+s.Load(), requests+n.Load()
			}
			b.ReportMetric(float64(failed)/float64(b.N), "failed/op")
			b.ReportMetric(float64(stalled)/float64(b.N), "stalled/op")
			b.ReportMetric(lost.Seconds()/float64(b.N), "lost-s/op")
			b.ReportMetric(float64(requests)/float64(b.N), "requests/op")
		})
	}
}
