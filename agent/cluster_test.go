package agent

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/cluster"
	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

// testCluster is several agents in this process, on loopback, with real
// Raft, gossip and HTTP transports and one fake switch to cut them apart.
type testCluster struct {
	t      testing.TB
	net    *cluster.Partitioner
	agents []*Agent // nil once killed
	acked  []string // IDs of every job a submit acknowledged
	// admin is the ACL admin token once startClusterWith bootstrapped the
	// cluster's ACLs; until then (and in benchmarks' clusters) clients
	// use the cluster's API token.
	admin string
}

// clusterToken is the API token every test cluster uses.
const clusterToken = "test-cluster-token"

// clusterConfig tightens liveness so node loss plays out in seconds.
func clusterConfig(t *testing.T, name string, net *cluster.Partitioner) Config {
	cfg := testConfig(t, t.TempDir())
	cfg.Name = name
	cfg.Token = clusterToken // agents talk to each other with it too
	cfg.Logger = cfg.Logger.Named(name)
	cfg.RaftPort = -1
	cfg.GossipPort = -1
	cfg.Network = net
	cfg.HeartbeatInterval = 100 * time.Millisecond
	cfg.StopAfter = time.Second
	cfg.FenceGrace = 200 * time.Millisecond
	cfg.DownAfter = 1500 * time.Millisecond
	cfg.GossipTiming = cluster.GossipTiming{PushPullInterval: time.Second}
	return cfg
}

// startCluster starts n agents: the first founds the cluster, each other
// joins through the one started before it (a non-leader from the third on).
func startCluster(t *testing.T, n int) *testCluster {
	t.Helper()
	return startClusterWith(t, n, nil)
}

// startClusterWith is startCluster with each node's config changed by
// mutate (nil: none) before it starts.
func startClusterWith(t *testing.T, n int, mutate func(i int, cfg *Config)) *testCluster {
	t.Helper()
	testutil.Long(t, "starts a cluster of agents")
	tc := &testCluster{t: t, net: &cluster.Partitioner{}}
	for i := range n {
		cfg := clusterConfig(t, fmt.Sprintf("node%d", i), tc.net)
		if mutate != nil {
			mutate(i, &cfg)
		}
		if i > 0 {
			cfg.Join = []string{tc.agents[i-1].raft.GossipAddr()}
			if cfg.Security == SecurityTLS {
				// Admitted through the node before, by its API.
				cfg.Join = append(cfg.Join, tc.agents[i-1].HTTPAddr())
				cfg.JoinToken = tc.joinToken(api.JoinTokenCreateRequest{})
			}
		}
		a, err := New(cfg)
		if err != nil {
			t.Fatalf("start node%d: %v", i, err)
		}
		t.Cleanup(a.Shutdown)
		tc.agents = append(tc.agents, a)
	}
	tc.waitReady(n)
	voters := min(n, tc.agents[0].cfg.Voters)
	tc.waitVoters(voters - (1 - voters%2)) // odd: 1 voter for 2 nodes
	tc.bootstrapACL()
	return tc
}

// servers returns the live agents that hold the state: all of them in a
// cluster without workers, else those in their own Raft configuration.
func (tc *testCluster) servers() []*Agent {
	var out []*Agent
	for _, a := range tc.live() {
		if a.cfg.Servers == 0 || a.holdsState() {
			out = append(out, a)
		}
	}
	return out
}

// bootstrapACL turns the cluster's ACLs on, as every real cluster's admin
// does, and waits until every node has applied it: from then on the
// tests' clients hold the admin token. A bootstrap whose leader lost its leadership before it committed (a
// machine loaded enough to starve Raft) is sent again once another
// leader is known to hold no bootstrap; one that committed without its
// answer lost the only admin token, which fails the test.
func (tc *testCluster) bootstrapACL() {
	tc.t.Helper()
	var boot *api.ACLTokenCreated
	for try := 1; ; try++ {
		var err error
		boot, err = tc.client(tc.agents[0]).ACLBootstrap(context.Background(), api.ACLBootstrapRequest{})
		if err == nil {
			break
		}
		lead := tc.agents[tc.leader()]
		if berr := lead.raft.Barrier(10 * time.Second); berr != nil || try == 5 {
			tc.t.Fatalf("ACL bootstrap, try %d: %v (barrier: %v)", try, err, berr)
		}
		if _, on := lead.fsm.ACL(); on {
			tc.t.Fatalf("ACL bootstrap: %v, yet it committed: its admin token is lost", err)
		}
		tc.t.Logf("ACL bootstrap, try %d: %v; again", try, err)
	}
	testutil.WaitFor(tc.t, 10*time.Second, func() error {
		for _, a := range tc.servers() {
			if _, on := a.fsm.ACL(); !on {
				return fmt.Errorf("%s has not applied the ACL bootstrap", a.Name())
			}
		}
		return nil
	})
	tc.admin = boot.Token
}

