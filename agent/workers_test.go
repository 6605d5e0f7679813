package agent

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/cluster"
	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

// startWorkerCluster starts n agents of which Raft holds servers (one
// voter and servers-1 standbys); the others are workers.
func startWorkerCluster(t *testing.T, n, servers int) *testCluster {
	t.Helper()
	return startWorkerClusterWith(t, n, servers, nil)
}

// startWorkerClusterWith is startWorkerCluster with each node's config
// changed by mutate (nil: none) before it starts.
func startWorkerClusterWith(t *testing.T, n, servers int, mutate func(i int, cfg *Config)) *testCluster {
	t.Helper()
	tc := startClusterWith(t, n, func(i int, cfg *Config) {
		cfg.Voters, cfg.Servers = 1, servers
		if mutate != nil {
			mutate(i, cfg)
		}
	})
	testutil.WaitFor(t, 10*time.Second, func() error {
		if got := len(tc.servers()); got != servers {
			return fmt.Errorf("%d servers, want %d", got, servers)
		}
		return nil
	})
	return tc
}

// standby is the index of a server that does not lead.
func (tc *testCluster) standby() int {
	return tc.followerWhere("no server besides the leader", func(_ int, a *Agent) bool { return a.holdsState() })
}

// workers returns the live agents outside Raft.
func (tc *testCluster) workers() []*Agent {
	var out []*Agent
	for _, a := range tc.live() {
		if !a.holdsState() {
			out = append(out, a)
		}
	}
	return out
}

func TestCluster_Workers_RunAGangAndServeTheAPIOutsideRaft(t *testing.T) {
	t.Parallel()
	tc := startWorkerCluster(t, 3, 1)
	workers := tc.workers()
	if len(workers) != 2 {
		t.Fatalf("%d workers, want 2", len(workers))
	}
	// They stay outside Raft: the leader does not add them as it did
	// every joiner before.
	testutil.Holds(t, time.Second, func() error {
		if got := len(tc.servers()); got != 1 {
			return fmt.Errorf("%d servers, want 1", got)
		}
		return nil
	})
	ctx := context.Background()
	w := tc.client(workers[0])

	// A worker answers reads by asking a server: the whole cluster, each
	// node with its role.
	nodes, err := w.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	roles := map[structs.NodeRole]int{}
	for _, n := range nodes {
		roles[n.Role]++
	}
	if len(nodes) != 3 || roles[structs.RoleLeader] != 1 || roles[structs.RoleWorker] != 2 {
		t.Fatalf("nodes through a worker: %d with roles %v; want 3: a leader and 2 workers", len(nodes), roles)
	}

	// A gang over all three nodes, submitted through a worker: each rank
	// learns its peers from its node's view.
	job := tc.submit(workers[1], structs.JobSpec{Nodes: 3, GPUs: 1,
		Command: []string{"sh", "-c", `echo "rank $SKEIN_RANK of $NNODES, master $MASTER_ADDR"; sleep 60`}})
	d := waitJobState(t, w, job.ID, structs.JobRunning)
	byNode := map[string]int{}
	for _, a := range d.Allocations {
		byNode[a.NodeID]++
	}
	if len(byNode) != 3 {
		t.Fatalf("the gang's ranks are on %d nodes, want 3", len(byNode))
	}
	for rank := range 3 {
		testutil.WaitFor(t, 10*time.Second, func() error {
			var b bytes.Buffer
			if err := w.Logs(ctx, job.ID, api.LogOptions{Rank: rank, Stream: "stdout"}, &b); err != nil {
				return err
			}
			if want := fmt.Sprintf("rank %d of 3, master 127.0.0.1", rank); !strings.Contains(b.String(), want) {
				return fmt.Errorf("rank %d's output %q, want %q", rank, b.String(), want)
			}
			return nil
		})
	}

	// Cancelled through the other worker: every rank stops, on the
	// workers too.
	if _, err := tc.client(workers[1]).CancelJob(ctx, job.ID); err != nil {
		t.Fatal(err)
	}
	waitJobState(t, w, job.ID, structs.JobCancelled)
	testutil.WaitFor(t, 15*time.Second, func() error {
		for _, a := range tc.live() {
			if n := len(a.runner.Tracked()); n != 0 {
				return fmt.Errorf("%s still runs %d allocations", a.Name(), n)
			}
		}
		return nil
	})
	tc.checkInvariants()
}

func TestCluster_Workers_AStandbyLostIsReplacedByAWorker(t *testing.T) {
	t.Parallel()
	tc := startWorkerCluster(t, 4, 2)
	lead, standby := tc.leader(), tc.standby()
	lost := tc.agents[standby].nodeID
	tc.kill(standby)
	// Once the standby has been failed in gossip for the dead server
	// grace (10 s), the leader takes a worker into Raft in its place, and
	// the new standby catches up with the state.
	testutil.WaitFor(t, 40*time.Second, func() error {
		servers := tc.servers()
		if len(servers) != 2 {
			return fmt.Errorf("%d alive servers, want 2", len(servers))
		}
		for _, a := range servers {
			if a.fsm.Index() < tc.agents[lead].fsm.Index()-1 {
				return fmt.Errorf("%s is at index %d, the leader at %d", a.Name(), a.fsm.Index(), tc.agents[lead].fsm.Index())
			}
		}
		return nil
	})
	// Work submitted now runs on the remaining nodes, the dead one
	// marked down.
	job := tc.submit(tc.workers()[0], structs.JobSpec{Nodes: 3, GPUs: 1, Command: []string{"sleep", "60"}})
	waitJobState(t, tc.client(tc.agents[lead]), job.ID, structs.JobRunning)
	if n, ok := tc.agents[lead].fsm.Node(lost); !ok || n.Status != structs.NodeDown {
		t.Fatalf("the lost standby is %v in the state, want down", n)
	}
}

