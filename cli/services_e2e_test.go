package cli

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

// waitService waits until `skein service --json NAME` says the service
// stands as want.
func waitService(t *testing.T, name, want string) api.ServiceDetail {
	t.Helper()
	var d api.ServiceDetail
	testutil.WaitFor(t, 20*time.Second, func() error {
		r := runCLI(t, "service", "--json", name)
		if r.code != exitOK {
			return fmt.Errorf("skein service: %d %s", r.code, r.stderr)
		}
		mustDecode(t, r.stdout, &d)
		if d.State != want {
			return fmt.Errorf("service %s is %q, want %q", name, d.State, want)
		}
		return nil
	})
	return d
}

func TestCLI_ServeScaleAndDeleteAgainstARealAgent(t *testing.T) {
	t.Parallel()
	startRealAgent(t)

	r := runCLI(t, "serve", "--name", "web", "--replicas", "2", "--", "sh", "-c", "echo up; exec sleep 1000")
	if r.code != exitOK || r.stdout != "web\n" || !strings.HasPrefix(r.stderr, "service web: ") {
		t.Fatalf("serve: %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	d := waitService(t, "web", "2/2 healthy")
	for i, rep := range d.Replicas {
		if rep.JobID != structs.ReplicaJobID(d.Service.ID, i) || rep.Node != "e2e" || rep.Port == 0 || rep.Status != api.ReplicaHealthy {
			t.Fatalf("replica %d: %+v", i, rep)
		}
	}

	r = runCLI(t, "services")
	if r.code != exitOK || !strings.Contains(r.stdout, "web") || !strings.Contains(r.stdout, "2/2 healthy") || !strings.Contains(r.stdout, "sleep 1000") {
		t.Fatalf("services: %d\n%s", r.code, r.stdout)
	}
	r = runCLI(t, "service", "web")
	for _, want := range []string{"State:         2/2 healthy", "Command:     sh -c 'echo up; exec sleep 1000'", structs.ReplicaJobID(d.Service.ID, 1), "running  healthy"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("service output lacks %q:\n%s", want, r.stdout)
		}
	}
	// A replica is a job like any other, named as skein jobs shows it.
	short := structs.ShortID(d.Replicas[1].JobID)
	if short != structs.ShortID(d.Service.ID)+"-r1" {
		t.Fatalf("replica 1 is shown as %s, want SERVICE-r1", short)
	}
	if r := runCLI(t, "job", short); r.code != exitOK || !strings.Contains(r.stdout, "ID:        "+d.Replicas[1].JobID+"\n") || !strings.Contains(r.stdout, "running") {
		t.Fatalf("job %s of a replica: %d %s%s", short, r.code, r.stdout, r.stderr)
	}
	testutil.WaitFor(t, 20*time.Second, func() error {
		if r := runCLI(t, "logs", short); r.code != exitOK || r.stdout != "up\n" {
			return fmt.Errorf("logs %s of a replica: %d stdout %q stderr %q, want its output", short, r.code, r.stdout, r.stderr)
		}
		return nil
	})

	if r := runCLI(t, "scale", "web", "3"); r.code != exitOK || !strings.HasPrefix(r.stdout, "service web: ") {
		t.Fatalf("scale to 3: %d %q %q", r.code, r.stdout, r.stderr)
	}
	waitService(t, "web", "3/3 healthy")
	if r := runCLI(t, "scale", "web", "1"); r.code != exitOK {
		t.Fatalf("scale to 1: %d %q", r.code, r.stderr)
	}
	d = waitService(t, "web", "1/1 healthy")
	if len(d.Replicas) != 1 || d.Replicas[0].Index != 0 || d.Service.Reason != "scaled 3→1 by admin" {
		t.Fatalf("after scaling to 1: reason %q, replicas %+v", d.Service.Reason, d.Replicas)
	}

	r = runCLI(t, "serve", "--name", "web", "--", "true")
	if r.code != exitError || !strings.Contains(r.stderr, "service web: service already exists") {
		t.Fatalf("a second service web: %d %q", r.code, r.stderr)
	}
	r = runCLI(t, "serve", "--name", "big", "--gpus", "3", "--", "true")
	if r.code != exitError || !strings.Contains(r.stderr, "no node has 3 GPUs; largest has 2") {
		t.Fatalf("a service no node can run: %d %q", r.code, r.stderr)
	}

	if r := runCLI(t, "service", "delete", "web"); r.code != exitOK || !strings.HasPrefix(r.stdout, "service web: ") {
		t.Fatalf("delete: %d %q %q", r.code, r.stdout, r.stderr)
	}
	testutil.WaitFor(t, 20*time.Second, func() error {
		r := runCLI(t, "service", "web")
		if r.code == exitError && strings.Contains(r.stderr, `no such service: "web"`) {
			return nil
		}
		return fmt.Errorf("service web after its delete: %d %q %q", r.code, r.stdout, r.stderr)
	})
	for i := range 3 {
		waitJobState(t, structs.ReplicaJobID(d.Service.ID, i), structs.JobCancelled)
	}
	if r := runCLI(t, "services"); r.code != exitOK || r.stdout != "No services.\n" {
		t.Fatalf("services after the delete: %d %q", r.code, r.stdout)
	}
}
