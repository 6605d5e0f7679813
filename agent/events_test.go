package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/fsm"
	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

// followerBut returns the index of a live agent that does not lead, other
// than those in not.
func (tc *testCluster) followerBut(not ...int) int {
	tc.t.Helper()
	return tc.followerWhere(fmt.Sprintf("no live follower besides %v", not), func(i int, _ *Agent) bool { return !slices.Contains(not, i) })
}

// followerWhere returns the index of the first live agent that does not
// lead and for which ok holds, failing the test with none when there is
// no such agent.
func (tc *testCluster) followerWhere(none string, ok func(i int, a *Agent) bool) int {
	tc.t.Helper()
	lead := tc.leader()
	for i, a := range tc.agents {
		if a != nil && i != lead && ok(i, a) {
			return i
		}
	}
	tc.t.Fatal(none)
	return -1
}

// eventKinds reads the events of q from c, every page.
func eventKinds(ctx context.Context, c *api.Client, q api.EventsQuery) ([]structs.EventKind, []structs.Event, error) {
	var all []structs.Event
	for {
		p, err := c.Events(ctx, q)
		if err != nil {
			return nil, nil, err
		}
		all = append(all, p.Events...)
		if len(p.Events) == 0 {
			break
		}
		q.After = p.Next
	}
	kinds := make([]structs.EventKind, len(all))
	for i, e := range all {
		kinds[i] = e.Kind
	}
	return kinds, all, nil
}

// waitKinds waits until the events of q, read from c, are want.
func waitKinds(t *testing.T, c *api.Client, q api.EventsQuery, want []structs.EventKind) []structs.Event {
	t.Helper()
	var evs []structs.Event
	testutil.WaitFor(t, 20*time.Second, func() error {
		got, all, err := eventKinds(context.Background(), c, q)
		if err != nil {
			return err
		}
		if !slices.Equal(got, want) {
			return fmt.Errorf("events %v, want %v", got, want)
		}
		evs = all
		return nil
	})
	return evs
}