// A voter dies, the leader or another, in a cluster that keeps three
// voters and a standby and makes the other nodes workers, after every
// server compacted its log: a standby takes the dead voter's vote, so
// three voters stay; a worker is taken into Raft in the dead server's
// place and, the entries it lacks being gone from every log, brought up
// to date from a snapshot, to the leader's state; the service replicas on
// the living nodes run on while the dead node's runs elsewhere; new work
// runs; the dead node is marked down; and at no moment checked are more
// servers alive than the four kept.
func TestCluster_Workers_ALostVoterIsReplacedAndAWorkerCatchesUpFromASnapshot(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		leader bool
	}{
		{name: "the leader", leader: true},
		{name: "a voter that does not lead"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel() // each its own cluster
			testVoterLost(t, tt.leader)
		})
	}
}

func testVoterLost(t *testing.T, killLeader bool) {
	const nodes, voters, servers, trailing = 6, 3, 4, 8
	tc := startWorkerClusterWith(t, nodes, servers, func(_ int, cfg *Config) {
		cfg.Voters = voters
		cfg.TrailingLogs = trailing
		// For the 10 s a dead voter keeps its vote, the two others must
		// hear each other: Raft's own timings, and the agent's lease,
		// which a loaded machine does not trip as it does the tests'
		// tight ones. This test is about membership, not failover speed.
		cfg.Timing = cluster.Timing{HeartbeatTimeout: time.Second, ElectionTimeout: time.Second,
			LeaderLeaseTimeout: 500 * time.Millisecond, CommitTimeout: 5 * time.Millisecond}
		cfg.StopAfter, cfg.DownAfter = 5*time.Second, 6*time.Second
	})
	ctx := context.Background()
	lead := tc.leader()
	c := tc.client(tc.agents[lead])

	// State for the new server to catch up with: a service whose replicas
	// spread, one on every node, and a job that ran.
	if _, err := c.CreateService(ctx, sleepService("web", nodes)); err != nil {
		t.Fatal(err)
	}
	before := waitServiceState(t, c, "web", fmt.Sprintf("%d/%d healthy", nodes, nodes))
	on := map[string]bool{} // the replicas' nodes
	for _, r := range before.Replicas {
		on[r.Node] = true
	}
	if len(on) != nodes {
		t.Fatalf("the replicas run on %d nodes, want one on each of %d: %+v", len(on), nodes, before.Replicas)
	}
	ran := tc.submit(tc.workers()[0], structs.JobSpec{Command: []string{"true"}})
	waitJobState(t, c, ran.ID, structs.JobSucceeded)

	// Every server snapshots, keeping only the last few entries in its
	// log: a server added from now on cannot be sent the log from its
	// start.
	snapshots := map[string]bool{} // the servers' snapshot indexes
	for _, a := range tc.servers() {
		testutil.WaitFor(t, 20*time.Second, func() error {
			err := a.raft.Snapshot()
			if err != nil {
				// Raft snapshots only once the state machine applied an
				// entry past the latest configuration change: write one.
				tc.submit(a, structs.JobSpec{Command: []string{"true"}})
			}
			return err
		})
		idx := a.raft.Stats()["last_snapshot_index"]
		if i, _ := strconv.Atoi(idx); i <= trailing {
			t.Fatalf("%s snapshotted at index %s: its log still starts at the beginning", a.Name(), idx)
		}
		snapshots[idx] = true
	}
	workers := map[string]bool{}
	for _, a := range tc.workers() {
		workers[a.nodeID] = true
		if idx := a.raft.Stats()["last_snapshot_index"]; idx != "0" {
			t.Fatalf("worker %s has a snapshot at %s before holding any state", a.Name(), idx)
		}
	}

	lead = tc.leader()
	conf, err := tc.agents[lead].raft.Servers()
	if err != nil {
		t.Fatal(err)
	}
	voted := map[string]bool{}
	for _, s := range conf {
		voted[s.ID] = s.Voter
	}
	victim := lead
	if !killLeader {
		victim = tc.followerWhere("no voter besides the leader", func(_ int, a *Agent) bool { return voted[a.nodeID] })
	}
	dead, deadName := tc.agents[victim].nodeID, tc.agents[victim].Name()
	var survivors []*Agent
	for _, a := range tc.live() {
		if a.nodeID != dead {
			survivors = append(survivors, a)
		}
	}
	bound := watchServers(t, survivors, dead, servers)
	tc.kill(victim)

	// Three voters again, the dead one not among them, and four alive
	// servers, one of them a worker before.
	var fresh *Agent
	testutil.WaitFor(t, 60*time.Second, func() error {
		l := leaderAmong(survivors)
		if l == nil {
			return fmt.Errorf("no leader among the survivors")
		}
		conf, err := l.raft.Servers()
		if err != nil {
			return err
		}
		var vs, alive []string
		fresh = nil
		for _, s := range conf {
			if s.ID == dead {
				if s.Voter {
					return fmt.Errorf("%s's configuration %+v: the dead voter still votes", l.Name(), conf)
				}
				continue
			}
			alive = append(alive, s.ID)
			if s.Voter {
				vs = append(vs, s.ID)
			}
			if workers[s.ID] {
				fresh = tc.agentOf(t, s.ID)
			}
		}
		if len(vs) != voters || len(alive) != servers || fresh == nil {
			return fmt.Errorf("%s's configuration %+v: want %d alive voters and %d alive servers, a worker among them", l.Name(), conf, voters, servers)
		}
		for _, id := range vs {
			if !voted[id] {
				t.Logf("the dead voter's vote went to %s, %s before", tc.agentOf(t, id).Name(), map[bool]string{true: "a worker", false: "a standby"}[workers[id]])
			}
		}
		return nil
	})
	// The new server installed a snapshot one of the servers made (its
	// own threshold is far off), and holds the leader's state.
	testutil.WaitFor(t, 20*time.Second, func() error {
		if idx := fresh.raft.Stats()["last_snapshot_index"]; !snapshots[idx] {
			return fmt.Errorf("%s's last snapshot is at %s, not one of the servers' %v", fresh.Name(), idx, snapshots)
		}
		l := leaderAmong(survivors)
		if l == nil {
			return fmt.Errorf("no leader among the survivors")
		}
		li, lh := l.fsm.IndexedHash()
		fi, fh := fresh.fsm.IndexedHash()
		if li != fi || lh != fh {
			return fmt.Errorf("%s at index %d (%.8s), the leader %s at %d (%.8s)", fresh.Name(), fi, fh, l.Name(), li, lh)
		}
		return nil
	})
	for _, id := range tc.acked {
		if _, ok := fresh.fsm.Job(id); !ok {
			t.Errorf("job %s is not in the new server's state", structs.ShortID(id))
		}
	}
	for _, r := range before.Replicas {
		if _, ok := fresh.fsm.Job(r.JobID); !ok {
			t.Errorf("replica %d's job is not in the new server's state", r.Index)
		}
	}
	if _, ok := fresh.fsm.Service("web"); !ok {
		t.Error("the service is not in the new server's state")
	}

	// The replicas on the living nodes ran on; the dead node's runs
	// elsewhere, and the dead node is down.
	w := tc.client(tc.workers()[0])
	testutil.WaitFor(t, 30*time.Second, func() error {
		d, err := w.Service(ctx, "web")
		if err != nil {
			return err
		}
		if want := fmt.Sprintf("%d/%d healthy", nodes, nodes); d.State != want {
			return fmt.Errorf("service is %q, want %q", d.State, want)
		}
		for _, r := range d.Replicas {
			was := before.Replicas[r.Index]
			switch {
			case r.Alloc == nil || r.Node == "":
				return fmt.Errorf("replica %d is not placed", r.Index)
			case r.Node == deadName:
				return fmt.Errorf("replica %d still on the dead node", r.Index)
			case was.Node != deadName && r.Alloc.ID != was.Alloc.ID:
				return fmt.Errorf("replica %d on the living %s was replaced: allocation %s, was %s", r.Index, was.Node, r.Alloc.ID, was.Alloc.ID)
			}
		}
		return nil
	})
	// `skein nodes` shows it, through a worker: a server's answer, which
	// may lag the leader's configuration by a moment.
	want := map[structs.NodeRole]int{structs.RoleLeader: 1, structs.RoleVoter: voters - 1,
		structs.RoleNonvoter: servers - voters, structs.RoleWorker: nodes - 1 - servers}
	testutil.WaitFor(t, 10*time.Second, func() error {
		all, err := w.Nodes(ctx)
		if err != nil {
			return err
		}
		roles := map[structs.NodeRole]int{}
		down := false
		for _, n := range all {
			switch {
			case n.ID == dead && n.Status != structs.NodeDown:
				return fmt.Errorf("the dead node is %s, want down", n.Status)
			case n.ID == dead:
				down = true
			default:
				roles[n.Role]++
			}
		}
		if !down {
			return fmt.Errorf("the dead node is not listed")
		}
		if !maps.Equal(roles, want) {
			return fmt.Errorf("the living nodes' roles %v, want %v", roles, want)
		}
		return nil
	})
	// New work runs, a gang over every living node, submitted through
	// the new server.
	gang := tc.submit(fresh, structs.JobSpec{Nodes: nodes - 1, GPUs: 1, Command: []string{"sleep", "60"}})
	waitJobState(t, w, gang.ID, structs.JobRunning)
	bound()
	tc.checkInvariants()
}

