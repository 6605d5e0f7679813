package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/agent/engine"
	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

// imageAgent starts a one-node agent on the machine's container engine
// that lets image jobs mount allowed, and returns it with the busybox
// test image.
func imageAgent(t *testing.T, allowed ...string) (*Agent, *api.Client, string) {
	t.Helper()
	image := testutil.BusyboxImage(t)
	cfg := testConfig(t, t.TempDir())
	cfg.ContainerSocket = DefaultContainerSocket
	cfg.AllowMounts = allowed
	a, c := startAgent(t, cfg)
	// The scheduler places image jobs only once the node's engine report
	// is in the state.
	testutil.WaitFor(t, 20*time.Second, func() error {
		nodes, err := c.Nodes(context.Background())
		if err != nil {
			return err
		}
		if len(nodes) != 1 || !nodes[0].Containers.Answers() {
			return fmt.Errorf("the node's engine report is not in yet")
		}
		return nil
	})
	return a, c, image
}

// TestAgent_ImageJobRunsInAContainerAndIsRemoved runs an image job end to
// end through a real agent and engine: it sees its GPUs and launch
// variables, runs as the job user, writes to an allowed mount, its exit
// code and logs come back, and its container is gone afterwards.
func TestAgent_ImageJobRunsInAContainerAndIsRemoved(t *testing.T) {
	t.Parallel()
	shared := testutil.SharedDir(t)
	_, c, image := imageAgent(t, shared)
	job, err := c.SubmitJob(context.Background(), api.SubmitRequest{Spec: structs.JobSpec{
		Image: image, GPUs: 2, Mounts: []structs.Mount{{Source: shared, Target: "/out"}},
		Command: []string{"sh", "-c", `echo "gpus=$CUDA_VISIBLE_DEVICES rank=$NODE_RANK uid=$(id -u)"; echo oops >&2; echo hi > /out/file; exit 4`},
	}})
	if err != nil {
		t.Fatal(err)
	}
	d := waitJobState(t, c, job.ID, structs.JobFailed)
	al := d.Allocations[0]
	if al.ExitCode != 4 || al.Reason != "exited with code 4" {
		t.Fatalf("allocation ended %d (%s), want exit code 4", al.ExitCode, al.Reason)
	}
	want := fmt.Sprintf("gpus=%s rank=0 uid=", strings.Join(al.GPUs, ","))
	if out := logs(t, c, job.ID, api.StreamStdout); !strings.HasPrefix(out, want) || strings.Contains(out, "uid=0\n") {
		t.Errorf("stdout %q, want it to start %q and not run as root", out, want)
	}
	if out := logs(t, c, job.ID, api.StreamStderr); out != "oops\n" {
		t.Errorf("stderr %q, want oops", out)
	}
	d2, err := engine.NewDocker(DefaultContainerSocket)
	if err != nil {
		t.Fatal(err)
	}
	defer d2.Close()
	testutil.WaitFor(t, 10*time.Second, func() error {
		cs, err := d2.List(context.Background(), engine.LabelAlloc, al.ID)
		if err != nil || len(cs) != 0 {
			return fmt.Errorf("containers of the finished allocation: %v %v", cs, err)
		}
		return nil
	})
}

// TestAgent_ImageJobsAreRefusedWhereNoNodeCanRunThem checks the refusals
// at submit: no engine on any node, a mount no node allows, and a
// capability no node allows.
func TestAgent_ImageJobsAreRefusedWhereNoNodeCanRunThem(t *testing.T) {
	t.Parallel()
	shared := testutil.SharedDir(t)
	_, c, image := imageAgent(t, shared)
	_, err := c.SubmitJob(context.Background(), api.SubmitRequest{Spec: structs.JobSpec{
		Image: image, Command: []string{"true"}, Mounts: []structs.Mount{{Source: "/etc", Target: "/etc2"}},
	}})
	var apiErr *api.Error
	if !errors.As(err, &apiErr) || !strings.Contains(err.Error(), "allows mount /etc") {
		t.Errorf("submit with a mount outside --allow-mount: %v, want a refusal naming /etc", err)
	}
	_, err = c.SubmitJob(context.Background(), api.SubmitRequest{Spec: structs.JobSpec{
		Image: image, Command: []string{"true"}, Caps: []string{"NET_ADMIN"},
	}})
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 ||
		!strings.Contains(err.Error(), "allows capability NET_ADMIN in its allow_caps: they allow none") {
		t.Errorf("submit with a capability no node allows: %v, want a refusal naming it and what nodes allow", err)
	}

	cfg := testConfig(t, t.TempDir())
	cfg.ContainerSocket = NoContainerSocket
	_, plain := startAgent(t, cfg)
	testutil.WaitFor(t, 20*time.Second, func() error {
		nodes, err := plain.Nodes(context.Background())
		if err != nil || len(nodes) != 1 {
			return fmt.Errorf("nodes %v, %v: want the one node registered", nodes, err)
		}
		return nil
	})
	_, err = plain.SubmitJob(context.Background(), api.SubmitRequest{Spec: structs.JobSpec{Image: image, Command: []string{"true"}}})
	if err == nil || !strings.Contains(err.Error(), "container engine") {
		t.Errorf("submit of an image job to a cluster without engines: %v, want a refusal naming the container engine", err)
	}
}

// TestAgent_ImagePullNeverWithAMissingImageFails checks that a start
// failure of a container is the allocation's reason, in words, and counts
// against restarts like any failed start.
func TestAgent_ImagePullNeverWithAMissingImageFails(t *testing.T) {
	t.Parallel()
	_, c, _ := imageAgent(t)
	job, err := c.SubmitJob(context.Background(), api.SubmitRequest{Spec: structs.JobSpec{
		Image: "skein-test-missing:never", ImagePull: structs.PullNever, Restarts: 1, Command: []string{"true"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	d := waitJobState(t, c, job.ID, structs.JobFailed)
	if len(d.Allocations) != 2 {
		t.Fatalf("%d attempts, want 2 (one restart)", len(d.Allocations))
	}
	for _, al := range d.Allocations {
		if !strings.Contains(al.Reason, `image skein-test-missing:never is not on this node and --image-pull is never`) {
			t.Errorf("allocation %d: reason %q, want the missing image named", al.Attempt, al.Reason)
		}
	}
}
