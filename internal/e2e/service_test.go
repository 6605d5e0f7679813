package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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

// serviceNode is a node of a cluster that serves services: its ingress
// port, and a range of replica ports of its own, since every node's
// replicas listen on all of this machine's addresses.
type serviceNode struct {
	*node
	ingress int
	ports   string
}

func newServiceNodes(t *testing.T, firstPort int, ips ...string) []*serviceNode {
	var out []*serviceNode
	for i, n := range newNodes(t, ips...) {
		lo := firstPort + 20*i
		out = append(out, &serviceNode{node: n, ingress: freePort(t, n.ip), ports: fmt.Sprintf("%d-%d", lo, lo+19)})
	}
	return out
}

func (n *serviceNode) start(t *testing.T, join ...string) {
	t.Helper()
	n.startWith(t, []string{"--ingress-port", strconv.Itoa(n.ingress), "--master-ports", n.ports}, join...)
}

func (n *serviceNode) name() string { return "node-" + n.ip }

// url is the service's URL on this node's ingress.
func (n *serviceNode) url(service, path string) string {
	return fmt.Sprintf("http://%s:%d/%s%s", n.ip, n.ingress, service, path)
}

// killAll SIGKILLs the node's agent and everything it runs, as a machine
// that dies would take them: the supervisors (whose command lines name
// the node's data dir) and the job process groups they recorded.
func (n *serviceNode) killAll(t *testing.T) {
	t.Helper()
	if err := n.proc.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = n.proc.cmd.Wait()
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmd, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(cmd), n.dataDir+"/") {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	pids, _ := filepath.Glob(filepath.Join(n.dataDir, "allocs", "*", "job.pid"))
	for _, path := range pids {
		var job struct {
			PGID int `json:"pgid"`
		}
		if b, err := os.ReadFile(path); err == nil && json.Unmarshal(b, &job) == nil && job.PGID > 0 {
			_ = syscall.Kill(-job.PGID, syscall.SIGKILL)
		}
	}
}

// serviceView is `skein service --json NAME` through one agent.
func serviceView(t *testing.T, p *agentProc, name string) (api.ServiceDetail, error) {
	t.Helper()
	var d api.ServiceDetail
	out, err := p.skein(t, "service", "--json", name)
	if err != nil {
		return d, err
	}
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		return d, fmt.Errorf("skein service --json: %v\n%s", err, out)
	}
	return d, nil
}

// waitHealthy waits until every replica the service wants is healthy on
// a node of on, one replica per node when spread, and returns the detail.
func waitHealthy(t *testing.T, p *agentProc, name string, on []*serviceNode, spread bool) api.ServiceDetail {
	t.Helper()
	allowed := map[string]bool{}
	for _, n := range on {
		allowed[n.name()] = true
	}
	var d api.ServiceDetail
	testutil.WaitFor(t, 45*time.Second, func() error {
		var err error
		if d, err = serviceView(t, p, name); err != nil {
			return err
		}
		if d.Healthy != d.Service.Replicas || len(d.Replicas) != d.Service.Replicas {
			return fmt.Errorf("service %s: %s", name, d.State)
		}
		per := map[string]int{}
		for _, r := range d.Replicas {
			if !allowed[r.Node] {
				return fmt.Errorf("replica %s healthy on %q, not one of the live nodes", r.JobID, r.Node)
			}
			per[r.Node]++
			if spread && per[r.Node] > 1 {
				return fmt.Errorf("replicas by node %v, want one per node", per)
			}
		}
		return nil
	})
	return d
}

// loadClient sends GET url at a steady rate, each request on its own, and
// counts the answers by the phase in which the request was sent.
type loadClient struct {
	url   string
	hc    *http.Client
	phase atomic.Value // string

	mu     sync.Mutex
	ok     map[string]int
	failed map[string][]string // phase -> what each failure got
	wg     sync.WaitGroup
	// stop stops sending and waits for every answer.
	stop func()
}

func startLoad(t *testing.T, url string, perSecond int) *loadClient {
	c := &loadClient{url: url, ok: map[string]int{}, failed: map[string][]string{},
		hc: tokenClient(t)}
	c.phase.Store("steady")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(time.Second / time.Duration(perSecond))
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				c.wg.Add(1)
				go c.one(c.phase.Load().(string))
			}
		}
	}()
	c.stop = sync.OnceFunc(func() { cancel(); <-done; c.wg.Wait() })
	t.Cleanup(c.stop)
	return c
}