// leaderAmong returns the agent among agents that leads, or nil.
func leaderAmong(agents []*Agent) *Agent {
	for _, a := range agents {
		if a.raft.IsLeader() {
			return a
		}
	}
	return nil
}

// watchServers checks every 20 ms, until the returned func is called,
// that at most max of agents are alive servers: by their own Raft
// configurations, and by the one of the leader among them, the node dead
// not counted. The func reports the first breach.
func watchServers(t *testing.T, agents []*Agent, dead string, max int) (check func()) {
	t.Helper()
	stop, done := make(chan struct{}), make(chan struct{})
	var breach error
	go func() {
		defer close(done)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for breach == nil {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			holding := 0
			for _, a := range agents {
				if a.holdsState() {
					holding++
				}
			}
			if holding > max {
				breach = fmt.Errorf("%d alive nodes are in their own Raft configuration, more than the %d servers kept", holding, max)
			}
			if l := leaderAmong(agents); l != nil {
				conf, err := l.raft.Servers()
				alive := slices.DeleteFunc(conf, func(s cluster.RaftServer) bool { return s.ID == dead })
				if err == nil && len(alive) > max {
					breach = fmt.Errorf("the leader %s holds %d alive servers, more than the %d kept: %+v", l.Name(), len(alive), max, alive)
				}
			}
		}
	}()
	var once sync.Once
	check = func() {
		once.Do(func() {
			close(stop)
			<-done
			if breach != nil {
				t.Error(breach)
			}
		})
	}
	t.Cleanup(check)
	return check
}

