package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

// signalledAt returns when the workload replica of allocation allocID
// wrote its stop event to the event log in dir (skein-workload's
// events.log), and false while it has not.
func signalledAt(t *testing.T, dir, allocID string) (time.Time, bool) {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, "events.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e struct {
			Time  time.Time `json:"time"`
			Event string    `json:"event"`
			Alloc string    `json:"alloc"`
			What  string    `json:"what"`
		}
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			continue // a line being written
		}
		if e.Alloc == allocID && e.Event == "stop" && e.What == "signalled" {
			return e.Time, true
		}
	}
	return time.Time{}, false
}

// A replica stopped by a scale down leaves the endpoints at once but is
// signalled only once its service's drain delay (here twice the default)
// has passed: until then it runs, and not one request through the ingress
// reaches it.
func TestDrain_AStoppedReplicaGetsNoRequestAndNoSignalForItsDrainDelay(t *testing.T) {
	t.Parallel()
	const delay = 2 * time.Duration(structs.DefaultDrainDelay)
	bin := testutil.Workload(t)
	shared := testutil.SharedDir(t)
	cfg := testConfig(t, t.TempDir())
	cfg.IngressPort = -1
	a, token, c := startAgentAdmin(t, cfg)
	spec := structs.ServiceSpec{
		Job: structs.JobSpec{Command: []string{bin, "--dir", shared, "--serve-port-env", "PORT"}},
		Health: &structs.HealthCheck{Kind: structs.HealthHTTP, Path: "/health",
			Interval: structs.Duration(100 * time.Millisecond), Timeout: structs.Duration(100 * time.Millisecond), Failures: 2},
		DrainTimeout: structs.Duration(10 * time.Second),
		DrainDelay:   structs.Duration(delay),
	}
	if _, err := c.CreateService(context.Background(), api.ServiceCreateRequest{Name: "web", Replicas: 2, Spec: spec}); err != nil {
		t.Fatalf("create the service: %v", err)
	}
	waitReplicas(t, a, "web", 2, true)
	var stopped *structs.Allocation
	for _, al := range runningReplicas(a, "web", nil) {
		if al.JobID == wantedReplicas(a)[1].ID {
			stopped = al
		}
	}
	if stopped == nil {
		t.Fatal("no running allocation of the newest replica")
	}

	asked := time.Now()
	if _, err := c.ScaleService(context.Background(), "web", api.ServiceScaleRequest{Replicas: 1}); err != nil {
		t.Fatalf("scale: %v", err)
	}
	// The ingress routes by the node's view, which follows the state a
	// moment later: once the view has the replica stopping, until it is
	// signalled, it runs and the ingress sends it nothing.
	testutil.WaitFor(t, 30*time.Second, func() error {
		al, ok := a.node.View().Alloc(stopped.ID)
		if !ok || al.DesiredState != structs.DesiredStop {
			return fmt.Errorf("the node's view does not have the replica scaled down stopping yet")
		}
		return nil
	})
	hc := tokenClient(token)
	served, untouched := 0, false
	for {
		if _, ok := signalledAt(t, shared, stopped.ID); ok {
			break
		}
		if time.Since(asked) > time.Minute {
			t.Fatal("the replica scaled down was not signalled within a minute")
		}
		resp, err := hc.Get(a.IngressAddr() + "/web/work?ms=50")
		if err != nil {
			t.Fatalf("request through the ingress while a replica drains: %v", err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch {
		case resp.StatusCode != http.StatusOK:
			t.Fatalf("request through the ingress while a replica drains: %d %s", resp.StatusCode, b)
		case strings.Contains(string(b), "alloc="+stopped.ID):
			t.Fatalf("the replica being stopped got a new request: %s", b)
		}
		served++
		if !untouched {
			// Asked directly, it still serves: nothing stopped it yet.
			if _, ok := signalledAt(t, shared, stopped.ID); !ok {
				untouched = directHealth(stopped.MasterPort) == nil
			}
		}
	}
	at, _ := signalledAt(t, shared, stopped.ID)
	if waited := at.Sub(asked); waited < delay {
		t.Errorf("the replica was signalled %s after the scale down was asked, before its drain delay of %s", waited, delay)
	}
	if served == 0 || !untouched {
		t.Errorf("while it drained: %d requests served by the other replica, replica answered directly: %v; want some, and true", served, untouched)
	}
	testutil.WaitFor(t, 30*time.Second, func() error {
		if al, _ := a.fsm.Alloc(stopped.ID); al.Live() {
			return fmt.Errorf("stopped replica's allocation is %s", al.State)
		}
		return nil
	})
}

// directHealth asks a replica's /health on its port, past the ingress.
func directHealth(port int) error {
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/health", port))
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return errors.New(resp.Status)
	}
	return nil
}