// TestCluster_Events_AJobThatFailsRestartsAndSucceeds_ReadFromAFollower
// runs a job whose first attempt fails and whose second succeeds, each
// attempt held until the test has seen it run, and reads its events from a
// node that does not lead.
func TestCluster_Events_AJobThatFailsRestartsAndSucceeds_ReadFromAFollower(t *testing.T) {
	t.Parallel()
	tc := startCluster(t, 3)
	reader := tc.follower()
	c := tc.client(tc.agents[reader])
	dir := testutil.SharedDir(t)
	script := fmt.Sprintf(`cd %s; if [ -f failed ]; then while [ ! -f go2 ]; do sleep 0.05; done; exit 0; fi
while [ ! -f go1 ]; do sleep 0.05; done; touch failed; exit 3`, dir)
	job := tc.submit(tc.agents[reader], structs.JobSpec{Command: []string{"sh", "-c", script}, Restarts: 1})

	waitJob(t, tc.agents[reader], job.ID, runningAlloc)
	if err := os.WriteFile(filepath.Join(dir, "go1"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitJob(t, tc.agents[reader], job.ID, func(j *structs.Job, allocs []*structs.Allocation) error {
		if j.Attempts != 2 {
			return fmt.Errorf("attempt %d (%s), want 2", j.Attempts, j.Reason)
		}
		return runningAlloc(j, allocs)
	})
	if err := os.WriteFile(filepath.Join(dir, "go2"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitJob(t, tc.agents[reader], job.ID, jobState(structs.JobSucceeded))

	evs := waitKinds(t, c, api.EventsQuery{Job: structs.ShortID(job.ID)}, []structs.EventKind{
		structs.EventJobSubmitted, structs.EventJobPlaced, structs.EventJobStarted, structs.EventJobRestarted,
		structs.EventJobPlaced, structs.EventJobStarted, structs.EventJobSucceeded,
	})
	if r := evs[3].Reason; r != "restarting in 1s after failure: exited with code 3 (attempt 2 of 2)" {
		t.Errorf("restart reason %q", r)
	}
	// Every node holds the same events, whichever it is, once it has
	// applied the entries the reader has (a node may be an entry behind).
	for _, a := range tc.live() {
		testutil.WaitFor(t, 10*time.Second, func() error {
			_, got, err := eventKinds(context.Background(), tc.client(a), api.EventsQuery{Job: job.ID})
			if err != nil || !reflect.DeepEqual(got, evs) {
				return fmt.Errorf("%s holds %v (%v), the reader %v", a.Name(), got, err, evs)
			}
			return nil
		})
	}
}

// TestCluster_Events_ANodeLoss_ReadFromAFollower crashes the node that
// runs a job: a follower's events say the node went down, its work was
// lost and the job restarted elsewhere.
func TestCluster_Events_ANodeLoss_ReadFromAFollower(t *testing.T) {
	t.Parallel()
	tc := startCluster(t, 3)
	lead := tc.leader()
	job := tc.submit(tc.agents[lead], structs.JobSpec{Command: []string{"sleep", "600"}, GPUs: 1, Restarts: 1})
	waitJob(t, tc.agents[lead], job.ID, runningAlloc)
	victim := tc.indexOf(tc.agents[lead].fsm.Allocs(job.ID)[0].NodeID)
	victimID := tc.agents[victim].NodeID()
	since := structs.AfterIndex(tc.agents[lead].fsm.Index())

	tc.kill(victim)
	reader := tc.follower()
	c := tc.client(tc.agents[reader])
	// Down, then its work lost, and nothing else: a leader that took
	// over meanwhile never calls a node ready before it hears from it.
	testutil.WaitFor(t, 20*time.Second, func() error {
		kinds, _, err := eventKinds(context.Background(), c, api.EventsQuery{After: since, Node: victimID})
		if err != nil {
			return err
		}
		if want := []structs.EventKind{structs.EventNodeDown, structs.EventNodeLost}; !slices.Equal(kinds, want) {
			return fmt.Errorf("events %v, want %v", kinds, want)
		}
		return nil
	})
	waitKinds(t, c, api.EventsQuery{After: since, Job: job.ID}, []structs.EventKind{
		structs.EventJobRestarted, structs.EventJobPlaced, structs.EventJobStarted,
	})
	// A leader that died is followed by one that says so.
	if victim == lead {
		_, evs, err := eventKinds(context.Background(), c, api.EventsQuery{After: since})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(evs, func(e structs.Event) bool {
			return e.Kind == structs.EventLeaderElected && e.Node != victimID
		}) {
			t.Errorf("no leader-elected event after the leader died: %v", evs)
		}
	}
	if _, err := c.CancelJob(context.Background(), job.ID); err != nil {
		t.Fatal(err)
	}
}

// The leader is killed, every time: a follower holds the old leader's
// node-down and, after it was killed, a leader-elected event that names
// the node leading now, by ID and name.
func TestCluster_Events_TheLeaderKilled_AFollowerReadsWhoLeadsNow(t *testing.T) {
	t.Parallel()
	tc := startCluster(t, 3)
	old := tc.leader()
	oldID, oldName := tc.agents[old].NodeID(), tc.agents[old].Name()
	since := structs.AfterIndex(tc.agents[old].fsm.Index())

	tc.kill(old)
	reader := tc.follower() // of the new leader
	c := tc.client(tc.agents[reader])
	testutil.WaitFor(t, 20*time.Second, func() error {
		_, evs, err := eventKinds(context.Background(), c, api.EventsQuery{After: since})
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(evs, func(e structs.Event) bool { return e.Kind == structs.EventNodeDown && e.Node == oldID }) {
			return fmt.Errorf("no node-down of the old leader %s among %v", oldName, evs)
		}
		// The last election names the node that leads now (it may have
		// taken more than one).
		var elected *structs.Event
		for i := range evs {
			if evs[i].Kind == structs.EventLeaderElected {
				elected = &evs[i]
			}
		}
		now := tc.agents[tc.leader()]
		switch {
		case elected == nil:
			return fmt.Errorf("no leader-elected event since %s was killed: %v", oldName, evs)
		case elected.Node != now.NodeID() || elected.NodeName != now.Name():
			return fmt.Errorf("the last leader-elected event names %s (%s), want %s, which leads", elected.NodeName, structs.ShortID(elected.Node), now.Name())
		case !strings.HasPrefix(elected.Reason, now.Name()+" leads from raft index "):
			return fmt.Errorf("leader-elected reason %q, want %s leading from an index", elected.Reason, now.Name())
		}
		return nil
	})
}

// TestCluster_Events_AFollowResumesOnAnotherNodeWhenItsNodeStops follows
// the events through a node that is then stopped: the client goes on
// through the next node of its address list, after the last event it had,
// and ends up with exactly the events that node holds: no gap, nothing
// twice.
func TestCluster_Events_AFollowResumesOnAnotherNodeWhenItsNodeStops(t *testing.T) {
	t.Parallel()
	tc := startCluster(t, 3)
	first := tc.follower()
	second := tc.followerBut(first)
	c, err := api.NewClient(tc.agents[first].HTTPAddr()+","+tc.agents[second].HTTPAddr(), tc.admin)
	if err != nil {
		t.Fatal(err)
	}
	firstID := tc.agents[first].NodeID()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		mu     sync.Mutex
		seen   []structs.Event
		breaks int
	)
	done := make(chan error, 1)
	go func() {
		done <- c.FollowEvents(ctx, api.EventsQuery{}, func(err error, wait time.Duration) {
			t.Logf("follow broke (%v); again in %s", err, wait)
			mu.Lock()
			breaks++
			mu.Unlock()
		}, func(e structs.Event) error {
			mu.Lock()
			seen = append(seen, e)
			mu.Unlock()
			return nil
		})
	}()
	// waitSeen waits until the follower has an event that ok accepts.
	waitSeen := func(what string, ok func(structs.Event) bool) {
		t.Helper()
		testutil.WaitFor(t, 30*time.Second, func() error {
			mu.Lock()
			defer mu.Unlock()
			if !slices.ContainsFunc(seen, ok) {
				return fmt.Errorf("no %s among %d events followed", what, len(seen))
			}
			return nil
		})
	}
	ended := func(id string) func(structs.Event) bool {
		return func(e structs.Event) bool { return e.Job == id && e.Kind == structs.EventJobSucceeded }
	}

	before := tc.submit(tc.agents[second], structs.JobSpec{Command: []string{"true"}})
	waitSeen("end of the first job", ended(before.ID))
	tc.kill(first)
	// Placed on the stopped node before it is found down, it is lost
	// there and runs again elsewhere.
	after := tc.submit(tc.agents[second], structs.JobSpec{Command: []string{"true"}, Restarts: 2})
	waitSeen("end of the second job", ended(after.ID))
	waitSeen("the stopped node going down", func(e structs.Event) bool {
		return e.Node == firstID && e.Kind == structs.EventNodeDown
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("follow ended with %v", err)
	}

	mu.Lock()
	defer mu.Unlock()
	if breaks == 0 {
		t.Fatal("the stream never broke: the test did not test a resume")
	}
	last := seen[len(seen)-1].Cursor()
	var held []structs.Event
	for q := (fsm.EventQuery{}); ; {
		p := tc.agents[second].fsm.Events(q)
		for _, e := range p.Events {
			if e.Cursor().Compare(last) <= 0 {
				held = append(held, e)
			}
		}
		if len(p.Events) == 0 || p.Events[len(p.Events)-1].Cursor().Compare(last) >= 0 {
			break
		}
		q.After = p.Next
	}
	if !reflect.DeepEqual(seen, held) {
		t.Fatalf("followed %d events, %s holds %d up to %s: they differ\nfollowed: %v\nheld:     %v",
			len(seen), tc.agents[second].Name(), len(held), last, seen, held)
	}
}
