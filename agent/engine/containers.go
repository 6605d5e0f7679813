package engine

import (
	"context"
	"errors"
	"io"
	"syscall"
	"time"

	"github.com/skein-dev/skein/structs"
)

// Labels every container skein runs carries: the allocation it runs and
// the runner's allocation directory (several agents may share one engine;
// each cleans up only its own).
const (
	LabelAlloc    = "skein.alloc"
	LabelAllocDir = "skein.alloc-dir"
)

// Errors of the container operations, matched with errors.Is.
var (
	// ErrImageNotFound: the engine does not hold the image and, when
	// pulling, the registry has no such image.
	ErrImageNotFound = errors.New("image not found")
	// ErrUnreachable: the engine did not answer.
	ErrUnreachable = errors.New("engine unreachable")
	// ErrNoContainer: no container has that ID or name.
	ErrNoContainer   = errors.New("no such container")
	errUnimplemented = errors.New("not implemented yet")
)

// GPUMode is how a container is handed its GPUs.
type GPUMode string

// GPU modes.
const (
	// GPUsNone passes no devices (simulated GPUs, or a job without GPUs).
	GPUsNone GPUMode = ""
	// GPUsNVIDIA sends the NVIDIA device request (`--gpus device=UUID,...`).
	GPUsNVIDIA GPUMode = "nvidia"
	// GPUsCDI names the GPUs as CDI devices (nvidia.com/gpu=UUID).
	GPUsCDI GPUMode = "cdi"
)

// ContainerSpec is one container to run for an allocation.
type ContainerSpec struct {
	// Name is the container's name; Labels are set on it as given
	// (LabelAlloc and LabelAllocDir at least).
	Name   string
	Labels map[string]string
	Image  string
	// Cmd is the container's command; the image's entrypoint, if any,
	// runs it.
	Cmd []string
	Env []string
	// Workdir is the working directory inside the container; "" keeps
	// the image's.
	Workdir string
	// User is "UID:GID" and GroupAdd the supplementary group IDs; "" runs
	// as the image's user.
	User     string
	GroupAdd []string
	Mounts   []structs.Mount
	// ShmSize is /dev/shm's size in bytes; 0 is the engine's default.
	ShmSize int64
	// GPUs are the allocation's GPU UUIDs, handed over as GPUMode says.
	GPUs    []string
	GPUMode GPUMode
	// Network is the network mode: "host" (the default when ""), or
	// "container:NAME" to share another container's network.
	Network string
}

// PullProgress is one report of a pull in flight: Bytes of Total
// downloaded so far (Total 0: not known yet).
type PullProgress struct {
	Bytes, Total int64
}

// ContainerState is what the engine says of one container.
type ContainerState struct {
	ID        string
	Name      string
	Labels    map[string]string
	Running   bool
	ExitCode  int
	StartedAt time.Time
}

// HasImage reports whether the engine holds the image ref.
func (d *Docker) HasImage(ctx context.Context, ref string) (bool, error) {
	return false, errUnimplemented
}

// Pull pulls ref, calling progress (when not nil) as the engine reports
// how far it got. A failure says why in words: the image does not exist
// (ErrImageNotFound), the engine did not answer (ErrUnreachable), or what
// the engine said.
func (d *Docker) Pull(ctx context.Context, ref string, progress func(PullProgress)) error {
	return errUnimplemented
}

// Images lists the references (repo:tag) of the images the engine holds,
// newest first, at most limit of them.
func (d *Docker) Images(ctx context.Context, limit int) ([]string, error) {
	return nil, errUnimplemented
}

// Create creates the container (not started) and returns its ID.
func (d *Docker) Create(ctx context.Context, spec ContainerSpec) (string, error) {
	return "", errUnimplemented
}

// Attach streams the container's standard output and error into stdout
// and stderr until the container ends (or ctx is done); the channel gets
// the stream's end (nil at the container's end). Attach before Start so
// that no output is missed.
func (d *Docker) Attach(ctx context.Context, id string, stdout, stderr io.Writer) (<-chan error, error) {
	return nil, errUnimplemented
}

// Start starts a created container.
func (d *Docker) Start(ctx context.Context, id string) error {
	return errUnimplemented
}

// Wait blocks until the container is not running and returns its exit
// code.
func (d *Docker) Wait(ctx context.Context, id string) (int, error) {
	return 0, errUnimplemented
}

// Signal sends sig to the container's main process.
func (d *Docker) Signal(ctx context.Context, id string, sig syscall.Signal) error {
	return errUnimplemented
}

// Inspect returns the container's state; ErrNoContainer when there is no
// such container.
func (d *Docker) Inspect(ctx context.Context, id string) (ContainerState, error) {
	return ContainerState{}, errUnimplemented
}

// Remove removes the container, killing it first if it still runs;
// a container that is already gone is not an error.
func (d *Docker) Remove(ctx context.Context, id string) error {
	return errUnimplemented
}

// List returns the containers, running or not, that carry label key with
// value (every value when value is "").
func (d *Docker) List(ctx context.Context, key, value string) ([]ContainerState, error) {
	return nil, errUnimplemented
}