// startSecureWorkerCluster starts n agents of a secure cluster whose one
// server is the founder; each other is admitted through the node started
// before it (from the third on a worker, which passes the admission on to
// the server) and is a worker.
func startSecureWorkerCluster(t *testing.T, n int, mutate func(i int, cfg *Config)) *testCluster {
	t.Helper()
	tc := startWorkerClusterWith(t, n, 1, func(i int, cfg *Config) {
		cfg.Security = SecurityTLS
		if mutate != nil {
			mutate(i, cfg)
		}
	})
	if !tc.agents[0].holdsState() || len(tc.workers()) != n-1 {
		t.Fatalf("the founder is a server: %v; %d workers, want %d", tc.agents[0].holdsState(), len(tc.workers()), n-1)
	}
	return tc
}

// internalCode is the status a's node certificate gets from the internal
// API at url (0: the TLS handshake, or the call, failed).
func internalCode(t *testing.T, a *Agent, url string) int {
	t.Helper()
	return post(t, nodeClient(a), url+"/v1/internal/heartbeat", api.HeartbeatRequest{NodeID: a.nodeID}, nil)
}

// userFrom is a client of a's API with token that calls from the loopback
// address from: on loopback every node calls from 127.0.0.1, so the
// failed authentications of a revoked node would count against a user
// there too.
func userFrom(t *testing.T, a *Agent, token, from string) *api.Client {
	t.Helper()
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	c, err := api.NewClient(a.HTTPAddr(), token)
	if err != nil {
		t.Fatal(err)
	}
	conf, err := api.ClusterTLS([]byte(strings.Join(a.secure.CA().CACerts, "")))
	if err != nil {
		t.Fatal(err)
	}
	return c.WithHTTPClient(&http.Client{Transport: &http.Transport{DialContext: dialer.DialContext}}).WithTLS(conf)
}

func TestSecure_Workers_RunJobsRenewAndFollowAKeyringRotation(t *testing.T) {
	t.Parallel()
	tc := startSecureWorkerCluster(t, 3, nil)
	workers := tc.workers()
	ctx := context.Background()
	w := tc.client(workers[0])

	// A gang over the server and both workers, through a worker.
	job := tc.submit(workers[0], structs.JobSpec{Nodes: 3, GPUs: 1, Command: []string{"sleep", "600"}})
	waitJobState(t, w, job.ID, structs.JobRunning)
	testutil.WaitFor(t, 10*time.Second, func() error {
		for _, a := range tc.agents {
			if n := len(a.runner.Tracked()); n != 1 {
				return fmt.Errorf("%s runs %d allocations, want the gang's rank", a.Name(), n)
			}
		}
		return nil
	})

	// A worker renews its certificate as any node does, at the leader
	// its view named, and the leader takes the new one.
	renewing := workers[1]
	serial := renewing.secure.Identity().Leaf().SerialNumber
	if err := renewing.secure.RenewNow(ctx); err != nil {
		t.Fatalf("a worker's renewal: %v", err)
	}
	if renewing.secure.Identity().Leaf().SerialNumber.Cmp(serial) == 0 {
		t.Fatal("the worker's renewal kept the old certificate")
	}
	if code := internalCode(t, renewing, tc.agents[tc.leader()].HTTPAddr()); code != http.StatusOK {
		t.Fatalf("a heartbeat with the worker's renewed certificate: %d, want 200", code)
	}

	// A keyring rotation, asked through a worker, completes only once
	// every node, the workers too, installed each step.
	if _, err := w.RotateKeyring(ctx); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 30*time.Second, func() error {
		if tr, _ := tc.agents[0].fsm.Trust(); tr.Keyring.Rotating() || tr.Keyring.Generation != 4 {
			return fmt.Errorf("the cluster's keyring is at generation %d, rotating %v", tr.Keyring.Generation, tr.Keyring.Rotating())
		}
		for _, a := range tc.agents {
			if g := a.secure.KeyringGeneration(); g != 4 {
				return fmt.Errorf("%s installed keyring %d, want 4", a.Name(), g)
			}
		}
		return nil
	})
	for _, a := range workers {
		if _, others, err := a.secure.GossipKeys(); err != nil || len(others) != 0 {
			t.Fatalf("%s still holds %d other gossip keys (%v): the old key was not dropped", a.Name(), len(others), err)
		}
	}
	// With the old key gone everywhere, the workers are still alive
	// members of everyone's gossip, announcing the new keyring.
	allAlive := func() error {
		for _, a := range tc.agents {
			members := a.peers.Members()
			if len(members) != 3 {
				return fmt.Errorf("%s's gossip has %d members, want 3", a.Name(), len(members))
			}
			for _, m := range members {
				if m.Status != "alive" || m.Keyring != 4 {
					return fmt.Errorf("%s sees %s %s with keyring %d", a.Name(), m.Name, m.Status, m.Keyring)
				}
			}
		}
		return nil
	}
	testutil.WaitFor(t, 10*time.Second, allAlive)
	testutil.Holds(t, 3*time.Second, allAlive)

	// The gang ran through all of it, fenced nowhere.
	if d, err := w.Job(ctx, job.ID); err != nil || d.Job.State != structs.JobRunning || d.Job.Attempts != 1 {
		t.Fatalf("the gang after the rotation: %+v, %v; want still running its first attempt", d, err)
	}
	tc.checkInvariants()
}