// waitVoters waits until every server's Raft configuration has n voters:
// the leader's alone may hold a promotion not yet replicated, and a
// partition then leaves the others disagreeing on who may vote.
func (tc *testCluster) waitVoters(n int) {
	tc.t.Helper()
	testutil.WaitFor(tc.t, 20*time.Second, func() error {
		for _, a := range tc.servers() {
			servers, err := a.raft.Servers()
			if err != nil {
				return err
			}
			voters := 0
			for _, s := range servers {
				if s.Voter {
					voters++
				}
			}
			if voters != n {
				return fmt.Errorf("%s sees %d voters, want %d", a.Name(), voters, n)
			}
		}
		return nil
	})
}

// live returns the agents still running.
func (tc *testCluster) live() []*Agent {
	var out []*Agent
	for _, a := range tc.agents {
		if a != nil {
			out = append(out, a)
		}
	}
	return out
}

// client is an API client for a: with the admin token once the cluster's
// ACLs are on, the cluster's API token before.
func (tc *testCluster) client(a *Agent) *api.Client {
	if tc.admin != "" {
		return clientFor(tc.t, a, tc.admin)
	}
	return clientFor(tc.t, a, clusterToken)
}

// clientFor is an API client for agent a with token; over TLS checked
// against the cluster CA when a runs a secure cluster.
func clientFor(tb testing.TB, a *Agent, token string) *api.Client {
	tb.Helper()
	c, err := api.NewClient(a.HTTPAddr(), token)
	if err != nil {
		tb.Fatal(err)
	}
	if a.secure != nil {
		conf, err := api.ClusterTLS([]byte(strings.Join(a.secure.CA().CACerts, "")))
		if err != nil {
			tb.Fatal(err)
		}
		c = c.WithTLS(conf)
	}
	return c
}

// joinToken makes a join token through the first live node.
func (tc *testCluster) joinToken(req api.JoinTokenCreateRequest) string {
	tc.t.Helper()
	var tok string
	testutil.WaitFor(tc.t, 10*time.Second, func() error {
		resp, err := tc.client(tc.live()[0]).CreateJoinToken(context.Background(), req)
		if err != nil {
			return err
		}
		tok = resp.Token
		return nil
	})
	return tok
}

// waitReady waits until every server sees n ready nodes.
func (tc *testCluster) waitReady(n int) {
	tc.t.Helper()
	testutil.WaitFor(tc.t, 20*time.Second, func() error {
		for _, a := range tc.servers() {
			ready := 0
			for _, node := range a.fsm.Nodes() {
				if node.Status == structs.NodeReady {
					ready++
				}
			}
			if ready != n {
				return fmt.Errorf("%s sees %d ready nodes, want %d", a.Name(), ready, n)
			}
		}
		return nil
	})
}

// leader returns the index of the agent that leads, waiting for one.
func (tc *testCluster) leader() int {
	tc.t.Helper()
	idx := -1
	testutil.WaitFor(tc.t, 15*time.Second, func() error {
		idx = -1
		for i, a := range tc.agents {
			if a != nil && a.raft.IsLeader() {
				if idx >= 0 {
					return fmt.Errorf("two leaders: %s and %s", tc.agents[idx].Name(), a.Name())
				}
				idx = i
			}
		}
		if idx < 0 {
			return fmt.Errorf("no leader")
		}
		return nil
	})
	return idx
}

// kill stops agent i the way a crash would: no leadership handover.
func (tc *testCluster) kill(i int) {
	tc.agents[i].stop(false)
	tc.agents[i] = nil
}

// isolate cuts agent i off from all others: Raft, gossip and HTTP.
func (tc *testCluster) isolate(i int) {
	a := tc.agents[i]
	tc.net.Block(a.raft.Addr(), a.raft.GossipAddr(), a.listener.Addr().String())
}

