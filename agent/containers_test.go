package agent

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/agent/engine"
	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

// waitEngine waits until the agent's only node reports a container engine
// for which ok returns nil.
func waitEngine(t *testing.T, c *api.Client, ok func(*structs.ContainerEngine) error) {
	t.Helper()
	testutil.WaitFor(t, 15*time.Second, func() error {
		nodes, err := c.Nodes(context.Background())
		if err != nil {
			return err
		}
		if len(nodes) != 1 {
			return fmt.Errorf("%d nodes, want 1", len(nodes))
		}
		return ok(nodes[0].Containers)
	})
}

func TestAgent_NodeReportsTheRealContainerEngine(t *testing.T) {
	t.Parallel()
	d, err := engine.NewDocker(DefaultContainerSocket)
	if err != nil {
		t.Fatal(err)
	}
	probe := d.Probe(context.Background())
	_ = d.Close()
	if probe.Error != "" {
		t.Skipf("no container engine answers at %s: %s", DefaultContainerSocket, probe.Error)
	}
	cfg := testConfig(t, t.TempDir())
	cfg.ContainerSocket = DefaultContainerSocket
	cfg.AllowMounts = []string{"/data", "/scratch/"}
	cfg.AllowCaps = []string{"cap_net_bind_service"}
	_, c := startAgent(t, cfg)
	waitEngine(t, c, func(e *structs.ContainerEngine) error {
		if e == nil || e.Error != "" || !strings.HasPrefix(e.Engine, "docker ") || e.APIVersion != probe.APIVersion || e.GPUs != probe.GPUs {
			return fmt.Errorf("node's container engine = %+v, want %+v", e, probe)
		}
		if !slices.Equal(e.AllowMounts, []string{"/data", "/scratch"}) {
			return fmt.Errorf("node allows mounts under %q, want /data and /scratch", e.AllowMounts)
		}
		if !slices.Equal(e.AllowCaps, []string{"NET_BIND_SERVICE"}) {
			return fmt.Errorf("node allows capabilities %q, want NET_BIND_SERVICE", e.AllowCaps)
		}
		return nil
	})
}

func TestAgent_NodeReportsAnUnreachableContainerEngine(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, t.TempDir())
	sock := filepath.Join(t.TempDir(), "docker.sock")
	cfg.ContainerSocket = sock
	_, c := startAgent(t, cfg)
	waitEngine(t, c, func(e *structs.ContainerEngine) error {
		if e == nil || !strings.Contains(e.Error, "engine unreachable at unix://"+sock) || e.Engine != "" {
			return fmt.Errorf("node's container engine = %+v, want unreachable at %s", e, sock)
		}
		return nil
	})
}

func TestAgent_NoContainerSocketReportsNoEngine(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, t.TempDir())
	cfg.ContainerSocket = NoContainerSocket
	a, c := startAgent(t, cfg)
	<-a.node.Registered()
	testutil.Holds(t, 500*time.Millisecond, func() error {
		nodes, err := c.Nodes(context.Background())
		if err != nil {
			return err
		}
		if len(nodes) != 1 || nodes[0].Containers != nil {
			return fmt.Errorf("nodes = %+v, want one with no container engine", nodes)
		}
		return nil
	})
}

func TestAgent_RefusesABadContainerSocket(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, t.TempDir())
	cfg.ContainerSocket = "tcp://10.0.0.1:2375"
	if _, err := New(cfg); !errors.Is(err, engine.ErrBadSocket) || !strings.Contains(err.Error(), "--container-socket") {
		t.Fatalf("New with --container-socket tcp://... = %v, want refused naming the flag", err)
	}
}
