package agent

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/sched"
	"github.com/skein-dev/skein/structs"
)

// holdPorts listens on each port on every address, as a program skein does
// not run would; the listeners close when the test ends.
func holdPorts(t *testing.T, ports ...int) {
	t.Helper()
	for _, p := range ports {
		l, err := net.Listen("tcp", ":"+strconv.Itoa(p))
		if err != nil {
			t.Fatalf("hold port %d: %v", p, err)
		}
		t.Cleanup(func() { l.Close() })
	}
}

// A job of one node holds no port of the range: with every port of it held
// by another program, the 1-node job still runs, and its
// MASTER_PORT is one its node found free.
func TestAgent_AOneNodeJobRunsWhileAnotherProgramHoldsEveryPortOfTheRange(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, t.TempDir())
	r := cfg.MasterPorts
	for p := r.Min; p <= r.Max; p++ {
		holdPorts(t, p)
	}
	_, c := startAgent(t, cfg)
	job := submit(t, c, 0, "sh", "-c", "echo $MASTER_PORT")
	d := waitJobState(t, c, job.ID, structs.JobSucceeded)
	if port := d.Allocations[0].MasterPort; port != 0 {
		t.Fatalf("a job of one node was given port %d", port)
	}
	out := strings.TrimSpace(logs(t, c, job.ID, api.StreamStdout))
	if port, err := strconv.Atoi(out); err != nil || port <= 0 || r.Contains(port) {
		t.Fatalf("the job's MASTER_PORT is %q, want a free port outside the held range %s", out, r)
	}
}

// A replica's port, which the ingress reaches it on, held by another
// program when its node starts it: the replica is not failed but moved to
// the next port of the range, which its PORT says, and an event says why.
// The port held is the one the leader picks first (sched.pickPort starts
// at the job's hash, which LegacyMasterPort spreads over 10,000 ports: 16
// divides it).
func TestAgent_AReplicasPortHeldByAnotherProgramMovesToAFreeOne(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, t.TempDir())
	r := cfg.MasterPorts
	if r.Len() != 16 {
		t.Fatalf("the test's range %s is not 16 ports", r)
	}
	_, c := startAgent(t, cfg)
	ctx := context.Background()
	req := api.ServiceCreateRequest{Name: "web", Replicas: 0, Spec: structs.ServiceSpec{Job: structs.JobSpec{
		Command: []string{"sh", "-c", "echo port $PORT $MASTER_PORT; exec sleep 1000"}}}}
	d, err := c.CreateService(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	id := structs.ReplicaJobID(d.Service.ID, 0)
	first := r.Min + (sched.LegacyMasterPort(id, 1)-29500)%r.Len()
	holdPorts(t, first)
	if _, err := c.ScaleService(ctx, "web", api.ServiceScaleRequest{Replicas: 1}); err != nil {
		t.Fatal(err)
	}
	want := r.Min + (first-r.Min+1)%r.Len()
	var jd *api.JobDetail
	testutil.WaitFor(t, 20*time.Second, func() error {
		if jd, err = c.Job(ctx, id); err != nil {
			return err
		}
		if len(jd.Allocations) != 1 || jd.Allocations[0].State != structs.AllocRunning {
			return fmt.Errorf("replica %s: %s (%s), allocations %+v", id, jd.Job.State, jd.Job.Reason, jd.Allocations)
		}
		return nil
	})
	if got := jd.Allocations[0].MasterPort; got != want || jd.Job.Attempts != 1 {
		t.Fatalf("the replica runs on port %d in attempt %d, want %d (the leader picked %d, held) in attempt 1", got, jd.Job.Attempts, want, first)
	}
	testutil.WaitFor(t, 10*time.Second, func() error {
		if out := logs(t, c, id, api.StreamStdout); out != fmt.Sprintf("port %d %d\n", want, want) {
			return fmt.Errorf("the replica printed %q", out)
		}
		return nil
	})
	p, err := c.Events(ctx, api.EventsQuery{Job: id})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range p.Events {
		if e.Kind == structs.EventJobPortMoved {
			if !strings.Contains(e.Reason, fmt.Sprintf("MASTER_PORT %d is in use", first)) || !strings.HasSuffix(e.Reason, fmt.Sprintf("moved to %d", want)) {
				t.Fatalf("the move says %q", e.Reason)
			}
			return
		}
	}
	t.Fatalf("no %s event among %+v", structs.EventJobPortMoved, p.Events)
}