func TestSecure_Workers_ARevokedWorkerIsCutOffAndItsJobRunsElsewhere(t *testing.T) {
	t.Parallel()
	tc := startSecureWorkerCluster(t, 3, func(i int, cfg *Config) {
		if i > 0 {
			cfg.Labels = map[string]string{"pool": "workers"}
		}
	})
	server := tc.agents[0]
	ctx := context.Background()
	job := tc.submit(server, structs.JobSpec{Command: []string{"sleep", "600"}, GPUs: 1, Restarts: 1,
		Constraints: map[string]string{"pool": "workers"}})
	d := waitJobState(t, tc.client(server), job.ID, structs.JobRunning)
	victim := tc.agents[tc.indexOf(d.Allocations[0].NodeID)]
	witness := tc.agents[3-tc.indexOf(victim.nodeID)]
	if victim.holdsState() || witness.holdsState() {
		t.Fatal("the job's node and the witness are not both workers")
	}
	// Until the revocation, the two workers take each other's
	// certificates, and the server reads the job's output from the
	// worker it ran on (keeping the connection open).
	if internalCode(t, victim, witness.HTTPAddr()) == 0 || internalCode(t, witness, victim.HTTPAddr()) == 0 {
		t.Fatal("two workers refuse each other's certificates before any revocation")
	}
	firstAttempt := api.LogOptions{Attempt: 1, Stream: api.StreamStdout}
	user := userFrom(t, server, tc.admin, "127.0.0.2")
	testutil.WaitFor(t, 10*time.Second, func() error {
		return user.Logs(ctx, job.ID, firstAttempt, io.Discard)
	})

	if _, err := tc.client(server).RevokeNode(ctx, victim.nodeID, api.NodeRevokeRequest{Reason: "stolen"}); err != nil {
		t.Fatal(err)
	}
	// The other worker learns of it from its view: it refuses the
	// revoked one's certificate both ways.
	testutil.WaitFor(t, 10*time.Second, func() error {
		if code := internalCode(t, victim, witness.HTTPAddr()); code != 0 {
			return fmt.Errorf("the witness answers the revoked worker %d", code)
		}
		if code := internalCode(t, witness, victim.HTTPAddr()); code != 0 {
			return fmt.Errorf("the witness takes the revoked worker's server certificate (%d)", code)
		}
		return nil
	})
	// The server no longer reads from it, though the connection it
	// had open outlived the revocation.
	testutil.WaitFor(t, 10*time.Second, func() error {
		err := user.Logs(ctx, job.ID, firstAttempt, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "revoked") {
			return fmt.Errorf("the server reads the revoked worker's output: %v, want refused as revoked", err)
		}
		return nil
	})
	// The server refuses it too, even on the connections it had open:
	// the revoked worker loses its lease and stops the job, which runs
	// on the other worker.
	waitJob(t, server, job.ID, func(j *structs.Job, allocs []*structs.Allocation) error {
		if err := runningAlloc(j, allocs); err != nil {
			return err
		}
		for _, al := range allocs {
			if al.Attempt == j.Attempts && al.NodeID != witness.nodeID {
				return fmt.Errorf("attempt %d runs on %s, want the witness", j.Attempts, structs.ShortID(al.NodeID))
			}
		}
		return nil
	})
	testutil.WaitFor(t, 10*time.Second, func() error {
		if n := len(victim.runner.Tracked()); n != 0 {
			return fmt.Errorf("the revoked worker still runs %d allocations", n)
		}
		return nil
	})
	if n, ok := server.fsm.Node(victim.nodeID); !ok || n.Status != structs.NodeDown {
		t.Fatalf("the revoked worker is %v in the state, want down", n)
	}
	// The keyring rotated past it, with the other worker.
	testutil.WaitFor(t, 30*time.Second, func() error {
		if tr, _ := server.fsm.Trust(); tr.Keyring.Rotating() || tr.Keyring.Generation != 4 {
			return fmt.Errorf("the cluster's keyring is at generation %d, rotating %v", tr.Keyring.Generation, tr.Keyring.Rotating())
		}
		if g := witness.secure.KeyringGeneration(); g != 4 {
			return fmt.Errorf("the witness installed keyring %d, want 4", g)
		}
		return nil
	})
	// Its view stopped at the revocation, before the new key came in.
	if g := victim.secure.KeyringGeneration(); g != 1 {
		t.Errorf("the revoked worker installed keyring %d, want still the first: it was handed the new key", g)
	}
}

