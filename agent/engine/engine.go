package engine

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/docker/docker/api/types/system"
	"github.com/docker/docker/client"
	"golang.org/x/sys/unix"

	"github.com/skein-dev/skein/structs"
)

// DefaultSocket is where the agent looks for the container engine unless
// told otherwise.
const DefaultSocket = "unix:///var/run/docker.sock"

// ProbeTimeout bounds each call of a probe to the engine.
const ProbeTimeout = 2 * time.Second

// ErrBadSocket is returned for a container socket that is neither an
// absolute path nor a unix:// address.
var ErrBadSocket = errors.New("container socket must be an absolute path or unix://PATH")

// Prober reports on a container engine.
type Prober interface {
	// Probe asks the engine what it is; it returns within ProbeTimeout
	// of each call it makes, and reports an engine that does not answer
	// in the result's Error.
	Probe(ctx context.Context) structs.ContainerEngine
}

// Host turns a --container-socket value into the engine's address: an
// absolute path becomes unix://PATH, and a unix:// address is kept.
func Host(socket string) (string, error) {
	switch {
	case strings.HasPrefix(socket, "unix:///"):
		return socket, nil
	case strings.HasPrefix(socket, "/"):
		return "unix://" + socket, nil
	}
	return "", fmt.Errorf("container socket %q: %w", socket, ErrBadSocket)
}

// Docker probes and runs containers on an engine that speaks the Docker
// Engine API.
type Docker struct {
	host string
	c    *client.Client
}

// NewDocker returns a client of the engine at socket (see Host); it
// negotiates the API version with the engine on first use.
func NewDocker(socket string) (*Docker, error) {
	host, err := Host(socket)
	if err != nil {
		return nil, err
	}
	c, err := client.NewClientWithOpts(client.WithHost(host), client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, fmt.Errorf("container engine client for %s: %w", host, err)
	}
	return &Docker{host: host, c: c}, nil
}

// Close releases the client's connections.
func (d *Docker) Close() error { return d.c.Close() }

// Probe implements Prober.
func (d *Docker) Probe(ctx context.Context) structs.ContainerEngine {
	vctx, cancel := context.WithTimeout(ctx, ProbeTimeout)
	defer cancel()
	v, err := d.c.ServerVersion(vctx)
	if err != nil {
		return structs.ContainerEngine{Error: unreachable(d.host, err)}
	}
	ictx, cancel := context.WithTimeout(ctx, ProbeTimeout)
	defer cancel()
	info, err := d.c.Info(ictx)
	if err != nil {
		return structs.ContainerEngine{Error: unreachable(d.host, err)}
	}
	lctx, cancel := context.WithTimeout(ctx, ProbeTimeout)
	defer cancel()
	// The images are a hint for placement: without them the engine is
	// still there.
	images, _ := d.Images(lctx, structs.MaxEngineImages)
	return structs.ContainerEngine{
		Engine:     engineName(v.Platform.Name, v.Version),
		APIVersion: truncate(d.c.ClientVersion(), structs.MaxEngineFieldLen),
		GPUs:       canHandOutGPUs(info),
		Images:     images,
	}
}

// unreachable says in words why the engine at host did not answer.
func unreachable(host string, err error) string {
	return truncate(unreachableError(host, err).Error(), structs.MaxEngineErrorLen)
}

// unreachableError is ErrUnreachable for the engine at host, with why.
func unreachableError(host string, err error) error {
	return fmt.Errorf("%w at %s: %w", ErrUnreachable, host, err)
}

// engineName names the engine ("docker 20.10.21"); Podman and others say
// who they are in the version's platform name.
func engineName(platform, version string) string {
	name := "docker"
	if strings.Contains(strings.ToLower(platform), "podman") {
		name = "podman"
	}
	return truncate(name+" "+version, structs.MaxEngineFieldLen)
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// canHandOutGPUs is true when the engine has an NVIDIA runtime or CDI
// spec directories configured.
func canHandOutGPUs(info system.Info) bool {
	return hasNVIDIARuntime(info) || len(info.CDISpecDirs) > 0
}

func hasNVIDIARuntime(info system.Info) bool {
	for name := range info.Runtimes {
		if strings.Contains(strings.ToLower(name), "nvidia") {
			return true
		}
	}
	return false
}

// ServerPID returns the process that listens on the engine's socket (the
// engine, or what started it for it), as this process's PID namespace
// numbers it: 0 when that process is not to be seen from here (it runs in
// another PID namespace, not below this one). The kernel says who it is
// (SO_PEERCRED), not the process itself.
func (d *Docker) ServerPID(ctx context.Context) (int, error) {
	op := "find the engine's process"
	var dialer net.Dialer
	conn, err := dialer.DialContext(ctx, "unix", strings.TrimPrefix(d.host, "unix://"))
	if err != nil {
		return 0, d.fail(op, err)
	}
	defer conn.Close()
	uc, ok := conn.(*net.UnixConn)
	if !ok {
		return 0, fmt.Errorf("%s: %T is not a unix socket", op, conn)
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	if credErr != nil {
		return 0, fmt.Errorf("%s: SO_PEERCRED: %w", op, credErr)
	}
	return int(cred.Pid), nil
}

// GPUMode says how to hand this engine's containers real GPUs: by CDI
// names when CDI is all it has, else by the NVIDIA device request (what
// `docker run --gpus` sends, served by the NVIDIA runtime or the NVIDIA
// container toolkit's hook), which is also the answer when the engine
// does not answer now.
func (d *Docker) GPUMode(ctx context.Context) GPUMode {
	ctx, cancel := context.WithTimeout(ctx, ProbeTimeout)
	defer cancel()
	info, err := d.c.Info(ctx)
	return gpuModeOf(info, err)
}

func gpuModeOf(info system.Info, err error) GPUMode {
	if err == nil && !hasNVIDIARuntime(info) && len(info.CDISpecDirs) > 0 {
		return GPUsCDI
	}
	return GPUsNVIDIA
}