// submit sends a job through agent a and remembers it as acknowledged.
func (tc *testCluster) submit(a *Agent, spec structs.JobSpec) *structs.Job {
	tc.t.Helper()
	job, err := tc.client(a).SubmitJob(context.Background(), api.SubmitRequest{RequestID: structs.NewID(), Spec: spec})
	if err != nil {
		tc.t.Fatalf("submit through %s: %v", a.Name(), err)
	}
	tc.acked = append(tc.acked, job.ID)
	return job
}

func (tc *testCluster) indexOf(nodeID string) int {
	for i, a := range tc.agents {
		if a != nil && a.nodeID == nodeID {
			return i
		}
	}
	return -1
}

// checkInvariants waits until every live agent has applied the same state,
// then checks the invariants of docs/architecture.md, "Invariants", on it.
func (tc *testCluster) checkInvariants() {
	tc.t.Helper()
	live := tc.live()
	testutil.WaitFor(tc.t, 15*time.Second, func() error {
		var first *api.Status
		for _, a := range live {
			s, err := tc.client(a).StatusWithHash(context.Background())
			if err != nil {
				return err
			}
			if first == nil {
				first = s
				continue
			}
			if s.HashIndex != first.HashIndex || s.StateHash != first.StateHash {
				return fmt.Errorf("%s at index %d (%.8s), %s at %d (%.8s)", first.Node, first.HashIndex, first.StateHash, s.Node, s.HashIndex, s.StateHash)
			}
		}
		return nil
	})
	f := live[0].fsm
	for _, id := range tc.acked {
		if _, ok := f.Job(id); !ok {
			tc.t.Errorf("acknowledged job %s is lost", structs.ShortID(id))
		}
	}
	holder := map[string]string{}
	for _, alloc := range f.State().LiveAllocs {
		for _, g := range alloc.GPUs {
			if other, ok := holder[g]; ok {
				tc.t.Errorf("GPU %s held by live allocations %s and %s", g, other, alloc.ID)
			}
			holder[g] = alloc.ID
		}
	}
	for _, job := range f.Jobs() {
		perAttempt := map[int]int{}
		for _, alloc := range f.Allocs(job.ID) {
			perAttempt[alloc.Attempt]++
		}
		for attempt, n := range perAttempt {
			if n != job.Spec.Nodes {
				tc.t.Errorf("job %s attempt %d has %d allocations, want %d (a replacement made twice?)", structs.ShortID(job.ID), attempt, n, job.Spec.Nodes)
			}
		}
	}
}

func waitJob(t *testing.T, a *Agent, id string, ok func(*structs.Job, []*structs.Allocation) error) {
	t.Helper()
	testutil.WaitFor(t, 20*time.Second, func() error {
		job, found := a.fsm.Job(id)
		if !found {
			return fmt.Errorf("job %s not on %s", structs.ShortID(id), a.Name())
		}
		return ok(job, a.fsm.Allocs(id))
	})
}

func jobState(want structs.JobState) func(*structs.Job, []*structs.Allocation) error {
	return func(j *structs.Job, _ []*structs.Allocation) error {
		if j.State != want {
			return fmt.Errorf("job %s is %s (%s), want %s", structs.ShortID(j.ID), j.State, j.Reason, want)
		}
		return nil
	}
}

func runningAlloc(j *structs.Job, allocs []*structs.Allocation) error {
	for _, a := range allocs {
		if a.Attempt == j.Attempts && a.State == structs.AllocRunning {
			return nil
		}
	}
	return fmt.Errorf("job %s has no running allocation (state %s, %s)", structs.ShortID(j.ID), j.State, j.Reason)
}