// agentOf returns the live agent of the node id.
func (tc *testCluster) agentOf(t *testing.T, id string) *Agent {
	t.Helper()
	for _, a := range tc.live() {
		if a.nodeID == id {
			return a
		}
	}
	t.Fatalf("no live agent is node %s", id)
	return nil
}

// A service reached through a worker's ingress, its replica on another
// node: the worker routes by its view and admits only the callers a
// server admits; it follows the replica when it is killed and placed
// again and when the service is scaled, and the leader's autoscaler
// hears what it has in flight. With no server left it admits nobody.
func TestCluster_Workers_AWorkersIngressServesAServiceRunningElsewhere(t *testing.T) {
	t.Parallel()
	tc := startWorkerClusterWith(t, 3, 1, func(_ int, cfg *Config) {
		cfg.IngressPort = -1
		cfg.AutoscaleInterval = 200 * time.Millisecond
	})
	leadIdx := tc.leader()
	lead := tc.agents[leadIdx]
	ctx := context.Background()
	if _, err := tc.client(lead).CreateService(ctx, api.ServiceCreateRequest{Name: "web", Replicas: 1, Spec: autoscaledSpec(t, 0)}); err != nil {
		t.Fatalf("create the service: %v", err)
	}
	replica := waitReplicas(t, lead, "web", 1, true)[0]
	var w *Agent
	for _, a := range tc.workers() {
		if a.nodeID != replica.NodeID {
			w = a
		}
	}
	if w == nil {
		t.Fatalf("no worker without the replica: it runs on %s", replica.NodeID)
	}

	// served waits until the worker's ingress serves the service and
	// sends its requests to the replicas given, those the leader's state
	// has healthy.
	served := func(what string, want ...*structs.Allocation) {
		t.Helper()
		var ids []string
		for _, a := range want {
			ids = append(ids, a.ID)
		}
		slices.Sort(ids)
		testutil.WaitFor(t, 20*time.Second, func() error {
			if code, body := ingressGet(t, http.DefaultClient, w, "/web/health", tc.admin); code != http.StatusOK {
				return fmt.Errorf("%s: %d %q through the worker's ingress", what, code, body)
			}
			if got := slices.Sorted(maps.Keys(w.ingressInFlight("web"))); !slices.Equal(got, ids) {
				return fmt.Errorf("%s: the worker's ingress sends to %v, want %v", what, got, ids)
			}
			return nil
		})
	}
	served("the replica on another node", replica)
	// A worker holds no ACLs: a server admits its callers.
	if code, body := ingressGet(t, http.DefaultClient, w, "/web/health", ""); code != http.StatusUnauthorized {
		t.Fatalf("without a token through the worker's ingress: %d %q, want 401", code, body)
	}

	// The replica killed: its job runs again on a new allocation, which
	// the worker's ingress follows.
	killJobGroup(t, tc.agentOf(t, replica.NodeID).allocDir(), replica.ID)
	var again *structs.Allocation
	testutil.WaitFor(t, 30*time.Second, func() error {
		healthy := true
		for _, a := range runningReplicas(lead, "web", &healthy) {
			if a.ID != replica.ID {
				again = a
				return nil
			}
		}
		return fmt.Errorf("replica %s has not come back", replica.JobID)
	})
	served("the replica placed again", again)

	// Scaled up through the worker: both replicas.
	if _, err := tc.client(w).ScaleService(ctx, "web", api.ServiceScaleRequest{Replicas: 2}); err != nil {
		t.Fatalf("scale the service: %v", err)
	}
	served("scaled to 2", waitReplicas(t, lead, "web", 2, true)...)

	// Autoscaled on requests in flight, with a target it cannot reach:
	// the slow requests held through the worker reach the leader's
	// autoscaler in the worker's load reports, as nobody else sends any.
	if _, err := tc.client(lead).AutoscaleService(ctx, "web", &structs.Autoscale{Min: 2, Max: 3,
		Metric: structs.AutoscaleInFlight, Target: 1000}); err != nil {
		t.Fatalf("autoscale the service: %v", err)
	}
	loadCtx, stop := context.WithCancel(ctx)
	var load sync.WaitGroup
	for range 4 {
		load.Add(1)
		go func() {
			defer load.Done()
			for loadCtx.Err() == nil {
				req, _ := http.NewRequestWithContext(loadCtx, http.MethodGet, w.IngressAddr()+"/web/work?ms=2000", nil)
				req.Header.Set(api.TokenHeader, tc.admin)
				if resp, err := http.DefaultClient.Do(req); err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}
		}()
	}
	defer func() { stop(); load.Wait() }()
	testutil.WaitFor(t, 20*time.Second, func() error {
		o, ok := lead.leader.Observed("web")
		if !ok || o.Value < 1 {
			return fmt.Errorf("the leader observes %+v (%v) of web's load, want at least 2 in flight over 2 replicas", o, ok)
		}
		return nil
	})
	stop()
	load.Wait()

	// The only server gone, the worker has nobody to check a token with:
	// it admits nobody, the admin included, rather than fall back on
	// its empty state.
	tc.kill(leadIdx)
	testutil.WaitFor(t, 20*time.Second, func() error {
		code, body := ingressGet(t, http.DefaultClient, w, "/web/health", tc.admin)
		if code != http.StatusUnauthorized || !strings.Contains(body, "no server answered") {
			return fmt.Errorf("with no server: %d %q, want 401 saying no server answered", code, body)
		}
		return nil
	})
	if code, body := ingressGet(t, http.DefaultClient, w, "/web/health", ""); code != http.StatusUnauthorized {
		t.Fatalf("with no server and no token: %d %q, want 401", code, body)
	}
}

