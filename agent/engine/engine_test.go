package engine

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/system"

	"github.com/skein-dev/skein/internal/testutil"
)

func TestProbe_RealEngineReportsVersionAPIAndNoGPURuntime(t *testing.T) {
	d, err := NewDocker(DefaultSocket)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	got := d.Probe(context.Background())
	if got.Error != "" {
		t.Skipf("no container engine answers at %s: %s", DefaultSocket, got.Error)
	}
	if !strings.HasPrefix(got.Engine, "docker ") || len(got.Engine) <= len("docker ") {
		t.Errorf("engine = %q, want docker and its version", got.Engine)
	}
	// The engine on this machine speaks API 1.41 and has no NVIDIA runtime.
	if got.APIVersion != "1.41" {
		t.Errorf("API version = %q, want the negotiated 1.41", got.APIVersion)
	}
	if got.GPUs {
		t.Errorf("GPUs = true, want false: the engine here has no NVIDIA runtime or CDI")
	}
}

func TestProbe_NothingListeningIsUnreachableWithinTheTimeout(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "none.sock")
	d, err := NewDocker(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	start := time.Now()
	got := d.Probe(context.Background())
	if !strings.Contains(got.Error, "engine unreachable at unix://"+sock) {
		t.Errorf("error = %q, want it to say the engine at %s is unreachable", got.Error, sock)
	}
	if got.Engine != "" || got.APIVersion != "" || got.GPUs {
		t.Errorf("unreachable engine reported %+v, want only the error", got)
	}
	if took := time.Since(start); took > 10*ProbeTimeout {
		t.Errorf("probe took %v, want it cut off by the %v timeout (the bound is loose for a busy machine)", took, ProbeTimeout)
	}
}

// silentEngine is the path of a socket that accepts connections and never
// answers on them, until the test ends.
func silentEngine(t *testing.T) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "silent.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	return sock
}

func TestProbe_SilentEngineIsCutOffByTheTimeout(t *testing.T) {
	// A socket that accepts but never answers must not hold the probe
	// longer than its timeout.
	sock := silentEngine(t)
	d, err := NewDocker("unix://" + sock)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	start := time.Now()
	got := d.Probe(context.Background())
	if !strings.Contains(got.Error, "engine unreachable") {
		t.Errorf("error = %q, want the engine unreachable", got.Error)
	}
	if took := time.Since(start); took > 10*ProbeTimeout {
		t.Errorf("probe took %v, want it cut off by the %v timeout (the bound is loose for a busy machine)", took, ProbeTimeout)
	}
}

func TestHost_RefusesARelativeOrForeignAddress(t *testing.T) {
	for _, s := range []string{"docker.sock", "tcp://1.2.3.4:2375", "unix://relative.sock", ""} {
		if _, err := Host(s); !errors.Is(err, ErrBadSocket) {
			t.Errorf("Host(%q) = %v, want ErrBadSocket", s, err)
		}
	}
	for s, want := range map[string]string{"/run/podman.sock": "unix:///run/podman.sock", DefaultSocket: DefaultSocket} {
		if got, err := Host(s); err != nil || got != want {
			t.Errorf("Host(%q) = %q, %v, want %q", s, got, err, want)
		}
	}
}

func TestGPUMode_CDIOnlyWhereItIsAllTheEngineHas(t *testing.T) {
	cdi := []string{"/etc/cdi", "/var/run/cdi"}
	cases := []struct {
		name string
		info system.Info
		err  error
		want GPUMode
	}{
		{"nvidia runtime", system.Info{Runtimes: map[string]system.RuntimeWithStatus{"nvidia": {}}}, nil, GPUsNVIDIA},
		{"nvidia runtime and CDI", system.Info{Runtimes: map[string]system.RuntimeWithStatus{"nvidia": {}}, CDISpecDirs: cdi}, nil, GPUsNVIDIA},
		{"CDI only", system.Info{Runtimes: map[string]system.RuntimeWithStatus{"runc": {}}, CDISpecDirs: cdi}, nil, GPUsCDI},
		{"neither: the toolkit's hook may serve the request", system.Info{}, nil, GPUsNVIDIA},
		{"no answer", system.Info{CDISpecDirs: cdi}, errors.New("unreachable"), GPUsNVIDIA},
	}
	for _, tc := range cases {
		if got := gpuModeOf(tc.info, tc.err); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	// The real engine here has neither.
	testutil.RequireEngine(t)
	d, err := NewDocker(DefaultSocket)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if got := d.GPUMode(context.Background()); got != GPUsNVIDIA {
		t.Errorf("the machine's engine: %q, want %q", got, GPUsNVIDIA)
	}
}

func TestServerPID_IsTheProcessListeningOnTheSocket(t *testing.T) {
	d, err := NewDocker(silentEngine(t))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if pid, err := d.ServerPID(context.Background()); pid != os.Getpid() || err != nil {
		t.Errorf("ServerPID = %d, %v; want this test process, %d, which listens", pid, err, os.Getpid())
	}

	none, err := NewDocker(filepath.Join(t.TempDir(), "none.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer none.Close()
	if pid, err := none.ServerPID(context.Background()); !errors.Is(err, ErrUnreachable) {
		t.Errorf("ServerPID with nothing listening = %d, %v; want %v", pid, err, ErrUnreachable)
	}
}

func TestServerPID_OfTheRealEngineIsItsDaemon(t *testing.T) {
	testutil.RequireEngine(t)
	d, err := NewDocker(DefaultSocket)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	pid, err := d.ServerPID(context.Background())
	if err != nil || pid <= 0 {
		t.Fatalf("ServerPID = %d, %v; want the engine's process, seen from here", pid, err)
	}
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if name := strings.TrimSpace(string(comm)); err != nil || name != "dockerd" && name != "systemd" {
		t.Errorf("process %d is %q (%v), want dockerd (or systemd, which may listen for it)", pid, name, err)
	}
}
