package e2e

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

// simCluster is a cluster of real server agent processes (one, or three
// voters with --standbys 0) and simulated workers (simWorkers) for the
// benchmarks at many workers.
type simCluster struct {
	// nodes are the servers, the one leading at the start first; addrs
	// their API addresses in the same order, as the sims know them.
	nodes []*node
	addrs []string
	flags []string // the servers' agent flags, for a restart
	token string
	sims  *simWorkers
}

// startSimCluster starts servers agents on the loopback addresses
// prefix.first, prefix.first+1 and so on, and workers sims that run each
// allocation for runFor, and returns once every node is ready and 3 s
// after. The sims stop when the benchmark ends.
func startSimCluster(b *testing.B, prefix string, first, servers, workers int, runFor time.Duration) *simCluster {
	b.Helper()
	var flags []string
	if servers > 1 {
		flags = []string{"--standbys", "0"}
	}
	nodes, admin := startRealAgents(b, prefix, first, servers, flags)
	token := adminToken(b)
	if servers > 1 {
		waitVoters(b, nodes[0].proc, servers)
	}
	// The leader first: the sims and the clients start with it.
	lead := leaderOf(b, nodes)
	slices.SortStableFunc(nodes, func(x, y *node) int {
		if x == lead {
			return -1
		}
		if y == lead {
			return 1
		}
		return 0
	})
	addrs := make([]string, servers)
	for i, n := range nodes {
		addrs[i] = n.proc.addr
	}
	infos, err := admin.Nodes(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	ids := map[string]int{}
	for _, in := range infos {
		for i, n := range nodes {
			if in.Name == "node-"+n.ip {
				ids[in.ID] = i
			}
		}
	}
	sims := newSimWorkers(addrs, ids, simRenewEvery, runFor)
	b.Cleanup(sims.close)
	sims.grow(b, workers)
	testutil.WaitFor(b, 2*time.Minute, func() error { return allReady(admin, workers+servers) })
	time.Sleep(3 * time.Second) // settle: registrations applied, passes done
	return &simCluster{nodes: nodes, addrs: addrs, flags: flags, token: token, sims: sims}
}

// client is a client of server i with the admin token.
func (c *simCluster) client(b *testing.B, i int) *api.Client {
	b.Helper()
	cl, err := api.NewClient(c.addrs[i], c.token)
	if err != nil {
		b.Fatal(err)
	}
	return cl
}

// simClients are clients users submit through: n of them, each from a
// loopback address of its own (127.0.5.x) and keeping its connections,
// with a client of each server at addrs, that wait as a busy server asks
// (429, Retry-After).
func simClients(b *testing.B, n int, addrs []string, token string) [][]*api.Client {
	b.Helper()
	cls := make([][]*api.Client, n)
	for c := range cls {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.DialContext = (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 5, byte(1+c))}}).DialContext
		b.Cleanup(tr.CloseIdleConnections)
		for _, addr := range addrs {
			cl, err := api.NewClient(addr, token)
			if err != nil {
				b.Fatal(err)
			}
			cls[c] = append(cls[c], cl.WithHTTPClient(&http.Client{Transport: tr}).WithBusyRetry(api.DefaultBusyWait, nil))
		}
	}
	return cls
}

// submitAll submits jobs jobs (specOf each, by index) back to back from
// the clients cls (simClients) to the server the sims take to lead, each
// with the request ID prefix-index, sending a submission a leader dropped
// on stepping down (503) again, to whoever leads next. What is not
// submitted by deadline is left unsubmitted. It returns the leader's
// answers by index (empty: not submitted), the 503s, and the first
// submission that failed otherwise.
func submitAll(cls [][]*api.Client, sims *simWorkers, prefix string, jobs int, specOf func(int) structs.JobSpec, deadline time.Time) ([]burstAck, int64, error) {
	acks := make([]burstAck, jobs)
	work := make(chan int)
	var mu sync.Mutex
	var unavailable int64
	var first error
	var wg sync.WaitGroup
	for c := range cls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if time.Now().After(deadline) {
					continue // left unsubmitted: reported, not waited for
				}
				req := api.SubmitRequest{RequestID: fmt.Sprintf("%s-%05d", prefix, i), Spec: specOf(i)}
				for {
					job, err := cls[c][sims.leader.Load()].SubmitJob(context.Background(), req)
					if isUnavailable(err) && time.Now().Before(deadline) {
						mu.Lock()
						unavailable++
						mu.Unlock()
						time.Sleep(100 * time.Millisecond)
						continue
					}
					if err != nil {
						mu.Lock()
						first = cmp.Or(first, fmt.Errorf("submit %d: %w", i, err))
						mu.Unlock()
						break
					}
					acks[i] = burstAck{id: job.ID, at: time.Now()}
					break
				}
			}
		}()
	}
	for i := range jobs {
		work <- i
	}
	close(work)
	wg.Wait()
	return acks, unavailable, first
}

// simLink is one sim's network: the connections its clients dialled,
// which cut closes, refusing every dial after, as a machine that died
// would. The servers then hear nothing more from the sim, and the sim
// nothing more from them: a view a server sends after the cut never
// reaches it, so it acts on none.
type simLink struct {
	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]bool
}

// errCut is what a cut sim's dials fail with.
var errCut = errors.New("sim cut off")

// dialer wraps dial, a sim's dialer, to keep track of its connections and
// refuse to dial once the sim is cut off.
func (l *simLink) dialer(dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.cut {
			conn.Close()
			return nil, errCut
		}
		if l.conns == nil {
			l.conns = map[net.Conn]bool{}
		}
		tracked := &linkConn{Conn: conn, l: l}
		l.conns[tracked] = true
		return tracked, nil
	}
}

// cutOff closes the sim's connections and refuses its dials from now on.
func (l *simLink) cutOff() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cut = true
	for c := range l.conns {
		_ = c.(*linkConn).Conn.Close()
	}
	l.conns = nil
}

// linkConn is a connection of a simLink, which forgets it once closed.
type linkConn struct {
	net.Conn
	l *simLink
}

func (c *linkConn) Close() error {
	c.l.mu.Lock()
	delete(c.l.conns, c)
	c.l.mu.Unlock()
	return c.Conn.Close()
}

// link is sim i's network.
func (s *simWorkers) link(i int) *simLink {
	l, _ := s.links.LoadOrStore(i, &simLink{})
	return l.(*simLink)
}

// cutOff makes sim i go silent at once, as a machine that died would: no
// heartbeat, watch or report of it reaches a server any more.
func (s *simWorkers) cutOff(i int) { s.link(i).cutOff() }
