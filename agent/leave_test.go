package agent

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/skein-dev/skein/fsm"
	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

// leaveAndExit makes agent i leave through its API, as skein leave does,
// and shuts it down once it has, as the agent command does. It fails the
// test unless the leave was clean and done within leaveWithin.
func (tc *testCluster) leaveAndExit(i int) {
	tc.t.Helper()
	const leaveWithin = 10 * time.Second
	a := tc.agents[i]
	start := time.Now()
	if _, err := tc.client(a).Leave(context.Background()); err != nil {
		tc.t.Fatalf("%s: leave: %v", a.Name(), err)
	}
	select {
	case <-a.Done():
	case <-time.After(leaveWithin):
		tc.t.Fatalf("%s has not left %s after skein leave", a.Name(), leaveWithin)
	}
	if err := a.LeaveErr(); err != nil {
		tc.t.Fatalf("%s: the leave was not clean: %v", a.Name(), err)
	}
	a.Shutdown()
	tc.agents[i] = nil
	tc.t.Logf("%s left in %s", a.Name(), time.Since(start).Round(time.Millisecond))
}

// roleOf is agent a's role as the leader's Raft configuration says.
func (tc *testCluster) roleOf(a *Agent) structs.NodeRole {
	lead := tc.agents[tc.leader()]
	if lead == a {
		return structs.RoleLeader
	}
	servers, _ := lead.raft.Servers()
	for _, s := range servers {
		if s.ID == a.nodeID {
			if s.Voter {
				return structs.RoleVoter
			}
			return structs.RoleNonvoter
		}
	}
	return structs.RoleWorker
}

// pick returns the index of a live agent of role.
func (tc *testCluster) pick(role structs.NodeRole) int {
	tc.t.Helper()
	for i, a := range tc.agents {
		if a != nil && tc.roleOf(a) == role {
			return i
		}
	}
	tc.t.Fatalf("no live agent is a %s", role)
	return -1
}

// Seven nodes, three voters, one standby and three workers: the leader, a
// voter, a worker and a standby leave one after the other, each through
// skein leave. Each is done in seconds and cleanly, shows left (never
// down) and is out of Raft, and the voters are three again each time,
// refilled from the standbys (and the standbys from the workers); the
// cluster takes work throughout.
func TestCluster_LeaveOfEveryRole_IsCleanShowsLeftAndRefillsTheVoters(t *testing.T) {
	t.Parallel()
	tc := startClusterWith(t, 7, func(i int, cfg *Config) { cfg.Voters, cfg.Servers = 3, 4 })
	testutil.WaitFor(t, 20*time.Second, func() error {
		if got := len(tc.servers()); got != 4 {
			return fmt.Errorf("%d servers, want 4", got)
		}
		return nil
	})
	for _, role := range []structs.NodeRole{structs.RoleLeader, structs.RoleVoter, structs.RoleWorker, structs.RoleNonvoter} {
		i := tc.pick(role)
		id, name := tc.agents[i].nodeID, tc.agents[i].Name()
		tc.leaveAndExit(i)
		lead := tc.agents[tc.leader()]
		testutil.WaitFor(t, 20*time.Second, func() error {
			n, ok := lead.fsm.Node(id)
			if !ok || n.Status != structs.NodeLeft {
				return fmt.Errorf("%s (was %s) is %+v", name, role, n)
			}
			servers, err := lead.raft.Servers()
			if err != nil {
				return err
			}
			voters := 0
			for _, s := range servers {
				if s.ID == id {
					return fmt.Errorf("%s (was %s) is still a Raft server", name, role)
				}
				if s.Voter {
					voters++
				}
			}
			if voters != 3 {
				return fmt.Errorf("%d voters after %s (%s) left, want 3", voters, name, role)
			}
			return nil
		})
		// Never shown down in between.
		for _, e := range lead.fsm.Events(fsm.EventQuery{Node: id}).Events {
			if e.Kind == structs.EventNodeDown {
				t.Errorf("%s (%s) was marked down while it left: %s", name, role, e.Reason)
			}
		}
		job := tc.submit(lead, structs.JobSpec{Nodes: 1, Command: []string{"true"}})
		waitJob(t, lead, job.ID, jobState(structs.JobSucceeded))
	}
	tc.checkInvariants()
}