func (c *loadClient) one(phase string) {
	defer c.wg.Done()
	resp, err := c.hc.Get(c.url)
	var got string
	if err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK && strings.HasPrefix(string(b), "alloc=") {
			c.mu.Lock()
			c.ok[phase]++
			c.mu.Unlock()
			return
		}
		got = fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSpace(string(b)))
	} else {
		got = err.Error()
	}
	c.mu.Lock()
	c.failed[phase] = append(c.failed[phase], time.Now().Format("15:04:05.000")+" "+got)
	c.mu.Unlock()
}

// enter starts a phase: the requests sent from now on count under it.
func (c *loadClient) enter(phase string) { c.phase.Store(phase) }

// counts returns the answers of the requests sent in phase that have
// come back.
func (c *loadClient) counts(phase string) (ok int, failed []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ok[phase], append([]string(nil), c.failed[phase]...)
}

// TestProcess_Service_ServedThroughReplicaNodeAndLeaderLoss runs three real
// agents on 127.0.0.61-63 and a service of three skein-workload replicas
// with an HTTP health check, one per node, while a client sends 50
// requests a second of a 20ms request through the ingress of one node,
// from start to end. Then, in turn: a replica's process is killed; a node
// that neither leads nor serves the client is killed with everything it
// runs (and started again, so that a quorum survives what follows); the
// leader is killed the same way. After each, the service is back to three
// healthy replicas on live nodes, and the client's failures are bounded:
// a killed replica refuses connections, which the ingress retries on
// another replica and then passes over, so a request fails only when it
// was in flight at the killed replica (a 20ms request at 50/s over three
// replicas: under one at a time), or on an idle connection that broke,
// which Go's client retries itself. Each phase allows 5.
func TestProcess_Service_ServedThroughReplicaNodeAndLeaderLoss(t *testing.T) {
	t.Parallel()
	const maxFailed = 5
	bin := testutil.Workload(t)
	shared := testutil.SharedDir(t)
	nodes := newServiceNodes(t, 26100, "127.0.0.61", "127.0.0.62", "127.0.0.63")
	nodes[0].start(t)
	nodes[1].start(t, nodes[0].gossip())
	nodes[2].start(t, nodes[0].gossip())
	var plain []*node
	for _, n := range nodes {
		plain = append(plain, n.node)
	}
	lead := leaderOf(t, plain)
	waitVoters(t, lead.proc, 3)
	// Roles: the client goes through a node that does not lead; the third
	// node is the first to die.
	var leader, ingress, victim *serviceNode
	for _, n := range nodes {
		switch {
		case n.node == lead:
			leader = n
		case ingress == nil:
			ingress = n
		default:
			victim = n
		}
	}
	p := ingress.proc

	if out, err := p.skein(t, "serve", "--name", "work", "--replicas", "3", "--health", "http:/health",
		"--health-interval", "200ms", "--health-timeout", "200ms", "--",
		bin, "--dir", shared, "--serve-port-env", "PORT"); err != nil {
		t.Fatalf("serve: %v\n%s", err, out)
	}
	waitHealthy(t, p, "work", nodes, true)
	load := startLoad(t, ingress.url("work", "/work?ms=20"), 50)
	// Every phase ends once the service is whole again; a phase named
	// after it, from then until the next, counts what it served whole.
	phases := []string{"steady"}
	settle := func(phase string, on []*serviceNode) api.ServiceDetail {
		t.Helper()
		d := waitHealthy(t, p, "work", on, false)
		phases = append(phases, phase, phase+", then")
		load.enter(phase + ", then")
		return d
	}
	testutil.WaitFor(t, 20*time.Second, func() error {
		if ok, failed := load.counts("steady"); ok+len(failed) < 50 {
			return fmt.Errorf("%d requests answered", ok+len(failed))
		}
		return nil
	})
	d := waitHealthy(t, p, "work", nodes, true)

	// (a) A replica's process killed: its job runs again.
	killed := d.Replicas[0]
	b, err := os.ReadFile(filepath.Join(nodeNamed(t, nodes, killed.Node).dataDir, "allocs", killed.Alloc.ID, "job.pid"))
	var job struct {
		PGID int `json:"pgid"`
	}
	if err == nil {
		err = json.Unmarshal(b, &job)
	}
	if err != nil || job.PGID <= 0 {
		t.Fatalf("find replica %s's process: %v (%s)", killed.JobID, err, b)
	}
	load.enter("replica killed")
	if err := syscall.Kill(-job.PGID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 30*time.Second, func() error {
		d, err := serviceView(t, p, "work")
		if err != nil {
			return err
		}
		for _, r := range d.Replicas {
			if r.JobID == killed.JobID && r.Alloc != nil && r.Alloc.ID != killed.Alloc.ID && r.Status == api.ReplicaHealthy {
				return nil
			}
		}
		return fmt.Errorf("replica %s not back healthy: %s", killed.JobID, d.State)
	})
	d = settle("replica killed", nodes)

	// (b) A node that neither leads nor serves the client dies with its
	// replicas; they run again on the other two.
	load.enter("node killed")
	victim.killAll(t)
	waitRefused(t, d, victim)
	d = settle("node killed", []*serviceNode{leader, ingress})
	victim.start(t, ingress.gossip())
	waitNodes(t, p, map[string]structs.NodeStatus{leader.name(): "ready", ingress.name(): "ready", victim.name(): "ready"})
	waitVoters(t, p, 3)

	// (c) The leader dies with its replicas: the ingress node, which
	// does not lead, keeps serving and the replicas run again.
	if l := leaderOf(t, plain); l != leader.node {
		t.Fatalf("%s leads, want %s still", l.ip, leader.ip)
	}
	load.enter("leader killed")
	leader.killAll(t)
	waitRefused(t, d, leader)
	settle("leader killed", []*serviceNode{ingress, victim})
	testutil.WaitFor(t, 20*time.Second, func() error {
		if ok, failed := load.counts("leader killed, then"); ok+len(failed) < 50 {
			return fmt.Errorf("%d requests answered", ok+len(failed))
		}
		return nil
	})
	load.stop()
	for _, phase := range phases {
		ok, failed := load.counts(phase)
		t.Logf("%s: %d served, %d failed %v", phase, ok, len(failed), failed)
		if len(failed) > maxFailed {
			t.Errorf("%s: %d requests failed, want at most %d: %v", phase, len(failed), maxFailed, failed)
		}
		if ok == 0 && !strings.HasSuffix(phase, ", then") {
			t.Errorf("%s: no request served", phase)
		}
	}
}