func TestCluster_JoinThroughAnyNode_SubmitThroughEveryNode(t *testing.T) {
	t.Parallel()
	tc := startCluster(t, 3)
	peers, err := tc.client(tc.agents[2]).RaftPeers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(peers) != 3 {
		t.Fatalf("raft peers = %+v, want 3 servers", peers)
	}
	for _, a := range tc.agents {
		job := tc.submit(a, structs.JobSpec{Command: []string{"true"}, GPUs: 1})
		waitJob(t, tc.agents[0], job.ID, jobState(structs.JobSucceeded))
	}
	members, err := tc.client(tc.agents[1]).Members(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(members) != 3 {
		t.Fatalf("members = %+v, want 3", members)
	}
	tc.checkInvariants()
}

func TestCluster_LogsOfAJobOnAnotherNodeAreProxied(t *testing.T) {
	t.Parallel()
	tc := startCluster(t, 2)
	// 4 GPUs fill a node, so two such jobs land on different nodes.
	var jobs []*structs.Job
	for range 2 {
		jobs = append(jobs, tc.submit(tc.agents[0], structs.JobSpec{Command: []string{"sh", "-c", "echo from $SKEIN_NODE"}, GPUs: 4}))
	}
	for _, j := range jobs {
		waitJob(t, tc.agents[0], j.ID, jobState(structs.JobSucceeded))
		alloc := tc.agents[0].fsm.Allocs(j.ID)[0]
		owner := tc.agents[tc.indexOf(alloc.NodeID)].Name()
		for _, a := range tc.agents {
			if got := logs(t, tc.client(a), j.ID, api.StreamStdout); got != "from "+owner+"\n" {
				t.Errorf("logs of a job on %s read through %s = %q", owner, a.Name(), got)
			}
		}
	}
}

func TestCluster_LeaderKilled_NewLeaderTakesWritesAndNoJobIsLost(t *testing.T) {
	t.Parallel()
	tc := startCluster(t, 3)
	for range 3 {
		tc.submit(tc.agents[0], structs.JobSpec{Command: []string{"sleep", "0.2"}, Restarts: 2})
	}
	old := tc.leader()
	tc.kill(old)
	next := tc.leader()
	if next == old {
		t.Fatal("the killed node still leads")
	}
	for _, a := range tc.live() {
		tc.submit(a, structs.JobSpec{Command: []string{"true"}, GPUs: 1, Restarts: 2})
	}
	for _, id := range tc.acked {
		waitJob(t, tc.agents[next], id, jobState(structs.JobSucceeded))
	}
	tc.checkInvariants()
}

func TestCluster_NodeCutOff_ItsJobRunsElsewhereOnceAndItDoesNotResume(t *testing.T) {
	t.Parallel()
	tc := startCluster(t, 3)
	lead := tc.leader()
	job := tc.submit(tc.agents[lead], structs.JobSpec{Command: []string{"sleep", "600"}, GPUs: 1, Restarts: 1})
	waitJob(t, tc.agents[lead], job.ID, runningAlloc)
	first := tc.agents[lead].fsm.Allocs(job.ID)[0]
	// Cut off the node running it, whichever it is: if it is the leader,
	// the majority elects another first.
	victim := tc.indexOf(first.NodeID)

	tc.isolate(victim)
	var other int
	for i := range tc.agents {
		if i != victim {
			other = i
			break
		}
	}
	waitJob(t, tc.agents[other], job.ID, func(j *structs.Job, allocs []*structs.Allocation) error {
		if j.Attempts != 2 {
			return fmt.Errorf("attempts %d, want 2 (%s)", j.Attempts, j.Reason)
		}
		return runningAlloc(j, allocs)
	})
	// The cut-off node stopped its copy by itself (its lease ran out).
	testutil.WaitFor(t, 10*time.Second, func() error {
		if slices.Contains(tc.agents[victim].runner.Tracked(), first.ID) {
			return fmt.Errorf("the cut-off node still runs allocation %s", structs.ShortID(first.ID))
		}
		return nil
	})

	tc.net.Heal()
	tc.waitReady(3)
	tc.checkInvariants()
	f := tc.agents[victim].fsm
	if a, _ := f.Alloc(first.ID); a.State != structs.AllocLost {
		t.Fatalf("the first allocation is %s after healing, want lost", a.State)
	}
	if j, _ := f.Job(job.ID); j.Attempts != 2 || j.State != structs.JobRunning {
		t.Fatalf("after healing the job is %s with %d attempts, want running with 2", j.State, j.Attempts)
	}
	if _, err := tc.client(tc.agents[0]).CancelJob(context.Background(), job.ID); err != nil {
		t.Fatal(err)
	}
}

func TestCluster_LeaderCutOff_MajorityElectsAndTheClusterHeals(t *testing.T) {
	t.Parallel()
	tc := startCluster(t, 3)
	old := tc.leader()
	tc.isolate(old)
	var next int
	testutil.WaitFor(t, 15*time.Second, func() error {
		for i, a := range tc.agents {
			if i != old && a.raft.IsLeader() {
				next = i
				return nil
			}
		}
		return fmt.Errorf("no new leader on the majority side")
	})
	tc.submit(tc.agents[next], structs.JobSpec{Command: []string{"true"}})
	tc.net.Heal()
	tc.waitReady(3)
	tc.leader() // fails on two leaders
	tc.checkInvariants()
}

// A follower that forwards a write to a leader that was just cut off
// (its dials hang, as across a pulled cable) gives up on it as soon as
// another leader is elected and delivers the write there, well inside the
// time it holds a write.
func TestCluster_WriteForwardedToACutOffLeaderReachesTheNewOne(t *testing.T) {
	t.Parallel()
	tc := startCluster(t, 3)
	old := tc.leader()
	follower := (old + 1) % 3
	tc.isolate(old)
	job := tc.submit(tc.agents[follower], structs.JobSpec{Command: []string{"true"}})
	waitJob(t, tc.agents[follower], job.ID, jobState(structs.JobSucceeded))
	if tc.agents[old].raft.IsLeader() {
		// It may still think so, cut off; the majority must have moved on.
		if _, id := tc.agents[follower].raft.Leader(); id == tc.agents[old].nodeID {
			t.Fatal("the follower still follows the cut-off leader")
		}
	}
	tc.net.Heal()
	tc.waitReady(3)
	tc.checkInvariants()
}

func TestCluster_GracefulLeaveOfTheLeader(t *testing.T) {
	t.Parallel()
	tc := startCluster(t, 3)
	old := tc.leader()
	leaving := tc.agents[old]
	if _, err := tc.client(leaving).Leave(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-leaving.Done():
	case <-time.After(40 * time.Second):
		t.Fatal("the leaving agent did not finish leaving")
	}
	tc.kill(old)
	next := tc.leader()
	testutil.WaitFor(t, 15*time.Second, func() error {
		servers, err := tc.agents[next].raft.Servers()
		if err != nil {
			return err
		}
		for _, s := range servers {
			if s.ID == leaving.nodeID {
				return fmt.Errorf("the node that left is still a raft server")
			}
		}
		n, _ := tc.agents[next].fsm.Node(leaving.nodeID)
		if n.Status != structs.NodeLeft {
			return fmt.Errorf("the node that left is %s", n.Status)
		}
		return nil
	})
	tc.submit(tc.agents[next], structs.JobSpec{Command: []string{"true"}})
	tc.checkInvariants()
}

func TestCluster_FiveNodes_DeadVoterIsReplaced(t *testing.T) {
	t.Parallel()
	tc := startCluster(t, 5)
	voters := func(a *Agent) (ids []string) {
		servers, _ := a.raft.Servers()
		for _, s := range servers {
			if s.Voter {
				ids = append(ids, s.ID)
			}
		}
		return ids
	}
	lead := tc.leader()
	testutil.WaitFor(t, 20*time.Second, func() error {
		if v := voters(tc.agents[lead]); len(v) != 3 {
			return fmt.Errorf("%d voters, want 3", len(v))
		}
		return nil
	})
	var dead int
	for _, id := range voters(tc.agents[lead]) {
		if i := tc.indexOf(id); i != lead {
			dead = i
			break
		}
	}
	deadID := tc.agents[dead].nodeID
	tc.kill(dead)
	lead = tc.leader()
	testutil.WaitFor(t, 30*time.Second, func() error {
		v := voters(tc.agents[lead])
		if len(v) != 3 || slices.Contains(v, deadID) {
			return fmt.Errorf("voters %v: want 3 without the dead node", v)
		}
		return nil
	})
	tc.submit(tc.agents[lead], structs.JobSpec{Command: []string{"true"}})
	tc.checkInvariants()
}

// TestCluster_JoinAtRuntime: a node started with a --join address nobody
// answers keeps retrying; `skein join` (POST /v1/join) points it at a real
// member and it becomes part of the cluster.
func TestCluster_JoinAtRuntime(t *testing.T) {
	t.Parallel()
	tc := startCluster(t, 1)
	cfg := clusterConfig(t, "late", tc.net)
	cfg.Join = []string{"127.0.0.1:1"} // nothing listens there
	late, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(late.Shutdown)
	tc.agents = append(tc.agents, late)
	// Until it joins, the node has a state of its own, without ACLs: its
	// API takes the token it was started with.
	resp, err := clientFor(t, late, clusterToken).Join(context.Background(), []string{tc.agents[0].raft.GossipAddr()})
	if err != nil || resp.Joined != 1 {
		t.Fatalf("join: %+v, %v", resp, err)
	}
	tc.waitReady(2)
	tc.submit(late, structs.JobSpec{Command: []string{"true"}})
	tc.checkInvariants()
}

// TestCluster_GangJobGetsTheLaunchEnvironment: a 2-node job runs on both
// nodes at once and each rank sees what torchrun and Slurm-aware
// frameworks read, consistently.
func TestCluster_GangJobGetsTheLaunchEnvironment(t *testing.T) {
	t.Parallel()
	tc := startCluster(t, 2)
	job := tc.submit(tc.agents[0], structs.JobSpec{
		Name:    "gang",
		Nodes:   2,
		GPUs:    2,
		Command: []string{"sh", "-c", `echo "$MASTER_ADDR:$MASTER_PORT nnodes=$NNODES rank=$NODE_RANK world=$WORLD_SIZE gpus=$GPUS_PER_NODE slurm=$SLURM_NNODES/$SLURM_NODEID/$SLURM_PROCID nodes=$SLURM_JOB_NODELIST"`},
	})
	waitJob(t, tc.agents[0], job.ID, jobState(structs.JobSucceeded))
	allocs := tc.agents[0].fsm.Allocs(job.ID)
	if len(allocs) != 2 || allocs[0].NodeID == allocs[1].NodeID {
		t.Fatalf("allocations %+v: want two ranks on two nodes", allocs)
	}
	rank0 := tc.agents[tc.indexOf(allocs[0].NodeID)]
	master, _, _ := strings.Cut(rank0.raft.Addr(), ":")
	names := []string{tc.agents[tc.indexOf(allocs[0].NodeID)].Name(), tc.agents[tc.indexOf(allocs[1].NodeID)].Name()}
	var port string
	for rank := range 2 {
		var out bytes.Buffer
		err := tc.client(tc.agents[1]).Logs(context.Background(), job.ID, api.LogOptions{Rank: rank, Stream: api.StreamStdout}, &out)
		if err != nil {
			t.Fatal(err)
		}
		fields := strings.Fields(out.String())
		if len(fields) != 7 {
			t.Fatalf("rank %d printed %q", rank, out.String())
		}
		addr, p, _ := strings.Cut(fields[0], ":")
		if port == "" {
			port = p
		}
		want := []string{master + ":" + port, "nnodes=2", fmt.Sprintf("rank=%d", rank), "world=4", "gpus=2",
			fmt.Sprintf("slurm=2/%d/%d", rank, rank), "nodes=" + structs.HostList(names)}
		if addr != master || p != port || !slices.Equal(fields, want) {
			t.Errorf("rank %d sees %q, want %q", rank, fields, want)
		}
	}
	ports := tc.agents[tc.indexOf(allocs[0].NodeID)].cfg.MasterPorts
	if n, err := strconv.Atoi(port); err != nil || !ports.Contains(n) || n != allocs[0].MasterPort {
		t.Errorf("MASTER_PORT %s, want the committed port %d from rank 0's node's %v", port, allocs[0].MasterPort, ports)
	}
	tc.checkInvariants()
}

// TestCluster_ADependencyOnAJobTheNodeHasNotAppliedIsResolvedByTheLeader:
// a job submitted through one node and its dependent, at once, through
// another that has not applied the first yet (here: cut off from Raft) is
// accepted, the leader resolving what the node could not.
func TestCluster_ADependencyOnAJobTheNodeHasNotAppliedIsResolvedByTheLeader(t *testing.T) {
	t.Parallel()
	tc := startCluster(t, 3)
	lead := tc.leader()
	f := tc.follower()
	tc.net.Block(tc.agents[f].raft.Addr())
	first := tc.submit(tc.agents[lead], structs.JobSpec{Command: []string{"sleep", "60"}})
	if _, ok := tc.agents[f].fsm.Job(first.ID); ok {
		t.Fatal("the node cut off from Raft applied the first job: the test shows nothing")
	}
	second := tc.submit(tc.agents[f], structs.JobSpec{Command: []string{"true"},
		After: []structs.Dependency{{JobID: structs.ShortID(first.ID), Condition: structs.AfterOK}}})
	if got := second.Spec.After[0].JobID; got != first.ID {
		t.Fatalf("the dependency resolved to %q, want %s", got, first.ID)
	}
	tc.net.Heal()
	tc.checkInvariants()
}