// A worker's /metrics has its own series (its GPUs, from its view, its
// gossip) and none of the state's or Raft's, which a server's has; it
// admits the scrapers a server admits.
func TestCluster_Workers_AWorkersMetricsAreItsOwn(t *testing.T) {
	t.Parallel()
	tc := startWorkerCluster(t, 2, 1)
	w := tc.workers()[0]
	server := tc.agents[tc.leader()]
	// A gang over both nodes: rank 1 or 0 holds a GPU of the worker.
	job := tc.submit(server, structs.JobSpec{Nodes: 2, GPUs: 1, Command: []string{"sleep", "60"}})
	waitJobState(t, tc.client(server), job.ID, structs.JobRunning)

	if _, err := scrapeMetrics(t, w, ""); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("a worker's /metrics without a token: %v, want 401 (the cluster has ACLs)", err)
	}
	var onWorker, onServer map[string]*dto.MetricFamily
	testutil.WaitFor(t, 10*time.Second, func() error {
		var err error
		if onWorker, err = scrapeMetrics(t, w, tc.admin); err != nil {
			return err
		}
		// The worker's GPU series read its view: the GPU its rank holds.
		held := 0.0
		for _, s := range onWorker["skein_gpu_allocated"].GetMetric() {
			held += s.GetGauge().GetValue()
		}
		if held != 1 {
			return fmt.Errorf("the worker's skein_gpu_allocated sum to %v, want 1: its rank's GPU", held)
		}
		return nil
	})
	onServer, err := scrapeMetrics(t, server, tc.admin)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"skein_jobs", "skein_nodes", "skein_sched_queue_depth", "skein_fsm_index", "skein_raft_term"} {
		if _, ok := onWorker[name]; ok {
			t.Errorf("a worker exports %s", name)
		}
		if _, ok := onServer[name]; !ok {
			t.Errorf("the server does not export %s", name)
		}
	}
	if got, err := series(onServer, "skein_jobs", map[string]string{"state": "running"}); err != nil || got != 1 {
		t.Errorf("the server's running jobs: %v %v, want 1", got, err)
	}
	for _, name := range []string{"skein_gossip_members", "skein_gpu_health_state", "process_cpu_seconds_total"} {
		if _, ok := onWorker[name]; !ok {
			t.Errorf("a worker does not export %s", name)
		}
	}
}

// requestsOf is how many requests a node's API answered on route with
// code (0 when none yet).
func requestsOf(t *testing.T, a *Agent, token, route string) float64 {
	t.Helper()
	fams, err := scrapeMetrics(t, a, token)
	if err != nil {
		t.Fatal(err)
	}
	n, err := series(fams, "skein_http_request_duration_seconds", map[string]string{"api": "internal", "route": route, "code": "200"})
	if err != nil {
		return 0
	}
	return n
}