// waitRefused waits until every replica of d on node n refuses
// connections: it died with its node. The node must have had one.
func waitRefused(t *testing.T, d api.ServiceDetail, n *serviceNode) {
	t.Helper()
	had := 0
	for _, r := range d.Replicas {
		if r.Node != n.name() {
			continue
		}
		had++
		testutil.WaitFor(t, 10*time.Second, func() error {
			conn, err := net.DialTimeout("tcp", net.JoinHostPort(n.ip, strconv.Itoa(r.Port)), time.Second)
			if err != nil {
				return nil
			}
			conn.Close()
			return fmt.Errorf("replica %s still accepts on %s:%d", r.JobID, n.ip, r.Port)
		})
	}
	if had == 0 {
		t.Fatalf("%s ran no replica of %s: %+v", n.name(), d.Service.Name, d.Replicas)
	}
}

// nodeNamed returns the node called name.
func nodeNamed(t *testing.T, nodes []*serviceNode, name string) *serviceNode {
	t.Helper()
	for _, n := range nodes {
		if n.name() == name {
			return n
		}
	}
	t.Fatalf("no node named %q", name)
	return nil
}

// TestProcess_ImageService_ReplicasInContainersServedThroughTheIngress runs
// two real agents on 127.0.0.71-72 and a service of two skein-workload
// replicas in containers, one per node, with an HTTP health check: the
// ingress of one node reaches both, and a replica whose container is
// killed runs again in a new one and is reached too.
func TestProcess_ImageService_ReplicasInContainersServedThroughTheIngress(t *testing.T) {
	t.Parallel()
	image := workloadImage(t)
	shared := testutil.SharedDir(t)
	nodes := newServiceNodes(t, 26200, "127.0.0.71", "127.0.0.72")
	for i, n := range nodes {
		flags := []string{"--ingress-port", strconv.Itoa(n.ingress), "--master-ports", n.ports, "--allow-mount=" + shared}
		if i == 0 {
			n.startWith(t, flags)
		} else {
			n.startWith(t, flags, nodes[0].gossip())
		}
	}
	p := nodes[0].proc
	waitNodes(t, p, map[string]structs.NodeStatus{nodes[0].name(): "ready", nodes[1].name(): "ready"})
	waitEngines(t, p, 2)
	if out, err := p.skein(t, "serve", "--name", "boxed", "--replicas", "2", "--image", image, "--mount", shared+":/shared",
		"--health", "http:/health", "--health-interval", "200ms", "--health-timeout", "200ms", "--",
		"skein-workload", "--dir", "/shared", "--serve-port-env", "PORT"); err != nil {
		t.Fatalf("serve: %v\n%s", err, out)
	}
	// reached waits until requests through the ingress have been answered
	// by every replica of d.
	hc := tokenClient(t)
	reached := func(d api.ServiceDetail) {
		t.Helper()
		want := map[string]bool{}
		for _, r := range d.Replicas {
			want[r.Alloc.ID] = true
		}
		testutil.WaitFor(t, 20*time.Second, func() error {
			resp, err := hc.Get(nodes[0].url("boxed", "/work?ms=0"))
			if err != nil {
				return err
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			alloc, _, _ := strings.Cut(strings.TrimPrefix(string(b), "alloc="), " ")
			if resp.StatusCode != http.StatusOK || !want[alloc] {
				return fmt.Errorf("answered %d %q, want one of %v", resp.StatusCode, b, want)
			}
			delete(want, alloc)
			if len(want) > 0 {
				return fmt.Errorf("not yet answered by %v", want)
			}
			return nil
		})
	}
	d := waitHealthy(t, p, "boxed", nodes, true)
	reached(d)
	for _, r := range d.Replicas {
		if st := containerOf(t, r.Alloc.ID); st != "running" {
			t.Fatalf("replica %s's container is %q, want running", r.JobID, st)
		}
	}

	// Kill one replica's container: it runs again in another.
	killed := d.Replicas[1]
	ids, err := exec.Command("docker", "ps", "-q", "--filter", "label=skein.alloc="+killed.Alloc.ID).Output()
	if err != nil || len(strings.Fields(string(ids))) != 1 {
		t.Fatalf("find replica %s's container: %v (%q)", killed.JobID, err, ids)
	}
	if out, err := exec.Command("docker", "kill", strings.TrimSpace(string(ids))).CombinedOutput(); err != nil {
		t.Fatalf("docker kill: %v\n%s", err, out)
	}
	testutil.WaitFor(t, 30*time.Second, func() error {
		var err error
		if d, err = serviceView(t, p, "boxed"); err != nil {
			return err
		}
		for _, r := range d.Replicas {
			if r.JobID == killed.JobID && (r.Alloc == nil || r.Alloc.ID == killed.Alloc.ID || r.Status != api.ReplicaHealthy) {
				return fmt.Errorf("replica %s not back healthy: %s", killed.JobID, d.State)
			}
		}
		return nil
	})
	reached(d)
}

// TestProcess_Service_HealthCheckedAgainAfterAgentRestart SIGKILLs a real
// agent whose replica keeps running, makes the replica fail its health
// check while no agent watches it, and starts the agent again: the
// adopted replica is checked again, reported unhealthy and left out of the
// ingress, and is an endpoint again once it passes.
func TestProcess_Service_HealthCheckedAgainAfterAgentRestart(t *testing.T) {
	t.Parallel()
	bin := testutil.Workload(t)
	shared := testutil.SharedDir(t)
	sick := filepath.Join(shared, "sick")
	n := newServiceNodes(t, 26260, "127.0.0.65")[0]
	n.start(t)
	p := n.proc
	if out, err := p.skein(t, "serve", "--name", "solo", "--health", "http:/health",
		"--health-interval", "200ms", "--health-timeout", "200ms", "--health-failures", "1", "--",
		bin, "--dir", shared, "--serve-port-env", "PORT", "--unhealthy-if", sick); err != nil {
		t.Fatalf("serve: %v\n%s", err, out)
	}
	replica := waitHealthy(t, p, "solo", []*serviceNode{n}, true).Replicas[0]
	hc := tokenClient(t)
	// status waits until the ingress answers want and the replica, on its
	// first allocation still, stands as status.
	status := func(want int, st api.ReplicaStatus) {
		t.Helper()
		testutil.WaitFor(t, 30*time.Second, func() error {
			d, err := serviceView(t, n.proc, "solo")
			if err != nil {
				return err
			}
			if r := d.Replicas[0]; r.Alloc == nil || r.Alloc.ID != replica.Alloc.ID || r.Status != st {
				return fmt.Errorf("replica %+v, want %s on allocation %s", r, st, replica.Alloc.ID)
			}
			resp, err := hc.Get(n.url("solo", "/work?ms=0"))
			if err != nil {
				return err
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != want {
				return fmt.Errorf("ingress answered %d %q, want %d", resp.StatusCode, b, want)
			}
			return nil
		})
	}
	status(http.StatusOK, api.ReplicaHealthy)

	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = p.cmd.Wait()
	if err := os.WriteFile(sick, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	n.start(t)
	status(http.StatusServiceUnavailable, api.ReplicaUnhealthy)
	if err := os.Remove(sick); err != nil {
		t.Fatal(err)
	}
	status(http.StatusOK, api.ReplicaHealthy)
}