func TestCluster_Workers_RenewTheirLeasesThroughAStandbyAndOutliveItsLoss(t *testing.T) {
	t.Parallel()
	tc := startWorkerCluster(t, 4, 2)
	lead, standby := tc.leader(), tc.standby()
	leader := tc.agents[lead]
	// The workers renew through the standby, which passes their
	// renewals on in rounds: the standby answers their heartbeats, the
	// leader its rounds.
	testutil.WaitFor(t, 10*time.Second, func() error {
		via := requestsOf(t, tc.agents[standby], tc.admin, "POST /v1/internal/heartbeat")
		rounds := requestsOf(t, leader, tc.admin, "POST /v1/internal/heartbeats")
		if via < 10 || rounds < 5 {
			return fmt.Errorf("the standby answered %v heartbeats and the leader %v rounds, want 10 and 5 at least", via, rounds)
		}
		return nil
	})
	// The standby dies: the workers renew with the leader until another
	// standby is chosen, and no node still alive is marked down.
	lost := tc.agents[standby].nodeID
	begin, err := tc.client(leader).Events(context.Background(), api.EventsQuery{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	tc.kill(standby)
	testutil.WaitFor(t, 20*time.Second, func() error {
		if got := len(tc.servers()); got != 2 {
			return fmt.Errorf("%d alive servers, want 2", got)
		}
		return nil
	})
	testutil.Holds(t, 2*time.Second, func() error {
		for _, a := range tc.live() {
			if n, ok := leader.fsm.Node(a.nodeID); !ok || n.Status != structs.NodeReady {
				return fmt.Errorf("%s is %v, want ready", a.Name(), n.Status)
			}
		}
		return nil
	})
	page, err := tc.client(leader).Events(context.Background(), api.EventsQuery{After: begin.Next})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range page.Events {
		if e.Kind == structs.EventNodeDown && e.Node != lost {
			t.Errorf("node %s was marked down while only %s died: %s", e.NodeName, lost, e.Reason)
		}
	}
}

// The web UI through a worker: the worker passes /ui/ on to a server,
// which signs the browser in and renders every page from its state, the
// worker's own node and GPU pages included, with the utilisation of the
// worker's GPUs, which the server asks the worker for. Once the worker
// is down, its page no longer asks it.
func TestCluster_Workers_TheUIThroughAWorker(t *testing.T) {
	t.Parallel()
	tc := startWorkerClusterWith(t, 2, 1, func(_ int, cfg *Config) { cfg.TelemetryPeriod = 50 * time.Millisecond })
	w := tc.workers()[0]
	// A gang over both nodes: one rank holds a GPU of the worker and
	// reports it 75 % busy.
	job := tc.submit(w, structs.JobSpec{Nodes: 2, GPUs: 1,
		Command: []string{"sh", "-c", `echo "75 2048" > "$SKEIN_SIM_GPU_UTIL_FILE"; sleep 60`}})
	d := waitJobState(t, tc.client(w), job.ID, structs.JobRunning)
	held := workerGPU(t, tc, w, d)

	b := newUIBrowser(t, w)
	if code, loc, _ := b.do(http.MethodGet, "/ui/", nil); code != http.StatusSeeOther || !strings.HasPrefix(loc, "/ui/login") {
		t.Fatalf("the worker's UI without a token: %d to %q, want 303 to the login page", code, loc)
	}
	if code, body := b.login("wrong"); code != http.StatusUnauthorized {
		t.Fatalf("login through the worker with a wrong token: %d, want 401:\n%s", code, body)
	}
	if code, body := b.login(tc.admin); code != http.StatusSeeOther {
		t.Fatalf("login through the worker: %d:\n%s", code, body)
	}
	page := func(path string, wants ...string) string {
		t.Helper()
		code, _, body := b.do(http.MethodGet, path, nil)
		if code != http.StatusOK {
			t.Fatalf("%s through the worker: %d:\n%s", path, code, body)
		}
		for _, want := range wants {
			if !strings.Contains(body, want) {
				t.Errorf("%s through the worker lacks %q:\n%s", path, want, body)
			}
		}
		return body
	}
	page("/ui/", `id="nodes-ready">2/2<`, `id="gpus-used">2<`, `href="/ui/nodes/`+w.nodeID+`">`+w.Name()+`<`)
	page("/ui/nodes/"+w.nodeID, `id="node-id">`+w.nodeID+`<`, `href="/ui/jobs/`+job.ID+`"`)
	page(fmt.Sprintf("/ui/nodes/%s/gpus/%d", w.nodeID, held.Index), `id="gpu-uuid">`+held.UUID+`<`,
		`id="gpu-job">job `+structs.ShortID(job.ID)+`<`)
	page("/ui/jobs/"+job.ID, `id="job-id">`+job.ID+`<`, `href="/ui/nodes/`+w.nodeID+`">`+w.Name()+`</a>`)

	// The worker's utilisation, read on the worker, asked for by the
	// server for the worker's pages.
	gpuPage := fmt.Sprintf("/ui/nodes/%s/gpus/%d", w.nodeID, held.Index)
	testutil.WaitFor(t, 10*time.Second, func() error {
		_, _, body := b.do(http.MethodGet, gpuPage, nil)
		if !strings.Contains(body, `id="gpu-util">75%<`) {
			return fmt.Errorf("the worker's GPU page shows no utilisation of 75%%:\n%s", body)
		}
		return nil
	})
	page(gpuPage, "simulated: the readings are made up", "2 GiB of 80 GiB")
	page("/ui/nodes/"+w.nodeID, "<th>Utilisation</th>", "<td>75%</td>", "as "+w.Name()+" read it")
	// The worker answers the server on its internal API, which takes a
	// node's credential, never a user's token.
	req, err := http.NewRequest(http.MethodGet, w.HTTPAddr()+"/v1/internal/nodes/"+w.nodeID+"/telemetry", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(api.TokenHeader, tc.admin)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the worker's telemetry with a user's token: %v %v, want 401", resp, err)
	} else {
		resp.Body.Close()
	}

	// The worker dies: once it is down, the server's page of it says so
	// and asks it nothing.
	server := tc.agents[tc.leader()]
	tc.kill(tc.indexOf(w.nodeID))
	sb := newUIBrowser(t, server)
	if code, body := sb.login(tc.admin); code != http.StatusSeeOther {
		t.Fatalf("login on the server: %d:\n%s", code, body)
	}
	testutil.WaitFor(t, 20*time.Second, func() error {
		code, _, body := sb.do(http.MethodGet, "/ui/nodes/"+w.nodeID, nil)
		if code != http.StatusOK || !strings.Contains(body, "No utilisation: "+w.Name()+" is down: its telemetry is not asked for.") {
			return fmt.Errorf("the dead worker's page: %d:\n%s", code, body)
		}
		return nil
	})
}

// workerGPU is the GPU of w that a rank of the running job d holds.
func workerGPU(t *testing.T, tc *testCluster, w *Agent, d *api.JobDetail) structs.GPU {
	t.Helper()
	n, ok := tc.agents[tc.leader()].fsm.Node(w.nodeID)
	if !ok {
		t.Fatalf("the leader holds no node %s", w.Name())
	}
	for _, a := range d.Allocations {
		if a.NodeID != w.nodeID || len(a.GPUs) != 1 {
			continue
		}
		for _, g := range n.GPUs {
			if g.UUID == a.GPUs[0] {
				return g
			}
		}
	}
	t.Fatalf("no rank of job %s holds a GPU of the worker: %+v", d.Job.ID, d.Allocations)
	return structs.GPU{}
}
